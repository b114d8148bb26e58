"""The one writer of the index database, and the reader that rebuilds a stored inventory.

`Store.put` writes one wheel's result in one transaction (so an interrupted run loses at most
the wheels in flight); `Store.done` says what a rerun may skip. `inventory_of` rebuilds the
TargetInventory a row was judged from, so queries judge it with today's rules.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import __version__
from ..findings import Code
from ..gpus.drivers import driver_key
from ..judge.audit import LibraryVerdict
from ..model import Container, Entry, Library, Problem, TargetInventory
from . import schema
from .sources import WheelRef, wheel_name
from .task import WheelResult, stand_in_key


def _problems(ps: Iterable[Problem]) -> str:
    """Problems as stored, each with its fold (findings.Fold), so the inventory rebuilt judges alike."""
    return json.dumps([[p.code, p.message, p.offset, p.count, list(p.examples)] for p in ps])


def _unproblems(text: str) -> tuple[Problem, ...]:
    return tuple(Problem(Code(c), m, o, n, tuple(e)) for c, m, o, n, e in json.loads(text))


def _pair(v: tuple[int, int] | None) -> str | None:
    return None if v is None else f"{v[0]}.{v[1]}"


def _unpair(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    a, b = text.split(".")
    return int(a), int(b)


@dataclass(frozen=True, slots=True)
class Change:
    """A wheel whose verdict another archaudit version gave otherwise."""

    file: str
    before: str
    before_version: str
    after: str


class Store:
    """The index database, opened for writing by the one process that writes it."""

    def __init__(self, path: str, tool_version: str = __version__):
        self.db = schema.connect(path, create=True)
        self.tool_version = tool_version
        self.changes: list[Change] = []

    def close(self) -> None:
        self.db.close()

    def put_trace(self, report: dict[str, Any], raw: bytes) -> int:
        """The trace rows of one smoke JSON report (report/smoke.py's to_dict) as dispatch rows: one
        per container a GPU launched from. A report already stored (same bytes) adds nothing.
        Returns the rows added; raises ValueError for a report that is not a smoke report."""
        if not isinstance(report, dict) or not str(report.get("schema", "")).startswith("archaudit-smoke/"):
            raise ValueError("not an archaudit smoke JSON report (its 'schema' is not archaudit-smoke/N)")
        sha = hashlib.sha256(raw).hexdigest()
        db = self.db
        if db.execute("SELECT 1 FROM dispatch WHERE report_sha256 = ? LIMIT 1", (sha,)).fetchone():
            return 0
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        added = 0
        for row in report.get("rows") or ():
            if not isinstance(row, dict):
                continue
            d = row.get("details") or {}
            if row.get("probe") != "trace" or row.get("status") != "PASS" or "containers" not in d:
                continue
            for c in d["containers"]:
                db.execute(
                    "INSERT INTO dispatch VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        sha,
                        str(d["gpu"]),
                        str(d["sm"]),
                        report.get("driver"),
                        str(report["distribution"]),
                        str(report["version"]),
                        str(row["subject"]),
                        int(c["container"]),
                        int(c["offset"]),
                        str(c["served"]),
                        int(c["launches"]),
                        int(d["containers_total"]),
                        int(d["containers_without_code"]),
                        now,
                    ),
                )
                added += 1
        db.commit()
        return added

    def known_sha(self, ref: WheelRef) -> str | None:
        """The sha256 of a local file hashed before, if it has not changed since."""
        if ref.remote:
            return ref.sha256
        try:
            st = os.stat(ref.location)
        except OSError:
            return None
        row = self.db.execute(
            "SELECT sha256 FROM files WHERE path = ? AND size = ? AND mtime_ns = ?",
            (os.path.abspath(ref.location), st.st_size, st.st_mtime_ns),
        ).fetchone()
        return str(row[0]) if row else None

    def done(self, ref: WheelRef, scope: str) -> bool:
        """Whether this wheel was judged by this archaudit, over the same scope (a rerun skips it)."""
        sha = self.known_sha(ref) or (stand_in_key(ref) if ref.remote else None)
        if sha is None:
            return False
        row = self.db.execute("SELECT id, archaudit_version, scope FROM wheels WHERE sha256 = ?", (sha,)).fetchone()
        if row is None or row[1] != self.tool_version or row[2] != scope:
            return False
        # a wheel whose worker died (E099) is judged again
        died = self.db.execute("SELECT 1 FROM findings WHERE wheel_id = ? AND code = 'E099'", (row[0],)).fetchone()
        return died is None

    def put(self, r: WheelResult, scope: str) -> int:
        """Store one result, replacing an older judgement of the same wheel; returns its id."""
        db = self.db
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        with db:
            previous = self._replace_previous(r)
            # a stand-in key (a wheel that could not be hashed, or whose worker died) gives way to its judgement
            stand_in = stand_in_key(r.ref)
            if stand_in != r.sha256:
                db.execute("DELETE FROM wheels WHERE sha256 = ?", (stand_in,))
            cur = db.execute(
                "INSERT INTO wheels (sha256, sha256_checked, file, location, size, project, version, build, tags, "
                "upload_time, claim_source, claim, verdict, exit_code, gpu_wheel, driver_cuda, driver_min, "
                "bytes_fetched, bytes_inflated, seconds, scope, archaudit_version, judged_at, previous_verdict, "
                "previous_version, verdict_changed, problems) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                "?,?,?)",
                self._wheel_values(r, scope, now, previous),
            )
            wid = int(cur.lastrowid or 0)
            verdicts = {v.path: v for v in r.report.libraries}
            for li, lib in enumerate(r.inventory.libraries):
                _put_library(db, wid, li, lib, verdicts.get(lib.path))
            db.executemany(
                "INSERT INTO findings VALUES (?,?,?,?,?,?,?)",
                [
                    (wid, f.code, f.severity, f.subject, f.message, f.count, json.dumps(list(f.examples)))
                    for f in r.report.findings
                ],
            )
            db.execute("INSERT INTO verdicts VALUES (?,?,?,?)", (r.sha256, self.tool_version, r.verdict, now))
            if r.sha256_checked and not r.ref.remote:
                self._remember_file(r)
        return wid

    def _replace_previous(self, r: WheelResult) -> tuple[str | None, str | None, int]:
        """Delete an older judgement of the same wheel; what it said, for the new row: (previous
        verdict, the archaudit version that gave it, whether the verdict changed). A judgement by
        this same archaudit passes on the previous one it had recorded."""
        db = self.db
        old = db.execute("SELECT id, verdict, archaudit_version FROM wheels WHERE sha256 = ?", (r.sha256,)).fetchone()
        if old is None:
            return None, None, 0
        if old[2] != self.tool_version:
            previous, previous_version = old[1], old[2]
            changed = int(old[1] != r.verdict)
            if changed:
                self.changes.append(Change(r.ref.file, old[1], old[2], r.verdict))
        else:
            prev = db.execute(
                "SELECT previous_verdict, previous_version, verdict_changed FROM wheels WHERE id = ?", (old[0],)
            ).fetchone()
            previous, previous_version, changed = prev
        db.execute("DELETE FROM wheels WHERE id = ?", (old[0],))
        return previous, previous_version, changed

    def _wheel_values(
        self, r: WheelResult, scope: str, now: str, previous: tuple[str | None, str | None, int]
    ) -> tuple[object, ...]:
        """The values of a wheel's row, in the order of the wheels table's INSERT."""
        t, inv = r.report, r.inventory
        name = wheel_name(r.ref.file)
        floors = [v.driver_floor for v in t.libraries if v.driver_floor is not None]
        top = max(floors, key=lambda f: driver_key(f[1])) if floors else None
        claim = ", ".join(f"{a.target}" for a in t.claim.archs) if t.claim is not None else ""
        named = (name.project, name.version, name.build, name.tags) if name else ("", "", "", "")
        floor = top if top else (None, None)
        return (
            r.sha256,
            int(r.sha256_checked),
            r.ref.file,
            r.ref.location,
            r.size,
            *named,
            r.ref.upload_time,
            r.claim_source,
            claim,
            r.verdict,
            r.exit_code,
            int(t.gpu_wheel),
            *floor,
            r.fetched,
            inv.bytes_read,
            round(r.seconds, 3),
            scope,
            self.tool_version,
            now,
            *previous,
            _problems(inv.problems),
        )

    def _remember_file(self, r: WheelResult) -> None:
        """The local file's size and mtime with its hash, so that a rerun need not hash it again."""
        try:
            st = os.stat(r.ref.location)
            self.db.execute(
                "INSERT OR REPLACE INTO files VALUES (?,?,?,?)",
                (os.path.abspath(r.ref.location), st.st_size, st.st_mtime_ns, r.sha256),
            )
        except OSError:
            pass


def _put_library(db: sqlite3.Connection, wid: int, li: int, lib: Library, v: LibraryVerdict | None) -> None:
    """One library's row, with its containers, entries and kernels."""
    fl = v.driver_floor if v else None
    db.execute(
        "INSERT INTO libraries VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            wid,
            li,
            lib.path,
            lib.size,
            lib.format,
            v.status if v else None,
            json.dumps(list(v.carried) if v else []),
            fl[0] if fl else None,
            fl[1] if fl else None,
            v.kernels if v else None,
            json.dumps(list(lib.needed)),
            json.dumps(list(lib.runpath)),
            json.dumps(list(lib.embedded_claims)),
            _problems(lib.problems),
            json.dumps(list(lib.notes)),
            json.dumps(list(lib.linkers)),
            json.dumps(list(lib.statements)),
        ),
    )
    for ci, c in enumerate(lib.containers):
        db.execute(
            "INSERT INTO containers VALUES (?,?,?,?,?,?,?,?)",
            (wid, li, ci, c.vendor, c.role, c.section, c.offset, c.size),
        )
        for ei, e in enumerate(c.entries):
            db.execute(
                "INSERT INTO entries VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    wid,
                    li,
                    ci,
                    ei,
                    e.vendor,
                    e.kind,
                    e.target,
                    _pair(e.code_version),
                    e.compression,
                    e.stored_size,
                    e.size,
                    e.offset,
                    e.identifier,
                    int(e.debug),
                    int(e.kernels is not None),
                    _pair(e.toolkit),
                    int(e.decoded),
                    e.ptx_target,
                    json.dumps(list(e.unresolved)),
                    e.own_target,
                    int(e.defines_nothing),
                ),
            )
            if e.kernels:
                db.executemany("INSERT INTO kernels VALUES (?,?,?,?,?)", [(wid, li, ci, ei, k) for k in e.kernels])


def inventory_of(db: sqlite3.Connection, wheel_id: int) -> TargetInventory:
    """The inventory a wheel row was judged from, rebuilt from its rows."""
    w = db.execute(
        "SELECT file, problems, exit_code, bytes_inflated, seconds, project, version FROM wheels WHERE id = ?",
        (wheel_id,),
    ).fetchone()
    if w is None:
        raise KeyError(f"no wheel {wheel_id} in the index")
    kernels: dict[tuple[int, int, int], list[str]] = {}
    for li, ci, ei, name in db.execute(
        "SELECT library_idx, container_idx, entry_idx, name FROM kernels WHERE wheel_id = ? ORDER BY rowid", (wheel_id,)
    ):
        kernels.setdefault((li, ci, ei), []).append(name)
    entries: dict[tuple[int, int], list[Entry]] = {}
    for row in db.execute(
        "SELECT library_idx, container_idx, idx, vendor, kind, target, code_version, compression, "
        "stored_size, size, offset, identifier, debug, kernels_read, toolkit, decoded, ptx_target, "
        "unresolved, own_target, defines_nothing FROM entries WHERE wheel_id = ? "
        "ORDER BY library_idx, container_idx, idx",
        (wheel_id,),
    ):
        (
            li,
            ci,
            ei,
            vendor,
            kind,
            target,
            cv,
            comp,
            stored,
            size,
            off,
            ident,
            debug,
            kread,
            tk,
            dec,
            ptxt,
            unres,
            own,
            nothing,
        ) = row
        ks = tuple(kernels.get((li, ci, ei), ())) if kread else None
        entries.setdefault((li, ci), []).append(
            Entry(
                vendor,
                kind,
                target,
                _unpair(cv) or (0, 0),
                comp,
                stored,
                size,
                off,
                ident,
                bool(debug),
                ks,
                _unpair(tk),
                bool(dec),
                ptxt,
                tuple(json.loads(unres)),
                own,
                bool(nothing),
            )
        )
    containers: dict[int, list[Container]] = {}
    for li, ci, vendor, role, section, off, size in db.execute(
        "SELECT library_idx, idx, vendor, role, section, offset, size FROM containers WHERE wheel_id = ? "
        "ORDER BY library_idx, idx",
        (wheel_id,),
    ):
        containers.setdefault(li, []).append(
            Container(vendor, role, section, off, size, tuple(entries.get((li, ci), ())))
        )
    libs = []
    for li, path, size, fmt, needed, runpath, claims, problems, notes, linkers, said in db.execute(
        "SELECT idx, path, size, format, needed, runpath, embedded_claims, problems, notes, linkers, statements "
        "FROM libraries WHERE wheel_id = ? ORDER BY idx",
        (wheel_id,),
    ):
        libs.append(
            Library(
                path,
                size,
                fmt,
                tuple(containers.get(li, ())),
                tuple(json.loads(needed)),
                tuple(json.loads(runpath)),
                tuple(json.loads(claims)),
                _unproblems(problems),
                tuple(json.loads(notes)),
                tuple(json.loads(linkers)),
                tuple(json.loads(said)),
            )
        )
    file, problems, exit_code, inflated, seconds, _, _ = w
    parts = file.split("-")
    dist = f"{parts[0]}-{parts[1]}" if len(parts) >= 2 else ""  # as artifacts names a wheel's distribution
    unusable = exit_code == 2  # only an unusable target makes the check exit 2
    return TargetInventory(file, "wheel", tuple(libs), _unproblems(problems), unusable, inflated, seconds, dist)


def wheel_rows(db: sqlite3.Connection, where: str = "", params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    db.row_factory = sqlite3.Row
    try:
        return list(db.execute(f"SELECT * FROM wheels {where}", params))
    finally:
        db.row_factory = None


__all__ = ["Change", "Store", "inventory_of", "wheel_rows"]
