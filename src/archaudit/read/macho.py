"""macOS libraries (Mach-O .dylib and .so): CUDA left macOS with 10.2 and ROCm never came.

A Mach-O library is a host library unless it carries device code, so it is searched,
whole, for fatbin containers and HIP bundles by the same forward scan as every other
library; a wheel whose Mach-O libraries carry none is a CPU wheel. Found device code is
walked, verified and judged like any other (role "embedded": Mach-O sections are not
read, so the runtime's registration cannot be told apart from any other copy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..findings import Code
from ..model import CUBIN, EMBEDDED, Container, Library
from . import records, scan, search, stream

MAGICS = (
    b"\xcf\xfa\xed\xfe",  # MH_MAGIC_64, little-endian (x86_64, arm64)
    b"\xce\xfa\xed\xfe",  # MH_MAGIC, 32-bit
    b"\xca\xfe\xba\xbe",  # FAT_MAGIC: a universal binary holding several
    b"\xca\xfe\xba\xbf",  # FAT_MAGIC_64
)
NO_CUDA = "Mach-O library: no CUDA or ROCm runs on macOS, and it carries no device code"

Chunks = Callable[[], Iterable[bytes]]


def is_macho(head: bytes) -> bool:
    return head[:4] in MAGICS


def read(path: str, size: int, src: stream.Source, settings: records.ScanSettings) -> Library:
    """Inventory one Mach-O file from the scanner's window over its stream (stream.Source)."""
    state = scan.LibraryScan(path, size, settings)
    found = state.run(src, [search.Zone(0, size, state.patterns(code=True, data=True))])
    containers = [Container("nvidia", EMBEDDED, "", c.offset, c.size, c.entries) for c in found.containers]
    containers += found.bundles
    containers += [Container("nvidia", CUBIN, "", c.offset, c.size, (c.entry,)) for c in found.cubins]
    containers.sort(key=lambda c: c.offset)
    # Mach-O sections are not read, so a container header that declares more bytes than the
    # file holds cannot be told to lie outside device code: it fails closed (E011), as in an ELF
    # file without a section table. A HIP bundle magic that does not parse is left out: every
    # LLVM build carries that magic as a string (llvmlite, jaxlib), and ROCm never came to macOS.
    problems = found.problems + found.soft.counted(lambda code, offset: code == Code.E011)
    notes = () if containers or problems else (NO_CUDA,)
    return Library(
        path,
        size,
        "macho",
        tuple(containers),
        (),
        (),
        tuple(found.claims),
        tuple(problems),
        notes,
        tuple(found.linkers),
        tuple(found.statements),
    )


__all__ = ["Chunks", "is_macho", "MAGICS", "NO_CUDA", "read"]
