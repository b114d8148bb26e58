"""The index database's schema: made with its version recorded, reopened read-only, and a file
of another version or no database at all refused with a usage error that says which."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from archaudit.errors import UsageError
from archaudit.index import schema


def test_a_new_database_records_its_schema_version_and_reopens_read_only(tmp_path: Path):
    path = str(tmp_path / "i.db")
    schema.connect(path, create=True).close()
    db = schema.connect(path, create=False)
    try:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            str(schema.SCHEMA_VERSION),
        )
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"wheels", "libraries", "entries", "kernels", "findings", "verdicts", "meta"} <= tables
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            db.execute("DELETE FROM meta")
    finally:
        db.close()


def test_creating_again_keeps_what_is_stored(tmp_path: Path):
    path = str(tmp_path / "i.db")
    with schema.connect(path, create=True) as db:
        db.execute("INSERT INTO meta VALUES ('note', 'kept')")
    schema.connect(path, create=True).close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'note'").fetchone() == ("kept",)


def test_another_schema_version_is_refused_naming_both(tmp_path: Path):
    path = str(tmp_path / "i.db")
    schema.connect(path, create=True).close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    for create in (False, True):
        with pytest.raises(UsageError, match=f"schema version 4, this archaudit reads version {schema.SCHEMA_VERSION}"):
            schema.connect(path, create=create)


def test_a_missing_file_or_a_file_that_is_no_database_is_a_usage_error(tmp_path: Path):
    with pytest.raises(UsageError, match="cannot open"):
        schema.connect(str(tmp_path / "missing.db"), create=False)
    assert not (tmp_path / "missing.db").exists()  # reading never makes one
    text = tmp_path / "notes.db"
    text.write_text("not a database\n" * 100)
    with pytest.raises(UsageError, match="not an archaudit index"):
        schema.connect(str(text), create=False)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    with pytest.raises(UsageError, match="schema version missing"):
        schema.connect(str(other), create=False)
