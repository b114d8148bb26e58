"""Just enough ELF: headers, program headers, section tables and symbols, from bytes.

Host libraries are never held whole in memory: the scanner hands these functions the
header, the program-header and section-header tables and small captured ranges.
Every offset and count read here is checked before use; bad input raises ElfError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import BinaryIO

from ..errors import ArchauditError
from ..findings import Code

EM_CUDA = 190
EM_AMDGPU = 224
SHT_SYMTAB = 2
SHT_STRTAB = 3
SHT_NOBITS = 8
PT_LOAD = 1
PT_DYNAMIC = 2
DT_NEEDED, DT_STRTAB, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 5, 14, 15, 29

_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
MAX_SECTIONS = 1 << 20
MAX_SEGMENTS = 1 << 16


class ElfError(ArchauditError):
    """Malformed or unsupported ELF; code is E010 (malformed) or E020 (unsupported)."""

    default_code = Code.E010


@dataclass(frozen=True, slots=True)
class Header:
    osabi: int
    abiversion: int
    type: int
    machine: int
    flags: int
    phoff: int
    phnum: int
    shoff: int
    shnum: int
    shstrndx: int


@dataclass(frozen=True, slots=True)
class Segment:
    type: int
    offset: int
    vaddr: int
    filesz: int
    flags: int = 0

    @property
    def executable(self) -> bool:
        return bool(self.flags & 0x1)

    @property
    def writable(self) -> bool:
        return bool(self.flags & 0x2)


@dataclass(frozen=True, slots=True)
class Section:
    name_offset: int
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    name: str = ""
    addralign: int = 0

    @property
    def file_end(self) -> int:
        return self.offset + (0 if self.type == SHT_NOBITS else self.size)

    @property
    def executable(self) -> bool:
        return bool(self.flags & 0x4)


def is_elf(head: bytes | memoryview) -> bool:
    return bytes(head[:4]) == b"\x7fELF"


def is_elf32_host(head: bytes | memoryview) -> bool:
    """A 32-bit little-endian ELF whose machine is a CPU's (not a cubin's or a code object's)."""
    if len(head) < 20 or not is_elf(head) or head[4] != 1 or head[5] != 1:
        return False
    return int.from_bytes(bytes(head[18:20]), "little") not in (EM_CUDA, EM_AMDGPU)


_HEADER32 = struct.Struct("<16sHHIIIIIHHHHHH")


def check_elf32_header(data: bytes | memoryview, file_size: int) -> None:
    """A 32-bit ELF header's own consistency (version, sizes, tables inside the file); ElfError
    (E010) otherwise. Its tables are not read further."""
    if len(data) < _HEADER32.size:
        raise ElfError("ELF header is truncated")
    (_, _, _, version, _, phoff, shoff, _, ehsize, phentsize, phnum, shentsize, shnum, _) = _HEADER32.unpack_from(data)
    if version != 1 or ehsize != _HEADER32.size:
        raise ElfError(f"32-bit ELF header of version {version} and size {ehsize}, expected 1 and {_HEADER32.size}")
    if phnum and (phentsize != 32 or phoff + phnum * 32 > file_size):
        raise ElfError("32-bit program header table is malformed or lies outside the file")
    if shnum and (shentsize != 40 or shoff + shnum * 40 > file_size):
        raise ElfError("32-bit section header table is malformed or lies outside the file")


def parse_header(data: bytes | memoryview, file_size: int) -> Header:
    if len(data) < 4 or not is_elf(data):
        raise ElfError("not an ELF file")
    if len(data) < _HEADER.size:
        raise ElfError("ELF header is truncated")
    if data[4] == 1:
        raise ElfError("32-bit ELF is not supported", code=Code.E020)
    if data[4] != 2:
        raise ElfError(f"ELF class {data[4]} is neither 32-bit (1) nor 64-bit (2)")
    if data[5] == 2:
        raise ElfError("big-endian ELF is not supported", code=Code.E020)
    if data[5] != 1:
        raise ElfError(f"ELF data encoding {data[5]} is neither little- (1) nor big-endian (2)")
    (ident, etype, machine, _, _, phoff, shoff, flags, ehsize, phentsize, phnum, shentsize, shnum, shstrndx) = (
        _HEADER.unpack_from(data)
    )
    if shnum and shentsize != _SHDR.size:
        raise ElfError(f"section header size {shentsize}, expected {_SHDR.size}")
    if phnum and phentsize != _PHDR.size:
        raise ElfError(f"program header size {phentsize}, expected {_PHDR.size}")
    if shnum and (shoff < _HEADER.size or shoff + shnum * _SHDR.size > file_size):
        raise ElfError("section header table lies outside the file")
    if phnum and (phoff < _HEADER.size or phoff + phnum * _PHDR.size > file_size):
        raise ElfError("program header table lies outside the file")
    if shnum and shstrndx >= shnum:
        raise ElfError("section name table index out of range")
    return Header(ident[7], ident[8], etype, machine, flags, phoff, phnum, shoff, shnum, shstrndx)


def parse_segments(table: bytes, count: int, file_size: int) -> tuple[Segment, ...]:
    if count > MAX_SEGMENTS or len(table) < count * _PHDR.size:
        raise ElfError("program header table is truncated")
    out = []
    for i in range(count):
        ptype, flags, offset, vaddr, _, filesz, _, _ = _PHDR.unpack_from(table, i * _PHDR.size)
        if ptype in (PT_LOAD, PT_DYNAMIC) and offset + filesz > file_size:
            raise ElfError(f"segment {i} lies outside the file")
        out.append(Segment(ptype, offset, vaddr, filesz, flags))
    return tuple(out)


def parse_sections(table: bytes, count: int, file_size: int) -> list[Section]:
    if count > MAX_SECTIONS or len(table) < count * _SHDR.size:
        raise ElfError("section header table is truncated")
    out = []
    for i in range(count):
        name, stype, flags, addr, offset, size, link, _, align, _ = _SHDR.unpack_from(table, i * _SHDR.size)
        # Processor-specific types (CUDA's .nv.global is 0x7000000a) may hold no file bytes.
        if stype not in (0, SHT_NOBITS) and stype < 0x70000000 and offset + size > file_size:
            raise ElfError(f"section {i} lies outside the file")
        out.append(Section(name, stype, flags, addr, offset, size, link, addralign=align))
    return out


def name_sections(sections: list[Section], names: bytes) -> list[Section]:
    return [replace(s, name=cstring(names, s.name_offset)) for s in sections]


def cstring(data: bytes, offset: int, limit: int = 4096) -> str:
    if offset < 0 or offset >= len(data):
        return ""
    end = data.find(b"\x00", offset, offset + limit)
    if end < 0:
        end = min(len(data), offset + limit)
    return data[offset:end].decode("utf-8", errors="replace")


def vaddr_to_offset(segments: tuple[Segment, ...], vaddr: int) -> int | None:
    for s in segments:
        if s.type == PT_LOAD and s.vaddr <= vaddr < s.vaddr + s.filesz:
            return s.offset + (vaddr - s.vaddr)
    return None


def dynamic_entries(data: bytes) -> list[tuple[int, int]]:
    out = []
    for i in range(0, len(data) - 15, 16):
        tag, val = struct.unpack_from("<qQ", data, i)
        if tag == 0:
            break
        out.append((tag, val))
    return out


# ---- whole small ELF files (cubins, code objects), held in memory ----


@dataclass(frozen=True, slots=True)
class SmallElf:
    """A device-code ELF (a cubin or an AMD code object) parsed from its bytes."""

    header: Header
    sections: list[Section]
    data: bytes

    def section_bytes(self, s: Section) -> bytes:
        return self.data[s.offset : s.file_end]

    def symbols(self) -> list[tuple[str, int, int, int]]:
        """(name, info, other, shndx) for every symbol in .symtab."""
        out = []
        for tab in self.sections:
            if tab.type != SHT_SYMTAB:
                continue
            if tab.link >= len(self.sections):
                raise ElfError("symbol table links a missing string table")
            names = self.section_bytes(self.sections[tab.link])
            raw = self.section_bytes(tab)
            for i in range(_SYM.size, len(raw) - _SYM.size + 1, _SYM.size):
                name, info, other, shndx, _, _ = _SYM.unpack_from(raw, i)
                out.append((cstring(names, name), info, other, shndx))
        return out


def parse_small(data: bytes) -> SmallElf:
    header = parse_header(data, len(data))
    sections = (
        parse_sections(data[header.shoff : header.shoff + header.shnum * _SHDR.size], header.shnum, len(data))
        if header.shnum
        else []
    )
    if sections:
        names_sec = sections[header.shstrndx]
        sections = name_sections(sections, data[names_sec.offset : names_sec.file_end])
    return SmallElf(header, sections, data)


SECTION_HEADER_SIZE = _SHDR.size
PROGRAM_HEADER_SIZE = _PHDR.size
HEADER_SIZE = _HEADER.size


# ---- what the dynamic loader reads: smoke's load probe explains a failed dlopen with it ----

ET_REL = 1
ET_DYN = 3


@dataclass(frozen=True, slots=True)
class Dynamic:
    """A shared library's ELF type and machine, and the names its dynamic section holds."""

    type: int
    machine: int
    needed: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    soname: str | None = None


def read_dynamic(f: BinaryIO, size: int) -> Dynamic:
    """Type, machine, NEEDED, RUNPATH, RPATH and SONAME of a 64-bit little-endian ELF file.

    Raises ElfError for what is not such an ELF (E020 for another class or byte order)."""
    f.seek(0)
    header = parse_header(f.read(HEADER_SIZE), size)
    f.seek(header.phoff)
    segments = parse_segments(f.read(header.phnum * PROGRAM_HEADER_SIZE), header.phnum, size)
    dynamic = next((s for s in segments if s.type == PT_DYNAMIC), None)
    if dynamic is None:
        return Dynamic(header.type, header.machine)
    f.seek(dynamic.offset)
    entries = dynamic_entries(f.read(dynamic.filesz))
    strtab = next((v for t, v in entries if t == DT_STRTAB), None)
    base = vaddr_to_offset(segments, strtab) if strtab is not None else None
    if base is None:
        return Dynamic(header.type, header.machine)

    def string(offset: int) -> str:
        f.seek(base + offset)
        return cstring(f.read(4096), 0)

    def paths(tag: int) -> tuple[str, ...]:
        return tuple(p for t, v in entries if t == tag for p in string(v).split(":") if p)

    return Dynamic(
        header.type,
        header.machine,
        tuple(string(v) for t, v in entries if t == DT_NEEDED),
        paths(DT_RUNPATH),
        paths(DT_RPATH),
        next((string(v) for t, v in entries if t == DT_SONAME), None),
    )


__all__ = [
    "cstring",
    "Dynamic",
    "dynamic_entries",
    "ElfError",
    "EM_AMDGPU",
    "EM_CUDA",
    "ET_DYN",
    "ET_REL",
    "Header",
    "check_elf32_header",
    "is_elf",
    "is_elf32_host",
    "MAX_SECTIONS",
    "name_sections",
    "parse_header",
    "parse_sections",
    "parse_segments",
    "parse_small",
    "PROGRAM_HEADER_SIZE",
    "PT_DYNAMIC",
    "PT_LOAD",
    "read_dynamic",
    "Section",
    "SECTION_HEADER_SIZE",
    "Segment",
    "SHT_NOBITS",
    "SHT_STRTAB",
    "SHT_SYMTAB",
    "vaddr_to_offset",
]
