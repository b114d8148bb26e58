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
from typing import Any, NamedTuple, TypeVar

from .. import __version__
from ..findings import Code, means_unverified
from ..gpus import cuda as arch
from ..gpus.cuda import target_order
from ..gpus.drivers import driver_key, floor_words
from ..gpus.selection import best, nv_codes
from ..model import RELOCATABLE, Library, TargetInventory
from .audit import LibraryVerdict, Policy, TargetReport, judge
from .facts import library_facts
from .policy import NvidiaGpu

DIFF_SCHEMA_VERSION = 1
GPU_EXAMPLES = 3
_T = TypeVar("_T")
NOW_WORDS = {
    "native": "still runs natively",
    "jit": "now only through PTX JIT",
    "none": "no longer runs",
    "": "not a CUDA target",
}


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
    now: str  # "native" | "jit" | "none": how the library runs there now, its kernels aside
    gpus: tuple[str, ...] = ()  # catalog GPUs of that compute capability, a few
    # kernels that ran there and no longer can from their own container (a kernel is its
    # container and its name: one object that lost sm_90 fails its launch on an H100 with 209,
    # whatever other objects of the library carry); "(unnamed)" for a container read without names
    kernels: tuple[str, ...] = ()


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


def _catalog() -> list[tuple[int, int]]:
    return sorted({arch.canonical_cc(g.cc) for g in arch.gpu_catalog()})


def _examples(cc: tuple[int, int]) -> tuple[str, ...]:
    return tuple(g.name for g in arch.gpu_catalog() if arch.canonical_cc(g.cc) == cc)[:GPU_EXAMPLES]


def worse_gpus(old: Library | None, new: Library | None, elsewhere: Iterable[Library] = ()) -> tuple[Worse, ...]:
    """Each catalog compute capability the old library's code ran on (natively or through the
    JIT) that the new library's code runs worse. A removed library (``new`` None) is weighed
    against ``elsewhere``, the new release's libraries: a variant folded into another library
    costs no GPU that the other runs as well (bitsandbytes 0.50.2 dropped libbitsandbytes_cuda120.so
    and kept the others)."""
    a, b = _lib_codes(old), _lib_codes(new)
    if not a:
        return ()
    others = [_lib_codes(lib) for lib in elsewhere] if new is None else []
    out = []
    for cc in _catalog():
        was = best(a, cc)
        now = max([best(b, cc), *(best(o, cc) for o in others if o)], key=lambda h: _RANK[h])
        if _RANK[was] > _RANK[now]:
            out.append(Worse(f"{cc[0]}.{cc[1]}", was, now, _examples(cc)))
    return tuple(out)


def _answers(lib: Library, gpus: list[tuple[int, int]]) -> dict[tuple[int, int], tuple[str, frozenset[str]]]:
    """How a library runs on each GPU, the rules' own --gpu answer: its path's verdict and the
    kernels that cannot run there from their own container, where no other container carries a
    kernel of that name for it either (KernelGap "fails", K001's). A kernel another container
    carries for the GPU ("elsewhere", K004's) may be dispatched by architecture (cuRAND 10.4.5's
    per-architecture containers): check reports it; the diff does not count it as lost."""
    policy = Policy(gpus=tuple(NvidiaGpu(f"{cc[0]}.{cc[1]}", cc) for cc in gpus))
    f = library_facts(lib, None, policy)
    out: dict[tuple[int, int], tuple[str, frozenset[str]]] = {}
    for cc in gpus:
        failing = frozenset(g.name or "(unnamed)" for g in f.kernel_gaps_on(cc) if g.verdict == "fails")
        out[cc] = (f.paths[cc].runs, failing)
    return out


def kernels_worse(old: Library, new: Library) -> tuple[Worse, ...]:
    """Each catalog compute capability where the new library runs worse container by container:
    its best code runs worse, or a kernel that ran there from its own container no longer can
    (the union of what the library carries may not change at all)."""
    if not _lib_codes(old):
        return ()
    gpus = _catalog()
    a, b = _answers(old, gpus), _answers(new, gpus)
    out = []
    for cc in gpus:
        (was, old_fail), (now, new_fail) = a[cc], b[cc]
        if was == "none":
            continue
        lost = tuple(sorted(new_fail - old_fail)) if now != "none" else ()
        if _RANK[was] > _RANK[now] or lost:
            out.append(Worse(f"{cc[0]}.{cc[1]}", was, now, _examples(cc), lost))
    return tuple(out)


def _side(t: TargetReport) -> Side:
    carries = _sorted(x for v in t.libraries for x in v.carried)
    problems = tuple(
        f.message for f in t.findings if means_unverified(f) and f.subject not in {v.path for v in t.libraries}
    )
    floors = [f for f in t.findings if f.code == Code.D002]
    top = max(floors, key=lambda f: driver_key(str(f.get("driver")))) if floors else None
    return Side(
        t.target,
        t.kind,
        t.distribution,
        carries,
        t.unusable,
        problems,
        str(top.get("driver")) if top else "",
        floor_words(top) + ")" if top else "",
    )


def _lost(target: str, lib: Library | None, coded: list[Library], carried: set[str]) -> Lost:
    """A target the library no longer carries, and how its GPU runs the library's new code; for a
    removed library, the new release's code (another library may carry it: a variant folded in)."""
    if lib is not None:
        return Lost(target, *_how_now(target, lib))
    if not (target.startswith("sm_") or target.startswith("compute_")):
        return Lost(target, "native" if target in carried else "")  # an AMD target another library still carries
    how, gpus = _how_now(target, None)
    ranks = [_how_now(target, other)[0] for other in coded]
    return Lost(target, max([how, *ranks], key=lambda h: _RANK.get(h, 0)), gpus)


def _worse(old: Library | None, new: Library | None, coded: list[Library], lost: bool) -> tuple[Worse, ...]:
    """The GPUs a library's change costs: by container and kernel where both releases have it,
    else (added or removed) by what the new release runs."""
    if old is not None and new is not None and old.has_device_code and new.has_device_code:
        return kernels_worse(old, new)
    return worse_gpus(old, new, coded) if lost else ()


def _interesting(v: LibraryVerdict) -> bool:
    """A library the diff reports: it carries device code, or it could not be verified."""
    return bool(v.carried or v.relocatable) or v.status == "unverified"


def _at(by_path: dict[str, _T], path: str | None) -> _T | None:
    """The entry of ``path`` where a library is on that side, else None."""
    return by_path.get(path) if path else None


def _bytes(v: LibraryVerdict | None) -> int:
    """The bytes of device code a library carries (0 where it is absent)."""
    return sum(s for _, s, _ in v.bytes_by_target) if v else 0


@dataclass(frozen=True)
class _Releases:
    """Both releases' verdicts and libraries by path, what compare weighs a matched pair by."""

    old: dict[str, LibraryVerdict]
    new: dict[str, LibraryVerdict]
    old_libraries: dict[str, Library]
    new_libraries: dict[str, Library]
    coded: list[Library]  # the new release's libraries that carry device code
    carried: set[str]  # every target the new release carries

    def wanted(self, m: Match) -> bool:
        """A pair the diff reports: either side is interesting (matching ran over every library,
        so device code that vanished from a library still shipped is a loss)."""
        old, new = _at(self.old, m.old), _at(self.new, m.new)
        return (old is not None and _interesting(old)) or (new is not None and _interesting(new))


def _change(vo: LibraryVerdict | None, vn: LibraryVerdict | None, differs: bool) -> str:
    """added, removed, changed or unchanged (the same targets, but a kernel that lost its own
    code in one container: changed)."""
    if vo is None or not _interesting(vo):
        return "added"
    if vn is None or not _interesting(vn):
        return "removed"
    return "changed" if differs else "unchanged"


def _library_diff(r: _Releases, m: Match) -> LibraryDiff:
    """What one matched pair (or an added or removed library) gained, lost and costs."""
    vo, vn = _at(r.old, m.old), _at(r.new, m.new)
    a = tuple(vo.carried) if vo else ()
    b = tuple(vn.carried) if vn else ()
    new_library = _at(r.new_libraries, m.new)
    gained = _sorted(set(b) - set(a))
    lost = tuple(_lost(x, new_library, r.coded, r.carried) for x in _sorted(set(a) - set(b)))
    problems = tuple(f.message for v in (vo, vn) if v for f in v.findings if means_unverified(f))
    worse = _worse(_at(r.old_libraries, m.old), new_library, r.coded, bool(lost))
    return LibraryDiff(
        path=m.new or m.old or "",
        old_path=m.old,
        new_path=m.new,
        matched_by=m.how if m.old and m.new else "",
        change=_change(vo, vn, bool(gained or lost or worse)),
        old=_sorted(a),
        new=_sorted(b),
        gained=gained,
        lost=lost,
        old_bytes=_bytes(vo),
        new_bytes=_bytes(vn),
        problems=problems,
        worse=worse,
    )


_CHANGE_ORDER = {"removed": 0, "changed": 1, "added": 2, "unchanged": 3}


def compare(old: TargetInventory, new: TargetInventory, *, allow_loss: bool = False) -> DiffReport:
    """Compare the device code of two inventories, library by library."""
    policy = Policy()
    t_old, t_new = judge(old, None, policy), judge(new, None, policy)
    s_old, s_new = _side(t_old), _side(t_new)
    if old.unusable or new.unusable:
        return DiffReport(s_old, s_new, (), (), (), allow_loss)
    r = _Releases(
        old={v.path: v for v in t_old.libraries},
        new={v.path: v for v in t_new.libraries},
        old_libraries={lib.path: lib for lib in old.libraries},
        new_libraries={lib.path: lib for lib in new.libraries},
        coded=[lib for lib in new.libraries if lib.has_device_code],
        carried={x for v in t_new.libraries for x in v.carried},
    )
    rows = [_library_diff(r, m) for m in match_libraries(list(r.old), list(r.new)) if r.wanted(m)]
    rows.sort(key=lambda d: (_CHANGE_ORDER[d.change], d.path))
    return DiffReport(
        s_old,
        s_new,
        tuple(rows),
        _sorted(set(s_new.carries) - set(s_old.carries)),
        _sorted(set(s_old.carries) - set(s_new.carries)),
        allow_loss,
    )


__all__ = [
    "compare",
    "match_libraries",
    "Match",
    "library_key",
    "DiffReport",
    "LibraryDiff",
    "Lost",
    "Side",
    "Worse",
    "NOW_WORDS",
    "DIFF_SCHEMA_VERSION",
    "kernels_worse",
    "worse_gpus",
]
