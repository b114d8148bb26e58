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

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..findings import Code, Finding, means_unverified
from ..gpus import cuda as arch
from ..gpus.cuda import CC, label
from ..gpus.drivers import driver_key
from ..judge import diff
from ..judge.audit import TargetReport, judge
from ..judge.policy import AmdGpu, NvidiaGpu, Policy
from ..model import TargetInventory
from ..report.index import Table
from .store import inventory_of

RANK = {"native": 2, "jit": 1, "none": 0}
MARKS = {"native": "N", "jit": "J", "none": "-"}


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
        os_name = (
            "win" if p.startswith("win") else "macos" if p.startswith("macosx") else "linux" if "linux" in p else p
        )
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
        params = (canonicalize_name(project),)
    rows = [WheelRow(*r) for r in db.execute(sql, params)]
    return sorted(rows, key=lambda w: (w.project, _version_key(w.version), w.build, w.tags, w.file))


def _inventories(db: sqlite3.Connection, rows: Iterable[WheelRow]) -> Iterable[tuple[WheelRow, TargetInventory]]:
    for w in rows:
        yield w, inventory_of(db, w.id)


# ---- runs-on --------------------------------------------------------------------------------


def runs_on(
    db: sqlite3.Connection,
    gpu_name: str,
    nvidia: Sequence[tuple[str, tuple[int, int]]],
    amd: Sequence[AmdGpu],
    project: str | None = None,
    every: bool = False,
) -> Table:
    """The wheels whose every library with device code runs on the GPU (natively or by JIT).
    A wheel that could not be verified (any E finding) never counts as running."""
    policy = Policy(gpus=tuple(NvidiaGpu(*g) for g in nvidia), amd_gpus=tuple(amd))
    out = []
    for w, inv in _inventories(db, wheels(db, project)):
        answer, how = answer_of(judge(inv, None, policy), inv.unusable)
        if every or answer == "yes":
            out.append((w.project, w.release, w.tags, answer, how))
    n_yes = sum(1 for r in out if r[3] == "yes")
    notes = (
        f"{n_yes} wheel(s) run on {gpu_name}: every library carrying device code runs there "
        f"(how: the worst of its libraries; native or jit)",
    )
    return Table(
        "runs-on", f"Wheels that run on {gpu_name}", ("project", "version", "tags", "runs", "how"), tuple(out), notes
    )


def answer_of(t: TargetReport, unusable: bool) -> tuple[str, str]:
    """A wheel's runs-on answer from the rules' own findings for the GPU asked: (answer, how)."""
    bad = sorted({f.subject for f in t.findings if f.code == Code.G009})
    unverified = [f for f in t.findings if means_unverified(f)]
    answered = [f for f in t.findings if f.code in (Code.G008, Code.G009)]
    if unverified or unusable:
        return "unverified", str(unverified[0].code if unverified else Code.E001)
    if not answered:
        return _unanswered(t)
    if other := _other_vendor(t):
        return "no", other
    if bad:
        return "no", ", ".join(b.rsplit("/", 1)[-1] for b in bad[:3]) + (" ..." if len(bad) > 3 else "")
    return "yes", min((str(f.get("runs")) for f in answered), key=lambda h: RANK.get(h, 0))


def _other_vendor(t: TargetReport) -> str:
    """Where the GPU asked is the other vendor's (check: G011): that the wheel has none of its device code."""
    other = [f for f in t.findings if f.code == Code.G011 and f.get("gpus") is not None]
    return f"no {other[0].get('vendor')} device code" if other else ""


def _unanswered(t: TargetReport) -> tuple[str, str]:
    """The answer of a usable wheel with no G008/G009 for the GPU asked."""
    if outside := vendor_outside(t.findings):
        return "no", outside
    if other := _other_vendor(t):
        return "no", other
    return "no device code", ""


def vendor_outside(findings: Iterable[Finding]) -> str:
    """Where every library with NVIDIA device code is a vendor library its vendor does not
    support on the GPU asked (G019 for a --gpu): that the wheel does not run there, and why."""
    rows = sorted(
        {str(r) for f in findings if f.code == Code.G019 and f.get("asked") == "asked" for r in _listed(f.get("rows"))}
    )
    return f"outside its vendor's range ({'; '.join(rows)})" if rows else ""


def _listed(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else []


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
                carried |= {
                    arch.canonical_cc(arch.CudaTarget.parse(e.target).cc)
                    for e in c.entries
                    if c.loadable and e.vendor == "nvidia" and e.kind in ("sass", "ptx")
                }
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
    notes = (
        "N: every library with device code runs natively; J: some only through PTX JIT; -: some library "
        "does not run there (none of its code, or some of its kernels: G009); ?: the wheel could not be verified",
    )
    return Table("coverage", f"Coverage of {project} by release", cols, trimmed, notes)


_NAMES = {2: "native", 1: "jit", 0: "none"}


# ---- architectures lost between consecutive releases ------------------------------------------


def _carried_lost(pair: str, line: str, r: diff.DiffReport) -> list[tuple[str, ...]]:
    """The 'carried' and 'kernels' rows of a pair: diff's targets lost and kernels a GPU no longer runs."""
    rows: list[tuple[str, ...]] = []
    for d in r.losses:
        for x in d.lost:
            rows.append((pair, line, "carried", d.path, x.target, x.now or ""))
        for gone in d.worse:  # diff's container-by-container answer: kernels a GPU no longer runs
            if gone.kernels:
                rows.append(
                    (
                        pair,
                        line,
                        "kernels",
                        d.path,
                        "sm_" + gone.cc.replace(".", ""),
                        ", ".join(gone.kernels[:3]) + (" ..." if len(gone.kernels) > 3 else ""),
                    )
                )
    return rows


def _runs_lost(
    pair: str, line: str, inv_old: TargetInventory, inv_new: TargetInventory, axis: list[tuple[int, int]]
) -> list[tuple[str, ...]]:
    """The 'runs' rows of a pair: each architecture the new wheel runs on worse than the old one did."""
    rows: list[tuple[str, ...]] = []
    a, b = _runs(inv_old, axis), _runs(inv_new, axis)
    for cc in axis:
        k = label(cc)
        before, after = a.worst.get(k), b.worst.get(k)
        if before is not None and before > 0 and (after or 0) < before:
            who = b.failing.get(k) or tuple(sorted({lib.path for lib in inv_new.libraries if lib.has_device_code}))
            shown = ", ".join(p.rsplit("/", 1)[-1] for p in who[:3]) + (" ..." if len(who) > 3 else "")
            rows.append((pair, line, "runs", shown, _sm(cc), _NAMES[after or 0]))
    return rows


def _release_pairs(ws: list[WheelRow]) -> list[tuple[WheelRow, WheelRow]]:
    """Consecutive releases of one line, the first wheel of each release."""
    by_release: dict[str, WheelRow] = {}
    for w in ws:
        by_release.setdefault(w.release, w)
    ordered = list(by_release.values())
    return list(zip(ordered, ordered[1:]))


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
        for old, new in _release_pairs(ws):
            compared += 1
            pair, line = f"{old.release} -> {new.release}", "-".join(key)
            inv_old, inv_new = inventory_of(db, old.id), inventory_of(db, new.id)
            r = diff.compare(inv_old, inv_new)
            if r.old.unusable or r.new.unusable:
                notes.append(f"{pair} ({line}): not compared, a wheel is unusable")
                continue
            rows += _carried_lost(pair, line, r)
            rows += _runs_lost(pair, line, inv_old, inv_new, axis)
    notes.insert(
        0,
        f"{compared} consecutive pair(s) compared. carried: a target the library no longer carries "
        f"('now': how its new code runs there); kernels: kernels of a library that GPUs of an "
        f"architecture no longer run from their own container ('now': which), whatever else the "
        f"library carries; runs: an architecture the wheel no longer runs on "
        f"natively ('now': jit, only through PTX; none, not at all)",
    )
    return Table(
        "lost",
        f"Architectures lost between consecutive releases of {project}",
        ("releases", "line", "kind", "library", "lost", "now"),
        tuple(rows),
        tuple(notes),
    )


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
    return Table(
        "driver-floor",
        f"Driver floor of {project} by release",
        ("version", "tags", "uploaded", "cuda", "driver", "set by"),
        tuple(rows),
        ("driver: the oldest NVIDIA driver that loads every library's device code (Linux)",),
    )


# ---- verdicts changed by a newer archaudit --------------------------------------------------------


def dispatch(db: sqlite3.Connection, gpu: str | None = None, project: str | None = None) -> Table:
    """The containers each GPU launched kernels from, as smoke traces recorded them (`archaudit index
    --trace REPORT.json`): per library, which containers served, how, and how many launches."""
    where, params = [], []
    if gpu:
        where.append("(sm = ? OR gpu LIKE ?)")
        params += [gpu, f"%{gpu}%"]
    if project:
        where.append("distribution = ?")
        params.append(project)
    sql = (
        "SELECT gpu, sm, driver, distribution, version, library, container_idx, container_offset, served, "
        "launches, containers_total, containers_without_code FROM dispatch"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY sm, gpu, library, container_idx"
    )
    rows = [tuple(r) for r in db.execute(sql, params).fetchall()]
    libraries = {(r[0], r[5]) for r in rows}
    notes = (
        f"{len(rows)} container(s) of {len(libraries)} library(ies) served a traced launch; a trace proves "
        f"dispatch on that GPU for the workloads traced, not for other shapes, paths or GPUs",
    )
    return Table(
        "dispatch",
        "containers that served traced launches, per GPU" + (f" ({gpu})" if gpu else ""),
        (
            "gpu",
            "sm",
            "driver",
            "distribution",
            "version",
            "library",
            "container",
            "offset",
            "served",
            "launches",
            "containers",
            "without code",
        ),
        tuple(rows),
        notes,
    )


def changed(db: sqlite3.Connection, project: str | None = None) -> Table:
    """The wheels whose latest judgement differs from the one an earlier archaudit version gave."""
    sql = (
        "SELECT project, version, build, tags, previous_verdict, previous_version, verdict, archaudit_version "
        "FROM wheels WHERE verdict_changed = 1"
    )
    params: tuple[Any, ...] = ()
    if project:
        sql += " AND project = ?"
        params = (canonicalize_name(project),)
    rows = sorted(db.execute(sql, params), key=lambda r: (r[0], _version_key(r[1]), r[2], r[3]))
    out = tuple(
        (p, f"{v}-{b}" if b else v, t, f"{pv} ({pver})", f"{nv} ({nver})") for p, v, b, t, pv, pver, nv, nver in rows
    )
    return Table(
        "changed",
        "Verdicts changed by a newer archaudit",
        ("project", "version", "tags", "before", "now"),
        out,
        (f"{len(out)} wheel(s) judged otherwise than before; the verdicts table keeps every judgement",),
    )


__all__ = [
    "Table",
    "WheelRow",
    "answer_of",
    "changed",
    "coverage",
    "driver_floor",
    "lost",
    "runs_on",
    "vendor_outside",
    "wheels",
]
