"""One forward pass over a library's bytes: find every device-code container in it.

Wheels hold libraries of hundreds of megabytes that are only available as an inflating
stream, and an ELF's section table sits at its end. So the scanner does not wait for
the table: it searches the stream for container magics, validates and walks each
container as it passes, captures the few small ranges it needs later (headers, the
section table, the dynamic segment), and attributes containers to sections at the end.
Every byte is searched for containers, whatever its section or segment (a fatbin may sit
in .text, in a segment without section headers, or after the ELF's end), and every payload
is decoded in the same pass (decode.py), unless the caller asks for headers only.

The parts, in the order data flows through them:
- Source: the forward-only window over the stream, with captured ranges;
- Pattern / Search: the multi-pattern search, zone by zone, dispatching each hit;
- Records: the record parsers (fatbin container, .nvFatBinSegment wrapper, HIP wrapper,
  embedded claim, offload bundle), one method each, registered by magic;
- LibraryScan: one library's pass, ties the three together and resolves decode results;
- the format readers (host ELF, device ELF, container files, PTX; PE and Mach-O in their
  own modules) and attribution of containers to sections.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ..claims import embedded_claim_markers, parse_embedded
from ..errors import ArchauditError
from ..findings import Code
from ..model import (
    CODE_OBJECT,
    DEVICE_LINK,
    EMBEDDED,
    EXECUTABLE,
    LTO,
    PTX,
    RELOCATABLE,
    SASS,
    STANDALONE,
    Container,
    Entry,
    Library,
    Problem,
    Role,
)
from . import elf, fatbin, hip, libc, native
from .decode import DecodePool, Decoding, is_cuda_target, result

HEAD = 4 << 20  # always kept: ELF header, program headers, usually .dynstr
SHSTR_WINDOW = 1 << 20  # bytes before the section table kept in the hope .shstrtab is there
CLAIM_WINDOW = 4096
DEFAULT_MAX_PAYLOAD = 256 << 20  # one entry decoded at a time, never more than this
SEAM = 64  # longer than any pattern: what a window keeps between chunks
CHUNK_GUESS = 1 << 21  # a chunk is never larger than this; chunks ending before a skip target are not kept
PAD_WINDOW = 4096  # bytes kept after each container: alignment padding there must be zeros
BUNDLE_HEAD = 4096  # first look at an offload bundle; grown until its extent is known
DEVICE_SUFFIXES = (".cubin", ".fatbin", ".ptx", ".hsaco")
HIP_WRAPPER_MAGIC = b"FPIH"  # 0x48495046, the __hip_fatbin_wrapper record in .hipFatBinSegment
ALIGN_SLACK = 8
HIP_ALIGN = 4096

Chunks = Callable[[], Iterable[bytes]]


class ReadFailed(ArchauditError):
    """The file itself could not be read to its end (I/O, a zip member error): the code of the
    finding it becomes."""


# ---- the window over the stream ----

@dataclass(slots=True)
class _Capture:
    want: int  # next file offset to fill
    stop: int
    out: bytearray
    done: Callable[[bytearray], None] | None


class Source:
    """A forward-only window over a byte stream, with ranges captured as they pass."""

    def __init__(self, chunks: Iterable[bytes], size: int):
        self._it: Iterator[bytes] = iter(chunks)
        self.size = size
        self.buf = bytearray()
        self.base = 0  # file offset of buf[0]
        self.before = -1  # the byte at base - 1, which the window let go last (-1: none)
        self.read = 0  # bytes pulled from the stream
        self._captures: list[_Capture] = []
        self._feeding: tuple[bytes, int, int] | None = None  # the chunk being fed to the captures

    @property
    def end(self) -> int:
        return self.base + len(self.buf)

    def capture(self, start: int, stop: int, done: Callable[[bytearray], None] | None = None) -> bytearray:
        """Bytes [start, stop), filled in as they pass; `done` is called once they are all in.
        Register before they pass: what has already been released is not there, and the
        result is then shorter than asked (and `done` is not called)."""
        start, stop = max(0, start), min(self.size, stop)
        out = bytearray()
        if start >= stop or start < self.base:
            return out
        if start < self.end:
            out += self.buf[start - self.base:min(stop, self.end) - self.base]
        if self._feeding is not None:  # asked by a `done` callback: that chunk is not fed again
            chunk, lo, hi = self._feeding
            at = start + len(out)
            if lo <= at < hi and at < stop:
                out += chunk[at - lo:min(stop, hi) - lo]
        if start + len(out) < stop:
            self._captures.append(_Capture(start + len(out), stop, out, done))
        elif done is not None:
            done(out)
        return out

    def _next(self) -> tuple[bytes, int, int] | None:
        """The next chunk and its [lo, hi) file range, captures fed; None at the end."""
        try:
            chunk = next(self._it)
        except StopIteration:
            return None
        lo = self.read
        hi = self.read = lo + len(chunk)
        if self._captures:
            self._feed(chunk, lo, hi)
        return chunk, lo, hi

    def _pull(self, keep: bool = True) -> bool:
        """Append the next chunk to the window (or, with keep=False, let it pass: the window
        must be empty then)."""
        got = self._next()
        if got is None:
            return False
        chunk, _, hi = got
        if keep:
            self.buf += chunk
        else:
            del self.buf[:]
            self.base = hi
            if chunk:
                self.before = chunk[-1]
        return True

    def skim(self, holds: Callable[[bytes], bool], stop: int) -> bool:
        """Pull the next chunk like _pull, but when it ends before `stop` and `holds` finds no
        pattern in it (nor across the seam with the window's short tail) keep only its last
        SEAM bytes instead of copying it into the window: most of a library is such chunks."""
        got = self._next()
        if got is None:
            return False
        chunk, _, hi = got
        if hi <= stop and len(self.buf) <= SEAM < len(chunk):
            if not holds(bytes(self.buf) + chunk[:SEAM]) and not holds(chunk):
                self.buf = bytearray(chunk[-SEAM:])
                self.base = hi - SEAM
                self.before = chunk[-SEAM - 1]
                return True
        self.buf += chunk
        return True

    def _feed(self, chunk: bytes, lo: int, hi: int) -> None:
        finished = []
        for cap in self._captures:
            if lo <= cap.want < hi:
                take = chunk[cap.want - lo:min(cap.stop, hi) - lo]
                cap.out += take
                cap.want += len(take)
                if cap.want >= cap.stop and cap.done is not None:
                    finished.append(cap)
        self._captures = [c for c in self._captures if c.want < c.stop and c.want >= hi]
        self._feeding = (chunk, lo, hi)
        try:
            for cap in finished:
                assert cap.done is not None
                cap.done(cap.out)
        finally:
            self._feeding = None

    def ensure(self, stop: int) -> bool:
        while self.end < stop:
            if not self._pull():
                return False
        return True

    def release(self, upto: int) -> None:
        cut = min(upto, self.end) - self.base
        if cut > 0:
            self.before = self.buf[cut - 1]
            del self.buf[:cut]
            self.base += cut

    def skip_to(self, pos: int) -> bool:
        """Move the window start to `pos` without holding the bytes in between."""
        if pos <= self.end:
            self.release(pos)
            return True
        self.release(self.end)
        while self.end < pos:
            if not self._pull(keep=self.read + CHUNK_GUESS > pos):
                return False
        self.release(pos)
        return True

    def drain(self) -> None:
        """Pull the rest of the stream (for captures and the verification of its end)."""
        self.release(self.end)
        while self._pull(keep=False):
            pass


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


# ---- what the record parsers found ----

@dataclass(frozen=True, slots=True)
class FatbinWrapper:
    """A .nvFatBinSegment record: the CUDA runtime registers the container at `address`."""

    offset: int
    version: int  # 2 = the nvlink (device-link) container
    address: int


@dataclass(frozen=True, slots=True)
class HipWrapper:
    """A .hipFatBinSegment record: the HIP runtime registers the bundle at `address`."""

    offset: int
    address: int


@dataclass(slots=True)
class WalkedContainer:
    """A fatbin container as walked, its entries possibly still decoding."""

    offset: int
    size: int
    entries: list[Entry | Future[Entry]]
    trailing: bytearray = field(default_factory=bytearray)  # the bytes after it (padding)


@dataclass(frozen=True, slots=True)
class FoundContainer:
    """A fatbin container the pass found, entries decoded (empty when it failed)."""

    offset: int
    size: int
    entries: tuple[Entry, ...]
    trailing: bytes = b""


@dataclass
class ScanResult:
    """Everything one library's pass found, for attribution to sections."""

    containers: list[FoundContainer] = field(default_factory=list)
    bundles: list[Container] = field(default_factory=list)
    wrappers: list[FatbinWrapper] = field(default_factory=list)
    hip_wrappers: list[HipWrapper] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    linkers: list[str] = field(default_factory=list)  # strings naming a run-time device-code linker
    problems: list[Problem] = field(default_factory=list)
    # Header-level rejects: real problems inside device-code sections, coincidences elsewhere.
    soft: list[Problem] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ScanSettings:
    """How a library is read: decoding every payload (the default) or headers only (--fast),
    the largest payload verified in memory, and the decode pool shared by the run."""

    decode: bool = True
    max_payload: int = DEFAULT_MAX_PAYLOAD
    pool: DecodePool | None = None


# ---- the record parsers ----

class Records:
    """The record parsers, one per magic: each validates the record at an offset, notes what it
    found, and returns the offset to continue from. Owns the lists of walked containers,
    wrappers, bundles and claims of one library; payloads go to its Decoding."""

    def __init__(self, size: int, settings: ScanSettings):
        self.size = size
        self.settings = settings
        self.decoding = Decoding(settings.pool, settings.max_payload)
        self.walked: list[WalkedContainer] = []
        self.found = ScanResult()

    def handlers(self) -> dict[bytes, Handler]:
        table: dict[bytes, Handler] = {
            fatbin.MAGIC: self.container,
            fatbin.WRAPPER_MAGIC: self.wrapper,
            HIP_WRAPPER_MAGIC: self.hip_wrapper,
        }
        for magic in hip.MAGICS:
            table[magic] = self.bundle
        for needle in MARKERS:
            table[needle] = self.claim
        table[LINKER_MARKER] = self.linker
        return table

    def problem(self, code: Code, message: str, offset: int | None = None) -> None:
        self.found.problems.append(Problem(code, message, offset))

    def wrapper(self, src: Source, at: int) -> int:
        if at % 8 == 0 and src.ensure(at + fatbin.WRAPPER.size):
            rec = fatbin.parse_wrapper(src.buf, at - src.base)
            if rec:
                self.found.wrappers.append(FatbinWrapper(at, rec[0], rec[1]))
                return at + fatbin.WRAPPER.size
        return at + 1

    def hip_wrapper(self, src: Source, at: int) -> int:
        # __hip_fatbin_wrapper {u32 magic "HIPF", u32 version 1, void *bundle, void *unused}
        if at % 8 == 0 and src.ensure(at + 24):
            version = int.from_bytes(src.buf[at - src.base + 4:at - src.base + 8], "little")
            if version == 1:
                addr = int.from_bytes(src.buf[at - src.base + 8:at - src.base + 16], "little")
                self.found.hip_wrappers.append(HipWrapper(at, addr))
                return at + 24
        return at + 1

    def claim(self, src: Source, at: int) -> int:
        # the needle is the marker without its leading NUL, which must precede it (the byte the
        # window let go last when the marker starts it: a string right after a container)
        if (src.buf[at - 1 - src.base] if at > src.base else src.before) != 0:
            return at + 1
        src.ensure(at + CLAIM_WINDOW)
        window = b"\0" + bytes(src.buf[at - src.base:at - src.base + CLAIM_WINDOW - 1])
        claims = self.found.claims
        claims.extend(c for c in parse_embedded(window) if c not in claims)
        return at + 1

    def linker(self, src: Source, at: int) -> int:
        """A name holding nvJitLinkCreate (looked up by name, or imported), as far as the window
        around the hit holds it: the first few distinct names only."""
        src.ensure(at + LINKER_WINDOW)
        lo = max(src.base, at - LINKER_WINDOW)
        before = bytes(src.buf[lo - src.base:at - src.base])
        after = bytes(src.buf[at - src.base:at - src.base + LINKER_WINDOW])
        start = len(before)
        while start and before[start - 1] in _NAME_BYTES:
            start -= 1
        end = next((i for i, c in enumerate(after) if c not in _NAME_BYTES), len(after))
        name = (before[start:] + after[:end]).decode("ascii")
        found = self.found.linkers
        if len(found) < LINKERS_KEPT and name not in found:
            found.append(name)
        return at + len(LINKER_MARKER)

    def bundle(self, src: Source, at: int) -> int:
        total = self._bundle_extent(src, at)
        if total is None:
            return at + 1
        try:
            if total > self.settings.max_payload * 4:
                raise hip.Malformed(f"bundle of {total} bytes is too large to verify", code=Code.E032)
            if not src.ensure(at + total):
                raise hip.Malformed("bundle is truncated", code=Code.E030)
            blob = bytes(src.buf[at - src.base:at - src.base + total])
            self.found.bundles.append(hip.parse(blob, at, "", max_decoded=self.settings.max_payload))
            return at + total
        except hip.Malformed as e:
            self.problem(e.code, f"HIP bundle at 0x{at:x}: {e}", at)
            return at + 1

    def _bundle_extent(self, src: Source, at: int) -> int | None:
        """The bundle's size, reading as much of it as its header needs (a version-1 compressed
        bundle states no size: its whole stream must be walked); None for an impossible header,
        noted as a soft problem (a coincidence unless it lies in .hip_fatbin)."""
        need = BUNDLE_HEAD
        limit = max(hip.MAX_HEADER, self.settings.max_payload * 4)
        try:
            while True:
                src.ensure(at + need)
                have = min(src.end, self.size) - at
                total = hip.extent(bytes(src.buf[at - src.base:at - src.base + min(need, have)]))
                if total is not None:
                    break
                if have < need:
                    raise hip.Malformed("bundle is truncated", code=Code.E030)
                if need >= limit:
                    raise hip.Malformed(f"bundle header is not complete within {limit} bytes", code=Code.E032)
                need = min(need * 4, limit)
            if at + total > self.size:
                raise hip.Malformed("bundle overruns the file", code=Code.E030)
        except hip.Malformed as e:
            self.found.soft.append(Problem(e.code, f"HIP bundle at 0x{at:x}: {e}", at))
            return None
        return total

    def container(self, src: Source, at: int) -> int:
        if not src.ensure(at + fatbin.CONTAINER_HEADER.size):
            return at + 1
        head = fatbin.parse_container_header(src.buf, at - src.base)
        if head is None:
            return at + 1
        end = at + head.total
        if end > self.size:  # a coincidental magic unless it lies in a fatbin section
            self.found.soft.append(Problem(Code.E011, f"fatbin container at 0x{at:x} declares {head.fat_size} "
                                                   f"bytes, past the end of the file", at))
            return at + 1
        entries: list[Entry | Future[Entry]] = []
        pos = at + head.header_size
        try:
            while pos < end:
                if not src.ensure(pos + fatbin.ENTRY_HEADER.size):
                    raise fatbin.FatbinError("file ends inside an entry header", code=Code.E011, offset=pos)
                eh = fatbin.parse_entry_header(src.buf, pos - src.base, end - pos, pos)
                if not src.ensure(pos + eh.header_size):
                    raise fatbin.FatbinError("file ends inside an entry header", code=Code.E011, offset=pos)
                ident = fatbin.identifier(src.buf[pos - src.base:pos - src.base + eh.header_size], eh)
                entries.append(self._entry(src, pos, eh, ident))
                pos += eh.total
                src.release(pos)
        except fatbin.FatbinError as e:
            self.problem(e.code, f"fatbin container at 0x{at:x}: {e}", e.offset)
            self.walked.append(WalkedContainer(at, head.total, []))
            return end
        if self._entry_at(src, end):  # outside a fatbin section no accounting would notice
            self.problem(Code.E011, f"fatbin container at 0x{at:x}: an entry follows its declared end, "
                                 f"so its size hides entries", end)
        self.walked.append(WalkedContainer(at, head.total, entries, src.capture(end, end + PAD_WINDOW)))
        return end

    def _entry_at(self, src: Source, pos: int) -> bool:
        """Whether a valid entry header starts at `pos` (where a container said it ends)."""
        if not src.ensure(pos + fatbin.ENTRY_HEADER.size):
            return False
        try:
            fatbin.parse_entry_header(src.buf, pos - src.base, self.size - pos, pos)
        except fatbin.FatbinError:
            return False
        return True

    def _entry(self, src: Source, pos: int, eh: fatbin.EntryHeader, ident: str) -> Entry | Future[Entry]:
        kind = eh.kind
        assert kind is not None  # parse_entry_header rejects unknown kinds
        payload_at = pos + eh.header_size
        entry = Entry("nvidia", kind, eh.target, eh.version, eh.compression, eh.stored_size, eh.size,
                      pos, ident, bool(eh.flags & fatbin.FLAG_DEBUG))
        if not self.settings.decode or kind == LTO:
            if kind != LTO:
                self._frame_check(src, pos, payload_at, eh)
            src.skip_to(payload_at + eh.payload_size)
            return entry
        max_payload = self.settings.max_payload
        if eh.payload_size > max_payload or eh.size > max_payload:
            raise fatbin.FatbinError(f"{eh.target} entry of {max(eh.payload_size, eh.size)} "
                                     f"bytes exceeds the {max_payload}-byte bound", code=Code.E012, offset=pos)
        if not src.ensure(payload_at + eh.payload_size):
            raise fatbin.FatbinError("file ends inside an entry payload", code=Code.E011, offset=pos)
        with memoryview(src.buf) as window:  # one copy (a bytearray slice is a copy of its own)
            raw = bytes(window[payload_at - src.base:payload_at - src.base + eh.payload_size])
        return self.decoding.entry(eh, raw, pos, entry)

    def _frame_check(self, src: Source, pos: int, payload_at: int, eh: fatbin.EntryHeader) -> None:
        """Without decoding, still check what the payload's first bytes promise: a raw cubin is
        a CUDA ELF for the header's architecture; a zstd frame declares the header's size."""
        head = min(eh.payload_size, 64)
        if not src.ensure(payload_at + head):
            raise fatbin.FatbinError("file ends inside an entry payload", code=Code.E011, offset=pos)
        first = bytes(src.buf[payload_at - src.base:payload_at - src.base + head])
        fatbin.check_payload_start(eh, first, pos)

    def resolve(self) -> ScanResult:
        """Wait for the decodes, in stream order; a failed decode fails its container."""
        for w in self.walked:
            try:
                entries = tuple(result(e) for e in w.entries)
            except fatbin.FatbinError as err:
                self.problem(err.code, f"fatbin container at 0x{w.offset:x}: {err}", err.offset)
                entries = ()
            self.found.containers.append(FoundContainer(w.offset, w.size, entries, bytes(w.trailing)))
        self.walked.clear()
        return self.found


# Short markers cost a slow search over every library; the long one finds PyTorch's gencode
# string in libtorch_cuda.so, which every CUDA torch wheel ships.
MARKERS: tuple[bytes, ...] = tuple(m.lstrip(b"\0") for m in embedded_claim_markers() if len(m) >= 16)
# The call every user of nvJitLink makes, in the strings of a library that links device code
# at run time: the nvJitLinkCreate cuSPARSE 12.9 looks up in the libnvJitLink.so.13 it dlopens
# (it neither NEEDs nor imports it), CUDA 12's versioned __nvJitLinkCreate_12_* imports. One
# more needle for read-only data, like the claim markers (its cost: docs/rules.md).
LINKER_MARKER = b"nvJitLinkCreate"
LINKER_WINDOW = 64
LINKERS_KEPT = 4
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")
_PATTERNS = {m: Pattern.of(m) for m in (fatbin.MAGIC, fatbin.WRAPPER_MAGIC, HIP_WRAPPER_MAGIC,
                                        *hip.MAGICS, *MARKERS, LINKER_MARKER)}


class LibraryScan:
    """One library's pass: the search over its zones, dispatching to the record parsers, then
    the decode results collected. Format readers (ELF here, PE and Mach-O in their modules)
    choose the zones and attribute what it found."""

    def __init__(self, path: str, size: int, settings: ScanSettings):
        self.path = path
        self.size = size
        self.records = Records(size, settings)

    @staticmethod
    def patterns(*, code: bool = True, data: bool = False, strings: bool = True) -> tuple[Pattern, ...]:
        """Containers (fatbin, offload bundles) can start anywhere; with `data`, the wrapper
        records the runtimes register (writable data); with `strings`, embedded claims and names
        of a run-time device-code linker."""
        out = [fatbin.MAGIC]
        if data:
            out += [fatbin.WRAPPER_MAGIC, HIP_WRAPPER_MAGIC]
        if code:
            out += hip.MAGICS
        if strings:
            out += [*MARKERS, LINKER_MARKER]
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


def _guard(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Turn reader failures (zip member errors, I/O) into a read failure of this file."""
    try:
        yield from chunks
    except OSError as e:
        raise ReadFailed(f"cannot read: {e}", code=Code.E001) from None
    except Exception as e:  # noqa: BLE001 - zipread.MemberError and friends carry a code
        raise ReadFailed(str(e), code=getattr(e, "code", Code.E002)) from None


def _read_all(src: Source, size: int, max_payload: int) -> bytes:
    if size > max_payload:
        raise ReadFailed(f"{size} bytes exceed the {max_payload}-byte verification bound", code=Code.E012)
    src.ensure(size + 1)
    if src.end != size:
        raise ReadFailed(f"file has {src.end} bytes, expected {size}", code=Code.E002)
    return bytes(src.buf)


def _not_device_code(f: OpenFile) -> Library:
    return Library(f.path, f.size, "other", problems=(Problem(Code.E014, "not a cubin, fatbin, PTX or code object"),))


def _container_file(f: OpenFile) -> Library:
    """A bare .fatbin or offload bundle file: all of it is device code."""
    scan = LibraryScan(f.path, f.size, f.settings)
    found = scan.run(f.src, [Zone(0, f.size, scan.patterns(code=True, strings=False))])
    containers = [Container("nvidia", STANDALONE, "", c.offset, c.size, c.entries) for c in found.containers]
    containers += [replace(c, role=STANDALONE) for c in found.bundles]
    containers.sort(key=lambda c: c.offset)
    problems = found.problems + found.soft
    if not containers and not problems:
        problems.append(Problem(Code.E011, "not a valid fatbin container"))
    elif containers and containers[0].offset:
        # Chosen by its first bytes, so a container must start there: a library whose header
        # was overwritten by a magic would otherwise pass with every container it embeds
        # (relocatable ones too) read as standalone code.
        problems.append(Problem(Code.E011, f"the file starts with a container magic, but its first valid "
                                        f"container starts at 0x{containers[0].offset:x}", 0))
    return Library(f.path, f.size, "fatbin", tuple(containers), problems=tuple(problems))


def _ptx_file(f: OpenFile) -> Library:
    path, size = f.path, f.size
    data = _read_all(f.src, size, f.settings.max_payload)
    target, version, kernels = fatbin.ptx_facts(data)
    if not target or not target.startswith("sm_") and not target.startswith("compute_"):
        return Library(path, size, "ptx", problems=(Problem(Code.E014, "PTX has no .target sm_XX directive"),))
    target = target.replace("compute_", "sm_")
    if not is_cuda_target(target):
        return Library(path, size, "ptx", problems=(Problem(
            Code.E014, f"PTX .target {target!r} is not a CUDA architecture"),))
    entry = Entry("nvidia", PTX, target, version or (0, 0), "none", size, size, 0,
                  kernels=kernels, decoded=True, ptx_target=target)
    return Library(path, size, "ptx", (Container("nvidia", STANDALONE, "", 0, size, (entry,)),))


def _elf(f: OpenFile) -> Library:
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
    data = _read_all(f.src, size, f.settings.max_payload)
    try:
        if h.machine == elf.EM_CUDA:
            target, kernels, toolkit = fatbin.cubin_facts(data)
            if not is_cuda_target(target):
                raise fatbin.FatbinError(f"cubin e_flags name no CUDA architecture ({target})", code=Code.E014)
            entry = Entry("nvidia", SASS, target, (1, h.abiversion), "none", size, size, 0,
                          kernels=kernels, toolkit=toolkit, decoded=True,
                          defines_nothing=not kernels and fatbin.cubin_defines_nothing(data))
            fmt = "cubin"
        else:
            small = elf.parse_small(data)
            target = hip.target_from_elf(h.flags, h.abiversion)
            kernels = tuple(sorted({n[:-3] for n, *_ in small.symbols() if n.endswith(".kd")}))
            if h.abiversion not in hip.CO_VERSION:
                raise ValueError(f"code object ABI version {h.abiversion} is unknown")
            version = (hip.CO_VERSION[h.abiversion], 0)
            entry = Entry("amd", CODE_OBJECT, target, version, "none", size, size, 0,
                          kernels=kernels, decoded=True, own_target=target)
            fmt = "hsaco"
    except elf.ElfError as e:
        return Library(path, size, "cubin", problems=(Problem(e.code, str(e)),))
    except fatbin.FatbinError as e:
        return Library(path, size, "cubin", problems=(Problem(e.code, str(e)),))
    except ValueError as e:
        return Library(path, size, "cubin", problems=(Problem(Code.E014, str(e)),))
    return Library(path, size, fmt, (Container(entry.vendor, STANDALONE, "", 0, size, (entry,)),))


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
            segments = elf.parse_segments(bytes(src.buf[h.phoff:ph_stop]), h.phnum, size)
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
    found = scan.run(src, _zones(size, segments))
    problems = found.problems
    sections: list[elf.Section] = []
    if h.shnum:
        try:
            sections = elf.parse_sections(bytes(table), h.shnum, size)
            names = sections[h.shstrndx]
            lo = sh_start - SHSTR_WINDOW
            if (names.offset >= max(lo, 0) and names.file_end <= sh_start
                    and len(names_window) == sh_start - max(lo, 0)):
                blob = bytes(names_window[names.offset - max(lo, 0):names.file_end - max(lo, 0)])
            elif names.file_end <= HEAD:
                blob = bytes(head_capture[names.offset:names.file_end])
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
    needed, runpath = _dynamic(dyn_names, notes)
    containers = attribute(found, sections, segments, problems)
    return Library(path, size, "elf", tuple(containers), needed, runpath, tuple(found.claims),
                   tuple(problems), tuple(notes), tuple(found.linkers))


def _zones(size: int, segments: tuple[elf.Segment, ...]) -> list[Zone]:
    """Which patterns to search where, from the program headers. Containers are searched for in
    every byte: a library may load device code from its own .text or from bytes no segment maps
    (cuModuleLoadData on an image it reads itself). Wrapper records only matter in writable
    data, embedded claims in read-only data (or, in older layouts where .rodata shares the
    executable segment, there too)."""
    loads = sorted((s for s in segments if s.type == elf.PT_LOAD and s.filesz), key=lambda s: s.offset)
    containers = LibraryScan.patterns(code=True, strings=False)
    if not loads:
        return [Zone(0, size, LibraryScan.patterns(code=True, data=True))]
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
            pats = containers if separate else LibraryScan.patterns(code=True)
        elif seg.writable:
            pats = LibraryScan.patterns(code=True, data=True, strings=False)
        else:
            pats = LibraryScan.patterns(code=True)
        zones.append(Zone(start, stop, pats))
        pos = stop
    if pos < size:
        zones.append(Zone(pos, size, containers))
    return zones


def fetch(chunks: Chunks, start: int, stop: int, size: int) -> bytes:
    """Bytes [start, stop) of the file, read again from its start: a second pass, used only
    for the rare table that lies where the first could not keep it."""
    src = Source(_guard(chunks()), size)
    if not src.skip_to(start) or not src.ensure(stop):
        raise elf.ElfError("range lies past the end of the file")
    return bytes(src.buf[:stop - start])


def _dynamic(names: _DynamicNames, notes: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if not names.seen:
        return (), ()
    if names.strings is None:
        notes.append("NEEDED/RUNPATH names passed before they could be captured; not listed")
        return (), ()
    strings, base, lo = bytes(names.strings), names.base, names.lo
    needed: list[str] = []
    runpath: list[str] = []
    for tag, val in names.entries:
        if tag == elf.DT_NEEDED:
            needed.append(elf.cstring(strings, base + val - lo))
        elif tag in (elf.DT_RPATH, elf.DT_RUNPATH):
            runpath.extend(p for p in elf.cstring(strings, base + val - lo).split(":") if p)
    return tuple(needed), tuple(runpath)


# ---- attribution ----

FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")


def _unregistered(wrappers: Sequence[FatbinWrapper | HipWrapper], where: list[elf.Section],
                  segments: tuple[elf.Segment, ...], found_at: set[int], code: Code, what: str,
                  missing: str) -> list[Problem]:
    """A problem for each wrapper (in one of the `where` sections) that registers an address
    where nothing was found. Position-independent libraries leave the address 0 for a relocation
    to fill at load: those are not judged."""
    out = []
    for w in wrappers:
        if w.address and any(s.offset <= w.offset < s.file_end for s in where):
            off = elf.vaddr_to_offset(segments, w.address)
            if off is not None and off not in found_at:
                out.append(Problem(code, f"{what} at 0x{w.offset:x} registers 0x{off:x}, where {missing}", off))
    return out


def attribute(found: ScanResult, sections: list[elf.Section], segments: tuple[elf.Segment, ...],
              problems: list[Problem], alignment: int = ALIGN_SLACK) -> list[Container]:
    """Name each container's section and role; check fatbin sections are fully accounted for.
    A gap before the first container must be shorter than `alignment`; a gap after a container
    (before the next or the section's end) may reach the section's own alignment (aarch64
    libraries align containers to 256 bytes), and must be zeros."""
    seg_sections = [s for s in sections if s.name == ".nvFatBinSegment"]
    dlink = set()
    for w in found.wrappers:
        if w.version == 2 and any(s.offset <= w.offset < s.file_end for s in seg_sections):
            off = elf.vaddr_to_offset(segments, w.address)
            if off is not None:
                dlink.add(off)
    device_sections = [s for s in sections if s.name in (*FATBIN_SECTIONS, ".hip_fatbin")]
    for p in found.soft:
        if not sections or any(s.offset <= (p.offset or 0) < s.file_end for s in device_sections):
            problems.append(p)
    out: list[Container] = []
    for c in found.containers:
        sec = next((s for s in sections if s.type not in (0, elf.SHT_NOBITS) and s.offset <= c.offset < s.file_end),
                   None)
        name = sec.name if sec else ""
        problems += _misplaced(Code.E011, "fatbin container", c.offset, c.size, sec, bool(sections))
        role: Role
        if name == ".nv_fatbin":
            role = DEVICE_LINK if c.offset in dlink else EXECUTABLE
        elif name == "__nv_relfatbin":
            role = RELOCATABLE
        else:
            role = EMBEDDED
            if sec is not None and not c.entries:
                problems.append(_empty_outside_fatbin_section(c.offset, name))
        out.append(Container("nvidia", role, name, c.offset, c.size, c.entries))
    # The runtimes register what the wrappers in .nvFatBinSegment / .hipFatBinSegment point at:
    # each must be a container (a bundle) that was found and verified; one whose magic is damaged
    # is not found at all.
    hip_segs = [s for s in sections if s.name == ".hipFatBinSegment"]
    problems += _unregistered(found.wrappers, seg_sections, segments, {c.offset for c in found.containers},
                              Code.E011, "fatbin wrapper", "no fatbin container was found")
    problems += _unregistered(found.hip_wrappers, hip_segs, segments, {b.offset for b in found.bundles},
                              Code.E030, "HIP wrapper", "no valid offload bundle was found")
    for b in found.bundles:
        sec = next((s for s in sections if s.offset <= b.offset < s.file_end and s.type not in (0, elf.SHT_NOBITS)),
                   None)
        problems += _misplaced(Code.E033, "HIP bundle", b.offset, b.size, sec, bool(sections))
        out.append(replace(b, section=sec.name if sec else ""))
    for s in sections:
        if s.name == ".hip_fatbin" and s.size and s.type != elf.SHT_NOBITS:
            inside_b = [b for b in found.bundles if s.offset <= b.offset < s.file_end]
            covered = sum(b.size for b in inside_b)
            # bundles are page-aligned in the section: a gap of less than a page may follow each
            if s.size - covered >= HIP_ALIGN * (len(inside_b) + 1):
                problems.append(Problem(Code.E030, f".hip_fatbin: {s.size - covered} of its {s.size} bytes are "
                                                f"not a valid offload bundle", s.offset))
        if s.name in FATBIN_SECTIONS and not s.size:
            problems.append(Problem(Code.E011, f"{s.name} is empty (nvcc never writes an empty fatbin section)",
                                    s.offset))
        if s.name in FATBIN_SECTIONS and s.size and not _accounted(s, found.containers, alignment):
            covered = sum(c.size for c in found.containers if s.offset <= c.offset < s.file_end)
            why = (f"{s.size - covered} of its {s.size} bytes are not a valid fatbin container" if covered <= s.size
                   else f"its containers declare {covered} bytes, {covered - s.size} more than the section holds")
            problems.append(Problem(Code.E011, f"{s.name}: {why}", s.offset))
    out.sort(key=lambda c: c.offset)
    return out


def _empty_outside_fatbin_section(offset: int, section: str) -> Problem:
    """An empty fatbin container (no entries) in a section that no accounting covers (.rodata,
    .text; a DLL's .rdata): nvcc writes empty containers only in its fatbin section (nvlink's,
    accounted there), and a container whose size was cut to 0 elsewhere would hide the entries
    after it unseen, however damaged their headers are."""
    return Problem(Code.E011, f"fatbin container at 0x{offset:x} in {section} is empty (nvcc writes empty ones only "
                           f"in its fatbin section): nothing accounts for the bytes after it", offset)


def _misplaced(code: Code, what: str, offset: int, size: int, sec: elf.Section | None,
               sectioned: bool) -> list[Problem]:
    """A container (an offload bundle) must lie within the section it starts in: every byte a
    linker places is in a section, so one in none, or running past its section's end, was put
    there after the link, where no tool that reads sections sees it."""
    if sec is not None and offset + size > sec.file_end:
        return [Problem(code, f"{what} at 0x{offset:x} overruns section {sec.name}", offset)]
    if sec is None and sectioned:
        return [Problem(code, f"{what} at 0x{offset:x} lies in no section", offset)]
    return []


def _accounted(s: elf.Section, containers: list[FoundContainer], alignment: int) -> bool:
    """Whether a fatbin section holds containers and nothing else but alignment padding: a
    section holding no container at all (a header damaged, its size cut below one container)
    hides its code, and so would non-zero bytes between containers."""
    inside = sorted((c for c in containers if s.offset <= c.offset < s.file_end), key=lambda c: c.offset)
    if not inside or inside[0].offset - s.offset >= alignment:
        return False
    pad = max(alignment, min(s.addralign, PAD_WINDOW))
    for c, nxt in zip(inside, inside[1:] + [None]):
        stop = nxt.offset if nxt is not None else s.file_end
        gap = stop - (c.offset + c.size)
        if gap < 0:
            return False
        if gap >= alignment and (gap >= pad or (stop - s.offset) % pad and nxt is not None):
            return False
        if gap and (len(c.trailing) < gap or any(c.trailing[:gap])):
            return False
    return True
