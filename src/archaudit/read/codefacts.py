"""What decoded device code says: a cubin's target, kernels, toolkit and unresolved
symbols, and PTX text's target, version and entries.

The cubin tables are read by the compiled reader where it is built (archaudit._speedups), else
by `_tables`, the Python reference; fatbin.py owns the container and entry format around them.
"""

from __future__ import annotations

import array
import itertools
import re
import struct
import sys
from collections.abc import Callable

from ..findings import Code
from . import elf, native
from .fatbin import FatbinError

_compiled = native.active  # the compiled cubin reader, where there is one

_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
# PTX directives as ptxas reads them: comments (`//` to the end of the line, `/* ... */`) may
# stand wherever white space may, so `.entry /*x*/ name` is a kernel and a `.target` inside a
# comment is not the directive. The first real .target counts, and it must be well formed: a
# malformed one is not skipped in favour of a later one (ptxas would reject the text).
_PTX_GAP = rb"(?:[ \t\r\n]|//[^\n]*|/\*.*?\*/)"
_PTX_HEAD = re.compile(rb"//[^\n]*|/\*.*?\*/|(\.version|\.target)\b", re.DOTALL)
_PTX_TARGET_NAME = re.compile(_PTX_GAP + rb"*([A-Za-z0-9_]+)" + _PTX_GAP + rb"*(?:,|$|\.|\n)", re.DOTALL)
_PTX_VERSION = re.compile(_PTX_GAP + rb"+(\d{1,9})\.(\d{1,9})\b", re.DOTALL)
_PTX_ENTRY = re.compile(rb"\.entry" + _PTX_GAP + rb"+([A-Za-z_$%][A-Za-z0-9_$]*)", re.DOTALL)
_PTX_COMMENT = re.compile(rb"//[^\n]*|/\*.*?\*/", re.DOTALL)


# The `a` (arch-specific) marker of a cubin: CUDA 12.x sets an e_flags bit (0x800 in ELF ABI 7,
# 0x8 in ABI 8); CUDA 13 leaves it clear and writes .nv.compat attribute 0x09 = 1 instead.
EF_CUDA_ACCELERATORS_V7 = 0x800
EF_CUDA_ACCELERATORS_V8 = 0x8
_BANK = b".nv.constant0."


def _words(data: bytes, code: str) -> array.array[int]:
    """Little-endian unsigned words of `data` (`code`: H, I or Q), as an array."""
    out = array.array(code)
    out.frombytes(data)
    if sys.byteorder != "little":
        out.byteswap()
    return out


_FUNCTION = bytes(1 if b & 0xF == 2 else 0 for b in range(256))  # st_info: STT_FUNC


def cubin_facts(data: bytes | memoryview) -> tuple[str, tuple[str, ...], tuple[int, int] | None]:
    """(target from e_flags, kernel names, toolkit version) of a CUDA cubin.

    The tables are read by the compiled reader where it is built (archaudit._speedups), else by
    `_tables`, which stays the reference: the compiled one gives the same answer or none, and
    `_tables` then judges the input itself. Nothing returned refers to `data`."""
    h = elf.parse_header(data, len(data))
    if h.machine != elf.EM_CUDA:
        raise FatbinError(f"not a CUDA ELF (e_machine {h.machine})", code=Code.E014)
    arch = (h.flags >> 8) & 0xFF if h.abiversion >= 8 else h.flags & 0xFF
    if not h.shnum:
        raise FatbinError("cubin has no section table", code=Code.E014)
    found = None if _compiled is None else _compiled.cubin_tables(data, h.shoff, h.shnum, h.shstrndx)
    kernels, compat, note = _tables(data, h) if found is None else found
    accelerated = h.flags & (EF_CUDA_ACCELERATORS_V8 if h.abiversion >= 8 else EF_CUDA_ACCELERATORS_V7)
    marked = compat is not None and _compat_arch_specific(compat)
    suffix = "a" if accelerated or marked else ""
    toolkit = _toolkit(note) if note is not None else None
    return f"sm_{arch}{suffix}", tuple(sorted(set(kernels))), toolkit


def _tables(data: bytes | memoryview, h: elf.Header) -> tuple[list[str], bytes | None, bytes | None]:
    """(kernel names as found, the .nv.compat section, the .note.nv.tkinfo section) of a cubin.

    Written for speed where no compiled reader is built: the section and symbol tables are
    read as columns of words, only function symbols are visited, and only kernels have their
    names decoded. The tables are copied out of a memoryview."""
    table = bytes(data[h.shoff : h.shoff + h.shnum * _SHDR.size])
    if len(table) != h.shnum * _SHDR.size:
        raise FatbinError("cubin section table is truncated", code=Code.E014)
    words, longs = _words(table, "I"), _words(table, "Q")
    sec_name, sec_type, sec_link = words[0::16], words[1::16], words[10::16]
    sec_offset, sec_size = longs[3::8], longs[4::8]
    count = h.shnum

    def section(i: int) -> bytes:
        return bytes(data[sec_offset[i] : sec_offset[i] + sec_size[i]])

    names = section(h.shstrndx)
    # .nv.compat (the 'a' suffix) is found by name: the name table must be a string table
    # (type SHT_STRTAB, first and last byte NUL), not whatever its header points at
    if not h.shstrndx or sec_type[h.shstrndx] != elf.SHT_STRTAB or names[:1] != b"\0" or names[-1:] != b"\0":
        raise FatbinError("cubin has no valid section name table", code=Code.E014)

    # A kernel's parameters live in its own constant bank, section .nv.constant0.<kernel>:
    # device functions have none. With the entry flag (STO_CUDA_ENTRY) cleared, the driver still
    # launches the kernel, so either mark names it. The banks are listed only when a function
    # without the flag needs them (nvcc marks its kernels, so most cubins never do).
    banks: set[bytes] | None = None
    kernels: list[str] = []
    for i in range(count):
        if sec_type[i] != elf.SHT_SYMTAB:
            continue
        if sec_link[i] >= count:
            raise FatbinError("cubin symbol table links a missing string table", code=Code.E014)
        found, banks = _symtab_kernels(section(i), section(sec_link[i]), names, sec_name, banks)
        kernels += found
    return (
        kernels,
        _named(names, sec_name, section, b".nv.compat"),
        _named(names, sec_name, section, b".note.nv.tkinfo"),
    )


def _symtab_kernels(
    raw: bytes, strs: bytes, names: bytes, sec_name: array.array[int], banks: set[bytes] | None
) -> tuple[list[str], set[bytes] | None]:
    """The kernel names one symbol table holds (its string table `strs`), and the constant banks
    as listed so far (None until a function without the entry flag needs them)."""
    count = len(sec_name)
    raw = raw[: len(raw) - len(raw) % _SYM.size]
    sym_name, sym_shndx = _words(raw, "I")[0::6], _words(raw, "H")[3::12]
    other = raw[5 :: _SYM.size]
    kernels = []
    cstring = elf.cstring
    # Kernels are functions (static ones are local) marked as entries (STO_CUDA_ENTRY)
    # in their own .text.<name> section.
    for j in itertools.compress(range(len(other)), raw[4 :: _SYM.size].translate(_FUNCTION)):
        shndx = sym_shndx[j]
        if not 0 < shndx < count or not names.startswith(b".text.", sec_name[shndx]):
            continue
        if other[j] & 0x10:
            kernels.append(cstring(strs, sym_name[j]))
            continue
        if banks is None:
            banks = {names[o + len(_BANK) : names.find(b"\0", o)] for o in sec_name if names.startswith(_BANK, o)}
        if banks:
            text_name = names[sec_name[shndx] + 6 : names.find(b"\0", sec_name[shndx])]
            if text_name in banks and strs.startswith(text_name + b"\0", sym_name[j]):
                kernels.append(cstring(strs, sym_name[j]))
    return kernels, banks


def _named(names: bytes, sec_name: array.array[int], section: Callable[[int], bytes], n: bytes) -> bytes | None:
    """The contents of the section named `n`; None when there is none."""
    at = names.find(b"\0" + n + b"\0")
    if at < 0 and names.startswith(n + b"\0"):
        at = -1
    elif at < 0:
        return None
    try:
        return section(sec_name.index(at + 1))
    except ValueError:
        return None


def cubin_defines_nothing(data: bytes | memoryview) -> bool:
    """Whether a cubin holds no code and names nothing: no ``.text`` section and no symbol but
    section symbols (nvcc's cubin for a translation unit with host code only; NPP 13.2's
    libnppc.so.13 ships one). Such code defines no kernel. Asked only of cubins in which no
    kernel was found; unreadable tables say False (the container stays judged: fail closed)."""
    try:
        h = elf.parse_header(data, len(data))
        table = bytes(data[h.shoff : h.shoff + h.shnum * _SHDR.size])
        if not h.shnum or len(table) != h.shnum * _SHDR.size or not 0 < h.shstrndx < h.shnum:
            return False
        shdrs = [_SHDR.unpack_from(table, i * _SHDR.size) for i in range(h.shnum)]
        names = bytes(data[shdrs[h.shstrndx][4] : shdrs[h.shstrndx][4] + shdrs[h.shstrndx][5]])
        for name, kind, _, _, offset, size, *_ in shdrs:
            if names.startswith(b".text", name):
                return False
            if kind == elf.SHT_SYMTAB:
                raw = bytes(data[offset : offset + size])
                for at in range(0, len(raw) - _SYM.size + 1, _SYM.size):
                    info = _SYM.unpack_from(raw, at)[1]
                    if info & 0xF not in (0, 3):  # STT_NOTYPE, STT_SECTION: no function, no object
                        return False
        return True
    except (elf.ElfError, struct.error, IndexError):
        return False


# Undefined symbols every relocatable cubin has: nvlink's unified function and data tables
# and the reserved shared memory base. The driver supplies them when it loads the object alone.
_LINKER_SYMBOLS = re.compile(r"__U[FD]T(_OFFSET|_CANONICAL|_END)?|\.nv\.reservedSmem\..*")
# A hand-assembled kernel's references to its own constant bank and shared-memory relocation
# (cuBLASLt's volta_* and cuDNN's *_cudnn_volta_* cubins for 5.0-8.9 name them undefined beside
# the kernel and its .nv.constant0 section): they resolve within the object, not by a link.
_OWN_KERNEL_SYMBOLS = re.compile(r"(?:\.nv\.constant0\.|shmem_reloc_)(.+)")


def cubin_unresolved(data: bytes | memoryview) -> tuple[str, ...]:
    """The undefined symbols of a relocatable cubin (ELF type ET_REL) that only a link supplies.

    Empty for an executable cubin: nvlink resolved everything. A relocatable one that calls
    code it does not carry (cuSPARSE's user operators, NCCL's device library) names that code."""
    if len(data) < 64 or bytes(data[16:18]) != b"\x01\x00":
        return ()
    h = elf.parse_header(data, len(data))
    table = data[h.shoff : h.shoff + h.shnum * _SHDR.size]
    secs = list(_SHDR.iter_unpack(table[: len(table) - len(table) % _SHDR.size]))
    out: list[str] = []
    for sec in secs:
        if sec[1] != elf.SHT_SYMTAB or sec[6] >= len(secs):
            continue
        strs = bytes(data[secs[sec[6]][4] : secs[sec[6]][4] + secs[sec[6]][5]])
        raw = data[sec[4] : sec[4] + sec[5]]
        symbols = list(_SYM.iter_unpack(raw[: len(raw) - len(raw) % _SYM.size]))
        defined: set[str] | None = None
        for name, info, _other, shndx, _value, _size in symbols:
            if shndx == 0 and name and info >> 4 in (1, 2):  # undefined, global or weak
                symbol = elf.cstring(strs, name)
                if _LINKER_SYMBOLS.fullmatch(symbol) or symbol in out:
                    continue
                own = _OWN_KERNEL_SYMBOLS.fullmatch(symbol)
                if own is not None:
                    if defined is None:
                        defined = {elf.cstring(strs, n) for n, _i, _o, x, _v, _s in symbols if x and n}
                    if own.group(1) in defined:
                        continue
                out.append(symbol)
    return tuple(out)


def _compat_arch_specific(raw: bytes) -> bool:
    for i in range(0, len(raw) - 3, 4):
        if raw[i + 1] == 0x09:
            return raw[i + 2] == 1
    return False


def _toolkit(text: bytes) -> tuple[int, int] | None:
    at = text.find(b"release ")
    if at < 0:
        return None
    tail = text[at + 8 : at + 16].split(b",")[0].split(b".")
    try:
        return int(tail[0]), int(tail[1])
    except (ValueError, IndexError):
        return None


def ptx_facts(text: bytes) -> tuple[str | None, tuple[int, int] | None, tuple[str, ...]]:
    """(first .target name as written, .version, .entry names) of PTX text.

    The target is None when there is no .target directive, "" when it names nothing."""
    target: str | None = None
    version: tuple[int, int] | None = None
    for m in _PTX_HEAD.finditer(text):  # the header: up to the first real .target
        if m.group(1) == b".version" and version is None:
            v = _PTX_VERSION.match(text, m.end())
            version = (int(v.group(1)), int(v.group(2))) if v else None
        elif m.group(1) == b".target":
            name = _PTX_TARGET_NAME.match(text, m.end())
            target = name.group(1).decode("ascii") if name else ""
            break
    return target, version, _ptx_entries(text)


def _ptx_entries(text: bytes) -> tuple[str, ...]:
    """Names of the .entry directives outside comments, in order."""
    found = [(m.start(), m.group(1)) for m in _PTX_ENTRY.finditer(text)]
    if not found:
        return ()
    if b"/*" not in text:  # nvcc's PTX: line comments alone, a `//` before it on its line
        if b"//" in text:
            found = [(at, n) for at, n in found if text.find(b"//", text.rfind(b"\n", 0, at) + 1, at) < 0]
    else:
        # One left-to-right pass, as ptxas reads them: whichever comment starts first holds what
        # follows, so a `/*` inside a `//` comment opens no block, nor a `//` inside a block a line.
        # Both lists are in text order: walk them together, keeping no list of comments.
        comments = _PTX_COMMENT.finditer(text)
        comment = next(comments, None)
        kept = []
        for at, name in found:
            while comment is not None and comment.end() <= at:
                comment = next(comments, None)
            if comment is None or comment.start() > at:
                kept.append((at, name))
        found = kept
    return tuple(n.decode("ascii", "replace") for _, n in found)


__all__ = [
    "cubin_defines_nothing",
    "cubin_facts",
    "cubin_unresolved",
    "ptx_facts",
    "EF_CUDA_ACCELERATORS_V7",
    "EF_CUDA_ACCELERATORS_V8",
]
