"""One forward pass over a library's bytes: find every device-code container in it.

Wheels hold libraries of hundreds of megabytes that are only available as an inflating
stream, and an ELF's section table sits at its end. So the scanner does not wait for
the table: it searches the stream for container magics, validates and walks each
container as it passes, captures the few small ranges it needs later (headers, the
section table, the dynamic segment), and attributes containers to sections at the end.
Every byte is searched for containers, whatever its section or segment (a fatbin may sit
in .text, in a segment without section headers, or after the ELF's end), and every payload
is decoded in the same pass (decode.py), unless the caller asks for headers only.

The parts, each a module of archaudit.read, in the order data flows through them:
- stream.py: Source, the forward-only window over the stream, with captured ranges;
- search.py: Pattern / Search, the multi-pattern search, zone by zone, dispatching each hit;
- records.py: Records, the record parsers (fatbin container, .nvFatBinSegment wrapper, HIP
  wrapper, embedded claim, offload bundle), one method each, registered by magic, and what
  they found (ScanResult);
- this module: LibraryScan, one library's pass, tying the three together;
- attribution.py: containers attributed to the sections that hold them;
- elflib.py (host and device ELF), devicefiles.py (container files, PTX), pe.py and macho.py:
  the format readers, chosen by library.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..findings import Code
from ..model import Problem
from . import fatbin, hip
from .records import (
    CUBIN_MAGIC,
    HIP_WRAPPER_MAGIC,
    LINKER_MARKER,
    MARKERS,
    RUNTIME_BY_MACHINE,
    RUNTIME_MARKERS,
    STATEMENTS,
    VERSION_MARKERS,
    ZSTD_MAGIC,
    Records,
    ScanResult,
    ScanSettings,
)
from .search import Pattern, Search, Zone
from .stream import Chunks, Source

DEVICE_SUFFIXES = (".cubin", ".fatbin", ".ptx", ".hsaco")
_PATTERNS = {
    m: Pattern.of(m)
    for m in (
        fatbin.MAGIC,
        fatbin.WRAPPER_MAGIC,
        HIP_WRAPPER_MAGIC,
        *hip.MAGICS,
        CUBIN_MAGIC,
        ZSTD_MAGIC,
        *MARKERS,
        LINKER_MARKER,
        *STATEMENTS,
        *VERSION_MARKERS,
        *RUNTIME_MARKERS,
        *(m for markers in RUNTIME_BY_MACHINE.values() for m in markers),
    )
}


class LibraryScan:
    """One library's pass: the search over its zones, dispatching to the record parsers, then
    the decode results collected. Format readers (ELF here, PE and Mach-O in their modules)
    choose the zones and attribute what it found."""

    def __init__(self, path: str, size: int, settings: ScanSettings):
        self.path = path
        self.size = size
        self.records = Records(size, settings)

    @staticmethod
    def patterns(
        *,
        code: bool = True,
        data: bool = False,
        strings: bool = True,
        cubins: bool = True,
        machine: bool = False,
        isa: int | None = None,
    ) -> tuple[Pattern, ...]:
        """Containers (fatbin, offload bundles) can start anywhere; with `cubins` (with `code`),
        whole cubins outside any container, bare or as zstd frames, which a library loads itself
        (a container file's loader reads its containers only); with `data`, the wrapper records the runtimes
        register (writable data); with `strings`, embedded claims, names of a run-time
        device-code linker, the sourced statements and vendor identity strings
        (records.STATEMENTS) and the vendor version markers (records.VERSION_MARKERS); with
        `machine`, the version a statically linked CUDA runtime returns (records.RUNTIME_BY_MACHINE:
        the one for the machine `isa`, an ELF e_machine or a PE machine, where it is one of theirs,
        else the ELF ones, records.RUNTIME_MARKERS)."""
        out = [fatbin.MAGIC]
        if machine:
            out += RUNTIME_BY_MACHINE.get(isa, RUNTIME_MARKERS) if isa is not None else RUNTIME_MARKERS
        if data:
            out += [fatbin.WRAPPER_MAGIC, HIP_WRAPPER_MAGIC]
        if code:
            out += hip.MAGICS
        if code and cubins:
            out += [CUBIN_MAGIC, ZSTD_MAGIC]
        if strings:
            out += [*MARKERS, LINKER_MARKER, *STATEMENTS, *VERSION_MARKERS]
        return tuple(_PATTERNS[m] for m in out)

    def run(self, src: Source, zones: Iterable[Zone]) -> ScanResult:
        Search(self.records.handlers(), self.size).run(src, zones)
        found = self.records.resolve()
        if src.read != self.size:
            found.problems.append(Problem(Code.E002, f"stream ended after {src.read} of {self.size} bytes"))
        return found


@dataclass(frozen=True, slots=True)
class OpenFile:
    """A file being read: its first bytes decide which reader takes it."""

    path: str
    size: int
    src: Source
    chunks: Chunks
    settings: ScanSettings
    head: bytes


__all__ = ["DEVICE_SUFFIXES", "LibraryScan", "OpenFile"]
