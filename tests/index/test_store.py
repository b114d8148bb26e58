"""The index store: what a database holds rebuilds the inventory check reads (entries, kernels,
own targets, statements, folded findings), and a wheel judged over some libraries is another
key than the same wheel over all."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from archaudit.cli import main
from archaudit.index import sources
from archaudit.index.store import Store, inventory_of
from archaudit.read.artifacts import inventory
from helpers import db_rows, index_db, make_wheel

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cuda" / "bin"


def test_entries_and_kernels_round_trip(corpus: Path, tmp_path: Path) -> None:
    """What the database holds rebuilds the inventory `check` reads (every entry and kernel)."""
    db = tmp_path / "i.db"
    index_db(db, str(corpus), "-j", "1")
    with sqlite3.connect(db) as c:
        for wid, file in c.execute("SELECT id, file FROM wheels"):
            direct = inventory(str(corpus / file), jobs=1, decode=True)
            stored = inventory_of(c, wid)
            assert stored.libraries == direct.libraries
            assert [p.code for p in stored.problems] == [p.code for p in direct.problems]
            assert stored.unusable == direct.unusable
    kernels = db_rows(db, "SELECT DISTINCT name FROM kernels")
    assert kernels  # the fixtures' kernels were decoded and stored
    n_entries = sum(len(lib.entries) for f in corpus.iterdir() for lib in inventory(str(f), jobs=1).libraries)
    assert db_rows(db, "SELECT count(*) FROM entries")[0][0] == n_entries


def test_libraries_scope_reads_only_matching_members_and_is_part_of_the_key(tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    wheels.mkdir()
    make_wheel(
        wheels,
        "two",
        "1.0",
        {"two/lib/liba.so": FIXTURES / "lib_multi.so", "two/lib/libb.so": FIXTURES / "lib_sm80.so"},
    )
    db = tmp_path / "i.db"
    index_db(db, str(wheels), "-j", "1", "--libraries", "*/liba.so")
    assert db_rows(db, "SELECT l.path, w.scope FROM libraries l JOIN wheels w ON w.id = l.wheel_id") == [
        ("two/lib/liba.so", "*/liba.so")
    ]
    # the same wheel over every library is another question: judged again, both libraries read
    refs = sources.resolve([str(wheels)], [], sources.Filters())
    store = Store(str(db))
    assert store.done(refs[0], "*/liba.so") and not store.done(refs[0], "")
    store.close()
    index_db(db, str(wheels), "-j", "1")
    assert [r[0] for r in db_rows(db, "SELECT path FROM libraries ORDER BY path")] == [
        "two/lib/liba.so",
        "two/lib/libb.so",
    ]


def test_own_target_and_defines_nothing_round_trip(tmp_path: Path) -> None:
    """An AMD code object's own target (its e_flags) and an empty cubin's 'defines nothing' survive
    the database: a query judges them as check does (an xnack+ object, a cubin with no kernel)."""
    fix = Path(__file__).resolve().parents[1] / "fixtures"
    corpus = tmp_path / "wheels"
    corpus.mkdir()
    make_wheel(
        corpus,
        "rt",
        "1.0",
        {
            "rt/lib_empty_sm75.so": fix / "cuda" / "bin" / "lib_empty_sm75.so",
            "rt/hip_xnack.so": fix / "amd" / "bin" / "hip_xnack.so",
        },
    )
    db = tmp_path / "i.db"
    index_db(db, str(corpus), "-j", "1")
    with sqlite3.connect(db) as c:
        ((wid, file),) = c.execute("SELECT id, file FROM wheels").fetchall()
        stored = inventory_of(c, wid)
    direct = inventory(str(corpus / file), jobs=1, decode=True)
    assert stored.libraries == direct.libraries
    entries = [e for lib in stored.libraries for e in lib.entries]
    assert any(e.defines_nothing for e in entries) and any(e.own_target for e in entries)


def test_statements_round_trip(tmp_path: Path) -> None:
    """A library's sourced statements (schema 4, libraries.statements) survive the database, so a
    query excuses NCCL's fp8 kernels below sm_90 as check does."""
    fix = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
    corpus = tmp_path / "wheels"
    corpus.mkdir()
    make_wheel(corpus, "st", "1.0", {"st/lib/libnccl.so.2": fix / "fp8_stated" / "libnccl.so.2"})
    db = tmp_path / "i.db"
    index_db(db, str(corpus), "-j", "1", "--arch", "80;90")
    with sqlite3.connect(db) as c:
        ((wid, file),) = c.execute("SELECT id, file FROM wheels").fetchall()
        stored = inventory_of(c, wid)
        (said,) = c.execute("SELECT statements FROM libraries WHERE wheel_id = ?", (wid,)).fetchone()
    assert stored.libraries == inventory(str(corpus / file), jobs=1, decode=True).libraries
    assert json.loads(said) == ["FP8 reduction support begins with sm90 capable devices."]
    assert db_rows(db, "SELECT verdict FROM wheels") == [("pass",)]


def test_a_finding_flood_is_one_folded_row_and_an_older_database_is_refused(tmp_path: Path) -> None:
    """A member of 32-byte bundle headers that declare no entries (one E030 each, E032 once the
    look-ahead is spent) is stored as check reports it, one row per code with its count and first
    messages (schema 5), and its inventory's folded problems round trip. A database of schema 4,
    whose rows cannot say so, is refused, not read."""
    import struct

    member = tmp_path / "data.hsaco"
    member.write_bytes((b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", 0)) * (1 << 15))  # 1 MiB
    corpus = tmp_path / "wheels"
    corpus.mkdir()
    make_wheel(corpus, "fl", "1.0", {"fl/data.hsaco": member})
    db = tmp_path / "i.db"
    assert index_db(db, str(corpus), "-j", "1", "--arch", "80") == 1
    rows = db_rows(db, "SELECT code, count, examples FROM findings")
    assert sum(n for _, n, _ in rows) == (1 << 15) + 1 and len(rows) <= 3  # every header, and G006
    assert all(len(json.loads(e)) == (5 if n > 5 else 0) for _, n, e in rows)
    with sqlite3.connect(db) as c:
        ((wid, file),) = c.execute("SELECT id, file FROM wheels").fetchall()
        stored = inventory_of(c, wid)
    assert stored.libraries == inventory(str(corpus / file), jobs=1, decode=True).libraries
    assert sum(p.count for p in stored.libraries[0].problems) == 1 << 15
    with sqlite3.connect(db) as c:
        c.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    assert main(["query", "--db", str(db), "changed"]) == 2
