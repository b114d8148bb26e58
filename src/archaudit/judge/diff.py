"""`archaudit diff OLD NEW`: the GPU architectures each library gained or lost between two
releases (wheels, directories, or an installed distribution against a new wheel).

Libraries are matched by path, then (for those left over) by file name without its version
suffix or auditwheel hash (`libfoo-1a2b3c4d.so.12` ~ `libfoo.so.13`). A library with device
code that disappears loses all of it; one that appears gains all of it. A loss fails (exit 1,
unless allowed) when some catalog GPU the old library ran on runs worse with the new one
(native -> JIT, or no longer at all), or when it is not a CUDA target (AMD code is not weighed);
a lost target whose GPUs still run as well costs nothing and is reported only. The driver floor
of each release is reported. Whatever could not be read fails closed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from .. import __version__
from ..findings import Code, means_unverified
from ..gpus import cuda as arch
from ..gpus.cuda import target_order
from ..gpus.drivers import driver_key, floor_words
from ..gpus.selection import best, nv_codes
from ..model import RELOCATABLE, Library, TargetInventory
from .audit import LibraryVerdict, Policy, TargetReport, judge

DIFF_SCHEMA_VERSION = 1
GPU_EXAMPLES = 3
NOW_WORDS = {"native": "still runs natively", "jit": "now only through PTX JIT", "none": "no longer runs",
             "": "not a CUDA target"}


@dataclass(frozen=True, slots=True)
class Lost:
    target: str  # "sm_61", "compute_90", "gfx90a"
    now: str  # how the library's new code runs on that GPU: "native" | "jit" | "none" | "" (not CUDA)
    gpus: tuple[str, ...] = ()  # catalog GPUs of that compute capability, a few


@dataclass(frozen=True, slots=True)
class Worse:
    """A GPU the old library ran on that the new one runs worse."""

    cc: str  # "8.6"
    was: str  # "native" | "jit"
    now: str  # "jit" | "none"
    gpus: tuple[str, ...] = ()  # catalog GPUs of that compute capability, a few


@dataclass(frozen=True, slots=True)
class LibraryDiff:
    path: str  # the new path when the library is in NEW, else the old one
    old_path: str | None
    new_path: str | None
    matched_by: str  # "path" | "name" | "" (added or removed)
    change: str  # "added" | "removed" | "changed" | "unchanged"
    old: tuple[str, ...]
    new: tuple[str, ...]
    gained: tuple[str, ...]
    lost: tuple[Lost, ...]
    old_bytes: int
    new_bytes: int
    problems: tuple[str, ...] = ()
    worse: tuple[Worse, ...] = ()

    @property
    def costly(self) -> bool:
        """A loss that costs some GPU (or cannot be weighed: not a CUDA target)."""
        return bool(self.worse) or any(not x.now for x in self.lost)


@dataclass(frozen=True, slots=True)
class Side:
    target: str
    kind: str
    distribution: str
    carries: tuple[str, ...]
    unusable: bool
    problems: tuple[str, ...]
    driver: str = ""  # the driver floor (D002 of its most demanding library), "" when none
    driver_words: str = ""  # ">= 580.65.06 on Linux (CUDA 13.0"


@dataclass(frozen=True)
class DiffReport:
    old: Side
    new: Side
    libraries: tuple[LibraryDiff, ...]
    gained: tuple[str, ...]
    lost: tuple[str, ...]
    allow_loss: bool = False
    schema_version: int = DIFF_SCHEMA_VERSION
    tool_version: str = __version__

    @property
    def losses(self) -> tuple[LibraryDiff, ...]:
        """Libraries whose loss costs some GPU: what fails."""
        return tuple(d for d in self.libraries if d.costly)

    @property
    def free_losses(self) -> tuple[LibraryDiff, ...]:
        """Libraries that lost targets while every GPU they ran on runs as well."""
        return tuple(d for d in self.libraries if d.lost and not d.costly)

    @property
    def problems(self) -> tuple[str, ...]:
        return self.old.problems + self.new.problems + tuple(p for d in self.libraries for p in d.problems)

    @property
    def exit_code(self) -> int:
        if self.old.unusable or self.new.unusable:
            return 2
        if self.problems:
            return 1
        return 1 if self.losses and not self.allow_loss else 0


# ---- matching ----

_VERSION_SUFFIX = re.compile(r"(\.so)(\.\d+)+$")
_AUDITWHEEL_HASH = re.compile(r"-[0-9a-f]{8}(?=\.(?:so|dll|dylib)\b)")


def library_key(path: str) -> str:
    """A library's name without directory, version suffix or auditwheel hash:
    `pkg/lib/libcublas-8a7b6c5d.so.12.1` -> `libcublas.so`."""
    base = path.replace("\\", "/").rsplit("/", 1)[-1]
    base = _VERSION_SUFFIX.sub(r"\1", base)
    return _AUDITWHEEL_HASH.sub("", base)


class Match(NamedTuple):
    """One old library and its new counterpart; None on the side where it is absent."""

    old: str | None
    new: str | None
    how: str  # "path" | "name" | "" (added or removed)


def match_libraries(old: list[str], new: list[str]) -> list[Match]:
    """Pairs (old path, new path, how) covering both lists: by path first, then by library_key
    where that key is unique among the leftovers on each side; the rest are added or removed."""
    new_set = set(new)
    pairs = [Match(p, p, "path") for p in old if p in new_set]
    matched = {p for p, _, _ in pairs}
    left_old = [p for p in old if p not in matched]
    left_new = [p for p in new if p not in matched]

    def by_key(paths: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for p in paths:
            out.setdefault(library_key(p), []).append(p)
        return out

    ko, kn = by_key(left_old), by_key(left_new)
    for key, olds in ko.items():
        news = kn.get(key, [])
        if len(olds) == 1 and len(news) == 1:
            pairs.append(Match(olds[0], news[0], "name"))
    matched_old = {o for o, _, _ in pairs}
    matched_new = {n for _, n, _ in pairs}
    pairs += [Match(p, None, "") for p in old if p not in matched_old]
    pairs += [Match(None, p, "") for p in new if p not in matched_new]
    return pairs


# ---- comparing ----

def _sorted(labels: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(labels), key=target_order))


def _how_now(label: str, lib: Library | None) -> tuple[str, tuple[str, ...]]:
    """How the library's new device code runs on the GPU a lost target served, and a few GPUs."""
    if not (label.startswith("sm_") or label.startswith("compute_")):
        return "", ()
    try:
        cc = arch.canonical_cc(arch.CudaTarget.parse(label).cc)
    except ValueError:
        return "", ()
    gpus = tuple(g.name for g in arch.gpu_catalog() if g.cc == cc)[:GPU_EXAMPLES]
    if lib is None:
        return "none", gpus
    return best(nv_codes(e for c in lib.reachable if c.role != RELOCATABLE for e in c.entries), cc), gpus


_RANK = {"native": 2, "jit": 1, "none": 0}


def _lib_codes(lib: Library | None) -> tuple[Any, ...]:
    return nv_codes(e for c in lib.reachable if c.role != RELOCATABLE for e in c.entries) if lib else ()


def worse_gpus(old: Library | None, new: Library | None) -> tuple[Worse, ...]:
    """Each catalog compute capability the old library's code ran on (natively or through the
    JIT) that the new library's code runs worse."""
    a, b = _lib_codes(old), _lib_codes(new)
    if not a:
        return ()
    out = []
    for cc in sorted({arch.canonical_cc(g.cc) for g in arch.gpu_catalog()}):
        was, now = best(a, cc), best(b, cc)
        if _RANK[was] > _RANK[now]:
            gpus = tuple(g.name for g in arch.gpu_catalog() if arch.canonical_cc(g.cc) == cc)[:GPU_EXAMPLES]
            out.append(Worse(f"{cc[0]}.{cc[1]}", was, now, gpus))
    return tuple(out)


def _side(t: TargetReport) -> Side:
    carries = _sorted(x for v in t.libraries for x in v.carried)
    problems = tuple(f.message for f in t.findings if means_unverified(f)
                     and f.subject not in {v.path for v in t.libraries})
    floors = [f for f in t.findings if f.code == Code.D002]
    top = max(floors, key=lambda f: driver_key(str(f.get("driver")))) if floors else None
    return Side(t.target, t.kind, t.distribution, carries, t.unusable, problems,
                str(top.get("driver")) if top else "", floor_words(top) + ")" if top else "")


def compare(old: TargetInventory, new: TargetInventory, *, allow_loss: bool = False) -> DiffReport:
    """Compare the device code of two inventories, library by library."""
    policy = Policy()
    t_old, t_new = judge(old, None, policy), judge(new, None, policy)
    v_old = {v.path: v for v in t_old.libraries}
    v_new = {v.path: v for v in t_new.libraries}
    l_new = {lib.path: lib for lib in new.libraries}
    l_old = {lib.path: lib for lib in old.libraries}

    def interesting(v: LibraryVerdict) -> bool:
        return bool(v.carried or v.relocatable) or v.status == "unverified"

    olds = [p for p, v in v_old.items() if interesting(v)]
    news = [p for p, v in v_new.items() if interesting(v)]
    # match among every library, so device code that vanished from a library still shipped is a loss
    pairs = match_libraries(list(v_old), list(v_new))
    wanted = set(olds) | {("new", p) for p in news}
    rows: list[LibraryDiff] = []
    for op, np_, how in pairs:
        if op not in wanted and ("new", np_) not in wanted:
            continue
        vo, vn = v_old.get(op) if op else None, v_new.get(np_) if np_ else None
        a = tuple(vo.carried) if vo else ()
        b = tuple(vn.carried) if vn else ()
        gained = _sorted(set(b) - set(a))
        lost = tuple(Lost(x, *_how_now(x, l_new.get(np_) if np_ else None)) for x in _sorted(set(a) - set(b)))
        problems = tuple(f.message for v in (vo, vn) if v for f in v.findings if means_unverified(f))
        if vo is None or not interesting(vo):
            change = "added"
        elif vn is None or not interesting(vn):
            change = "removed"
        else:
            change = "changed" if gained or lost else "unchanged"
        rows.append(LibraryDiff(
            np_ or op or "", op, np_, how if op and np_ else "", change, _sorted(a), _sorted(b), gained, lost,
            sum(s for _, s, _ in vo.bytes_by_target) if vo else 0,
            sum(s for _, s, _ in vn.bytes_by_target) if vn else 0, problems,
            worse_gpus(l_old.get(op) if op else None, l_new.get(np_) if np_ else None) if lost else ()))
    rows.sort(key=lambda d: ({"removed": 0, "changed": 1, "added": 2, "unchanged": 3}[d.change], d.path))
    s_old, s_new = _side(t_old), _side(t_new)
    if old.unusable or new.unusable:
        return DiffReport(s_old, s_new, (), (), (), allow_loss)
    return DiffReport(s_old, s_new, tuple(rows), _sorted(set(s_new.carries) - set(s_old.carries)),
                      _sorted(set(s_old.carries) - set(s_new.carries)), allow_loss)


__all__ = ["compare", "match_libraries", "Match", "library_key", "DiffReport", "LibraryDiff", "Lost", "Side",
           "Worse", "NOW_WORDS", "DIFF_SCHEMA_VERSION", "worse_gpus"]
