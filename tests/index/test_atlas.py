"""The GPU atlas's data: every wheel of an index of the nvcc-built demo wheels judged again
against every GPU row; a cell says what `check --gpu` says of that GPU, an unreadable wheel is
unverified everywhere, and each column keeps the findings the index stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archaudit.core import check
from archaudit.gpus.catalog import NvidiaGpu
from archaudit.index import atlas as atlas_data, schema
from archaudit.judge.policy import Policy
from archaudit.report import atlas
from helpers import index_db


@pytest.fixture(scope="module")
def db(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("atlas") / "i.db"
    index_db(path, str(corpus), "-j", "1")
    return path


def test_each_cell_is_what_check_gpu_answers(db: Path, corpus: Path):
    rows = atlas.gpu_rows()
    conn = schema.connect(str(db), create=False)
    try:
        demo = {c.release: c for c in atlas_data.columns(conn, rows)["demo"]}
    finally:
        conn.close()
    assert list(demo) == ["1.0", "2.0", "3.0"]  # oldest release first
    assert set(demo["3.0"].cells.values()) == {atlas.UNVERIFIED}  # truncated: nothing can be said
    wheel = next(f for f in corpus.iterdir() if f.name.startswith("demo-2.0-"))
    for key in ("sm_75", "sm_80", "sm_86", "sm_90"):
        cc = (int(key[3:-1]), int(key[-1]))
        r = check([str(wheel)], None, Policy(gpus=(NvidiaGpu(key, cc),)), jobs=1)
        runs = r.exit_code == 0
        assert (demo["2.0"].cells[key] == atlas.NATIVE) == runs, key
        assert (demo["2.0"].cells[key] == atlas.NO) == (not runs), key
    assert demo["1.0"].cells["sm_75"] == atlas.NATIVE and demo["2.0"].cells["sm_75"] == atlas.NO


def test_a_column_carries_its_stored_findings_and_the_data_its_cells(db: Path):
    conn = schema.connect(str(db), create=False)
    try:
        cols = atlas_data.columns(conn, atlas.gpu_rows())
        stored = dict(
            conn.execute("SELECT file, count(*) FROM findings JOIN wheels ON wheels.id = wheel_id GROUP BY file")
        )
        files = {f for (f,) in conn.execute("SELECT file FROM wheels")}
        doc = json.loads(atlas_data.data(conn))
    finally:
        conn.close()
    every = [c for cs in cols.values() for c in cs]
    assert {c.file for c in every} == files  # every wheel a column
    for c in every:
        assert len(c.findings) == stored.get(c.file, 0)  # one per stored row, a folded one with its count
    [new] = [c for c in cols["demo"] if c.release == "1.0"]
    assert new.floor is not None  # CUDA 13 SASS: a driver floor
    assert {p: [d["cells"] for d in ds] for p, ds in doc.items()} == {
        p: [c.cells for c in cs] for p, cs in cols.items()
    }
