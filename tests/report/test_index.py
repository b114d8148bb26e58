"""The renderings of an index query's Table: text columns padded to their widest cell, Markdown
cells escaped, JSON rows keyed by column; a Table of a real index (the nvcc-built demo wheels)
and one that is empty."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from archaudit.cli import main
from archaudit.index import reports
from archaudit.report import index
from archaudit.report.index import Table
from helpers import CUDA_BIN, DEMO_LIB, make_wheel


@pytest.fixture(scope="module")
def coverage(tmp_path_factory: pytest.TempPathFactory) -> Table:
    d = tmp_path_factory.mktemp("query")
    make_wheel(d, "demo", "1.0", {DEMO_LIB: CUDA_BIN / "lib_multi.so"})
    make_wheel(d, "demo", "2.0", {DEMO_LIB: CUDA_BIN / "lib_sm80.so"})
    db = d / "i.db"
    main(["index", str(d), "--db", str(db), "-j", "1", "-q", "-o", os.devnull])
    with sqlite3.connect(db) as c:
        return reports.coverage(c, "demo")


def test_text_pads_each_column_to_its_widest_cell(coverage: Table):
    lines = index.render_text(coverage).splitlines()
    assert lines[0] == coverage.title and lines[1] == ""
    header, *rows = lines[2 : 2 + 1 + len(coverage.rows)]
    assert header.split() == list(coverage.columns)
    starts = [header.index(c) for c in coverage.columns[1:]]
    for row, cells in zip(rows, coverage.rows):
        for at, cell in zip(starts, cells[1:]):
            assert row[at:].startswith("" if cell is None else str(cell))


def test_json_keys_every_row_by_its_columns(coverage: Table):
    doc = json.loads(index.render(coverage, "json"))
    assert (doc["report"], doc["title"], doc["columns"]) == (coverage.name, coverage.title, list(coverage.columns))
    assert doc["rows"] == [dict(zip(coverage.columns, r)) for r in coverage.rows]
    assert {r["version"] for r in doc["rows"]} == {"1.0", "2.0"}


def test_markdown_escapes_cells_and_has_one_row_per_table_row(coverage: Table):
    md = index.render_markdown(coverage).splitlines()
    assert md[0] == f"### {coverage.title}" and md[3] == "|" + "---|" * len(coverage.columns)
    assert "sm\\_75" in md[2]  # underscores escaped: a cell is text, never emphasis
    assert len([line for line in md if line.startswith("| ")]) == 1 + len(coverage.rows)


def test_an_empty_table_says_so_and_keeps_its_notes():
    t = Table("changed", "Verdicts changed", ("project", "version"), (), ("a note",))
    text = index.render_text(t)
    assert "(no rows)" in text and text.rstrip().endswith("a note")
    assert json.loads(index.render_json(t))["rows"] == [] and "_a note_" in index.render_markdown(t)
    assert index.render(t, "no-such-format") == text  # any other format is text


def test_a_none_cell_is_blank_in_every_format():
    t = Table("x", "X", ("a", "b"), (("1", None),))
    assert index.render_text(t).splitlines()[3] == "1"
    assert "| 1 |  |" in index.render_markdown(t)
    assert json.loads(index.render_json(t))["rows"] == [{"a": "1", "b": None}]
