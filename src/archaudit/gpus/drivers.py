"""One order of NVIDIA driver versions, and its one meaning.

A driver version is dotted numbers ("580.65.06"), compared numerically part by part
("580.65.06" after "580.65.6" is false: they are equal; "575.57.08" comes before "580").
A floor archaudit cannot name is written "unknown" (UNKNOWN). In an order of floors it asks
most of all: it sorts after every known version, so the most demanding floor of several is
"unknown" as soon as one of them is (fail closed: a floor nobody can name is never hidden
behind a lower one that is known). Checking a driver against a floor (driver_at_least)
takes known versions only and refuses anything else.
"""

from __future__ import annotations

import re

from ..findings import Finding

UNKNOWN = "unknown"
"""The driver floor archaudit cannot name (no table row, an ISA newer than the tables)."""

_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*")
_ABOVE_ALL = (1 << 30,)


def driver_parts(version: str) -> tuple[int, ...]:
    """A driver version's numbers ("580.65.06" -> (580, 65, 6)); ValueError for anything else."""
    if not _VERSION.fullmatch(version.strip()):
        raise ValueError(f"not a driver version: {version!r}")
    return tuple(int(p) for p in version.strip().split("."))


def driver_key(version: str) -> tuple[int, ...]:
    """The sort key of a driver floor: known versions by their numbers, and "unknown" (or
    anything that is not a version) after all of them, as the floor that asks most."""
    try:
        return driver_parts(version)
    except ValueError:
        return _ABOVE_ALL


def floor_words(f: Finding) -> str:
    """A D002 floor in words: ">= 580.65.06 on Linux (CUDA 13.0" or "unknown (archaudit cannot name it"."""
    if f.get("driver") == UNKNOWN:
        return "unknown (archaudit cannot name it"
    where = "Windows" if f.get("os") == "windows" else "Linux"
    return f">= {f.get('driver')} on {where} (CUDA {f.get('cuda')}"


def driver_at_least(have: str, need: str) -> bool:
    """Compare dotted driver versions numerically ("580.65.06" >= "580.65.6", "575.57.08" < "580");
    ValueError when either is not a driver version."""
    a, b = driver_parts(have), driver_parts(need)
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)) >= b + (0,) * (width - len(b))


__all__ = ["driver_at_least", "driver_key", "driver_parts", "floor_words", "UNKNOWN"]
