"""The ELF library reader: host libraries (the forward scan by segment, the dynamic section,
the section table at the end, attribution) and device ELF files (a cubin or an AMD code object).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..findings import Code
from ..model import CODE_OBJECT, SASS, STANDALONE, Container, Entry, Library, Problem
from . import codefacts, elf, fatbin, hip
from .attribution import attribute
from .decode import is_cuda_target
from .devicefiles import read_all
from .scan import LibraryScan, OpenFile
from .search import Zone
from .stream import HEAD, SHSTR_WINDOW, fetch


def read(f: OpenFile) -> Library:
    if elf.is_elf32_host(f.head):
        return _elf32(f)
    try:
        h = elf.parse_header(f.head, f.size)
    except elf.ElfError as e:
        words = "malformed ELF" if e.code == Code.E010 else "unsupported library format"
        return Library(f.path, f.size, "elf", problems=(Problem(e.code, f"{words}: {e}"),))
    if h.machine in (elf.EM_CUDA, elf.EM_AMDGPU):
        return _device_elf(f, h)
    return _host_elf(f, h)


def _device_elf(f: OpenFile, h: elf.Header) -> Library:
    path, size = f.path, f.size
    data = read_all(f.src, size, f.settings.max_payload)
    try:
        if h.machine == elf.EM_CUDA:
            target, kernels, toolkit = codefacts.cubin_facts(data)
            if not is_cuda_target(target):
                raise fatbin.FatbinError(f"cubin e_flags name no CUDA architecture ({target})", code=Code.E014)
            entry = Entry(
                "nvidia",
                SASS,
                target,
                (1, h.abiversion),
                "none",
                size,
                size,
                0,
                kernels=kernels,
                toolkit=toolkit,
                decoded=True,
                defines_nothing=not kernels and codefacts.cubin_defines_nothing(data),
            )
            fmt = "cubin"
        else:
            small = elf.parse_small(data)
            target = hip.target_from_elf(h.flags, h.abiversion)
            kernels = tuple(sorted({n[:-3] for n, *_ in small.symbols() if n.endswith(".kd")}))
            if h.abiversion not in hip.CO_VERSION:
                raise ValueError(f"code object ABI version {h.abiversion} is unknown")
            version = (hip.CO_VERSION[h.abiversion], 0)
            entry = Entry(
                "amd",
                CODE_OBJECT,
                target,
                version,
                "none",
                size,
                size,
                0,
                kernels=kernels,
                decoded=True,
                own_target=target,
                unloadable=not hip.has_load_segment(data),
            )
            fmt = "hsaco"
    except elf.ElfError as e:
        return Library(path, size, "cubin", problems=(Problem(e.code, str(e)),))
    except (fatbin.FatbinError, hip.Malformed) as e:
        return Library(path, size, "cubin", problems=(Problem(e.code, e.message),))
    except ValueError as e:
        return Library(path, size, "cubin", problems=(Problem(Code.E014, str(e)),))
    return Library(path, size, fmt, (Container(entry.vendor, STANDALONE, "", 0, size, (entry,)),))


def _elf32(f: OpenFile) -> Library:
    """A 32-bit little-endian host ELF (Compute Sanitizer ships x86 helpers for 32-bit programs).
    Its headers are not read, but every byte is searched for device code as in any library: one
    holding none is host code, verified; one holding any is unsupported (E020), for which of its
    containers loads is what its headers would say."""
    try:
        elf.check_elf32_header(f.head, f.size)
    except elf.ElfError as e:
        return Library(f.path, f.size, "elf", problems=(Problem(e.code, f"malformed ELF: {e}"),))
    found = LibraryScan(f.path, f.size, f.settings).run(f.src, _zones(f.size, ()))
    containers, _ = attribute(found, [], ())
    if containers or found.problems:
        return Library(
            f.path,
            f.size,
            "elf",
            problems=(
                Problem(
                    Code.E020,
                    f"unsupported library format: a 32-bit ELF carrying device code ({len(containers)} "
                    f"container(s)): its headers are not read, so what it loads is not verified",
                ),
                *found.problems,
            ),
        )
    return Library(
        f.path,
        f.size,
        "elf",
        notes=("32-bit ELF: its headers are not read; every byte was searched and holds no device code",),
    )


# ---- host ELF libraries ----


@dataclass
class _DynamicNames:
    """DT_NEEDED/DT_RUNPATH, gathered as the dynamic segment and its strings pass."""

    entries: list[tuple[int, int]] = field(default_factory=list)
    base: int = 0  # file offset of the dynamic string table
    lo: int = 0  # file offset of `strings`
    strings: bytearray | None = None
    seen: bool = False


def _host_elf(f: OpenFile, h: elf.Header) -> Library:
    path, size, src = f.path, f.size, f.src
    notes: list[str] = []
    ph_stop = h.phoff + h.phnum * elf.PROGRAM_HEADER_SIZE
    src.ensure(min(size, max(ph_stop, 64)))
    head_capture = src.capture(0, min(size, HEAD))
    segments: tuple[elf.Segment, ...] = ()
    if h.phnum and ph_stop <= HEAD:
        try:
            segments = elf.parse_segments(bytes(src.buf[h.phoff : ph_stop]), h.phnum, size)
        except elf.ElfError as e:
            return Library(path, size, "elf", problems=(Problem(e.code, f"malformed ELF: {e}"),))
    sh_start = h.shoff
    sh_stop = h.shoff + h.shnum * elf.SECTION_HEADER_SIZE
    table = src.capture(sh_start, sh_stop)
    names_window = src.capture(sh_start - SHSTR_WINDOW, sh_start)
    dyn = next((s for s in segments if s.type == elf.PT_DYNAMIC), None)
    dyn_names = _DynamicNames()

    def on_dynamic(raw: bytearray) -> None:
        # .dynstr usually precedes .dynamic, but patchelf moves it to the end of the file.
        entries = elf.dynamic_entries(bytes(raw))
        strtab = next((v for t, v in entries if t == elf.DT_STRTAB), None)
        base = elf.vaddr_to_offset(segments, strtab) if strtab is not None else None
        offs = [v for t, v in entries if t in (elf.DT_NEEDED, elf.DT_RPATH, elf.DT_RUNPATH)]
        if base is None or not offs:
            return
        lo, hi = base + min(offs), min(size, base + max(offs) + 4096)
        dyn_names.entries, dyn_names.base, dyn_names.lo, dyn_names.seen = entries, base, lo, True
        if lo >= src.base:
            dyn_names.strings = src.capture(lo, hi)
        elif hi <= len(head_capture):
            dyn_names.strings = head_capture[lo:hi]

    if dyn:
        src.capture(dyn.offset, dyn.offset + dyn.filesz, on_dynamic)
    scan = LibraryScan(path, size, f.settings)
    found = scan.run(src, _zones(size, segments, h.machine))
    problems = found.problems
    sections: list[elf.Section] = []
    if h.shnum:
        try:
            sections = elf.parse_sections(bytes(table), h.shnum, size)
            names = sections[h.shstrndx]
            lo = sh_start - SHSTR_WINDOW
            if names.offset >= max(lo, 0) and names.file_end <= sh_start and len(names_window) == sh_start - max(lo, 0):
                blob = bytes(names_window[names.offset - max(lo, 0) : names.file_end - max(lo, 0)])
            elif names.file_end <= HEAD:
                blob = bytes(head_capture[names.offset : names.file_end])
            else:
                notes.append("second pass: the section name table lies away from the section table")
                blob = fetch(f.chunks, names.offset, names.file_end, size)
            sections = elf.name_sections(sections, blob)
            # Roles follow section names (__nv_relfatbin is never loadable coverage): a section
            # whose name is lost (sh_name 0 or outside .shstrtab) cannot be given one.
            unnamed = next((i for i, s in enumerate(sections) if i and s.type and not s.name), None)
            if unnamed is not None:
                raise elf.ElfError(f"section {unnamed} has no name")
        except elf.ElfError as e:
            problems.append(Problem(e.code, f"malformed ELF: {e}"))
            sections = []
    needed, runpath, note = _dynamic(dyn_names)
    if note is not None:
        notes.append(note)
    containers, placed = attribute(found, sections, segments)
    problems += placed
    return Library(
        path,
        size,
        "elf",
        tuple(containers),
        needed,
        runpath,
        tuple(found.claims),
        tuple(problems),
        tuple(notes),
        tuple(found.linkers),
        tuple(found.statements),
        tuple(found.runtimes),
    )


def _zones(size: int, segments: tuple[elf.Segment, ...], isa: int | None = None) -> list[Zone]:
    """Which patterns to search where, from the program headers. Containers are searched for in
    every byte: a library may load device code from its own .text or from bytes no segment maps
    (cuModuleLoadData on an image it reads itself). Wrapper records only matter in writable
    data, embedded claims in read-only data (or, in older layouts where .rodata shares the
    executable segment, there too)."""
    loads = sorted((s for s in segments if s.type == elf.PT_LOAD and s.filesz), key=lambda s: s.offset)
    containers = LibraryScan.patterns(code=True, strings=False)
    if not loads:
        return [Zone(0, size, LibraryScan.patterns(code=True, data=True, machine=True, isa=isa))]
    # Separate-code layouts map the ELF header (offset 0) read-only and start machine code on a
    # page of its own; older ones map header, .text, .rodata and .nv_fatbin in one R+X segment.
    separate = not loads[0].executable and loads[0].offset == 0
    zones: list[Zone] = []
    pos = 0
    for seg in loads:
        start, stop = max(seg.offset, pos), seg.offset + seg.filesz
        if start > pos:
            zones.append(Zone(pos, start, containers))
        if stop <= start:
            continue
        if seg.executable:
            pats = (
                LibraryScan.patterns(code=True, strings=False, machine=True, isa=isa)
                if separate
                else LibraryScan.patterns(code=True, machine=True, isa=isa)
            )
        elif seg.writable:
            pats = LibraryScan.patterns(code=True, data=True, strings=False)
        else:
            pats = LibraryScan.patterns(code=True)
        zones.append(Zone(start, stop, pats))
        pos = stop
    if pos < size:
        zones.append(Zone(pos, size, containers))
    return zones


class _Dynamic(NamedTuple):
    needed: tuple[str, ...]
    runpath: tuple[str, ...]
    note: str | None = None  # why the names are not listed, when they could not be read


def _dynamic(names: _DynamicNames) -> _Dynamic:
    """DT_NEEDED and DT_RUNPATH/DT_RPATH from the dynamic entries and strings the pass captured."""
    if not names.seen:
        return _Dynamic((), ())
    if names.strings is None:
        return _Dynamic((), (), "NEEDED/RUNPATH names passed before they could be captured; not listed")
    strings, base, lo = bytes(names.strings), names.base, names.lo
    needed: list[str] = []
    runpath: list[str] = []
    for tag, val in names.entries:
        if tag == elf.DT_NEEDED:
            needed.append(elf.cstring(strings, base + val - lo))
        elif tag in (elf.DT_RPATH, elf.DT_RUNPATH):
            runpath.extend(p for p in elf.cstring(strings, base + val - lo).split(":") if p)
    return _Dynamic(tuple(needed), tuple(runpath))


__all__ = ["read"]
