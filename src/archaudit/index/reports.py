"""Named reports over an index database: each rebuilds the stored inventories and asks today's
rules (audit.judge, diff.compare), so a query and `archaudit check` never disagree.

Every report is a Table (title, columns, rows, notes), rendered as text, JSON or Markdown.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from ..findings import Code, Finding, means_unverified
from ..gpus import cuda as arch
from ..gpus.cuda import CC, label
from ..gpus.drivers import driver_key
from ..judge import diff
from ..judge.audit import judge
from ..judge.policy import AmdGpu, NvidiaGpu, Policy
from ..model import TargetInventory
from .store import inventory_of

Cell = str | int | float | None
RANK = {"native": 2, "jit": 1, "none": 0}
MARKS = {"native": "N", "jit": "J", "none": "-"}


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WheelRow:
    id: int
    file: str
    project: str
    version: str
    tags: str
    verdict: str
    upload_time: str | None
    build: str = ""

    @property
    def release(self) -> str:
        """The version, with the build tag when the file name has one (torch 2.10.0 build 3: 2.10.0-3)."""
        return f"{self.version}-{self.build}" if self.build else self.version

    @property
    def line(self) -> tuple[str, str, str]:
        """(python tag, OS, CPU): the wheels of one project that succeed each other."""
        py, _, plat = self.tags.split("-") if self.tags.count("-") == 2 else ("", "", self.tags)
        p = plat.split(".")[-1]
        m = re.search(r"(x86_64|aarch64|amd64|arm64|ppc64le|s390x|i686|armv7l|universal2|any)$", p)
        cpu = m.group(1) if m else p
        os_name = "win" if p.startswith("win") else "macos" if p.startswith("macosx") else \
            "linux" if "linux" in p else p
        return py, os_name, cpu


def _version_key(v: str) -> tuple[int, Any]:
    try:
        return 0, Version(v)
    except InvalidVersion:
        return 1, v


def wheels(db: sqlite3.Connection, project: str | None = None) -> list[WheelRow]:
    """Wheel rows, oldest version first (a project filter compares normalised names)."""
    sql = "SELECT id, file, project, version, tags, verdict, upload_time, build FROM wheels"
    params: tuple[Any, ...] = ()
    if project:
        sql += " WHERE project = ?"
        params = (re.sub(r"[-_.]+", "-", project).lower(),)
    rows = [WheelRow(*r) for r in db.execute(sql, params)]
    return sorted(rows, key=lambda w: (w.project, _version_key(w.version), w.build, w.tags, w.file))


def _inventories(db: sqlite3.Connection, rows: Iterable[WheelRow]) -> Iterable[tuple[WheelRow, TargetInventory]]:
    for w in rows:
        yield w, inventory_of(db, w.id)


# ---- runs-on --------------------------------------------------------------------------------

def runs_on(db: sqlite3.Connection, gpu_name: str, nvidia: Sequence[tuple[str, tuple[int, int]]],
            amd: Sequence[AmdGpu], project: str | None = None, every: bool = False) -> Table:
    """The wheels whose every library with device code runs on the GPU (natively or by JIT).
    A wheel that could not be verified (any E finding) never counts as running."""
    policy = Policy(gpus=tuple(NvidiaGpu(*g) for g in nvidia), amd_gpus=tuple(amd))
    out = []
    for w, inv in _inventories(db, wheels(db, project)):
        t = judge(inv, None, policy)
        bad = sorted({f.subject for f in t.findings if f.code == Code.G009})
        unverified = [f for f in t.findings if means_unverified(f)]
        answered = [f for f in t.findings if f.code in (Code.G008, Code.G009)]
        hows = [str(f.get("runs")) for f in answered]
        if unverified or inv.unusable:
            answer, how = "unverified", str(unverified[0].code if unverified else Code.E001)
        elif not answered and (outside := vendor_outside(t.findings)):
            answer, how = "no", outside
        elif not answered:
            answer, how = "no device code", ""
        elif bad:
            answer, how = "no", ", ".join(b.rsplit("/", 1)[-1] for b in bad[:3]) + (" ..." if len(bad) > 3 else "")
        else:
            answer, how = "yes", min(hows, key=lambda h: RANK.get(h, 0))
        if every or answer == "yes":
            out.append((w.project, w.release, w.tags, answer, how))
    n_yes = sum(1 for r in out if r[3] == "yes")
    notes = (f"{n_yes} wheel(s) run on {gpu_name}: every library carrying device code runs there "
             f"(how: the worst of its libraries; native or jit)",)
    return Table("runs-on", f"Wheels that run on {gpu_name}", ("project", "version", "tags", "runs", "how"),
                 tuple(out), notes)


def vendor_outside(findings: Iterable[Finding]) -> str:
    """Where every library with device code is a vendor library outside its documented range on
    the GPU asked (G016 for a --gpu, and no G008/G009 answer): that it does not run there, and why."""
    libraries = sorted({f"{f.get('library')} {f.get('range')}" for f in findings
                        if f.code == Code.G016 and f.get("gpu") is not None})
    return f"outside its vendor's range ({', '.join(libraries)})" if libraries else ""


# ---- coverage per release ---------------------------------------------------------------------

def _axis() -> list[tuple[int, int]]:
    return [cc for cc in arch.KNOWN_CCS if not arch.is_tegra(cc) and arch.canonical_cc(cc) == cc]


@dataclass(frozen=True, slots=True)
class _Runs:
    worst: dict[str, int]  # architecture label -> worst RANK over the libraries with device code
    failing: dict[str, tuple[str, ...]]  # architecture label -> libraries that do not run there
    unverified: bool


def _runs(inv: TargetInventory, axis: Sequence[tuple[int, int]]) -> _Runs:
    """How a wheel runs on each architecture of the axis: the rules' own --gpu answers (G008, G009)."""
    t = judge(inv, None, Policy(gpus=tuple(NvidiaGpu(label(cc), cc) for cc in axis)))
    worst: dict[str, int] = {}
    failing: dict[str, list[str]] = {}
    outside: dict[str, list[str]] = {}  # vendor libraries outside their documented range (G016)
    for f in t.findings:
        if f.code == Code.G016 and f.get("gpu") is not None:
            outside.setdefault(str(f.get("gpu")), []).append(f.subject)
        if f.code in (Code.G008, Code.G009):
            g = str(f.get("gpu"))
            # G009 decides: a library with kernels that cannot run there does not run there
            rank = 0 if f.code == Code.G009 else RANK.get(str(f.get("runs")), 0)
            worst[g] = min(worst.get(g, 2), rank)
            if f.code == Code.G009:
                failing.setdefault(g, []).append(f.subject)
    for g, subjects in outside.items():  # only they carry device code: the wheel does not run there
        if g not in worst:
            worst[g], failing[g] = 0, subjects
    bad = inv.unusable or any(means_unverified(f) for f in t.findings)
    return _Runs(worst, {k: tuple(v) for k, v in failing.items()}, bad)


def _sm(cc: CC) -> str:
    return f"sm_{cc[0]}{cc[1]}"


def coverage(db: sqlite3.Connection, project: str) -> Table:
    """Per wheel of a project, oldest first: how it runs on each architecture, the worst of its
    libraries (N native, J only by PTX JIT, - not at all)."""
    axis = _axis()
    rows = []
    carried: set[tuple[int, int]] = set()
    for w, inv in _inventories(db, wheels(db, project)):
        for lib in inv.libraries:
            for c in lib.reachable:
                carried |= {arch.canonical_cc(arch.CudaTarget.parse(e.target).cc) for e in c.entries
                            if c.loadable and e.vendor == "nvidia" and e.kind in ("sass", "ptx")}
        r = _runs(inv, axis)
        cells = []
        for cc in axis:
            rank = r.worst.get(label(cc))
            cells.append("?" if r.unverified else "" if rank is None else MARKS[_NAMES[rank]])
        rows.append((w.release, w.tags, *cells))
    used = [i for i, cc in enumerate(axis) if cc in carried or any(r[2 + i] not in ("", "-", "?") for r in rows)]
    keep = list(range(used[0], used[-1] + 1)) if used else []
    cols = ("version", "tags", *(_sm(axis[i]) for i in keep))
    trimmed = tuple((r[0], r[1], *(r[2 + i] for i in keep)) for r in rows)
    notes = ("N: every library with device code runs natively; J: some only through PTX JIT; -: some library "
             "does not run there (none of its code, or some of its kernels: G009); ?: the wheel could not be verified",)
    return Table("coverage", f"Coverage of {project} by release", cols, trimmed, notes)


_NAMES = {2: "native", 1: "jit", 0: "none"}


# ---- architectures lost between consecutive releases ------------------------------------------

def lost(db: sqlite3.Connection, project: str) -> Table:
    """For each line of wheels (python tag, OS, CPU), each release against the one before it:
    every architecture a library stopped carrying (the `diff` rule: kind 'carried'), and every
    architecture the wheel stopped running on, or now reaches only through PTX JIT (kind 'runs':
    what a GPU of that architecture sees, such as Turing losing its sm_70 cubins)."""
    lines: dict[tuple[str, str, str], list[WheelRow]] = {}
    for w in wheels(db, project):
        lines.setdefault(w.line, []).append(w)
    axis = _axis()
    rows = []
    notes = []
    compared = 0
    for key, ws in sorted(lines.items()):
        by_release: dict[str, WheelRow] = {}
        for w in ws:
            by_release.setdefault(w.release, w)
        ordered = list(by_release.values())
        for old, new in zip(ordered, ordered[1:]):
            compared += 1
            pair, line = f"{old.release} -> {new.release}", "-".join(key)
            inv_old, inv_new = inventory_of(db, old.id), inventory_of(db, new.id)
            r = diff.compare(inv_old, inv_new)
            if r.old.unusable or r.new.unusable:
                notes.append(f"{pair} ({line}): not compared, a wheel is unusable")
                continue
            for d in r.losses:
                for x in d.lost:
                    rows.append((pair, line, "carried", d.path, x.target, x.now or ""))
            a, b = _runs(inv_old, axis), _runs(inv_new, axis)
            for cc in axis:
                k = label(cc)
                before, after = a.worst.get(k), b.worst.get(k)
                if before is not None and before > 0 and (after or 0) < before:
                    who = b.failing.get(k) or tuple(sorted({lib.path for lib in inv_new.libraries
                                                            if lib.has_device_code}))
                    shown = ", ".join(p.rsplit("/", 1)[-1] for p in who[:3]) + (" ..." if len(who) > 3 else "")
                    rows.append((pair, line, "runs", shown, _sm(cc), _NAMES[after or 0]))
    notes.insert(0, f"{compared} consecutive pair(s) compared. carried: a target the library no longer carries "
                    f"('now': how its new code runs there); runs: an architecture the wheel no longer runs on "
                    f"natively ('now': jit, only through PTX; none, not at all)")
    return Table("lost", f"Architectures lost between consecutive releases of {project}",
                 ("releases", "line", "kind", "library", "lost", "now"), tuple(rows), tuple(notes))


# ---- driver floor per release -------------------------------------------------------------------

def driver_floor(db: sqlite3.Connection, project: str) -> Table:
    """Per wheel, oldest first: the newest driver any of its libraries needs (and the CUDA
    release that sets it, and the library)."""
    rows = []
    for w, inv in _inventories(db, wheels(db, project)):
        t = judge(inv, None, Policy())
        floors = [(v.driver_floor, v.path) for v in t.libraries if v.driver_floor is not None]
        if floors:
            (cuda, driver), path = max(floors, key=lambda f: driver_key(f[0][1]))
            rows.append((w.release, w.tags, w.upload_time or "", cuda, driver, path.rsplit("/", 1)[-1]))
        else:
            rows.append((w.release, w.tags, w.upload_time or "", "", "", ""))
    return Table("driver-floor", f"Driver floor of {project} by release",
                 ("version", "tags", "uploaded", "cuda", "driver", "set by"), tuple(rows),
                 ("driver: the oldest NVIDIA driver that loads every library's device code (Linux)",))


# ---- verdicts changed by a newer archaudit --------------------------------------------------------

def changed(db: sqlite3.Connection, project: str | None = None) -> Table:
    """The wheels whose latest judgement differs from the one an earlier archaudit version gave."""
    sql = ("SELECT project, version, build, tags, previous_verdict, previous_version, verdict, archaudit_version "
           "FROM wheels WHERE verdict_changed = 1")
    params: tuple[Any, ...] = ()
    if project:
        sql += " AND project = ?"
        params = (re.sub(r"[-_.]+", "-", project).lower(),)
    rows = sorted(db.execute(sql, params), key=lambda r: (r[0], _version_key(r[1]), r[2], r[3]))
    out = tuple((p, f"{v}-{b}" if b else v, t, f"{pv} ({pver})", f"{nv} ({nver})")
                for p, v, b, t, pv, pver, nv, nver in rows)
    return Table("changed", "Verdicts changed by a newer archaudit", ("project", "version", "tags", "before", "now"),
                 out, (f"{len(out)} wheel(s) judged otherwise than before; the verdicts table keeps every judgement",))


__all__ = ["Table", "WheelRow", "changed", "coverage", "driver_floor", "lost", "runs_on", "vendor_outside", "wheels"]
