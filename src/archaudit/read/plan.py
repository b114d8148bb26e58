"""Targets into library jobs: what reading a wheel, a directory, a file or an installed
distribution takes (the members and files read, each a job streaming its bytes), with the bounds
on that work (libraries per target, bytes inflated, nesting) and why a target cannot be read.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Literal, NamedTuple

from ..findings import Code
from ..model import Problem, TargetInventory
from ..printable import printable
from . import zipread
from .filekinds import (
    HEAD,
    LIBRARY_SUFFIXES,
    ContentKind,
    _name_note,
    _regular_kind,
    content_kind,
    is_library_name,
    select_member,
)

# Libraries per target, bounded by the bytes that bring them: any wheel may hold MAX_LIBRARIES,
# and beyond that one per BYTES_PER_LIBRARY of its own size (flashinfer-cubin 0.6.13: 15,970
# cubins in 458 MB, one per 28.7 KB; docs/threat-model.md has the measurements).
MAX_LIBRARIES = 10_000
BYTES_PER_LIBRARY = 4096
BUDGET_FLOOR = 64 << 20  # bytes any wheel may inflate for the audit, however small
BUDGET_RATIO = 32  # and beyond the floor, this many times its own size (real wheels: under 6)
MAX_NESTING = 2  # a wheel, a zip in it, a zip in that
NESTED_MAX = 256 << 20  # bytes of a zip inside a wheel held in memory to read its members


@dataclass(frozen=True, slots=True)
class _Job:
    display: str
    size: int
    chunks: Callable[[], Iterator[bytes]]
    note: str = ""  # said with the library (why it was read although its name hides it)


class _Plan(NamedTuple):
    """What reading a target takes: its kind, the library jobs and the target's own problems;
    or, for a target that cannot be read at all, the unusable inventory that says why."""

    kind: str
    jobs: list[_Job]
    problems: list[Problem]
    distribution: str = ""
    unusable: TargetInventory | None = None


def _refused(target: str, kind: str, problems: tuple[Problem, ...]) -> _Plan:
    """The plan of a target that cannot be read: its unusable inventory (exit 2)."""
    return _Plan(kind, [], [], unusable=TargetInventory(target, kind, (), problems, unusable=True))


_FILE_SUFFIXES = (*LIBRARY_SUFFIXES, ".whl", ".zip", ".tar.gz", ".tgz", ".tar", ".egg", ".txt", ".json")


def _names_a_file(target: str) -> bool:
    """A target spelled as a path (a separator or a file suffix), never a distribution name."""
    return os.path.sep in target or "/" in target or target.lower().endswith(_FILE_SUFFIXES)


def _not_a_library(path: str) -> str | None:
    """Why a file given by name is none of what check reads, or None: an ELF, PE or Mach-O
    library, a fatbin, an offload bundle, a .ptx (by name; its text is judged) or a device-code
    name the readers refuse with their own finding. A zip or an sdist is not a wheel."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD)
    except OSError:
        return None  # the reader says why it cannot read it
    kind = content_kind(head)
    if kind == "zip":
        return (
            "not a wheel: a zip archive whose name does not end in .whl (a wheel is named "
            "name-version-python-abi-platform.whl and holds a .dist-info directory)"
        )
    if kind is not None or is_library_name(path):
        return None
    if head.startswith(b"\x1f\x8b"):
        return "not a wheel: a gzip archive (an sdist?); archaudit audits built wheels and libraries"
    if head.startswith(b"BZh") or head.startswith(b"\xfd7zXZ\0") or head.startswith(b"\x28\xb5\x2f\xfd"):
        return "not a wheel: a compressed archive; archaudit audits built wheels and libraries"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "not a wheel: a tar archive; archaudit audits built wheels and libraries"
    return (
        "not a wheel, library or device-code file: its first bytes are none of ELF, PE, Mach-O, "
        "fatbin or offload bundle"
    )


def _plan(target: str) -> _Plan:
    """The kind, jobs, problems and distribution of a target, or why it cannot be read."""
    if not target.strip():  # an unset variable in a script: names no file and no distribution
        return _refused(target, "file", (Problem(Code.E001, "cannot read: an empty target names nothing"),))
    if os.path.isdir(target):
        jobs_list, problems = _directory_jobs(target)
        return _Plan("directory", jobs_list, problems, "")
    if os.path.exists(target) and target.lower().endswith(".whl"):
        if not os.path.isfile(target):  # a FIFO would block its open forever; a device reads as anything
            return _refused(target, "wheel", (Problem(Code.E001, "cannot read: not a regular file"),))
        try:
            jobs_list, problems = _wheel_jobs(target)
        except zipread.ZipError as e:
            return _refused(target, "wheel", (Problem(Code.E002, f"malformed archive: {e}"),))
        except NotAWheel as e:
            return _refused(target, "wheel", e.problems)
        return _Plan("wheel", jobs_list, problems, _wheel_dist(target))
    if os.path.exists(target) or _names_a_file(target):
        if not os.path.isfile(target):
            why = "not a regular file" if os.path.exists(target) else "no such file"
            return _refused(target, "file", (Problem(Code.E001, f"cannot read: {why}"),))
        refused = _not_a_library(target)
        if refused is not None:
            return _refused(target, "file", (Problem(Code.E004, refused),))
        return _Plan("file", [_file_job(target, os.path.basename(target))], [])
    found = _distribution_jobs(target)
    if found is None:
        return _refused(
            target,
            "distribution",
            (Problem(Code.E001, f"cannot read: no such file, directory or installed distribution '{target}'"),),
        )
    jobs_list, problems, dist = found
    return _Plan("distribution", jobs_list, problems, dist)


def _file_job(path: str, display: str, size: int | None = None) -> _Job:
    def chunks() -> Iterator[bytes]:
        with open(path, "rb") as f:
            while True:
                block = f.read(zipread.CHUNK)
                if not block:
                    return
                yield block

    return _Job(display, os.path.getsize(path) if size is None else size, chunks)


class _Budget:
    """Bytes a target may inflate for its audit: enough for any real wheel, bounded by the
    wheel's own size, so a small input never means a long run."""

    def __init__(self, archive_size: int):
        self.limit = max(BUDGET_FLOOR, BUDGET_RATIO * archive_size)
        self.left = self.limit
        self.refused: list[str] = []
        self.held = 0  # bytes of zips inside the archive held in memory

    def hold(self, nbytes: int) -> bool:
        if self.held + nbytes > NESTED_MAX:
            return False
        self.held += nbytes
        return True

    def take(self, name: str, nbytes: int) -> bool:
        if nbytes > self.left:
            self.refused.append(name)
            return False
        self.left -= nbytes
        return True

    def problem(self) -> Problem | None:
        if not self.refused:
            return None
        shown = ", ".join(self.refused[:3]) + (", ..." if len(self.refused) > 3 else "")
        return Problem(
            Code.E003,
            f"{len(self.refused)} member(s) not read ({shown}): they would inflate "
            f"the audit past {self.limit} bytes, {BUDGET_RATIO}x the wheel's size "
            f"(zip bomb?)",
        )


class _TooManyLibraries(Exception):
    """More members chosen than any real wheel holds: reading stops there."""


def _counting(limit: int) -> zipread.Select:
    """select_member, stopping the directory's reading at the (limit + 1)th library."""
    chosen = 0

    def select(name: str, head: bytes) -> object:
        nonlocal chosen
        tag = select_member(name, head)
        if tag and tag != "zip":
            chosen += 1
            if chosen > limit:
                raise _TooManyLibraries
        return tag

    return select


def max_libraries(size: int) -> int:
    """How many library members a wheel of ``size`` bytes may hold: work is bounded by the bytes
    that bring it, never by a guess at what real wheels hold."""
    return max(MAX_LIBRARIES, size // BYTES_PER_LIBRARY)


def _too_many(size: int) -> Problem:
    return Problem(
        Code.E003,
        f"more than {max_libraries(size)} members are libraries or device code: a wheel "
        f"may hold {MAX_LIBRARIES}, and beyond that one per {BYTES_PER_LIBRARY} bytes of "
        f"its own size ({size}): none is read",
    )


class NotAWheel(Exception):
    """A .whl that pip would refuse to install (E004): its members are not read; what reading
    its directory found wrong (E002, E003) is said with it."""

    def __init__(self, why: str, hazards: list[zipread.Hazard]):
        super().__init__(why)
        self.problems = (
            *(Problem(code, f"{printable(name)}: {msg}") for code, name, msg in hazards),
            Problem(Code.E004, why),
        )


def not_a_wheel(names: Iterator[str] | list[str]) -> str | None:
    """Why pip refuses a .whl with these member names, or None: pip installs a wheel with
    exactly one top-level .dist-info directory (pip's wheel_dist_info_dir), and so does smoke."""
    info_dirs = sorted({n.split("/", 1)[0] for n in names if "/" in n and n.split("/", 1)[0].endswith(".dist-info")})
    if not info_dirs:
        return "not a wheel: .dist-info directory not found (pip refuses to install it)"
    if len(info_dirs) > 1:
        return f"not a wheel: multiple .dist-info directories found ({', '.join(info_dirs)}; pip refuses to install it)"
    return None


def _wheel_jobs(path: str) -> tuple[list[_Job], list[Problem]]:
    try:
        size = os.path.getsize(path)
        members, hazards = zipread.read_directory(path, _counting(max_libraries(size)))
    except _TooManyLibraries:
        return [], [_too_many(size)]
    why = not_a_wheel([m.name for m in members])
    if why is not None:
        raise NotAWheel(why, hazards)
    return _wheel_member_jobs(lambda: open(path, "rb"), members, hazards, os.path.getsize(path))


def _wheel_member_jobs(
    opener: Callable[[], IO[bytes]], members: list[zipread.Member], hazards: list[zipread.Hazard], size: int
) -> tuple[list[_Job], list[Problem]]:
    budget = _Budget(size)
    jobs_list, problems = _archive_jobs(opener, members, hazards, "", 0, budget)
    over = budget.problem()
    if over is not None:
        problems.append(over)
    if len(jobs_list) > max_libraries(size):  # with those of zips inside it
        problems.append(_too_many(size))
        jobs_list = []
    return jobs_list, problems


def _archive_jobs(
    opener: Callable[[], IO[bytes]],
    members: list[zipread.Member],
    hazards: list[zipread.Hazard],
    prefix: str,
    depth: int,
    budget: _Budget,
) -> tuple[list[_Job], list[Problem]]:
    """Jobs for the members of one archive chosen by content (their first bytes, read with the
    directory, without inflating the rest) or by name; a zip among them is read in turn, its
    members named `outer!inner`."""
    problems = [Problem(code, f"{prefix}{printable(name)}: {msg}") for code, name, msg in hazards]
    jobs_list: list[_Job] = []
    for m in members:
        if not m.tag:
            continue
        display = prefix + printable(m.name)  # a name is shown, never obeyed (CR, ESC: docs/threat-model.md)
        kind: ContentKind | None = None if m.tag == "name" else m.tag  # type: ignore[assignment]
        if kind == "zip":
            nested = _nested_jobs(opener, m, display, depth, budget)
            jobs_list += nested[0]
            problems += nested[1]
            continue
        if not budget.take(display, m.size):
            continue
        jobs_list.append(_Job(display, m.size, _member_chunks(opener, m), _name_note(m.name, kind)))
    return jobs_list, problems


def _member_chunks(opener: Callable[[], IO[bytes]], m: zipread.Member) -> Callable[[], Iterator[bytes]]:
    """A member's bytes: held already when it is tiny, else inflated in place on each call."""
    whole = m.whole
    if whole is not None:

        def held() -> Iterator[bytes]:
            yield whole

        return held

    def streamed() -> Iterator[bytes]:
        with opener() as f:
            yield from zipread.iter_member(f, m)

    return streamed


def _nested_jobs(
    opener: Callable[[], IO[bytes]], m: zipread.Member, display: str, depth: int, budget: _Budget
) -> tuple[list[_Job], list[Problem]]:
    """A zip inside the archive: held in memory (bounded) and read with the same rules."""
    if depth + 1 > MAX_NESTING:
        return [], [Problem(Code.E003, f"{display}: a zip nested {depth + 1} deep; its members are not read")]
    if m.method == 0 and m.whole is None:
        return _stored_nested_jobs(opener, m, display, depth, budget)
    if m.size > NESTED_MAX or not budget.hold(m.size):
        return [], [
            Problem(
                Code.E003,
                f"{display}: a zip of {m.size} bytes inside the archive, over the "
                f"{NESTED_MAX}-byte bound for zips read in memory; its members are not read",
            )
        ]
    if not budget.take(display, m.size):
        return [], []
    try:
        whole = m.whole
        if whole is None:
            with opener() as f:
                whole = b"".join(zipread.iter_member(f, m))
        members, hazards = zipread.read_directory_bytes(whole, select_member)
    except zipread.MemberError as e:
        return [], [Problem(e.code, f"{display}: {e}")]
    except zipread.ZipError as e:
        return [], [Problem(Code.E002, f"{display}: a zip whose members cannot be read: {e}")]
    data = whole
    return _archive_jobs(lambda: io.BytesIO(data), members, hazards, display + "!", depth + 1, budget)


def _stored_nested_jobs(
    opener: Callable[[], IO[bytes]], m: zipread.Member, display: str, depth: int, budget: _Budget
) -> tuple[list[_Job], list[Problem]]:
    """A stored zip inside the archive: read in place, as a window on the archive (no bound on
    its size but the wheel's budget), after its CRC is verified (the bytes read are those
    installed)."""
    if not budget.take(display, m.size):
        return [], []
    base, size = m.data_offset, m.size

    def window() -> IO[bytes]:
        return zipread.Window(opener(), base, size)  # type: ignore[return-value]

    try:
        with opener() as f:
            for _ in zipread.iter_member(f, m):
                pass
        with zipread.Window(opener(), base, size) as w:
            members, hazards = zipread.read_directory_at(w.pread, size, select_member)
    except OSError as e:
        return [], [Problem(Code.E001, f"{display}: cannot read: {e}")]
    except zipread.MemberError as e:
        return [], [Problem(e.code, f"{display}: {e}")]
    except zipread.ZipError as e:
        return [], [Problem(Code.E002, f"{display}: a zip whose members cannot be read: {e}")]
    return _archive_jobs(window, members, hazards, display + "!", depth + 1, budget)


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
            if is_library_name(name) or (name not in dirnames and _file_kind(full) is not None):
                rel = printable(os.path.relpath(full, root).replace(os.sep, "/"))
                candidates.append((os.path.islink(full), rel, full))
            elif name in dirnames:  # a link to a directory is not walked: its files must lie inside
                target = os.path.realpath(full)
                if not (target == real_root or target.startswith(real_root + os.sep)):
                    rel = printable(os.path.relpath(full, root).replace(os.sep, "/"))
                    problems.append(
                        Problem(
                            Code.E003,
                            f"{rel}: symbolic link to a directory outside the target (its files are not audited)",
                        )
                    )
    seen: set[tuple[int, int]] = set()
    for is_link, rel, full in sorted(candidates):  # real files first: a link names its target
        try:
            st = os.stat(full)  # follows links: a link to a library is that library
        except OSError as e:
            problems.append(Problem(Code.E003, f"{rel}: unreadable or a broken/looping link ({e.strerror})"))
            continue
        if is_link:
            target = os.path.realpath(full)
            if not (target == real_root or target.startswith(real_root + os.sep)):
                problems.append(Problem(Code.E003, f"{rel}: symbolic link points outside the target"))
                continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(Problem(Code.E003, f"{rel}: not a regular file"))
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:  # libfoo.so -> libfoo.so.1: audit the file once
            continue
        seen.add(key)
        _add_file(jobs_list, problems, full, rel, st.st_size)
    return jobs_list, problems


def _file_kind(full: str) -> ContentKind | Literal["unreadable"] | None:
    """The content kind of a file that is not a link (a link is judged by its name and target).
    A file whose first bytes cannot be read is "unreadable": it is chosen, and its read then
    fails with E001, rather than passed over unseen."""
    if os.path.islink(full):
        return None
    try:
        return _regular_kind(full)
    except OSError:
        return "unreadable"


def _add_file(jobs_list: list[_Job], problems: list[Problem], full: str, rel: str, size: int) -> None:
    """One file of a directory or distribution: a library or device-code file is one job; a zip
    is read like a wheel's nested zip, its members named `file!member`."""
    try:
        with open(full, "rb") as f:
            kind = content_kind(f.read(HEAD))
        if kind == "zip":
            members, hazards = zipread.read_directory(full, select_member)
            budget = _Budget(size)
            jobs, probs = _archive_jobs(lambda: open(full, "rb"), members, hazards, rel + "!", 1, budget)
            over = budget.problem()
            jobs_list += jobs
            problems += probs + ([over] if over else [])
            return
    except zipread.ZipError as e:
        problems.append(Problem(Code.E002, f"{rel}: a zip whose members cannot be read: {e}"))
        return
    except OSError as e:
        problems.append(Problem(Code.E001, f"{rel}: cannot read: {e.strerror}"))
        return
    job = _file_job(full, rel, size)
    note = _name_note(rel, kind)
    jobs_list.append(_Job(job.display, job.size, job.chunks, note) if note else job)


def _distribution_jobs(name: str) -> tuple[list[_Job], list[Problem], str] | None:
    from importlib import metadata

    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    problems: list[Problem] = []
    jobs_list: list[_Job] = []
    seen: set[str] = set()
    for f in dist.files or ():
        full = str(f.locate())
        if not is_library_name(str(f)) and _file_kind(full) is None:
            continue
        real = os.path.realpath(full)
        if real in seen:
            continue
        seen.add(real)
        if not os.path.isfile(full):
            problems.append(Problem(Code.E001, f"{f}: listed in RECORD but missing"))
            continue
        _add_file(jobs_list, problems, full, str(f), os.path.getsize(full))
    label = f"{dist.metadata['Name']}-{dist.version}"
    return jobs_list, problems, label


__all__ = [
    "BUDGET_FLOOR",
    "BUDGET_RATIO",
    "BYTES_PER_LIBRARY",
    "MAX_LIBRARIES",
    "max_libraries",
    "MAX_NESTING",
    "NESTED_MAX",
    "not_a_wheel",
    "NotAWheel",
]
