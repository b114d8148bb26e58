"""What a word in a kernel's name says about the GPUs the kernel is for (data/names.json).

A name is a convention of whoever wrote it, and means what that convention says, no more: a
CUTLASS ArchTag (``cutlass::arch::Sm80``) is the kernel's minimum compute capability, a CuTe
``SM80_*`` atom or NVIDIA's ``sm80_xmma_*`` names the instruction generation the kernel is
written for, and a generation word (``ampere``) spans several compute capabilities. Every row
of the table reads "this architecture or newer", so a name excludes only GPUs older than the
first architecture it names (``excludes``); it never says a newer GPU is not meant.

Pure: reads only the package's own data table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Literal

from ..gpus import cuda as arch
from ..gpus.cuda import CC

Meaning = Literal["from"]


@dataclass(frozen=True, slots=True)
class Convention:
    """One row of data/names.json: a word in a name, and what its author means by it."""

    name: str
    word: str  # a substring every match holds
    pattern: str
    ccs: tuple[CC, ...]  # a generation word's span; empty when the pattern captures the digits
    means: Meaning
    source: tuple[str, ...]


def _cc(text: str) -> CC:
    major, minor = text.split(".")
    return int(major), int(minor)


@cache
def conventions() -> tuple[Convention, ...]:
    """The table's rows, in its order."""
    table = json.loads(resources.files("archaudit").joinpath("data", "names.json").read_text("utf-8"))
    out = []
    for name, row in table["conventions"].items():
        source = row["source"] if isinstance(row["source"], list) else [row["source"]]
        out.append(
            Convention(
                name,
                row["word"],
                row["pattern"],
                tuple(_cc(c) for c in row.get("ccs", ())),
                row["means"],
                tuple(source),
            )
        )
    return tuple(out)


@cache
def _cccl_namespace() -> re.Pattern[str]:
    """CCCL's versioned namespaces (cub::CUB_300001_SM_800_900, thrust::THRUST_200302_800_NS) list
    every architecture of the translation unit that instantiated a kernel: they name none."""
    table = json.loads(resources.files("archaudit").joinpath("data", "names.json").read_text("utf-8"))
    return re.compile(table["cccl_namespace"], re.IGNORECASE)


@cache
def _compiled(ascii_lower: bool) -> tuple[tuple[Convention, re.Pattern[str]], ...]:
    """The rows' patterns, compiled when a name first holds their words: case-sensitive for a
    lower-cased ASCII name, else case-insensitive (which also folds a few non-ASCII letters
    onto s and k)."""
    flags = 0 if ascii_lower else re.IGNORECASE
    return tuple((c, re.compile(c.pattern, flags)) for c in conventions())


@lru_cache(maxsize=1 << 14)
def readings(kernel: str) -> tuple[tuple[Convention, tuple[CC, ...]], ...]:
    """Each convention the name uses, with the compute capabilities it names (in order)."""
    ascii_name = kernel.isascii()
    text = kernel.lower() if ascii_name else kernel
    if not ascii_name or "cub_" in text or "thrust_" in text:
        text = _cccl_namespace().sub("_", text)
    out: list[tuple[Convention, tuple[CC, ...]]] = []
    for conv, pattern in _compiled(ascii_name):
        if ascii_name and conv.word not in text:
            continue
        named: list[CC] = []
        for m in pattern.finditer(text):
            if conv.ccs:
                named.extend(conv.ccs)
                continue
            n = int(m.group(1))
            if n >= 20:
                named.append(arch.canonical_cc((n // 10, n % 10)))
        if named:
            out.append((conv, tuple(dict.fromkeys(named))))
    return tuple(out)


def named_architectures(kernel: str) -> tuple[CC, ...]:
    """Every compute capability a kernel's name names (``sm80_xmma_gemm`` -> 8.0; ``volta_sgemm``
    -> 7.0, 7.2); empty when it names none."""
    return tuple(dict.fromkeys(cc for _, ccs in readings(kernel) for cc in ccs))


def name_floor(kernel: str) -> CC | None:
    """The oldest GPU the name allows: the lowest first architecture of every convention it
    uses (all read "this or newer"; several words: the one that allows most, fail closed)."""
    firsts = [ccs[0] if conv.ccs else min(ccs) for conv, ccs in readings(kernel)]
    return min(firsts) if firsts else None


def excludes(kernel: str, gpu: CC) -> bool:
    """Whether the kernel's name, read by its author's convention, says it is not for ``gpu``:
    ``gpu`` is older than every architecture it names."""
    floor = name_floor(kernel)
    return floor is not None and gpu < floor


def conventions_of(kernel: str) -> tuple[str, ...]:
    """The names of the conventions the kernel's name is read by (for messages)."""
    return tuple(conv.name for conv, _ in readings(kernel))


def demangle(name: str) -> str:
    """A short readable name for an Itanium-mangled kernel: its qualified name without
    parameters (`_Z4axpyfPKfPfi` -> `axpy`, `_ZN2ns5scaleIfEEvPT_S1_i` -> `ns::scale`)."""
    if not name.startswith("_Z"):
        return name
    nested = name.startswith("_ZN")
    i = 3 if nested else 2
    while nested and i < len(name) and name[i] in "rVK":
        i += 1
    parts: list[str] = []
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        if j - i > 9:  # no identifier is a gigabyte long: not a name this reading knows
            break
        n = int(name[i:j])
        parts.append(name[j : j + n])
        i = j + n
        if not nested or (i < len(name) and name[i] == "I"):
            break
    return "::".join(p for p in parts if p) or name


__all__ = [
    "Convention",
    "conventions",
    "conventions_of",
    "demangle",
    "excludes",
    "name_floor",
    "named_architectures",
    "readings",
]
