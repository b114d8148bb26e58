"""Targets into libraries: wheels (read in place), directories, files, installed distributions.

Every library is scanned in one forward pass; libraries are scanned in parallel, the
largest first, each worker with its own file handle. Nothing is written anywhere.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import IO

from ..findings import Code
from ..model import LTO, Library, Problem, TargetInventory
from . import zipread
from .decode import DecodePool
from .fatbin import DEFAULT_MAX_PAYLOAD
from .filekinds import HEAD, content_kind, is_audited_file, is_library_name, select_member
from .library import scan_stream
from .plan import (
    BUDGET_FLOOR,
    BUDGET_RATIO,
    BYTES_PER_LIBRARY,
    MAX_LIBRARIES,
    MAX_NESTING,
    NotAWheel,
    _counting,
    _Job,
    _plan,
    _too_many,
    _TooManyLibraries,
    _wheel_dist,
    _wheel_member_jobs,
    max_libraries,
    not_a_wheel,
)


@dataclass
class Progress:
    """Counters for a progress display; updated by workers, read by a display thread."""

    total_bytes: int = 0
    done_bytes: int = 0
    total_libraries: int = 0
    done_libraries: int = 0
    lock: threading.Lock = threading.Lock()

    def add(self, nbytes: int = 0, libraries: int = 0) -> None:
        with self.lock:
            self.done_bytes += nbytes
            self.done_libraries += libraries


def inventory(
    target: str,
    *,
    jobs: int | None = None,
    decode: bool = True,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    progress: Progress | None = None,
) -> TargetInventory:
    """Inventory one target: a wheel, a directory, a device-code or library file, or a
    distribution name. Every payload is decoded; `decode=False` reads entry headers only
    (--fast), and each library whose payloads were not decoded then carries an E015."""
    return inventories([target], jobs=jobs, decode=decode, max_payload=max_payload, progress=progress)[0]


def inventories(
    targets: list[str],
    *,
    jobs: int | None = None,
    decode: bool = True,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    progress: Progress | None = None,
) -> list[TargetInventory]:
    """Inventory several targets with one pool of readers and one of decoders: the libraries of
    every target are read in parallel, largest first, so many small wheels keep every core busy
    too, and each library is read once."""
    plans, planned = [], []
    for t in targets:
        began = time.perf_counter()
        plans.append(_plan(t))
        planned.append(time.perf_counter() - began)
    everything = [j for p in plans for j in p.jobs]
    if progress is not None:
        progress.total_bytes += sum(j.size for j in everything)
        progress.total_libraries += len(everything)
    read_start = time.perf_counter()
    finished = [read_start] * len(everything)
    read = _run(everything, jobs, decode, max_payload, progress, finished)
    libraries = iter(read if decode else tuple(_unverified(lib) for lib in read))
    done = iter(finished)
    out = []
    for target, plan, plan_seconds in zip(targets, plans, planned):
        if plan.unusable is not None:
            out.append(replace(plan.unusable, seconds=plan_seconds))
            continue
        kind, jobs_list, problems, dist, _ = plan
        libs = tuple(sorted((next(libraries) for _ in jobs_list), key=lambda lib: lib.path))
        # its own time: its directory read, and the read until its last library was done (the
        # pool reads every target's libraries at once, so a small wheel is not stamped with all)
        last = max((next(done) for _ in jobs_list), default=read_start)
        seconds = plan_seconds + (last - read_start)
        problems_t = tuple(problems)
        unusable = kind == "directory" and not jobs_list and not problems_t
        if unusable:
            problems_t += (Problem(Code.E001, "directory holds no files to audit"),)
        out.append(
            TargetInventory(target, kind, libs, problems_t, unusable, sum(j.size for j in jobs_list), seconds, dist)
        )
    return out


def wheels_of(target: str) -> list[str] | None:
    """The wheels a directory holds, when wheels are all it holds that the audit reads (a
    wheelhouse, dist/): each is then its own target, with its own verdict and time, as twine
    and check-wheel-contents report them. None for anything else (a tree with libraries)."""
    if not os.path.isdir(target):
        return None
    wheels: list[str] = []
    for dirpath, dirnames, filenames in os.walk(target, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            if name.lower().endswith(".whl") and os.path.isfile(full):
                wheels.append(full)
            elif is_audited_file(full):
                return None
    return wheels or None


def archive_inventory(
    target: str,
    size: int,
    read_at: zipread.ReadAt,
    opener: Callable[[], IO[bytes]],
    *,
    jobs: int | None = 1,
    decode: bool = False,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    keep: Callable[[str], bool] | None = None,
    on_members: Callable[[list[zipread.Member]], None] | None = None,
) -> TargetInventory:
    """Inventory one wheel read through `read_at` and `opener` instead of a path (a wheel read
    over HTTP range requests): the same member selection, bounds and scan as a wheel on disk.
    `keep`, when given, limits the libraries read to those whose member path it accepts;
    `on_members` is told the members once the directory is read (where their data lies)."""
    start = time.perf_counter()
    try:
        members, hazards = zipread.read_directory_at(read_at, size, _counting(max_libraries(size)))
    except zipread.ZipError as e:
        return TargetInventory(target, "wheel", (), (Problem(Code.E002, f"malformed archive: {e}"),), unusable=True)
    except _TooManyLibraries:
        return TargetInventory(
            target, "wheel", (), (_too_many(size),), False, 0, time.perf_counter() - start, _wheel_dist(target)
        )
    why = not_a_wheel([m.name for m in members])
    if why is not None:
        return TargetInventory(target, "wheel", (), NotAWheel(why, hazards).problems, unusable=True)
    if on_members is not None:
        on_members(members)
    jobs_list, problems = _wheel_member_jobs(opener, members, hazards, size)
    if keep is not None:
        jobs_list = [j for j in jobs_list if keep(j.display)]
    libs = tuple(sorted(_run(jobs_list, jobs, decode, max_payload, None), key=lambda lib: lib.path))
    return TargetInventory(
        target,
        "wheel",
        libs,
        tuple(problems),
        False,
        sum(j.size for j in jobs_list),
        time.perf_counter() - start,
        _wheel_dist(target),
    )


def _run(
    jobs_list: list[_Job],
    jobs: int | None,
    decode: bool,
    max_payload: int,
    progress: Progress | None,
    finished: list[float] | None = None,
) -> tuple[Library, ...]:
    """Read every library once: `jobs` readers (inflating and scanning, largest library first)
    feed one shared pool of as many decoders. The libraries come back in the jobs' order
    (scan_stream turns every failure, MemoryError too, into a library with its problem)."""
    order = sorted(range(len(jobs_list)), key=lambda i: -jobs_list[i].size)
    cores = jobs or os.cpu_count() or 1
    workers = max(1, min(cores, len(jobs_list) or 1))
    with DecodePool(cores) as pool:

        def one(i: int) -> Library:
            j = jobs_list[i]
            chunks = j.chunks if progress is None else _counted(j.chunks, progress)
            lib = scan_stream(j.display, j.size, chunks, decode=decode, max_payload=max_payload, pool=pool)
            if j.note:
                lib = replace(lib, notes=lib.notes + (j.note,))
            if progress is not None:
                progress.add(libraries=1)
            if finished is not None:
                finished[i] = time.perf_counter()  # when this library's verdict could be given
            return lib

        if workers == 1:
            results = {i: one(i) for i in order}
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="archaudit-read") as readers:
                results = dict(zip(order, readers.map(one, order)))
    return tuple(results[i] for i in range(len(jobs_list)))


def _counted(chunks: Callable[[], Iterator[bytes]], progress: Progress) -> Callable[[], Iterator[bytes]]:
    def counted() -> Iterator[bytes]:
        for block in chunks():
            progress.add(len(block))
            yield block

    return counted


def _unverified(lib: Library) -> Library:
    """--fast: a library whose payloads were not decoded cannot pass on facts they hold."""
    skipped = [e for e in lib.entries if not e.decoded and e.kind != LTO]
    if not skipped:
        return lib
    problem = Problem(
        Code.E015,
        f"{len(skipped)} of {len(lib.entries)} device-code entries not decoded "
        f"(--fast): kernels, cubin flags, PTX .target and payload integrity "
        f"unverified",
    )
    return replace(lib, problems=lib.problems + (problem,))


__all__ = [
    "archive_inventory",
    "BUDGET_FLOOR",
    "BUDGET_RATIO",
    "BYTES_PER_LIBRARY",
    "content_kind",
    "HEAD",
    "inventories",
    "inventory",
    "is_audited_file",
    "is_library_name",
    "MAX_LIBRARIES",
    "max_libraries",
    "MAX_NESTING",
    "Progress",
    "select_member",
    "wheels_of",
]
