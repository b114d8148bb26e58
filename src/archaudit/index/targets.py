"""`check`'s remote targets: a wheel URL, or a requirement spec (`torch==2.5.1`) resolved on a
simple index to the one wheel for the platform asked; either is read by HTTP range requests
(index/remote.py, as `archaudit index` reads), never downloaded whole.

The inventory names the file judged (`Origin`): its file name, URL, the sha256 its index lists
(when it lists one; range reads fetch only part of a file, so it is not recomputed), and the bytes
fetched. What cannot be resolved or read is an unusable target with E001, never an exception.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags, sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..errors import ArchauditError
from ..findings import Code
from ..model import Origin, Problem, TargetInventory
from ..read.artifacts import archive_inventory
from ..read.fatbin import DEFAULT_MAX_PAYLOAD
from . import sources
from .remote import RangeReader

PYPI = "https://pypi.org/simple/"
_SPEC_CHARS = re.compile(r"[=<>!~]")
_PYTHON_VERSION = re.compile(r"(\d)\.?(\d{1,2})")
_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_(\w+)")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def default_index() -> str:
    """The simple index a requirement is resolved on: $PIP_INDEX_URL when it is http(s), else PyPI."""
    env = os.environ.get("PIP_INDEX_URL", "")
    return env if env.startswith(("http://", "https://")) else PYPI


def is_remote(target: str) -> bool:
    """A target `check` reads over HTTP: a URL, or a requirement with a version specifier
    (`torch==2.5.1`, `nvidia-curand>=10.4`). A bare name stays an installed distribution; a path
    that exists stays a path."""
    if target.startswith(("http://", "https://")):
        return True
    if os.path.exists(target) or "/" in target or os.path.sep in target or not _SPEC_CHARS.search(target):
        return False
    try:
        return bool(Requirement(target).specifier)
    except InvalidRequirement:
        return False


def python_version(spelling: str) -> tuple[int, int]:
    """A Python version as pip's --python-version takes it ("3.12" or "312"); ValueError otherwise."""
    m = _PYTHON_VERSION.fullmatch(spelling.strip())
    if m is None:
        raise ValueError(f"not a Python version such as 3.12: {spelling!r}")
    return (int(m[1]), int(m[2]))


def platform_tags(platform: str | None, python: tuple[int, int] | None = None) -> list[Tag]:
    """The wheel tags a platform installs, best first: this interpreter's (`sys_tags`) when
    neither is given; else that Python's (default: this one's) tags on that pip platform tag
    (default: this machine's), where a manylinux_2_X tag takes every older glibc's wheels, as
    pip does."""
    if platform is None and python is None:
        return list(sys_tags())
    platforms: list[str] | None = None
    if platform is not None:
        platforms = [platform]
        m = _MANYLINUX.fullmatch(platform)
        if m and m[1] == "2":
            arch = m[3]
            minors = range(int(m[2]), 4, -1)
            platforms = [f"manylinux_2_{n}_{arch}" for n in minors]
            platforms += [f"{legacy}_{arch}" for legacy, (_, n) in _LEGACY.items() if n <= int(m[2])]
    version = python or sys.version_info[:2]
    return [*cpython_tags(version, platforms=platforms), *compatible_tags(version, platforms=platforms)]


def _version(file: str) -> Version | None:
    try:
        return parse_wheel_filename(file)[1]
    except (InvalidWheelFilename, InvalidVersion, ValueError):
        return None


def choose(refs: list[sources.WheelRef], req: Requirement, tags: list[Tag]) -> sources.WheelRef | str:
    """The wheel pip would pick for `req` on `tags`: the newest version the specifier admits
    that has a wheel for these tags, and of its wheels the one with the best tag; else why none."""
    rank = {t: i for i, t in enumerate(tags)}
    best: tuple[Version, int, sources.WheelRef] | None = None
    admitted = 0
    for ref in refs:
        try:
            name, version, _, file_tags = parse_wheel_filename(ref.file)
        except (InvalidWheelFilename, InvalidVersion, ValueError):
            continue
        if name != canonicalize_name(req.name) or not req.specifier.contains(version):
            continue
        admitted += 1
        fits = [rank[t] for t in file_tags if t in rank]
        if fits and (best is None or (version, -min(fits)) > (best[0], -best[1])):
            best = (version, min(fits), ref)
    if best is not None:
        return best[2]
    if not admitted:
        return f"the index lists no wheel of {req.name} that {req.specifier} admits"
    return (
        f"the index lists {admitted} wheel(s) of {req} but none for this platform "
        f"(best tag {tags[0]}; --platform asks for another)"
    )


@dataclass(frozen=True, slots=True)
class Resolved:
    ref: sources.WheelRef | None
    requirement: str
    why: str = ""  # why no wheel, when ref is None


def resolve(target: str, platform: str | None, index: str | None, python: tuple[int, int] | None = None) -> Resolved:
    """The wheel a remote target names: a URL as it is, a requirement resolved on the index."""
    if target.startswith(("http://", "https://")):
        ref = sources._url_ref(target)
        if not ref.file.lower().endswith(".whl"):
            return Resolved(None, "", "not a wheel URL (its path does not end in .whl)")
        return Resolved(ref, "")
    req = Requirement(target)
    page = index or default_index()
    refs = sources.project_files(page, req.name)
    chosen = choose(refs, req, platform_tags(platform, python))
    if isinstance(chosen, str):
        return Resolved(None, target, f"{chosen} on {page}")
    return Resolved(chosen, target)


def remote_inventory(
    target: str,
    *,
    platform: str | None = None,
    index: str | None = None,
    decode: bool = True,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    python: tuple[int, int] | None = None,
) -> TargetInventory:
    """The inventory of one remote target, read by range requests; an unusable one with E001
    when it cannot be resolved or read."""
    start = time.perf_counter()
    try:
        found = resolve(target, platform, index, python)
    except ArchauditError as e:
        return _unreadable(target, e.message)
    if found.ref is None:
        return _unreadable(target, found.why)
    ref = found.ref
    try:
        reader = RangeReader(ref.location)
    except ArchauditError as e:
        return _unreadable(target, e.message)
    try:
        inv = archive_inventory(
            ref.file,
            reader.size,
            reader.read_at,
            reader.open,  # type: ignore[arg-type]
            jobs=1,
            decode=decode,
            max_payload=max_payload,
            on_members=lambda ms: reader.know_members(
                {m.data_offset: m.compressed_size for m in ms if m.data_offset >= 0}
            ),
        )
    except ArchauditError as e:  # the connection lost mid-read
        return _unreadable(target, e.message)
    finally:
        reader.close()
    origin = Origin(
        ref.file, ref.location, ref.sha256 or "", reader.size, reader.fetched, found.requirement, platform or ""
    )
    return replace(inv, target=target, origin=origin, seconds=time.perf_counter() - start)


def fetcher(
    *,
    platform: str | None = None,
    index: str | None = None,
    decode: bool = True,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    python: tuple[int, int] | None = None,
) -> Callable[[str], TargetInventory | None]:
    """What core.check's `fetch` takes: a remote target's inventory, None for one read here."""

    def fetch(target: str) -> TargetInventory | None:
        if not is_remote(target):
            return None
        return remote_inventory(
            target, platform=platform, index=index, decode=decode, max_payload=max_payload, python=python
        )

    return fetch


def _unreadable(target: str, why: str) -> TargetInventory:
    return TargetInventory(target, "wheel", (), (Problem(Code.E001, f"cannot read: {why}"),), unusable=True)


__all__ = [
    "PYPI",
    "Resolved",
    "choose",
    "default_index",
    "fetcher",
    "is_remote",
    "platform_tags",
    "python_version",
    "remote_inventory",
    "resolve",
]
