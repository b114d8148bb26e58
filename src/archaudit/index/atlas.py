"""The GPU atlas's data: every wheel of an index database judged again by today's rules against
every GPU row of the atlas (report/atlas.py renders what this hands it)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..findings import Code, means_unverified
from ..gpus.drivers import driver_key
from ..judge.audit import TargetReport, judge
from ..judge.policy import AmdGpu, NvidiaGpu, Policy
from ..report import atlas
from ..report.atlas import HOST, JIT, NATIVE, NO, UNVERIFIED, GpuRow, WheelColumn
from .reports import RANK, WheelRow, wheels
from .store import inventory_of


def _cc(key: str) -> tuple[int, int]:
    number = key.removeprefix("sm_")
    return int(number[:-1]), int(number[-1])


def _policy(rows: Sequence[GpuRow]) -> Policy:
    """A policy that asks the judge about every GPU row of the atlas."""
    nvidia = tuple(NvidiaGpu(r.key, _cc(r.key)) for r in rows if r.vendor == "nvidia")
    amd = tuple(
        AmdGpu(r.gpus[0], r.generation.split(":")[0], r.generation if ":" in r.generation else "")
        for r in rows
        if r.vendor == "amd"
    )
    return Policy(gpus=nvidia, amd_gpus=amd)


def _worst(t: TargetReport, row_of: dict[str, str]) -> dict[str, int]:
    """Each GPU row's worst answer among the --gpu findings (G008/G009): 2 native, 1 JIT, 0 does not run."""
    worst: dict[str, int] = {}
    for f in t.findings:
        if f.code in (Code.G008, Code.G009) and str(f.get("gpu")) in row_of:
            rank = 0 if f.code == Code.G009 else RANK.get(str(f.get("runs")), 2)
            key = row_of[str(f.get("gpu"))]
            worst[key] = min(worst.get(key, 2), rank)
    return worst


def _cells(rows: Sequence[GpuRow], worst: dict[str, int], unverified: bool) -> dict[str, str]:
    """A cell per GPU row: unverified, else its worst answer, else host code only."""
    word = {2: NATIVE, 1: JIT, 0: NO}
    cells = {}
    for r in rows:
        if unverified:
            cells[r.key] = UNVERIFIED
        elif r.key in worst:
            cells[r.key] = word[worst[r.key]]
        else:
            cells[r.key] = HOST
    return cells


def _found(db: sqlite3.Connection, wheel_id: int) -> tuple[tuple[str, str, str, str], ...]:
    """The findings the index stored for a wheel, a folded one with its count."""
    rows_found = db.execute(
        "SELECT code, severity, subject, message, count FROM findings WHERE wheel_id = ?", (wheel_id,)
    )
    return tuple(
        (code, sev, subject, message if n == 1 else f"x{n} (folded): {message}")
        for code, sev, subject, message, n in rows_found
    )


def _column(db: sqlite3.Connection, w: WheelRow, rows: Sequence[GpuRow]) -> WheelColumn:
    inv = inventory_of(db, w.id)
    row_of = {r.key if r.vendor == "nvidia" else r.gpus[0]: r.key for r in rows}
    t = judge(inv, None, _policy(rows))
    unverified = inv.unusable or any(means_unverified(f) for f in t.findings)
    cells = _cells(rows, _worst(t, row_of), unverified)
    floors = [v.driver_floor for v in t.libraries if v.driver_floor is not None]
    floor = max(floors, key=lambda f: driver_key(f[1])) if floors else None
    return WheelColumn(
        w.id,
        w.project,
        w.release,
        w.tags,
        w.file,
        w.verdict,
        w.upload_time or "",
        cells,
        floor,
        _found(db, w.id),
        w.line,
    )


def columns(db: sqlite3.Connection, rows: Sequence[GpuRow]) -> dict[str, list[WheelColumn]]:
    """Every wheel of the database, by project, oldest release first."""
    out: dict[str, list[WheelColumn]] = {}
    for w in wheels(db):
        out.setdefault(w.project, []).append(_column(db, w, rows))
    return out


def page(db: sqlite3.Connection, title: str = "GPU atlas") -> str:
    """The whole atlas of a database: every project, every wheel."""
    rows = atlas.gpu_rows()
    return atlas.page(columns(db, rows), rows, title)


def data(db: sqlite3.Connection) -> str:
    """The atlas's cells as JSON, for a test or a script (what the page draws)."""
    return atlas.data(columns(db, atlas.gpu_rows()))


__all__ = ["columns", "data", "page"]
