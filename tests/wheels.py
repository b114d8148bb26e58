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


def fetch(name: str, version: str) -> Path:
    d = cache_dir()
    stem = name.replace("-", "_") + "-" + version
    have = sorted(p for p in d.glob(stem + "*.whl") if p.name[len(stem)] in "-+")
    if not have:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                            "--dest", str(d), f"{name}=={version}"], capture_output=True, text=True)
        have = sorted(p for p in d.glob(stem + "*.whl") if p.name[len(stem)] in "-+")
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
