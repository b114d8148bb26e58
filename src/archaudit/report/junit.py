"""The one JUnit XML writer: check, diff and smoke describe their suites and cases as data
(Suite, Case, Failure) and this writes them, so every report's XML is escaped, counted and
laid out the same way. Text XML 1.0 cannot carry (control characters) becomes U+FFFD."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from xml.etree import ElementTree as ET

_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def xml_text(text: object) -> str:
    """Text XML 1.0 can carry: control characters (other than tab, CR, LF) become U+FFFD."""
    return _XML_BAD.sub("\ufffd", str(text))


@dataclass(frozen=True, slots=True)
class Failure:
    message: str
    text: str
    type: str | None = None


@dataclass(frozen=True, slots=True)
class Case:
    classname: str
    name: str
    failure: Failure | None = None
    skipped: str | None = None  # the reason, when the case did not run
    out: str | None = None  # <system-out>
    time: float | None = None  # seconds, when the report measures them


@dataclass(frozen=True, slots=True)
class Suite:
    name: str
    cases: tuple[Case, ...]
    properties: tuple[tuple[str, str], ...] = ()


def _counts(el: ET.Element, cases: Sequence[Case]) -> None:
    el.set("tests", str(len(cases)))
    el.set("failures", str(sum(c.failure is not None for c in cases)))
    el.set("errors", "0")


def _time(el: ET.Element, cases: Sequence[Case]) -> None:
    if any(c.time is not None for c in cases):
        el.set("time", f"{sum(c.time or 0.0 for c in cases):.3f}")


def write(name: str, suites: Sequence[Suite]) -> str:
    """<testsuites name=...> holding every suite, with the counts JUnit readers expect."""
    root = ET.Element("testsuites", name=xml_text(name))
    every: list[Case] = []
    for s in suites:
        suite = ET.SubElement(root, "testsuite", name=xml_text(s.name))
        if s.properties:
            props = ET.SubElement(suite, "properties")
            for key, value in s.properties:
                ET.SubElement(props, "property", name=key, value=xml_text(value))
        for c in s.cases:
            case = ET.SubElement(suite, "testcase", classname=xml_text(c.classname), name=xml_text(c.name))
            if c.time is not None:
                case.set("time", f"{c.time:.3f}")
            if c.failure is not None:
                failure = ET.SubElement(case, "failure", message=xml_text(c.failure.message))
                if c.failure.type is not None:
                    failure.set("type", c.failure.type)
                failure.text = xml_text(c.failure.text)
            if c.skipped is not None:
                ET.SubElement(case, "skipped", message=xml_text(c.skipped))
            if c.out:
                ET.SubElement(case, "system-out").text = xml_text(c.out)
        _counts(suite, s.cases)
        suite.set("skipped", str(sum(c.skipped is not None for c in s.cases)))
        _time(suite, s.cases)
        every += s.cases
    _counts(root, every)
    _time(root, every)
    ET.indent(root, space="  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


__all__ = ["Case", "Failure", "Suite", "write", "xml_text"]
