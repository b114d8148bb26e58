"""`archaudit index --ray`: the same per-wheel task on a local Ray instance, results written by
the one writer; the database must hold what a single process stores.

Ray is an optional extra (archaudit[ray]); CI installs it (.ci/run). On a developer machine
without it the test skips with the reason; under CI=true it fails (tests/reference_tools.py)."""

from __future__ import annotations

import importlib.util
import os
import sqlite3
from pathlib import Path

from archaudit.cli import main
from reference_tools import needs_tool

pytestmark = needs_tool("ray (pip install 'archaudit[ray]')", importlib.util.find_spec("ray") is not None)

Q = (
    "SELECT file, sha256, verdict, exit_code, (SELECT count(*) FROM entries e WHERE e.wheel_id = w.id), "
    "(SELECT count(*) FROM kernels k WHERE k.wheel_id = w.id), "
    "(SELECT group_concat(code) FROM findings f WHERE f.wheel_id = w.id) FROM wheels w ORDER BY file"
)


def test_ray_stores_what_one_process_stores(corpus: Path, tmp_path: Path) -> None:  # noqa: F811
    one, ray_db = tmp_path / "one.db", tmp_path / "ray.db"
    assert main(["index", str(corpus), "--db", str(one), "-j", "1", "-q", "-o", os.devnull]) == 1
    assert main(["index", str(corpus), "--db", str(ray_db), "--ray", "local", "-j", "2", "-q", "-o", os.devnull]) == 1
    with sqlite3.connect(one) as a, sqlite3.connect(ray_db) as b:
        assert list(a.execute(Q)) == list(b.execute(Q))
        assert len(list(b.execute(Q))) == 4
    # a rerun on Ray skips every wheel judged (nothing is shipped)
    assert main(["index", str(corpus), "--db", str(ray_db), "--ray", "local", "-j", "2", "-q", "-o", os.devnull]) == 0
