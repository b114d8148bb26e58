"""Targets into libraries: wheels (read in place), directories, files, installed distributions.

Every library is scanned in one forward pass; libraries are scanned in parallel, the
largest first, each worker with its own file handle. Nothing is written anywhere.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from . import zipread
from .decode import DecodePool
from .model import LTO, Library, Problem
from .scan import DEFAULT_MAX_PAYLOAD, scan_stream

LIBRARY_SUFFIXES = (".so", ".cubin", ".fatbin", ".ptx", ".hsaco", ".pyd", ".dll", ".dylib")


def is_library_name(name: str) -> bool:
    base = name.rsplit("/", 1)[-1].lower()
    if base.endswith(LIBRARY_SUFFIXES):
        return True
    return ".so." in base and base.split(".so.", 1)[1].replace(".", "").isdigit()


@dataclass(frozen=True, slots=True)
class TargetInventory:
    """What one target carries: its libraries and the problems of the target as a whole."""

    target: str
    kind: str  # "wheel" | "directory" | "file" | "distribution"
    libraries: tuple[Library, ...]
    problems: tuple[Problem, ...] = ()
    unusable: bool = False  # the target itself could not be read (exit 2)
    bytes_read: int = 0
    seconds: float = 0.0
    distribution: str = ""  # name-version, when known


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


@dataclass(frozen=True, slots=True)
class _Job:
    display: str
    size: int
    chunks: Callable[[], Iterator[bytes]]


def inventory(target: str, *, jobs: int | None = None, decode: bool = True,
              max_payload: int = DEFAULT_MAX_PAYLOAD, progress: Progress | None = None) -> TargetInventory:
    """Inventory one target: a wheel, a directory, a device-code or library file, or a
    distribution name. Every payload is decoded; `decode=False` reads entry headers only
    (--fast), and each library whose payloads were not decoded then carries an E015."""
    return inventories([target], jobs=jobs, decode=decode, max_payload=max_payload, progress=progress)[0]


def inventories(targets: list[str], *, jobs: int | None = None, decode: bool = True,
                max_payload: int = DEFAULT_MAX_PAYLOAD, progress: Progress | None = None) -> list[TargetInventory]:
    """Inventory several targets with one pool of readers and one of decoders: the libraries of
    every target are read in parallel, largest first, so many small wheels keep every core busy
    too, and each library is read once."""
    start = time.perf_counter()
    plans = [_plan(t) for t in targets]
    everything = [j for p in plans if isinstance(p, tuple) for j in p[1]]
    if progress is not None:
        progress.total_bytes += sum(j.size for j in everything)
        progress.total_libraries += len(everything)
    libraries = iter(_run(everything, jobs, decode, max_payload, progress, keep_order=True))
    out = []
    for target, plan in zip(targets, plans):
        if isinstance(plan, TargetInventory):
            out.append(plan)
            continue
        kind, jobs_list, problems, dist = plan
        libs = tuple(sorted((next(libraries) for _ in jobs_list), key=lambda lib: lib.path))
        problems_t = tuple(problems)
        unusable = kind == "directory" and not jobs_list and not problems_t
        if unusable:
            problems_t += (Problem("E001", "directory holds no files to audit"),)
        out.append(TargetInventory(target, kind, libs, problems_t, unusable,
                                   sum(j.size for j in jobs_list), time.perf_counter() - start, dist))
    return out


def _plan(target: str):
    """(kind, jobs, problems, distribution) for a target, or an unusable TargetInventory."""
    if os.path.isdir(target):
        jobs_list, problems = _directory_jobs(target)
        return "directory", jobs_list, problems, ""
    if os.path.exists(target) and target.lower().endswith(".whl"):
        try:
            jobs_list, problems = _wheel_jobs(target)
        except zipread.ZipError as e:
            return TargetInventory(target, "wheel", (), (Problem("E002", f"malformed archive: {e}"),),
                                   unusable=True)
        return "wheel", jobs_list, problems, _wheel_dist(target)
    if os.path.exists(target) or os.path.sep in target or target.endswith(LIBRARY_SUFFIXES):
        if not os.path.isfile(target):
            return TargetInventory(target, "file", (), (Problem("E001", "cannot read: no such file"),),
                                   unusable=True)
        return "file", [_file_job(target, os.path.basename(target))], [], ""
    found = _distribution_jobs(target)
    if found is None:
        return TargetInventory(target, "distribution", (), (Problem(
            "E001", f"cannot read: '{target}' is not a file, a directory or an installed "
                    f"distribution"),), unusable=True)
    jobs_list, problems, dist = found
    return "distribution", jobs_list, problems, dist


def _run(jobs_list: list[_Job], jobs: int | None, decode: bool, max_payload: int,
         progress: Progress | None, keep_order: bool = False) -> tuple[Library, ...]:
    """Read every library once: `jobs` readers (inflating and scanning, largest library first)
    feed one shared pool of as many decoders."""
    order = sorted(range(len(jobs_list)), key=lambda i: -jobs_list[i].size)
    cores = jobs or os.cpu_count() or 1
    workers = max(1, min(cores, len(jobs_list) or 1))
    with DecodePool(cores) as pool:

        def one(i: int) -> Library:
            j = jobs_list[i]
            chunks = j.chunks if progress is None else _counted(j.chunks, progress)
            try:
                lib = scan_stream(j.display, j.size, chunks, decode=decode, max_payload=max_payload,
                                  pool=pool)
            except MemoryError:
                lib = Library(j.display, j.size, "other",
                              problems=(Problem("E012", "ran out of memory while verifying"),))
            if progress is not None:
                progress.add(libraries=1)
            return lib if decode else _unverified(lib)

        if workers == 1:
            results = {i: one(i) for i in order}
        else:
            with ThreadPoolExecutor(workers, thread_name_prefix="archaudit-read") as readers:
                results = dict(zip(order, readers.map(one, order)))
    ordered = tuple(results[i] for i in range(len(jobs_list)))
    return ordered if keep_order else tuple(sorted(ordered, key=lambda lib: lib.path))


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
    problem = Problem("E015", f"{len(skipped)} of {len(lib.entries)} device-code entries not decoded "
                              f"(--fast): kernels, cubin flags, PTX .target and payload integrity "
                              f"unverified")
    return replace(lib, problems=lib.problems + (problem,))


def _file_job(path: str, display: str, size: int | None = None) -> _Job:
    def chunks() -> Iterator[bytes]:
        with open(path, "rb") as f:
            while True:
                block = f.read(zipread.CHUNK)
                if not block:
                    return
                yield block
    return _Job(display, os.path.getsize(path) if size is None else size, chunks)


def _wheel_jobs(path: str) -> tuple[list[_Job], list[Problem]]:
    members, hazards = zipread.read_directory(path)
    problems = [Problem(code, f"{name}: {msg}") for code, name, msg in hazards]
    jobs_list = []
    for m in members:
        if m.is_dir or not is_library_name(m.name):
            continue
        def chunks(m=m) -> Iterator[bytes]:
            with open(path, "rb") as f:
                yield from zipread.iter_member(f, m)
        jobs_list.append(_Job(m.name, m.size, chunks))
    return jobs_list, problems


def _wheel_dist(path: str) -> str:
    parts = os.path.basename(path).split("-")
    return f"{parts[0]}-{parts[1]}" if len(parts) >= 2 else ""


def _directory_jobs(root: str) -> tuple[list[_Job], list[Problem]]:
    jobs_list: list[_Job] = []
    problems: list[Problem] = []
    real_root = os.path.realpath(root)
    candidates: list[tuple[bool, str, str]] = []  # (is a link, relative path, full path)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            if is_library_name(name):
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                candidates.append((os.path.islink(full), rel, full))
            elif name in dirnames:  # a link to a directory is not walked: its files must lie inside
                target = os.path.realpath(full)
                if not (target == real_root or target.startswith(real_root + os.sep)):
                    rel = os.path.relpath(full, root).replace(os.sep, "/")
                    problems.append(Problem("E003", f"{rel}: symbolic link to a directory outside the "
                                                    f"target (its files are not audited)"))
    seen: set[tuple[int, int]] = set()
    for is_link, rel, full in sorted(candidates):  # real files first: a link names its target
        try:
            st = os.stat(full)  # follows links: a link to a library is that library
        except OSError as e:
            problems.append(Problem("E003", f"{rel}: unreadable or a broken/looping link ({e.strerror})"))
            continue
        if is_link:
            target = os.path.realpath(full)
            if not (target == real_root or target.startswith(real_root + os.sep)):
                problems.append(Problem("E003", f"{rel}: symbolic link points outside the target"))
                continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(Problem("E003", f"{rel}: not a regular file"))
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:  # libfoo.so -> libfoo.so.1: audit the file once
            continue
        seen.add(key)
        jobs_list.append(_file_job(full, rel, st.st_size))
    return jobs_list, problems


def _distribution_jobs(name: str):
    from importlib import metadata

    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    problems: list[Problem] = []
    jobs_list: list[_Job] = []
    seen: set[str] = set()
    for f in dist.files or ():
        if not is_library_name(str(f)):
            continue
        full = str(f.locate())
        real = os.path.realpath(full)
        if real in seen:
            continue
        seen.add(real)
        if not os.path.isfile(full):
            problems.append(Problem("E001", f"{f}: listed in RECORD but missing"))
            continue
        jobs_list.append(_file_job(full, str(f)))
    label = f"{dist.metadata['Name']}-{dist.version}"
    return jobs_list, problems, label


def progress_display(progress: Progress, stream=sys.stderr) -> Callable[[], None]:
    """Start a one-line progress display on a terminal; returns the function that stops it."""
    stop = threading.Event()
    began = time.perf_counter()

    def loop() -> None:
        while True:
            el = max(time.perf_counter() - began, 1e-6)
            with progress.lock:
                done, total = progress.done_bytes, max(progress.total_bytes, 1)
                libs, nlibs = progress.done_libraries, progress.total_libraries
            stream.write(f"\r{done / 1e6:8.0f}/{total / 1e6:.0f} MB  {libs}/{nlibs} libraries  "
                         f"{done / el / 1e6:6.0f} MB/s ")
            stream.flush()
            if stop.wait(0.2):
                break
        stream.write("\r" + " " * 70 + "\r")
        stream.flush()

    t = threading.Thread(target=loop, daemon=True)
    t.start()

    def finish() -> None:
        stop.set()
        t.join()
    return finish
