"""The renderings of a SmokeReport: a real `smoke --installed zstandard` run (its libraries
loaded by the load probe in a child), and the same report with a failed and a skipped row
added, through text, JSON, Markdown, GitHub workflow commands and JUnit."""

from __future__ import annotations

import dataclasses
import json
from xml.etree import ElementTree as ET

import pytest

from archaudit.report import smoke as render
from archaudit.smoke import runner
from archaudit.smoke.report import FAIL, PASS, SKIP, Row, SmokeReport


@pytest.fixture(scope="module")
def clean() -> SmokeReport:
    report = runner.run_smoke(
        None, installed="zstandard", require_gpu=False, timeout=60.0, system_site_packages=False, probes=["load"]
    )
    assert report.rows and all(r.status == PASS for r in report.rows)
    return report


@pytest.fixture(scope="module")
def mixed(clean: SmokeReport) -> SmokeReport:
    """The real rows, one of them turned into a death by SIGSEGV, and a skipped row."""
    first = clean.rows[0]
    died = dataclasses.replace(
        first, status=FAIL, reason="died | in its constructor", signal="SIGSEGV", stderr_tail="a\nb\nlast line"
    )
    skipped = Row("device-load", "zstandard", SKIP, "no GPU")
    return dataclasses.replace(clean, rows=(died, *clean.rows[1:], skipped))


def test_json_holds_every_row_its_details_and_the_summary(clean: SmokeReport):
    doc = json.loads(render.to_json(clean))
    assert doc["schema"] == render.SCHEMA and doc["exit_code"] == clean.exit_code == 0
    assert doc["summary"] == {"passed": len(clean.rows), "failed": 0, "skipped": 0}
    assert [r["subject"] for r in doc["rows"]] == [r.subject for r in clean.rows]
    assert doc["rows"][0]["details"] == dict(clean.rows[0].details)  # pairs become an object
    assert doc["resources"] == dict(clean.resources)


def test_text_says_the_environment_why_there_is_no_gpu_and_each_failures_tail(clean, mixed):
    text = render.render_text(clean)
    assert text.startswith(f"archaudit smoke: {clean.distribution} {clean.version}")
    if not clean.gpus:
        assert f"GPUs: none ({clean.gpu_error})" in text
    assert f"{len(clean.rows)} passed, 0 failed, 0 skipped" in text and "peak memory: archaudit" in text
    lines = render.render_text(mixed).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("FAIL"))
    assert lines[at + 1 : at + 6] == [
        "      signal: SIGSEGV",
        "      stderr tail:",
        "      | a",
        "      | b",
        "      | last line",
    ]
    assert f"{len(clean.rows) - 1} passed, 1 failed, 1 skipped" in lines


def test_markdown_escapes_a_reason_that_would_break_its_table(mixed):
    md = render.render_markdown(mixed)
    rows = [line for line in md.splitlines() if line.startswith("| ") and "status" not in line]
    assert len(rows) == len(mixed.rows) and all(row.count(" | ") == 3 for row in rows)
    assert rows[0].startswith("| ✗ FAIL |") and rows[-1].startswith("| · SKIP |")


def test_github_errors_a_failure_notices_a_skip_and_passes_nothing(mixed):
    lines = render.render_github(mixed).splitlines()
    assert [line.split(" ", 1)[0] for line in lines[:-1]] == ["::error", "::notice"]
    assert lines[0].endswith("::died | in its constructor") and lines[1].endswith("::no GPU")
    assert lines[-1].startswith("archaudit smoke: ")


def test_junit_is_one_timed_case_per_row(mixed):
    root = ET.fromstring(render.render_junit(mixed))
    cases = list(root.iter("testcase"))
    assert [c.get("name") for c in cases] == [r.subject for r in mixed.rows]
    assert [c.get("classname") for c in cases] == ["smoke." + r.probe for r in mixed.rows]
    failure = cases[0].find("failure")
    assert failure is not None and "SIGSEGV" in (failure.text or "")
    assert cases[-1].find("skipped") is not None
    assert (root.get("tests"), root.get("failures")) == (str(len(mixed.rows)), "1")


def test_every_format_ends_in_one_newline(mixed):
    for fmt in render.RENDERERS:
        out = render.render(mixed, fmt)
        assert out.endswith("\n") and not out.endswith("\n\n"), fmt
