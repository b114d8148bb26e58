"""One file's bytes into a model.Library: which reader takes a file (its first bytes decide),
and the entry points the rest of archaudit calls (a stream of chunks, bytes in memory, a file).

Above the scanner and the format readers (scan.py for ELF, container and PTX files; pe.py and
macho.py), so that each of those imports the scanner and none imports this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from ..findings import Code, Fold
from ..model import Library, Problem
from . import devicefiles, elf, elflib, fatbin, hip, macho, pe, records, scan, stream
from .decode import DecodePool


def scan_stream(
    path: str,
    size: int,
    chunks: stream.Chunks,
    *,
    decode: bool = True,
    max_payload: int = fatbin.DEFAULT_MAX_PAYLOAD,
    pool: DecodePool | None = None,
) -> Library:
    """Inventory one file from a factory of its byte chunks (called again only if needed).
    Every payload is decoded unless `decode` is False (headers only); `pool` decodes beside
    the reader (without one, decoding happens in this thread)."""
    settings = records.ScanSettings(decode, max_payload, pool)
    try:
        return _read(path, size, chunks, settings)
    except stream.ReadFailed as e:
        return Library(path, size, "other", problems=(Problem(e.code, str(e)),))
    except MemoryError:
        return Library(path, size, "other", problems=(Problem(Code.E012, "ran out of memory while verifying"),))
    except Exception as e:  # noqa: BLE001 - fail closed: an input we could not handle is unverified
        return Library(
            path,
            size,
            "other",
            problems=(Problem(Code.E099, f"could not be verified: internal error {type(e).__name__}: {e}"),),
        )


def library_from_bytes(
    path: str, data: bytes, *, decode: bool = True, max_payload: int = fatbin.DEFAULT_MAX_PAYLOAD
) -> Library:
    """Inventory a file already in memory (tests, small members)."""

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(data), 1 << 20):
            yield data[i : i + (1 << 20)]

    return scan_stream(path, len(data), chunks, decode=decode, max_payload=max_payload)


def scan_file(
    path: str, display: str | None = None, *, decode: bool = True, max_payload: int = fatbin.DEFAULT_MAX_PAYLOAD
) -> Library:
    """Inventory a file on disk, read in chunks."""
    import os

    def chunks() -> Iterator[bytes]:
        with open(path, "rb") as f:
            while True:
                block = f.read(1 << 20)
                if not block:
                    return
                yield block

    try:
        size = os.path.getsize(path)
    except OSError as e:
        return Library(display or path, 0, "other", problems=(Problem(Code.E001, f"cannot read: {e}"),))
    return scan_stream(display or path, size, chunks, decode=decode, max_payload=max_payload)


def _folded(lib: Library) -> Library:
    """The library with its problems folded by code (findings.Fold): the scan folds its own as it
    goes; this folds what the readers add after it (one per container or wrapper misplaced)."""
    if len(lib.problems) <= 1:
        return lib
    fold: Fold[Problem] = Fold(lambda p: p.code)
    return replace(lib, problems=tuple(fold.extend(lib.problems).result()))


FileReader = Callable[[scan.OpenFile], Library]


def _readers() -> tuple[tuple[Callable[[scan.OpenFile], bool], FileReader], ...]:
    """Which reader takes a file, tried in order: the first whose test accepts it."""
    return (
        (lambda f: elf.is_elf(f.head), elflib.read),
        (lambda f: f.head.startswith((fatbin.MAGIC, *hip.MAGICS)), devicefiles.container_file),
        (lambda f: f.path.lower().endswith(".ptx"), devicefiles.ptx_file),
        (lambda f: f.path.lower().endswith(scan.DEVICE_SUFFIXES), devicefiles.not_device_code),
        (lambda f: pe.is_pe(f.head), lambda f: pe.read(f.path, f.size, f.src, f.chunks, f.settings)),
        (lambda f: macho.is_macho(f.head), lambda f: macho.read(f.path, f.size, f.src, f.settings)),
    )


def _read(path: str, size: int, chunks: stream.Chunks, settings: records.ScanSettings) -> Library:
    src = stream.Source(stream._guard(chunks()), size)
    src.ensure(64)
    f = scan.OpenFile(path, size, src, chunks, settings, bytes(src.buf[:64]))
    for accepts, reader in _readers():
        if accepts(f):
            return _folded(reader(f))
    return Library(path, size, "other", problems=(Problem(Code.E010, "malformed ELF: not an ELF file"),))


__all__ = ["library_from_bytes", "scan_file", "scan_stream"]
