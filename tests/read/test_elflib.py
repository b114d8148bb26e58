"""read/elflib.py: host ELF libraries: the dynamic segment's names, the section name table, which
patterns are searched in which zone of the program headers, AMD host objects.

Inputs are the nvcc- and clang-built fixtures (tests/fixtures/cuda/bin, tests/fixtures/amd/bin)
or their bytes with one fact changed. Facts expected come from the build (build.sh's -arch, the
kernels in the sources, NVCC_VERSION, llvm-readelf's REFERENCE.txt), never from the reader.
"""

from __future__ import annotations

import struct

import pytest

from archaudit.findings import Code
from archaudit.model import Library, Problem
from helpers import (
    AMD_BIN,
    CLAIM,
    CUDA_BIN,
    FATBIN_AT,
    LIB_SM80,
    PLAIN_TWO,
    READELF,
    READERS,
    TEXT,
    TWO_PLAIN,
    patched,
    problems,
    read,
    readelf_dynamic,
    with_strings,
)
from reference_tools import needs_tool

# ---- host libraries: the dynamic segment's names, the section name table -------------------------


@needs_tool("binutils readelf (apt-get install binutils)", READELF)
def test_needed_names_far_into_the_dynamic_string_table_are_read():
    """NEEDED is what makes a library that only links the CUDA runtime a GPU library: its names
    must be read wherever .dynstr holds them (here after 4 KiB of symbol names)."""
    path = READERS / "lib_many_exports.so"
    want = readelf_dynamic(path)
    assert want["NEEDED"] == ["libm.so.6", "libc.so.6"] and want["RUNPATH"] == ["$ORIGIN/../lib"]
    lib = read(path.name, path.read_bytes())
    assert (list(lib.needed), list(lib.runpath), lib.problems) == (want["NEEDED"], want["RUNPATH"], ())


def test_a_segment_outside_the_file_is_e010_and_nothing_else():
    (phoff,) = struct.unpack_from("<Q", LIB_SM80, 0x20)  # program header 0: PT_LOAD; p_filesz at +32
    data = patched(LIB_SM80, phoff + 32, "<Q", lambda _: len(LIB_SM80) + 1)
    assert read("lib.so", data) == Library(
        "lib.so", len(data), "elf", problems=(Problem(Code.E010, "malformed ELF: segment 0 lies outside the file"),)
    )


def summary(lib: Library) -> tuple[object, ...]:
    return (
        lib.format,
        [(c.section, c.role, c.offset, c.size, len(c.entries)) for c in lib.containers],
        lib.needed,
        lib.runpath,
        lib.problems,
    )


def moved_table(data: bytes, gap: int, names_gap: int | None = None) -> bytes:
    """The library with its section header table moved `gap` bytes past the end of the file
    (e_shoff patched) and, with names_gap, .shstrtab copied that far past the end first (its
    sh_offset patched): every section's bytes stay where they were."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
    table = bytearray(data[shoff : shoff + 64 * shnum])
    out = bytearray(data)
    if names_gap is not None:
        names_at, names_size = struct.unpack_from("<QQ", table, 64 * shstrndx + 24)
        out += bytes(names_gap)
        struct.pack_into("<Q", table, 64 * shstrndx + 24, len(out))
        out += data[names_at : names_at + names_size]
    out += bytes(gap)
    struct.pack_into("<Q", out, 0x28, len(out))
    return bytes(out + table)


def test_section_names_read_from_the_head_when_the_table_is_far_from_them():
    """.shstrtab more than SHSTR_WINDOW (1 MiB) before the section table but within the 4 MiB
    head that is always kept."""
    data = moved_table(LIB_SM80, (1 << 20) + 4096)
    lib = read("lib.so", data)
    assert summary(lib) == summary(read("lib.so", LIB_SM80)) and lib.notes == ()


def test_section_names_read_in_a_second_pass_when_neither_window_holds_them():
    data = moved_table(LIB_SM80, (1 << 20) + 4096, names_gap=5 << 20)
    lib = read("lib.so", data)
    assert summary(lib) == summary(read("lib.so", LIB_SM80))
    assert lib.notes == ("second pass: the section name table lies away from the section table",)


def test_section_names_read_from_the_window_before_a_table_past_the_first_mebibyte():
    data = moved_table(LIB_SM80, 0, names_gap=(1 << 20) + 4096)  # .shstrtab just before the table
    lib = read("lib.so", data)
    assert summary(lib) == summary(read("lib.so", LIB_SM80)) and lib.notes == ()


# ---- which patterns are searched where (the program headers' zones) -------------------------------


def test_an_object_file_without_segments_is_searched_whole():
    """nvcc -c kern.cu: no program headers, so every byte is searched for every record."""
    lib = read("kern.o", (CUDA_BIN / "kern.o").read_bytes())
    assert [(c.section, c.role, c.size, [e.target for e in c.entries]) for c in lib.containers] == [
        (".nv_fatbin", "executable", 3448, ["sm_80"])
    ] and not lib.problems


def test_a_container_in_bytes_no_segment_maps_is_found_and_lies_in_no_section():
    """Between lib_sm80.so's code segment (ends 0x1699) and its read-only one (0x2000): a copy of
    its 1,536-byte device-link container, which cuModuleLoadData could load from there."""
    at = 0x16A0
    data = with_strings(LIB_SM80, (at, LIB_SM80[FATBIN_AT : FATBIN_AT + 1536]))
    lib = read("lib.so", data)
    assert (at, "embedded", "") in [(c.offset, c.role, c.section) for c in lib.containers]
    assert problems(lib) == [("E011", f"fatbin container at 0x{at:x} lies in no section", at)]


def test_claims_are_not_read_from_bytes_past_the_last_segment():
    data = LIB_SM80 + b"\0" + CLAIM + b"\0"
    assert read("lib.so", data).embedded_claims == ()


def test_claims_are_read_from_code_in_a_layout_without_separate_code():
    """Older layouts map the ELF header, .text and .rodata in one R+X segment: its string
    literals are in the executable segment, which is then searched for claims."""
    (phoff,) = struct.unpack_from("<Q", LIB_SM80, 0x20)
    data = with_strings(LIB_SM80, (TEXT, b"\0" + CLAIM + b"\0"))
    assert read("lib.so", data).embedded_claims == ()  # separate code: not searched
    data = patched(data, phoff + 4, "<I", lambda _: 5)  # program header 0 (offset 0): R -> R+X
    assert read("lib.so", data).embedded_claims == (CLAIM.decode(),)


def test_a_load_segment_inside_another_does_not_end_the_zones():
    """Program header 5 (PT_NOTE inside the first PT_LOAD) relabelled PT_LOAD: the segments after
    it are still searched for what each may hold (wrappers in writable data)."""
    (phoff,) = struct.unpack_from("<Q", LIB_SM80, 0x20)
    data = patched(LIB_SM80, phoff + 5 * 56, "<I", lambda _: 1)
    assert summary(read("lib.so", data)) == summary(read("lib.so", LIB_SM80))


@pytest.mark.parametrize("flags, first", [(5, 5), (6, 4)], ids=["code, no separate code", "writable"])
def test_offload_bundles_are_found_in_code_and_writable_segments(flags, first):
    """hip_two_plain.so's .hip_fatbin lies in its read-only segment (program header 2): mapped
    R+X in a layout without separate code, or writable, its bundles are still found."""
    (phoff,) = struct.unpack_from("<Q", TWO_PLAIN, 0x20)
    data = patched(patched(TWO_PLAIN, phoff + 2 * 56 + 4, "<I", lambda _: flags), phoff + 4, "<I", lambda _: first)
    lib = read("lib.so", data)
    assert [(c.section, c.offset) for c in lib.containers] == [(".hip_fatbin", 0x3000), (".hip_fatbin", 0x8000)]
    assert not lib.problems


# ---- an AMD host object ---------------------------------------------------------------------------


def test_an_amd_object_file_without_segments_is_searched_for_bundles():
    """clang -c --offload-arch=gfx90a kernels.hip (hip_gfx90a.o): no program headers, so every byte
    is searched, offload bundles too; REFERENCE.txt lists its one bundle, for gfx90a."""
    data = (AMD_BIN / "hip_gfx90a.o").read_bytes()
    lib = read("hip_gfx90a.o", data)
    kernels = ("_Z5scaleIdEvPT_S0_", "_Z5scaleIfEvPT_S0_", "saxpy")  # kernels.hip
    assert [
        (c.vendor, c.section, c.offset, [(e.target, tuple(sorted(e.kernels or ()))) for e in c.entries])
        for c in lib.containers
    ] == [("amd", ".hip_fatbin", 0x1000, [("gfx90a", kernels)])]
    assert lib.format == "elf" and not lib.problems


def test_a_bundle_header_cut_by_the_end_of_the_file_far_into_it_is_truncated():
    """A plain bundle's header cut 100 bytes in, 4.4 MB into a bare file (past MAX_HEADER): the
    bytes left are counted from the bundle, not from the file's start, so it is truncated
    (E030), not a header too long to complete (E032)."""
    at = len(PLAIN_TWO) + 4_400_000
    lib = read("k.hipfb", PLAIN_TWO + b"\0" * 4_400_000 + PLAIN_TWO[:100], max_payload=1 << 16)
    assert [c.offset for c in lib.containers] == [0]
    assert problems(lib) == [("E030", f"HIP bundle at 0x{at:x}: E030: bundle is truncated", at)]
