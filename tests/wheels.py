"""Real wheels for tests: downloaded once with pip into a cache, reused from there.

The cache is $ARCHAUDIT_WHEEL_CACHE, else $XDG_CACHE_HOME/archaudit/wheels, else
~/.cache/archaudit/wheels. A wheel is named by
its exact version (a local build such as ``2.13.0+cpu`` included) and, where the test needs
one particular file, by its file name: pip is then asked for that file's own tags
(``manylinux_2_27`` is not ``manylinux_2_28``), never for whatever the machine would pick.
Downloads are retried; a wheel pip still cannot fetch fails the test that needs it (set
ARCHAUDIT_OFFLINE=1 to skip instead). The cache is safe for several test processes at once
(pytest-xdist's workers): one wheel is fetched under a file lock, into a temporary directory
beside the cache, and renamed into place whole, so no process ever reads half a wheel.

Tiers are bounded by bytes: a wheel over TIER_BYTES is fetched only by a test marked ``census``
(the census tier, README "Tests"); any other test asking for one fails, naming the wheel's size.

With ARCHAUDIT_WHEELS_LIST=FILE nothing is downloaded: each test that asks for a wheel appends
one JSON line to FILE (the test, the wheel's name, version, platform and file name) and is
skipped, so a tier's downloads can be listed and summed without fetching them
(tools/test_wheel_sizes.py; README "Tests").
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from packaging.tags import Tag, sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

ATTEMPTS = 3
HERE = LINUX = HERE_PLATFORM = "here"  # a wheel this interpreter can install (the default)
TIER_BYTES = 100 << 20  # the largest wheel the fast and real-wheel tiers fetch; larger ones are the census's
CENSUS = False  # whether the running test is marked census (set by conftest before its fixtures run)


def cache_root() -> Path:
    """The XDG cache directory: $XDG_CACHE_HOME when set (and absolute), else ~/.cache."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"


def cache_dir() -> Path:
    d = Path(os.environ.get("ARCHAUDIT_WHEEL_CACHE") or cache_root() / "archaudit" / "wheels")
    d.mkdir(parents=True, exist_ok=True)
    return d


def want(name: str, version: str, platform: str = HERE_PLATFORM, filename: str | None = None) -> None:
    """Say that the running test needs this wheel. Under ARCHAUDIT_WHEELS_LIST the wish is
    written down and the test skipped; otherwise nothing happens."""
    listing = os.environ.get("ARCHAUDIT_WHEELS_LIST")
    if not listing:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    with open(listing, "a", encoding="utf-8") as f:
        f.write(
            json.dumps({"test": test, "name": name, "version": version, "platform": platform, "filename": filename})
            + "\n"
        )
    pytest.skip(f"listing the wheels tests ask for (ARCHAUDIT_WHEELS_LIST): {name}=={version}")


def _fits(tags: frozenset[Tag], platform: str) -> bool:
    if platform == HERE:
        return bool(tags & _installable())
    return any(t.platform == platform or t.platform == "any" for t in tags)


@functools.lru_cache(maxsize=1)
def _installable() -> frozenset[Tag]:
    return frozenset(sys_tags())


def _cached(name: str, version: str, platform: str = HERE) -> list[Path]:
    """Cached wheels of exactly this project and version (``2.13.0`` is not ``2.13.0+cpu``) for
    ``platform``: one this interpreter installs by default, or a pip platform tag ("win_amd64")."""
    want_name, want_version = canonicalize_name(name), Version(version)
    out = []
    for p in cache_dir().glob("*.whl"):
        try:
            got_name, got_version, _, tags = parse_wheel_filename(p.name)
        except ValueError:
            continue
        if got_name == want_name and got_version == want_version and _fits(tags, platform):
            out.append(p)
    return sorted(out)


def _tag_options(filename: str) -> list[str]:
    """pip options that ask for exactly this wheel file's tags."""
    _, _, _, tags = parse_wheel_filename(filename)
    platforms = sorted({t.platform for t in tags})
    abis = sorted({t.abi for t in tags} - {"none"})
    pythons = sorted({t.interpreter[2:] for t in tags if t.interpreter[:2] == "cp" and t.interpreter[2:].isdigit()})
    opts = [o for p in platforms for o in ("--platform", p)]
    if pythons:
        digits = pythons[0]
        opts += ["--python-version", f"{digits[0]}.{digits[1:]}", "--implementation", "cp"]
    else:  # a py3 wheel: pip still needs a Python version beside --platform
        opts += ["--python-version", f"{sys.version_info.major}.{sys.version_info.minor}"]
    return opts + [o for a in abis for o in ("--abi", a)]


def _download(requirement: str, options: list[str], dest: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--retries",
        "5",
        "--timeout",
        "60",
        "--dest",
        str(dest),
        *options,
        requirement,
    ]
    return subprocess.run(cmd, capture_output=True, text=True)


def _fail(msg: str) -> None:
    if os.environ.get("ARCHAUDIT_OFFLINE"):
        pytest.skip(msg)
    pytest.fail(msg)


@contextmanager
def _locked(key: str) -> Iterator[None]:
    """One process at a time per wheel (an advisory lock the kernel drops if the process dies)."""
    locks = cache_dir() / ".locks"
    locks.mkdir(exist_ok=True)
    with open(locks / f"{key}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _within_tier(path: Path) -> Path:
    size = path.stat().st_size
    if size > TIER_BYTES and not CENSUS:
        pytest.fail(
            f"{path.name} is {size >> 20} MiB, over the {TIER_BYTES >> 20} MiB of the fast and real-wheel "
            "tiers: read a smaller wheel of the same structure, or mark the test census"
        )
    return path


def _have(name: str, version: str, platform: str, filename: str | None) -> Path | None:
    if filename is not None:
        path = cache_dir() / filename
        return path if path.exists() else None
    have = _cached(name, version, platform)
    return have[-1] if have else None


def fetch(name: str, version: str, platform: str = HERE, *, filename: str | None = None) -> Path:
    """The cached wheel ``name==version`` for ``platform`` (exactly ``filename`` when given),
    downloading it if needed."""
    want(name, version, platform, filename)
    found = _have(name, version, platform, filename)
    if found is not None:
        return _within_tier(found)
    if filename is not None:
        options = _tag_options(filename)
    else:
        options = (
            []
            if platform == HERE
            else ["--platform", platform, "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}"]
        )
    with _locked(f"{canonicalize_name(name)}-{version}-{filename or platform}"):
        found = _have(name, version, platform, filename)  # another process fetched it meanwhile
        if found is not None:
            return _within_tier(found)
        last = ""
        for attempt in range(ATTEMPTS):
            with tempfile.TemporaryDirectory(dir=cache_dir(), prefix=".partial-") as tmp:
                done = _download(f"{name}=={version}", options, Path(tmp))
                for got in Path(tmp).glob("*.whl"):
                    os.replace(got, cache_dir() / got.name)  # whole, in one step
            found = _have(name, version, platform, filename)
            if done.returncode == 0 and found is not None:
                return _within_tier(found)
            last = (done.stderr.strip().splitlines() or [""])[-1]
            time.sleep(2 * (attempt + 1))
    _fail(f"cannot download {name}=={version}{' as ' + filename if filename else ''}: {last}")
    raise AssertionError("unreachable")


def extract_member(wheel: Path, member: str, dest: Path) -> Path:
    """For comparisons with tools that need a file on disk (cuobjdump); archaudit never does this."""
    out = dest / member
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as f:
        while block := src.read(1 << 20):
            f.write(block)
    return out
