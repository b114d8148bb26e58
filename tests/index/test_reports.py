"""The index queries (runs-on, coverage, lost) over a database of real nvcc-built wheels: each
answer is what check --gpu and diff say of the same wheels read directly."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from archaudit.core import check
from archaudit.gpus.catalog import NvidiaGpu
from archaudit.index import reports
from archaudit.judge import diff
from archaudit.judge.policy import Policy
from archaudit.read.artifacts import inventory
from helpers import DEMO_LIB as LIB, index_db, make_wheel

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cuda" / "bin"


def test_runs_on_depends_on_the_gpu_asked(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    index_db(db, str(corpus), "-j", "1")
    with sqlite3.connect(db) as c:
        hopper = reports.runs_on(c, "H100", [("H100", (9, 0))], [], "demo", every=True)
        ampere = reports.runs_on(c, "A10", [("A10", (8, 6))], [], "demo", every=True)
    # sm_80 SASS runs on 8.6 (same major), not on 9.0; 1.0 carries sm_90 and PTX
    assert {r[1]: r[3] for r in hopper.rows} == {"1.0": "yes", "2.0": "no", "3.0": "unverified"}
    assert {r[1]: r[3] for r in ampere.rows} == {"1.0": "yes", "2.0": "yes", "3.0": "unverified"}


def test_runs_on_a_gpu_outside_a_vendor_range(tmp_path: Path) -> None:
    """An nvcc-built cuSPARSELt (its file name and CUSPARSELT_LOG_LEVEL; documented for 8.0 and
    newer): a wheel of it alone does not run on a T4 (G019, the row named as the reason, not 'no
    device code'); beside a library that runs there it is not held against the wheel (torch 2.5.1
    on a T4), in the coverage row too. The identity string survives the database (schema 6)."""
    wheels = tmp_path / "w"
    wheels.mkdir()
    lt = FIXTURES / "vendor" / "cusparselt" / "libcusparseLt.so.0"
    make_wheel(wheels, "ltalone", "1.0", {"ltalone/libcusparseLt.so.0": lt})
    make_wheel(
        wheels,
        "ltbundled",
        "1.0",
        {"ltbundled/lib/libcusparseLt-294d6944.so.0": lt, "ltbundled/lib/libtorchish.so": FIXTURES / "lib_all.so"},
    )
    db = tmp_path / "i.db"
    index_db(db, str(wheels), "-j", "1")
    with sqlite3.connect(db) as c:
        t4 = reports.runs_on(c, "T4", [("T4", (7, 5))], [], None, every=True)
        bundled = reports.coverage(c, "ltbundled")
    answers = {r[0]: (r[3], r[4]) for r in t4.rows}
    assert answers["ltalone"] == ("no", "outside its vendor's range (cuSPARSELt for CUDA 13: 8.0 and newer)")
    assert answers["ltbundled"][0] == "yes"
    assert bundled.rows[0][bundled.columns.index("sm_75")] == "N"


def test_coverage_cell_follows_g009_when_only_part_of_a_library_runs(tmp_path: Path) -> None:
    """lib_multiobj.so carries sm_90 and compute_90 for one object but only sm_80 for another: the
    library as a whole does not run on 9.0 (check --gpu says G009), so its cell is '-', not 'N'."""
    wheels = tmp_path / "w"
    wheels.mkdir()
    make_wheel(wheels, "part", "1.0", {LIB: FIXTURES / "lib_multiobj.so"})
    db = tmp_path / "i.db"
    index_db(db, str(wheels), "-j", "1")
    gpus = (NvidiaGpu("sm_90", (9, 0)), NvidiaGpu("sm_86", (8, 6)))
    r = check([str(next(wheels.iterdir()))], None, Policy(gpus=gpus), jobs=1, decode=True)
    g009 = {str(f.get("gpu")) for f in r.findings if f.code == "G009"}
    with sqlite3.connect(db) as c:
        [row] = reports.coverage(c, "part").rows
        cols = reports.coverage(c, "part").columns
    cells = dict(zip(cols, row))
    assert "sm_90" in g009 and cells["sm_90"] == "-"
    assert cells["sm_86"] == ("-" if "sm_86" in g009 else "N")


def test_lost_and_diff_agree_kernel_by_kernel(tmp_path: Path) -> None:
    """1.0 links kern.o and mul.o, each for 80;90; 2.0 links mul.o for sm_80 only. The library
    carries sm_80 and sm_90 in both, but mul's launch fails on 9.0 in 2.0: diff and query lost
    both name it."""
    floors = FIXTURES / "floors"
    wheels = tmp_path / "w"
    wheels.mkdir()
    make_wheel(wheels, "two", "1.0", {LIB: floors / "lib_two_8090.so"})
    make_wheel(wheels, "two", "2.0", {LIB: floors / "lib_two_mul80.so"})
    db = tmp_path / "i.db"
    index_db(db, str(wheels), "-j", "1")
    old, new = sorted(wheels.iterdir())
    d = diff.compare(inventory(str(old)), inventory(str(new)))
    (lib,) = d.losses
    assert lib.lost == () and [(w.cc, w.kernels) for w in lib.worse] == [("9.0", ("_Z3mulPKfS0_Pfi",))]
    with sqlite3.connect(db) as c:
        rows = reports.lost(c, "two").rows
    assert [(r[2], r[4], r[5]) for r in rows if r[2] == "kernels"] == [("kernels", "sm_90", "_Z3mulPKfS0_Pfi")]
    assert ("runs", "sm_90", "none") in {(r[2], r[4], r[5]) for r in rows}  # check --gpu H100: G009
