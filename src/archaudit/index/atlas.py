"""The GPU atlas's data: every wheel of an index database judged again by today's rules against
every GPU row of the atlas (report/atlas.py renders what this hands it)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..findings import Code, means_unverified
from ..gpus.drivers import driver_key
from ..judge.audit import judge
from ..judge.policy import AmdGpu, NvidiaGpu, Policy
from ..report import atlas
from ..report.atlas import HOST, JIT, NATIVE, NO, UNVERIFIED, GpuRow, WheelColumn
from .reports import RANK, WheelRow, wheels
from .store import inventory_of


def _cc(key: str) -> tuple[int, int]:
    number = key.removeprefix("sm_")
    return int(number[:-1]), int(number[-1])


def _column(db: sqlite3.Connection, w: WheelRow, rows: Sequence[GpuRow]) -> WheelColumn:
    inv = inventory_of(db, w.id)
    policy = Policy(gpus=tuple(NvidiaGpu(r.key, _cc(r.key)) for r in rows if r.vendor == "nvidia"),
                    amd_gpus=tuple(AmdGpu(r.gpus[0], r.generation.split(":")[0], r.generation if ":" in r.generation
                                          else "") for r in rows if r.vendor == "amd"))
    row_of = {r.key if r.vendor == "nvidia" else r.gpus[0]: r.key for r in rows}
    t = judge(inv, None, policy)
    worst: dict[str, int] = {}
    for f in t.findings:
        if f.code in (Code.G008, Code.G009) and str(f.get("gpu")) in row_of:
            rank = 0 if f.code == Code.G009 else RANK.get(str(f.get("runs")), 2)
            key = row_of[str(f.get("gpu"))]
            worst[key] = min(worst.get(key, 2), rank)
    unverified = inv.unusable or any(means_unverified(f) for f in t.findings)
    word = {2: NATIVE, 1: JIT, 0: NO}
    cells = {r.key: UNVERIFIED if unverified else word[worst[r.key]] if r.key in worst else HOST for r in rows}
    floors = [v.driver_floor for v in t.libraries if v.driver_floor is not None]
    floor = max(floors, key=lambda f: driver_key(f[1])) if floors else None
    rows_found = db.execute("SELECT code, severity, subject, message, count FROM findings WHERE wheel_id = ?", (w.id,))
    found = tuple((code, sev, subject, message if n == 1 else f"x{n} (folded): {message}")
                  for code, sev, subject, message, n in rows_found)
    return WheelColumn(w.id, w.project, w.release, w.tags, w.file, w.verdict, w.upload_time or "", cells, floor,
                       found, w.line)


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
