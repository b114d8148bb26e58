"""A fatbin entry's options descriptor, read as cuobjdump reads it (issue 38, item 4).

The referee fuzzer found a mutant of a real fatbin (nvcc 13.0's kern.fatbin) whose PTX entry's
options length was flipped: cuobjdump refuses it ("Invalid fatbin header"), archaudit read it
as valid. cuobjdump's rule, found by the mutants below: a PTX entry has a descriptor; a string
at a non-zero offset is followed by a NUL byte. archaudit refuses every mutant cuobjdump
refuses (E011), and (fail closed) also a descriptor or string that reaches past the entry
header, which cuobjdump reads only when the payload's bytes happen to fit (docs/fuzzing.md).
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from archaudit.read.library import scan_file
from oracle import find_cuobjdump
from reference_tools import missing_tool

FATBIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin" / "kern.fatbin"


def ptx_entry(data: bytes) -> int:
    """The offset of the PTX entry, walked with struct (not the code under test)."""
    _, _, hsize, size = struct.unpack_from("<IHHQ", data, 0)
    pos = hsize
    while pos < hsize + size:
        kind, _, ehsize, psize = struct.unpack_from("<HHIQ", data, pos)
        if kind == 1:
            return pos
        pos += ehsize + psize
    raise AssertionError("no PTX entry")


def mutants() -> list[tuple[str, int, int]]:
    """(label, offset in the entry, new u32): each bit of the descriptor's offset, the string's
    offset and its length flipped, plus the values at and past each bound."""
    out = []
    for name, at in (("descriptor offset", 0x14), ("string offset", 64), ("string length", 68)):
        out += [(f"{name} bit {b}", at, b) for b in range(32)]
    return out


def codes(path: Path) -> set[str]:
    lib = scan_file(str(path))
    return {p.code for p in lib.problems}


def mutate(data: bytes, entry: int, at: int, bit: int) -> bytes:
    out = bytearray(data)
    value = struct.unpack_from("<I", out, entry + at)[0] ^ (1 << bit)
    struct.pack_into("<I", out, entry + at, value)
    return bytes(out)


def test_the_original_is_read_and_its_descriptor_is_what_the_test_flips():
    data = FATBIN.read_bytes()
    entry = ptx_entry(data)
    assert struct.unpack_from("<I", data, entry + 0x14)[0] == 64
    assert struct.unpack_from("<II", data, entry + 64) == (72, 0)
    assert "E011" not in codes(FATBIN)


def test_archaudit_refuses_every_descriptor_mutant_cuobjdump_refuses(tmp_path):
    tool = find_cuobjdump()
    if tool is None:
        missing_tool("cuobjdump")
    data = FATBIN.read_bytes()
    entry = ptx_entry(data)
    disagree, refused = [], 0
    for label, at, bit in mutants():
        path = tmp_path / "m.fatbin"
        path.write_bytes(mutate(data, entry, at, bit))
        r = subprocess.run([str(tool), str(path)], capture_output=True, text=True, timeout=60)
        theirs = r.returncode != 0 and "Invalid fatbin header" in r.stderr
        ours = "E011" in codes(path)
        refused += theirs
        if theirs and not ours:
            disagree.append(label)
    assert refused >= 80  # the run compared something: 86 of the 96 flips are refused by cuobjdump 13
    assert disagree == []


@pytest.mark.parametrize(
    "at,value,words",
    [
        (0x14, 0, "PTX entry has no options descriptor"),
        (0x14, 320, "options descriptor at 320 lies outside the entry header"),
        (68, 8, "does not end inside the entry header"),
        (64, 64, "is not followed by a NUL byte"),
    ],
)
def test_each_contradiction_is_e011_with_its_reason(tmp_path, at, value, words):
    data = bytearray(FATBIN.read_bytes())
    entry = ptx_entry(bytes(data))
    struct.pack_into("<I", data, entry + at, value)
    path = tmp_path / "m.fatbin"
    path.write_bytes(bytes(data))
    lib = scan_file(str(path))
    assert any(p.code == "E011" and words in p.message for p in lib.problems), lib.problems
