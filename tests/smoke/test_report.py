"""The smoke report's records (smoke/report.py): frozen rows, the counts and the exit status a
report carries, and which trace rows are a library's dispatch that every format shows."""

from __future__ import annotations

import dataclasses

import pytest

from archaudit.smoke.report import FAIL, PASS, SKIP, Row, SmokeReport, is_dispatch


def report(*statuses: str) -> SmokeReport:
    rows = tuple(Row("load", f"lib{k}.so", s, "why") for k, s in enumerate(statuses))
    return SmokeReport("demo.whl", "demo", "1.0", "fresh venv (uv)", "3.12", (), "no GPU", None, False, 60.0, rows)


def test_the_exit_status_is_1_on_any_failed_row_and_skips_do_not_fail():
    assert report().exit_code == 0 and not report().failed
    assert report(PASS, SKIP, SKIP).exit_code == 0
    mixed = report(PASS, FAIL, SKIP, FAIL)
    assert (mixed.count(PASS), mixed.count(FAIL), mixed.count(SKIP)) == (1, 2, 1)
    assert mixed.failed and mixed.exit_code == 1


def test_rows_and_reports_are_frozen():
    row = Row("load", "lib.so", PASS, "loaded")
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.status = FAIL  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        report(PASS).rows = ()  # type: ignore[misc]


def test_a_dispatch_row_is_a_passed_trace_row_that_names_its_containers():
    containers = (("containers", [{"index": 1, "served": "sm_90 SASS"}]), ("launches", 3))
    assert is_dispatch(Row("trace", "lib.so", PASS, "served", details=containers))
    assert not is_dispatch(Row("trace", "lib.so", FAIL, "failed", details=containers))
    assert not is_dispatch(Row("trace", "lib.so", PASS, "no containers", details=(("launches", 3),)))
    assert not is_dispatch(Row("device-load", "lib.so", PASS, "loaded", details=containers))
