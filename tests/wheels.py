"""Real wheels for tests: downloaded once with pip into a cache, reused from there.

The cache is $ARCHAUDIT_WHEEL_CACHE, default ~/.cache/archaudit/wheels. A wheel that pip
cannot fetch fails the test that needs it (set ARCHAUDIT_OFFLINE=1 to skip instead).
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest


def cache_dir() -> Path:
    d = Path(os.environ.get("ARCHAUDIT_WHEEL_CACHE") or Path.home() / ".cache" / "archaudit" / "wheels")
    d.mkdir(parents=True, exist_ok=True)
    return d


LINUX = "linux"  # any manylinux/musllinux/linux tag of this machine's kind, or a pure wheel


def _platform_tag(wheel: Path) -> str:
    return wheel.name[:-len(".whl")].rsplit("-", 1)[-1]


def _fits(wheel: Path, platform: str) -> bool:
    tag = _platform_tag(wheel)
    if platform == LINUX:
        return tag == "any" or "linux" in tag
    return platform in tag.split(".") or tag == "any"


def fetch(name: str, version: str, platform: str = LINUX) -> Path:
    """The cached wheel of name==version for `platform` (a Linux one by default, or a pip
    platform tag such as "win_amd64"), downloaded first if the cache lacks it."""
    d = cache_dir()
    stem = name.replace("-", "_") + "-" + version

    def cached() -> list[Path]:
        return sorted(p for p in d.glob(stem + "*.whl") if p.name[len(stem)] in "-+" and _fits(p, platform))

    have = cached()
    if not have:
        where = [] if platform == LINUX else ["--platform", platform, "--python-version", "3.12"]
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                            *where, "--dest", str(d), f"{name}=={version}"], capture_output=True, text=True)
        have = cached()
        if r.returncode != 0 or not have:
            msg = f"cannot download {name}=={version}: {r.stderr.strip().splitlines()[-1:]}"
            if os.environ.get("ARCHAUDIT_OFFLINE"):
                pytest.skip(msg)
            pytest.fail(msg)
    return have[-1]


def extract_member(wheel: Path, member: str, dest: Path) -> Path:
    """For comparisons with tools that need a file on disk (cuobjdump); archaudit never does this."""
    out = dest / member
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as f:
        while block := src.read(1 << 20):
            f.write(block)
    return out
