"""The ELF tables, pinned where mutation testing found elf.py loose (docs/mutation.md).

Inputs are nvcc's and clang's fixtures with one header or table field changed; facts expected
come from binutils' readelf or from the gABI layout read here with struct.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from archaudit.findings import Code
from archaudit.model import Library, Problem
from archaudit.read import elf
from archaudit.read.library import library_from_bytes
from helpers import READELF, readelf_dynamic
from reference_tools import needs_tool

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LIB = (FIXTURES / "cuda" / "bin" / "lib_sm80.so").read_bytes()
HSACO = (FIXTURES / "amd" / "bin" / "gfx90a_xnack_on.hsaco").read_bytes()
(SHOFF,) = struct.unpack_from("<Q", LIB, 0x28)
(PHOFF,) = struct.unpack_from("<Q", LIB, 0x20)
PHNUM, SHNUM, SHSTRNDX = struct.unpack_from("<H", LIB, 0x38)[0], *struct.unpack_from("<HH", LIB, 0x3C)
EM_X86_64, ET_REL = 62, 1


def patched(data: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def refused(code: str, message: str, fn: object, *args: object) -> None:
    with pytest.raises(elf.ElfError) as e:
        fn(*args)  # type: ignore[operator]
    assert (e.value.code, e.value.message) == (code, message)


@pytest.mark.parametrize(
    "data, code, message",
    [
        (b"\x7fELG" + LIB[4:64], "E010", "not an ELF file"),
        (LIB[:4], "E010", "ELF header is truncated"),
        (patched(LIB, 5, "<B", 2), "E020", "big-endian ELF is not supported"),  # EI_DATA: ELFDATA2MSB
        (patched(LIB, 0x28, "<Q", len(LIB) - 64), "E010", "section header table lies outside the file"),
        (patched(LIB, 0x20, "<Q", len(LIB) - 56), "E010", "program header table lies outside the file"),
        (patched(LIB, 0x3E, "<H", SHNUM), "E010", "section name table index out of range"),
    ],
)
def test_elf_headers_that_cannot_be_read(data, code, message):
    refused(code, message, elf.parse_header, data[:64], len(data))


def test_the_largest_tables_that_fit_are_read():
    h = elf.parse_header(LIB[:64], SHOFF + SHNUM * 64)  # the section table ends the file
    assert (h.shnum, h.shstrndx, h.phnum) == (SHNUM, SHSTRNDX, PHNUM)
    assert elf.parse_header(patched(LIB, 0x3E, "<H", SHNUM - 1)[:64], len(LIB)).shstrndx == SHNUM - 1


def test_tables_shorter_than_their_count_are_truncated():
    phdrs, shdrs = LIB[PHOFF : PHOFF + PHNUM * 56], LIB[SHOFF : SHOFF + SHNUM * 64]
    refused("E010", "program header table is truncated", elf.parse_segments, phdrs[:-1], PHNUM, len(LIB))
    refused("E010", "section header table is truncated", elf.parse_sections, shdrs[:-1], SHNUM, len(LIB))


def test_segments_and_sections_may_end_at_the_end_of_the_file():
    phdrs, shdrs = LIB[PHOFF : PHOFF + PHNUM * 56], LIB[SHOFF : SHOFF + SHNUM * 64]
    segs = elf.parse_segments(phdrs, PHNUM, len(LIB))
    last = max((s for s in segs if s.type == elf.PT_LOAD), key=lambda s: s.offset + s.filesz)
    assert elf.parse_segments(phdrs, PHNUM, last.offset + last.filesz) == segs
    secs = elf.parse_sections(shdrs, SHNUM, len(LIB))
    end = max(s.file_end for s in secs)
    assert elf.parse_sections(shdrs, SHNUM, end) == secs


def test_a_progbits_section_outside_the_file_is_e010():
    names = {}
    secs = elf.parse_sections(LIB[SHOFF : SHOFF + SHNUM * 64], SHNUM, len(LIB))
    strtab = secs[SHSTRNDX]
    for i, s in enumerate(elf.name_sections(secs, LIB[strtab.offset : strtab.file_end])):
        names[s.name] = i
    i = names[".nv_fatbin"]  # SHT_PROGBITS
    data = patched(LIB, SHOFF + 64 * i + 32, "<Q", len(LIB))
    assert library_from_bytes("lib.so", data).problems == (
        Problem(Code.E010, f"malformed ELF: section {i} lies outside the file"),
    )


@pytest.mark.parametrize("sh_name", [0, 1 << 20], ids=["the null name", "outside .shstrtab"])
def test_a_section_whose_name_is_lost_is_e010(sh_name):
    """Roles follow section names: a section with a type and no name cannot be given one."""
    data = patched(LIB, SHOFF + 64 * 1, "<I", sh_name)  # section 1's sh_name
    lib = library_from_bytes("lib.so", data)
    assert Problem(Code.E010, "malformed ELF: section 1 has no name") in lib.problems


def test_a_virtual_address_maps_from_the_first_byte_of_its_segment():
    segs = elf.parse_segments(LIB[PHOFF : PHOFF + PHNUM * 56], PHNUM, len(LIB))
    for s in segs:
        if s.type == elf.PT_LOAD:
            assert elf.vaddr_to_offset(segs, s.vaddr) == s.offset
            assert elf.vaddr_to_offset(segs, s.vaddr + s.filesz - 1) == s.offset + s.filesz - 1


def test_a_symbol_table_linking_a_missing_string_table_is_e010():
    (shoff,) = struct.unpack_from("<Q", HSACO, 0x28)
    (shnum,) = struct.unpack_from("<H", HSACO, 0x3C)
    symtab = next(i for i in range(shnum) if struct.unpack_from("<I", HSACO, shoff + 64 * i + 4)[0] == elf.SHT_SYMTAB)
    data = patched(HSACO, shoff + 64 * symtab + 40, "<I", shnum)  # sh_link = e_shnum
    assert library_from_bytes("k.hsaco", data) == Library(
        "k.hsaco", len(data), "cubin", problems=(Problem(Code.E010, "symbol table links a missing string table"),)
    )


# ---- read_dynamic: what smoke's load probe explains a failed dlopen with -----------------------


def test_read_dynamic_of_an_elf_without_a_dynamic_segment(tmp_path):
    path = FIXTURES / "cuda" / "bin" / "kern.o"  # readelf -h: REL, X86-64
    with open(path, "rb") as f:
        assert elf.read_dynamic(f, path.stat().st_size) == elf.Dynamic(ET_REL, EM_X86_64)
    no_strtab = tmp_path / "lib.so"  # DT_STRTAB's tag changed to DT_DEBUG: no names can be read
    dyn = next(
        s for s in elf.parse_segments(LIB[PHOFF : PHOFF + PHNUM * 56], PHNUM, len(LIB)) if s.type == elf.PT_DYNAMIC
    )
    at = next(
        dyn.offset + i
        for i in range(0, dyn.filesz, 16)
        if struct.unpack_from("<q", LIB, dyn.offset + i)[0] == elf.DT_STRTAB
    )
    no_strtab.write_bytes(patched(LIB, at, "<q", 21))
    with open(no_strtab, "rb") as f:
        assert elf.read_dynamic(f, len(LIB)) == elf.Dynamic(elf.ET_DYN, EM_X86_64)


@needs_tool("binutils readelf (apt-get install binutils)", READELF)
@pytest.mark.parametrize("name", ["lib_patchelf_runpath.so", "lib_many_exports.so"])
def test_read_dynamic_splits_runpaths_as_readelf_does(name):
    path = FIXTURES / "readers" / "bin" / name
    want = readelf_dynamic(path)
    with open(path, "rb") as f:
        d = elf.read_dynamic(f, path.stat().st_size)
    assert (d.type, d.machine) == (elf.ET_DYN, EM_X86_64)
    assert (list(d.needed), list(d.runpath), list(d.rpath)) == (want["NEEDED"], want["RUNPATH"], want["RPATH"])
    assert len(want["RUNPATH"]) >= 1 and d.soname is None and not want["SONAME"]
