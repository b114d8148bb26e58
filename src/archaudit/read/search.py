"""The multi-pattern search, zone by zone: every byte of a library is searched for the container
magics (compiled `find` where built, libc memmem for long ranges, else bytes.find), and each
hit is handed to the record parser registered for its magic.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from . import fatbin, libc, native
from .stream import SEAM, Source

# ---- the multi-pattern search ----

# How each record's first bytes are searched for. The compiled search (archaudit._speedups.find,
# without the GIL) compares two rare bytes of the needle with 16 positions at a time: 3-4x
# glibc's memmem on torch's libraries, whose shift is bounded by the needle's length. Without
# it, glibc's memmem (called through ctypes, so the search runs without the GIL, beside the
# other readers and the decoders) is 1.5-3x faster than bytes.find on binaries, and longer
# needles are faster still. Where the record
# parser accepts only one value of the bytes after a magic (a fatbin container is version 1
# with a 16-byte header), the needle includes them, so the hits are exactly the records the
# parser would accept. Without memmem (Windows) bytes.find searches the magic alone: it skips
# ahead by the needle's length unless the next byte may occur in the needle (a 64-bit Bloom
# filter of its bytes' low six bits), so a needle holding 0x00, which fills binaries, crawls.
# Embedded-claim markers are searched without their leading NUL, which the claim parser checks.
MEMMEM_MIN = 4096  # shorter ranges: bytes.find (the foreign call costs more than it saves)
Haystack = bytes | bytearray


def _libc_memmem() -> Callable[[int, int, bytes, int], int | None] | None:
    memmem = libc.function("memmem")
    if memmem is None:
        return None
    memmem.restype = ctypes.c_void_p
    memmem.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
    trusted: Callable[[int, int, bytes, int], int | None] = memmem
    return trusted


_MEMMEM = _libc_memmem()
_REQUIRED_AFTER: dict[bytes, bytes] = {fatbin.MAGIC: fatbin.CONTAINER_MAGIC_TAIL}


_FIND: Callable[[Haystack, bytes, int, int], int] | None = None if native.active is None else native.active.find


def find_bytes(buf: Haystack, needle: bytes, start: int, stop: int) -> int:
    """buf.find(needle, start, stop): by the compiled search where it is built, else through
    memmem where there is one and the range is long."""
    stop = min(stop, len(buf))
    start = max(start, 0)
    if _FIND is not None:
        return _FIND(buf, needle, start, stop)
    if _MEMMEM is None or stop - start < MEMMEM_MIN:
        return buf.find(needle, start, stop)
    if isinstance(buf, bytes):
        base = ctypes.cast(ctypes.c_char_p(buf), ctypes.c_void_p).value or 0
        hit = _MEMMEM(base + start, stop - start, needle, len(needle))
    else:  # a bytearray: its buffer is exported (cannot move) until `view` is dropped
        view = (ctypes.c_char * len(buf)).from_buffer(buf)
        base = ctypes.addressof(view)
        hit = _MEMMEM(base + start, stop - start, needle, len(needle))
        del view
    return -1 if not hit else hit - base


@dataclass(frozen=True, slots=True)
class Pattern:
    """A byte string that starts a record (its magic, which names the handler), and the needle
    searched for: the magic, plus the bytes after it that the record's parser requires."""

    magic: bytes
    needle: bytes

    @classmethod
    def of(cls, magic: bytes) -> Pattern:
        fast = _MEMMEM is not None or _FIND is not None
        return cls(magic, magic + _REQUIRED_AFTER.get(magic, b"") if fast else magic)

    def find(self, buf: Haystack, start: int, stop: int) -> int:
        """Offset of the first occurrence lying wholly in buf[start:stop], or -1."""
        return find_bytes(buf, self.needle, start, stop)

    def within(self, data: bytes) -> bool:
        return self.find(data, 0, len(data)) >= 0


class Zone(NamedTuple):
    """A range of the file and the patterns that can start a record there (never none: every
    reader searches every byte for containers)."""

    start: int
    stop: int
    patterns: tuple[Pattern, ...]


Handler = Callable[[Source, int], int]  # parses the record at an offset; returns where to go on


class Search:
    """The multi-pattern search. Owns the walk over the stream zone by zone, finding the next
    occurrence of any pattern, and hands each hit to the handler registered for its magic
    (which returns the offset to continue from). Knows nothing of what the records mean."""

    def __init__(self, handlers: dict[bytes, Handler], size: int):
        self.handlers = handlers
        self.size = size

    def run(self, src: Source, zones: Iterable[Zone]) -> None:
        cursor = 0
        for start, stop, patterns in zones:
            if cursor >= stop:
                continue
            cursor = self._zone(src, max(cursor, start), stop, patterns)
        src.drain()

    def _zone(self, src: Source, cursor: int, stop: int, patterns: tuple[Pattern, ...]) -> int:
        nxt = {p: -1 for p in patterns}  # next occurrence at or after the cursor; -1: none up to upto[p]
        upto = {p: cursor for p in patterns}

        def holds(data: bytes) -> bool:
            return any(p.within(data) for p in patterns)

        while True:
            best, best_pat = -1, patterns[0]
            for p in patterns:  # earlier patterns first; later ones only up to the best so far
                n = len(p.needle)
                at = nxt[p]
                limit = min(src.end, stop + n - 1)
                if best >= 0:
                    limit = min(limit, best + n - 1)
                if at < cursor and (at >= 0 or upto[p] < limit):
                    frm = max(cursor, upto[p] - n + 1) if at < 0 else cursor
                    found = p.find(src.buf, frm - src.base, limit - src.base)
                    at = nxt[p] = (found + src.base) if found >= 0 else -1
                    upto[p] = limit
                if at >= 0 and (best < 0 or at < best):
                    best, best_pat = at, p
            if best < 0:
                if src.end >= stop + SEAM or src.end >= self.size:
                    return max(cursor, stop)
                keep = max(cursor, src.end - SEAM)
                src.release(keep)
                if not src.skim(holds, stop):
                    return max(keep, stop)
                cursor = max(keep, src.base)
                for p in patterns:
                    upto[p] = max(upto[p], src.base)
                continue
            cursor = self.handlers[best_pat.magic](src, best)
            src.release(cursor)


__all__ = ["find_bytes", "Handler", "MEMMEM_MIN", "Pattern", "Search", "Zone"]
