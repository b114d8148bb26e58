"""Windows libraries (PE/COFF DLLs and .pyd modules), read in place like ELF.

A PE image names its sections in a table near its start, so the section table, the
import directory and the data directories are known before the first section passes.
The device code itself is found by the same forward scan as in ELF libraries (scan.py):
containers anywhere in the file (loaded sections, header slack, file-alignment padding,
the overlay after the last section), walked and verified as they pass. Sections
are then handed to the ELF path's attribution under the names it knows (linkers cut
PE section names to 8 characters: `.nv_fatb` is `.nv_fatbin`, `.nvFatBi` holds the
`.nvFatBinSegment` wrapper records), so roles, accounting and wrapper checks are the
same. Imports are the DLL counterpart of DT_NEEDED (cudart64_13.dll, nvcuda.dll).

Layout from the PE/COFF specification; every offset and count is checked before use,
and a malformed image raises PeError (finding E021).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from ..errors import ArchauditError
from ..findings import Code
from ..model import Container, Library, Problem
from . import attribution, elf, records, scan, search, stream

MALFORMED = Code.E021
UNSUPPORTED = Code.E020
DOS_MAGIC = b"MZ"
PE_SIGNATURE = b"PE\x00\x00"
PE32, PE32_PLUS = 0x10B, 0x20B
MACHINES = {0x14C: "x86", 0x8664: "x86-64", 0xAA64: "arm64", 0xA641: "arm64ec", 0x1C4: "arm"}
HEADERS_MAX = 4 << 20  # DOS stub, PE header and section table must lie in the first 4 MiB
MAX_SECTIONS = 0xFFFF
DIR_IMPORT, DIR_DELAY_IMPORT = 1, 13
SCN_EXECUTE, SCN_READ, SCN_WRITE = 0x20000000, 0x40000000, 0x80000000
NAMES_WINDOW = 64 << 10  # bytes after an import table kept in the hope its DLL names are there
MAX_IMPORTS = 4096
SYMBOL_SIZE = 18  # a COFF symbol record; the string table follows the symbols
CONTAINER_ALIGN = 16  # MSVC places each fatbin container in .nv_fatb on a 16-byte boundary
WRAPPER_BYTES_MAX = 1 << 20  # a wrapper section's bytes are read whole up to this (catboost 1.2.10: 2,804)


def msvc_slack(size: int) -> int:
    """The zero bytes after a container of ``size`` bytes in a DLL's .nv_fatb: nvcc's host array
    for it holds 6/5 of the container, rounded up to 16 bytes, the rest zeros (all 76 containers
    of catboost 1.2.10's _catboost.pyd, 45 MB of its 270 MB .nv_fatb, end exactly there)."""
    slot = (size * 6 + 4) // 5
    return (slot + 15) // 16 * 16 - size


_COFF = struct.Struct("<HHIIIHH")
_SECTION = struct.Struct("<8sIIIIIIHHI")
_IMPORT = struct.Struct("<IIIII")  # OriginalFirstThunk, TimeDateStamp, ForwarderChain, Name, FirstThunk
_DELAY = struct.Struct("<IIIIIIII")  # Attributes, DllName, ModuleHandle, IAT, INT, BoundIAT, UnloadIAT, Time

# The names nvcc, MSVC and clang give device-code sections in ELF, as PE linkers cut them.
CANONICAL = {
    ".nv_fatb": ".nv_fatbin",
    ".nvFatBi": ".nvFatBinSegment",
    "__nv_rel": "__nv_relfatbin",
    ".hip_fat": ".hip_fatbin",
    ".hipFatB": ".hipFatBinSegment",
}


class PeError(ArchauditError):
    """A malformed (E021) or unsupported (E020: 32-bit) PE image: its device code cannot be
    located, so it is unverified."""

    default_code = MALFORMED


@dataclass(frozen=True, slots=True)
class Section:
    name: str  # as the image names it: ".nv_fatb", or a long name from the string table
    virtual_size: int
    rva: int
    raw_size: int
    raw_offset: int
    characteristics: int

    @property
    def loaded_size(self) -> int:
        """File bytes the loader maps: the raw data, cut to the virtual size when that is smaller
        (the rest of the raw data is file-alignment padding)."""
        if self.virtual_size and self.virtual_size < self.raw_size:
            return self.virtual_size
        return self.raw_size

    @property
    def elf_flags(self) -> int:
        """The section's access as ELF segment flags (PF_X 1, PF_W 2, PF_R 4)."""
        c = self.characteristics
        return (1 if c & SCN_EXECUTE else 0) | (2 if c & SCN_WRITE else 0) | (4 if c & SCN_READ else 0)


@dataclass(frozen=True, slots=True)
class Headers:
    machine: int
    optional_magic: int
    image_base: int
    size_of_headers: int
    directories: tuple[tuple[int, int], ...]  # (rva, size) per data directory
    sections: tuple[Section, ...]
    string_table: int  # file offset of the COFF string table (long section names); 0: none

    @property
    def machine_name(self) -> str:
        return MACHINES.get(self.machine, f"machine 0x{self.machine:x}")

    def directory(self, index: int) -> tuple[int, int]:
        return self.directories[index] if index < len(self.directories) else (0, 0)

    def rva_to_offset(self, rva: int) -> int | None:
        """The file offset holding the byte the loader maps at `rva`, or None (zero fill, or no
        section there)."""
        if 0 <= rva < self.size_of_headers:
            return rva
        for s in self.sections:
            if s.rva <= rva < s.rva + s.loaded_size:
                return s.raw_offset + (rva - s.rva)
        return None


def is_pe(head: bytes) -> bool:
    return head[:2] == DOS_MAGIC


def headers_extent(head: bytes) -> int:
    """How many bytes from the file start parse_headers needs, from the first 64 bytes and
    (once they are there) the COFF header. Call again with more bytes until it stops growing."""
    if len(head) < 64:
        return 64
    lfanew = int.from_bytes(head[0x3C:0x40], "little")
    need = lfanew + 4 + _COFF.size
    if len(head) < need:
        return need
    nsections = int.from_bytes(head[lfanew + 6 : lfanew + 8], "little")
    opt_size = int.from_bytes(head[lfanew + 20 : lfanew + 22], "little")
    return need + opt_size + nsections * _SECTION.size


def parse_headers(data: bytes, file_size: int) -> Headers:
    """The PE headers and section table from the file's first bytes (headers_extent of them)."""
    if len(data) < 64 or not is_pe(data):
        raise PeError("not a PE image (no MZ header)")
    lfanew = int.from_bytes(data[0x3C:0x40], "little")
    if lfanew < 4 or lfanew + 4 + _COFF.size > min(file_size, HEADERS_MAX):
        raise PeError(f"PE header offset 0x{lfanew:x} lies outside the file's headers")
    if len(data) < lfanew + 4 + _COFF.size:
        raise PeError("PE header is truncated")
    if data[lfanew : lfanew + 4] != PE_SIGNATURE:
        raise PeError("no PE signature: an MS-DOS program, not a Windows library")
    machine, nsections, _, symtab, nsymbols, opt_size, _ = _COFF.unpack_from(data, lfanew + 4)
    opt = lfanew + 4 + _COFF.size
    table = opt + opt_size
    if table + nsections * _SECTION.size > min(file_size, HEADERS_MAX):
        raise PeError("section table lies outside the file's headers")
    if len(data) < table + nsections * _SECTION.size:
        raise PeError("section table is truncated")
    if opt_size < 2:
        raise PeError("no optional header: an object file, not an image")
    magic = int.from_bytes(data[opt : opt + 2], "little")
    base_at, count_at, dirs_at, base_size = _optional_layout(magic)
    if opt_size < dirs_at:
        raise PeError(f"optional header of {opt_size} bytes is too short for its magic")
    image_base = int.from_bytes(data[opt + base_at : opt + base_at + base_size], "little")
    size_of_headers = int.from_bytes(data[opt + 60 : opt + 64], "little")
    declared = int.from_bytes(data[opt + count_at : opt + count_at + 4], "little")
    # The loader reads at most 16 directories, and only those the optional header holds.
    count = min(declared, 16, (opt_size - dirs_at) // 8)
    directories = tuple(struct.unpack_from("<II", data, opt + dirs_at + 8 * i) for i in range(count))
    sections = _section_table(data, table, nsections, file_size)
    strings = symtab + nsymbols * SYMBOL_SIZE if symtab else 0
    if any(s.name.startswith("/") for s in sections) and (not strings or strings + 4 > file_size):
        raise PeError("a long section name points into a string table the file does not have")
    return Headers(machine, magic, image_base, min(size_of_headers, file_size), directories, tuple(sections), strings)


def _optional_layout(magic: int) -> tuple[int, int, int, int]:
    """Where the optional header of an image of this magic holds its image base, its count of
    data directories and the directories, and the image base's size (PE format spec)."""
    if magic == PE32:  # a 32-bit image: a 4-byte image base after BaseOfData, 16 bytes less before
        return 28, 92, 96, 4
    if magic == PE32_PLUS:
        return 24, 108, 112, 8
    raise PeError(f"optional header magic 0x{magic:x} is neither PE32 nor PE32+")


def _section_table(data: bytes, table: int, nsections: int, file_size: int) -> list[Section]:
    """The section table's entries, each whose raw data lies inside the file."""
    sections = []
    for i in range(nsections):
        raw_name, vsize, rva, raw_size, raw_offset, _, _, _, _, chars = _SECTION.unpack_from(
            data, table + i * _SECTION.size
        )
        if raw_size and raw_offset + raw_size > file_size:
            raise PeError(f"section {i} ({_short_name(raw_name)}) lies outside the file")
        sections.append(Section(_short_name(raw_name), vsize, rva, raw_size if raw_offset else 0, raw_offset, chars))
    return sections


def _short_name(raw: bytes) -> str:
    return raw.split(b"\x00", 1)[0].decode("utf-8", errors="replace")


def long_name_offsets(h: Headers) -> list[int]:
    """String-table offsets of the sections' long names ("/123"): each name is read from the
    LONG_NAME bytes there (section names are short; the table itself may be large)."""
    return sorted({_long_offset(s.name) for s in h.sections if s.name.startswith("/")})


LONG_NAME = 256


def _long_offset(name: str) -> int:
    digits = name[1:]
    if not digits.isdigit() or not digits.isascii():
        raise PeError(f"section name {name!r} is neither a name nor a string-table offset")
    return int(digits)


def name_sections(h: Headers, strings: dict[int, bytes]) -> Headers:
    """The sections with long names resolved: `strings` holds, per string-table offset, the
    bytes there (up to LONG_NAME of them)."""
    out = []
    for i, s in enumerate(h.sections):
        name = s.name
        if name.startswith("/"):
            at = _long_offset(name)
            if at < 4 or not strings.get(at):
                raise PeError(f"section {i}: long name {name!r} lies outside the string table")
            name = elf.cstring(strings[at], 0, LONG_NAME)
        if not name:
            raise PeError(f"section {i} has no name")
        out.append(replace(s, name=name))
    return replace(h, sections=tuple(out))


def import_name_rvas(table: bytes, delay: bool, image_base: int, declared: int) -> list[int]:
    """RVAs of the DLL names an import (or delay-import) directory lists, up to its terminator.
    A directory declaring room for records but listing none is damaged (a linker omits the
    directory of a DLL that imports nothing): its imports would be lost unseen."""
    rec = _DELAY if delay else _IMPORT
    out: list[int] = []
    for at in range(0, len(table) - rec.size + 1, rec.size):
        fields = rec.unpack_from(table, at)
        if not any(fields):
            if not out and declared >= 2 * rec.size:
                raise PeError(f"{'delay-' * delay}import directory of {declared} bytes lists no DLL")
            return out
        if len(out) >= MAX_IMPORTS:
            raise PeError(f"import directory lists more than {MAX_IMPORTS} DLLs")
        if delay:
            attributes, name = fields[0], fields[1]
            # Version-1 delay descriptors (attribute bit 0 clear) hold virtual addresses.
            out.append(name if attributes & 1 else name - image_base)
        else:
            out.append(fields[3])
    raise PeError(("delay-" if delay else "") + "import directory has no terminating entry")


# ---- the library: headers, the shared forward scan, attribution ----

Chunks = Callable[[], Iterable[bytes]]


def read(path: str, size: int, src: stream.Source, chunks: Chunks, settings: records.ScanSettings) -> Library:
    """Inventory one PE image from the scanner's window over its stream (stream.Source)."""
    try:
        h = _read_headers(src, size)
        long_names = long_name_offsets(h)
    except PeError as e:
        what = "malformed PE: " if e.code == MALFORMED else ""
        return Library(path, size, "pe", problems=(Problem(e.code, f"{what}{e}"),))
    strings = {at: src.capture(h.string_table + at, h.string_table + at + LONG_NAME) for at in long_names}
    tables = _import_tables(h, src)
    if isinstance(tables, Problem):
        return Library(path, size, "pe", problems=(tables,))

    segments = tuple(
        elf.Segment(elf.PT_LOAD, s.raw_offset, h.image_base + s.rva, s.loaded_size, s.elf_flags)
        for s in h.sections
        if s.loaded_size
    )
    wrapper_bytes = {
        s.raw_offset: src.capture(s.raw_offset, s.raw_offset + s.loaded_size)
        for s in h.sections
        if s.name in WRAPPER_SECTIONS_PE and 0 < s.loaded_size <= WRAPPER_BYTES_MAX
    }
    settings = replace(settings, container_slack=msvc_slack)
    state = scan.LibraryScan(path, size, settings).run(src, _zones(h, size))
    problems = state.problems
    notes: list[str] = []
    try:
        h = name_sections(h, {at: bytes(b) for at, b in strings.items()})
        needed = _imports(h, tables, chunks, size, notes)
    except (PeError, elf.ElfError) as e:
        problems.append(Problem(MALFORMED, f"malformed PE: {e}"))
        h = replace(h, sections=())
        needed = ()
    sections = [
        elf.Section(
            0,
            1 if s.loaded_size else elf.SHT_NOBITS,
            0,
            h.image_base + s.rva,
            s.raw_offset,
            s.loaded_size,
            0,
            CANONICAL.get(s.name, s.name),
        )
        for s in h.sections
    ]
    containers, placed = attribution.attribute(state, sections, segments, alignment=CONTAINER_ALIGN, slack=msvc_slack)
    problems += placed
    problems += _unread_wrappers(h, state, {at: bytes(b) for at, b in wrapper_bytes.items()})
    pe_name = {c: p for p, c in CANONICAL.items()}
    containers = [_in_section(c, h) for c in containers]
    problems = [_pe_names(p, pe_name, h) for p in problems]
    return Library(
        path,
        size,
        "pe",
        tuple(containers),
        needed,
        (),
        tuple(state.claims),
        tuple(problems),
        tuple(notes),
        tuple(state.linkers),
        tuple(state.statements),
        tuple(state.runtimes),
    )


def _read_headers(src: stream.Source, size: int) -> Headers:
    """The headers, read from the stream's window as far as they say they reach (within
    HEADERS_MAX). Raises PeError."""
    need = 64
    while True:
        src.ensure(min(size, need))
        grown = headers_extent(bytes(src.buf[: min(size, need, HEADERS_MAX)]))
        if grown <= need or grown > HEADERS_MAX or need >= size:
            break
        need = grown
    return parse_headers(bytes(src.buf[: min(size, need, HEADERS_MAX)]), size)


def _import_tables(h: Headers, src: stream.Source) -> list[tuple[bool, int, int, bytearray]] | Problem:
    """The import and delay-import directories as (delay, file offset, declared size, bytes
    captured from the stream), or the problem of a directory that lies in no section."""
    tables: list[tuple[bool, int, int, bytearray]] = []
    for index, delay in ((DIR_IMPORT, False), (DIR_DELAY_IMPORT, True)):
        rva, dir_size = h.directory(index)
        if not rva:
            continue
        at = h.rva_to_offset(rva)
        if at is None:
            return Problem(
                MALFORMED, f"malformed PE: {'delay-' * delay}import directory at RVA 0x{rva:x} is in no section"
            )
        # the descriptors up to the most a table may list, then the names that usually follow
        room = min(dir_size, (MAX_IMPORTS + 1) * (_DELAY if delay else _IMPORT).size)
        tables.append((delay, at, dir_size, src.capture(at, at + room + NAMES_WINDOW)))
    return tables


def _zones(h: Headers, size: int) -> list[search.Zone]:
    """Which patterns to search where. Every byte is searched for containers, as in ELF
    libraries: a library may load device code it reads from its own file (cuModuleLoadData),
    so bytes no section maps (header slack, raw data past a section's virtual size, the
    overlay after the last section, where an Authenticode certificate or debug data lie) are
    searched too, and a container found there is judged and lies in no section (E011; an
    offload bundle E033);
    wrapper records there count only against a wrapper section whose raw data they are in.
    Code sections are searched for containers, embedded arch lists (string literals: a
    linker may merge .rdata into .text) and the version a statically linked CUDA runtime returns
    (records.RUNTIME_BY_MACHINE, x86-64 images); every other section also for wrapper records, which
    the loader relocates in read-only sections too (MSVC's .nvFatBi is read-only), and
    read-only ones for embedded arch lists."""
    unmapped = scan.LibraryScan.patterns(code=True, data=True, strings=False)  # wrappers: _unread_wrappers
    code = scan.LibraryScan.patterns(code=True, machine=h.machine in records.RUNTIME_BY_MACHINE, isa=h.machine)
    constant = scan.LibraryScan.patterns(code=True, data=True)
    writable = scan.LibraryScan.patterns(code=True, data=True, strings=False)  # string literals are in .rdata
    spans = sorted(
        (
            s.raw_offset,
            s.raw_offset + s.loaded_size,
            code if s.characteristics & SCN_EXECUTE else writable if s.characteristics & SCN_WRITE else constant,
        )
        for s in h.sections
        if s.loaded_size
    )
    zones: list[search.Zone] = []
    pos = 0
    for start, stop, patterns in spans:
        start = max(start, pos)
        if stop <= start:
            continue
        if start > pos:
            zones.append(search.Zone(pos, start, unmapped))
        zones.append(search.Zone(start, stop, patterns))
        pos = stop
    if pos < size:
        zones.append(search.Zone(pos, size, unmapped))
    return zones


WRAPPER_SIZE = 24  # a __fatBinC_Wrapper_t / __hip_fatbin_wrapper record
WRAPPER_PAD = 32  # MinGW pads the records to 32 bytes (MSVC and lld-link: none)
WRAPPER_SECTIONS = {".nvFatBinSegment": (Code.E011, "fatbin"), ".hipFatBinSegment": (Code.E030, "HIP")}
WRAPPER_SECTIONS_PE = tuple(short for short, name in CANONICAL.items() if name in WRAPPER_SECTIONS)


def _records_and_padding(start: int, mapped: list[int], size: int, blob: bytes | None) -> bool:
    """Whether a wrapper section's mapped bytes are its records, from its start, and padding:
    24-byte records (MSVC, lld-link; MinGW pads the section to 32 bytes), or records each padded
    to 32 bytes (MSVC's 32-byte wrapper records, catboost 1.2.10: 76 of them and 372 zero bytes
    after). Where the section's bytes were read (``blob``), any zero bytes may pad it: every byte
    outside a record must be zero; otherwise the padding is under WRAPPER_PAD bytes."""
    for stride in (WRAPPER_SIZE, WRAPPER_PAD):
        if mapped != list(range(start, start + stride * len(mapped), stride)):
            continue
        if stride == WRAPPER_SIZE and size - WRAPPER_SIZE * len(mapped) < WRAPPER_PAD:
            return True
        if blob is not None and len(blob) >= size:
            rest = bytearray(blob[:size])
            for at in mapped:
                rest[at - start : at - start + WRAPPER_SIZE] = bytes(WRAPPER_SIZE)
            if not any(rest):
                return True
    return False


def _unread_wrappers(h: Headers, found: records.ScanResult, blobs: dict[int, bytes] | None = None) -> list[Problem]:
    """The wrapper records a section holds are what tells a container the runtime registers
    from bytes that merely look like data: every record the loader maps must be read.
    MSVC and lld-link size .nvFatBi (.hipFatB) to its records, 24 bytes each from its start
    (or each padded to 32 bytes, then zeros: catboost 1.2.10), all in the file (no real DLL has
    zero fill there); MinGW pads them to 32 bytes. So a wrapper section whose mapped bytes are
    not all in the file, are not records from its start and padding (``_records_and_padding``),
    or whose records continue past the virtual size, hides what it registers (a container
    damaged beside it would vanish unseen): E011 (E030 for HIP)."""
    out = []
    for s in h.sections:
        kind = WRAPPER_SECTIONS.get(CANONICAL.get(s.name, s.name))
        if kind is None:
            continue
        code, what = kind
        records = found.wrappers if code == Code.E011 else found.hip_wrappers
        in_file = [w for w in records if s.raw_offset <= w.offset < s.raw_offset + s.raw_size]
        mapped = sorted(w.offset for w in in_file if w.offset + WRAPPER_SIZE <= s.raw_offset + s.loaded_size)
        size = s.virtual_size or s.raw_size
        why = ""
        if s.virtual_size > s.raw_size:
            why = f"{s.virtual_size - s.raw_size} of its {s.virtual_size} bytes are not in the file (zero fill)"
        elif not _records_and_padding(s.raw_offset, mapped, size, (blobs or {}).get(s.raw_offset)):
            why = f"its {size} bytes are not {len(mapped)} {what} wrapper records and padding"
        elif len(in_file) > len(mapped):
            why = f"{len(in_file) - len(mapped)} {what} wrapper records lie past its virtual size"
        if why:
            out.append(Problem(code, f"section {s.name}: {why}, so what it registers cannot be checked", s.raw_offset))
    return out


def _in_section(c: Container, h: Headers) -> Container:
    """The container with the section name the image itself uses."""
    if not c.section:
        return c
    for s in h.sections:
        if s.raw_offset <= c.offset < s.raw_offset + s.loaded_size:
            return replace(c, section=s.name)
    return c


def _pe_names(p: Problem, pe_name: dict[str, str], h: Headers) -> Problem:
    """Messages of the shared attribution speak of ELF names; say the image's own."""
    present = {s.name for s in h.sections}
    message = p.message
    for canonical, short in pe_name.items():
        if short in present and canonical + ":" in message:
            message = message.replace(canonical + ":", short + ":")
        if short in present and f"section {canonical}" in message:
            message = message.replace(f"section {canonical}", f"section {short}")
    return p if message == p.message else replace(p, message=message)


def _imports(
    h: Headers, tables: list[tuple[bool, int, int, bytearray]], chunks: Chunks, size: int, notes: list[str]
) -> tuple[str, ...]:
    needed: list[str] = []
    for delay, at, declared, blob in tables:
        rvas = import_name_rvas(bytes(blob), delay, h.image_base, declared)
        offsets = []
        for rva in rvas:
            off = h.rva_to_offset(rva)
            if off is None:
                raise PeError(f"imported DLL name at RVA 0x{rva:x} is in no section")
            offsets.append(off)
        if not offsets:
            continue
        lo, hi = min(offsets), min(size, max(offsets) + 256)
        if at <= lo and hi <= at + len(blob):
            window, base = bytes(blob), at
        elif hi - lo <= NAMES_WINDOW * 16:
            notes.append("second pass: imported DLL names lie away from the import directory")
            window, base = stream.fetch(chunks, lo, hi, size), lo
        else:
            raise PeError("imported DLL names are scattered over more than 1 MiB")
        for off in offsets:
            name = elf.cstring(window, off - base, 256)
            if not name or not name.isprintable() or "\ufffd" in name:
                raise PeError(f"imported DLL name at 0x{off:x} is {'empty' if not name else 'not text'}")
            needed.append(name)
    return tuple(needed)


__all__ = [
    "Chunks",
    "Headers",
    "headers_extent",
    "HEADERS_MAX",
    "import_name_rvas",
    "is_pe",
    "LONG_NAME",
    "long_name_offsets",
    "MALFORMED",
    "MAX_IMPORTS",
    "name_sections",
    "NAMES_WINDOW",
    "parse_headers",
    "PeError",
    "read",
    "SYMBOL_SIZE",
]
