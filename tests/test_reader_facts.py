"""Per-payload facts the readers take from real compiler output: `a` targets of CUDA 12.x
cubins, kernels without the entry flag, PTX read as ptxas reads it, and device code that no
fatbin section announces (fixtures: tests/fixtures/readers, built by its build.sh)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from archaudit import elf, fatbin
from archaudit.model import PTX, SASS
from archaudit.scan import scan_file

BIN = Path(__file__).parent / "fixtures" / "readers" / "bin"
AXPY = ("_Z4axpyfPKfPfi",)


@pytest.mark.parametrize("name,abi,bit", [
    ("cuda12_sm90", 7, 0x800), ("cuda12_sm90a", 7, 0x800),
    ("cuda12_sm100", 8, 0x8), ("cuda12_sm100a", 8, 0x8),
])
def test_cuda12_cubins_mark_the_a_target_in_e_flags(name, abi, bit):
    data = (BIN / f"{name}.cubin").read_bytes()
    h = elf.parse_header(data, len(data))
    assert h.abiversion == abi
    assert bool(h.flags & bit) == name.endswith("a")  # the fact, as ptxas 12.8 writes it
    target, kernels, _ = fatbin.cubin_facts(data)
    assert target == name.split("_")[1].replace("sm", "sm_")
    assert kernels == AXPY
    cleared = bytearray(data)  # the bit is the only marker: without it the cubin is plain
    struct.pack_into("<I", cleared, 48, h.flags & ~bit)
    assert fatbin.cubin_facts(bytes(cleared))[0] == target.rstrip("a")


def test_cuda12_a_cubins_in_a_fatbin_agree_with_their_headers():
    lib = scan_file(str(BIN / "cuda12_a.fatbin"), decode=True)
    assert lib.problems == ()
    assert [(e.target, e.decoded) for e in lib.entries] == [("sm_90a", True), ("sm_100a", True)]


def test_ptx_target_records_what_the_text_says():
    lib = scan_file(str(BIN / "ptx90_says_90a.fatbin"), decode=True)
    assert lib.problems == ()
    (e,) = lib.entries
    assert (e.kind, e.target, e.ptx_target) == (PTX, "sm_90", "sm_90a")


def test_kernel_without_the_entry_flag_is_still_a_kernel():
    data = (BIN / "noentry_sm80.cubin").read_bytes()
    small = elf.parse_small(data)
    funcs = [(n, other) for n, info, other, _, _ in small.symbols() if info & 0xF == 2]
    assert funcs and all(not other & 0x10 for _, other in funcs)  # STO_CUDA_ENTRY cleared
    assert fatbin.cubin_facts(data)[1] == AXPY


def test_device_function_is_not_a_kernel():
    # an -rdc cubin's __noinline__ device function has .text.<name> but no constant bank
    data = (BIN / "cuda12_sm90.cubin").read_bytes()
    assert fatbin.cubin_facts(data)[1] == AXPY


def test_ptx_read_as_ptxas_reads_it():
    text = (BIN / "entry_comment.ptx").read_bytes()
    assert b".entry /*x*/ _Z4axpyfPKfPfi" in text and b"/* .target sm_50 */" in text
    assert b"// .entry decoy_in_a_comment" in text
    assert fatbin.ptx_facts(text) == ("sm_80", (9, 0), AXPY)


@pytest.mark.parametrize("text,target,entries", [
    (b".version 8.0\n.target sm_90a, debug\n.entry k()\n{}\n", "sm_90a", ("k",)),
    (b".version 8.0\n.target // why\n  sm_75\n.visible .entry\n//c\nk2 ( )", "sm_75", ("k2",)),
    (b"/*\n.target sm_50\n*/.version 8.0\n.target sm_86\n", "sm_86", ()),
    (b".version 8.0\n.target sm_80 garbage\n", "", ()),
    (b".version 8.0\n/* .entry hidden() */ .entry shown()", None, ("shown",)),
])
def test_ptx_facts_on_comment_placements(text, target, entries):
    got = fatbin.ptx_facts(text)
    assert (got[0], got[2]) == (target, entries)


def test_hidden_kernels_through_the_fatbin_decode_path():
    lib = scan_file(str(BIN / "hidden_kernels.fatbin"), decode=True)
    assert lib.problems == ()
    assert [(e.kind, e.kernels) for e in lib.entries] == [(SASS, AXPY), (PTX, AXPY)]
