"""The one JUnit XML writer the check, diff and smoke reports share: counts, times and text
that XML cannot hold."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from archaudit.report import junit


def test_the_junit_writer_counts_and_escapes():
    cases = (
        junit.Case("c", "ok", out="fine"),
        junit.Case("c", "bad\x1b", junit.Failure("why\x07", "all\n", "G001")),
        junit.Case("c", "later", skipped="no GPU", time=1.5),
    )
    root = ET.fromstring(junit.write("suite", [junit.Suite("s", cases, (("target", "x.whl"),))]))
    suite = root.find("testsuite")
    assert suite is not None and root.get("tests") == suite.get("tests") == "3"
    assert root.get("failures") == suite.get("failures") == "1" and suite.get("skipped") == "1"
    assert root.get("time") == suite.get("time") == "1.500"
    bad = suite.findall("testcase")[1]
    assert bad.get("name") == "bad\ufffd" and bad.find("failure").get("message") == "why\ufffd"  # type: ignore[union-attr]
    assert suite.find("properties/property").get("value") == "x.whl"  # type: ignore[union-attr]
