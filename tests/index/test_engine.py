"""The index engine: which wheels a run judges (a rerun skips what is stored, a newer archaudit
judges again and says which verdicts changed, a dead worker is judged again), in one process or
a pool, and no wheel started past the byte cap."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from archaudit.index import engine, reports, sources
from archaudit.index.store import Store
from archaudit.index.task import TaskOptions, failed
from helpers import db_rows, index_db


def test_rerun_skips_and_newer_version_marks_changed_verdicts(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    refs = sources.resolve([str(corpus)], [], sources.Filters())
    store = Store(str(db))
    first = engine.run(refs, store, TaskOptions(), jobs=1)
    again = engine.run(refs, store, TaskOptions(), jobs=1)
    store.close()
    assert (first.judged, first.skipped) == (4, 0)
    assert (again.judged, again.skipped) == (0, 4)
    # an older archaudit had judged demo 2.0 a pass: the current one re-judges every wheel and says which changed
    with sqlite3.connect(db) as c:
        c.execute("UPDATE wheels SET archaudit_version = '0.0.1', verdict = 'pass' WHERE file LIKE 'demo-2.0%'")
        c.execute("UPDATE wheels SET archaudit_version = '0.0.1' WHERE file LIKE 'demo-1.0%'")
    store = Store(str(db))
    third = engine.run(refs, store, TaskOptions(), jobs=1)
    store.close()
    assert (third.judged, third.skipped) == (2, 2)
    assert [(ch.file.split("-")[1], ch.before, ch.before_version, ch.after) for ch in store.changes] == [
        ("2.0", "pass", "0.0.1", "fail")
    ]
    got = dict(
        (r[0], r[1:])
        for r in db_rows(
            db, "SELECT version, previous_verdict, previous_version, verdict_changed FROM wheels WHERE project = 'demo'"
        )
    )
    assert got["2.0"] == ("pass", "0.0.1", 1)
    assert got["1.0"] == ("fail", "0.0.1", 0)
    assert got["3.0"] == (None, None, 0)
    assert db_rows(db, "SELECT count(*) FROM verdicts")[0][0] == 6
    with sqlite3.connect(db) as c:
        t = reports.changed(c)
    assert [r[1:] for r in t.rows] == [
        ("2.0", "py3-none-manylinux_2_28_x86_64", "pass (0.0.1)", f"fail ({__import__('archaudit').__version__})")
    ]


def test_process_pool_stores_what_one_process_stores(corpus: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    index_db(a, str(corpus), "-j", "1")
    index_db(b, str(corpus), "-j", "2")
    q = (
        "SELECT file, sha256, verdict, (SELECT count(*) FROM entries e WHERE e.wheel_id = w.id), "
        "(SELECT count(*) FROM kernels k WHERE k.wheel_id = w.id) FROM wheels w ORDER BY file"
    )
    assert db_rows(a, q) == db_rows(b, q)


def test_max_bytes_starts_no_wheel_past_the_cap(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    store = Store(str(db))
    refs = sources.resolve([str(corpus)], [], sources.Filters())
    s = engine.run(refs, store, TaskOptions(), jobs=1, max_bytes=1)
    store.close()
    assert (s.judged, s.not_started) == (1, 3)


def test_a_dead_worker_is_a_row_judged_again_on_rerun(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    [ref] = [r for r in sources.resolve([str(corpus)], [], sources.Filters()) if r.file.startswith("demo-1.0")]
    store = Store(str(db))
    store.put(failed(ref, TaskOptions(), None, "killed"), "")
    assert db_rows(db, "SELECT verdict, file FROM wheels") == [("unusable", ref.file)]
    assert not store.done(ref, "")
    again = engine.run([ref], store, TaskOptions(), jobs=1)
    store.close()
    assert again.judged == 1
    assert db_rows(db, "SELECT verdict FROM wheels") == [("fail",)]
    assert db_rows(db, "SELECT count(*) FROM findings WHERE code = 'E099'") == [(0,)]
