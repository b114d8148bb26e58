"""`archaudit query REPORT --db FILE`: the reports of an index database in each format, and what
it refuses (a report without what it needs, a missing database, HTML without matplotlib)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from archaudit.cli import main
from archaudit.index import reports
from archaudit.report import index
from helpers import demo_corpus, index_db


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo 1.0, 2.0 and 3.0 (unreadable) and the example wheel (helpers.demo_corpus)."""
    return demo_corpus(tmp_path_factory.mktemp("wheels"))


def test_html_without_matplotlib_is_a_usage_error(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "i.db"
    index_db(db, str(corpus), "-j", "1")
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)  # as if not installed
    out = tmp_path / "page.html"
    assert main(["query", "html", "--db", str(db), "--project", "demo", "-o", str(out)]) == 2
    assert not out.exists()
    assert main(["query", "changed", "--db", str(db)]) == 0


def test_each_format_is_the_reports_table_rendered(corpus: Path, tmp_path: Path, capsys):
    db = tmp_path / "i.db"
    index_db(db, str(corpus), "-j", "1")
    with sqlite3.connect(db) as c:
        table = reports.coverage(c, "demo")
    capsys.readouterr()
    for fmt in ("text", "json", "markdown"):
        assert main(["query", "coverage", "--db", str(db), "--project", "demo", "--format", fmt]) == 0
        assert capsys.readouterr().out == index.render(table, fmt), fmt
    out = tmp_path / "c.md"
    assert (
        main(["query", "coverage", "--db", str(db), "--project", "demo", "--format", "markdown", "-o", str(out)]) == 0
    )
    assert out.read_text(encoding="utf-8") == index.render(table, "markdown")


def test_a_report_without_what_it_needs_or_a_database_is_a_usage_error(corpus: Path, tmp_path: Path, capsys):
    db = tmp_path / "i.db"
    index_db(db, str(corpus), "-j", "1")
    assert main(["query", "runs-on", "--db", str(db)]) == 2
    assert main(["query", "coverage", "--db", str(db)]) == 2
    assert main(["query", "coverage", "--db", str(tmp_path / "missing.db"), "--project", "demo"]) == 2
    assert not (tmp_path / "missing.db").exists()
