"""One forward pass over a library's bytes: find every device-code container in it.

Wheels hold libraries of hundreds of megabytes that are only available as an inflating
stream, and an ELF's section table sits at its end. So the scanner does not wait for
the table: it searches the stream for container magics, validates and walks each
container as it passes, captures the few small ranges it needs later (headers, the
section table, the dynamic segment), and attributes containers to sections at the end.
This also finds containers in sections cuobjdump never reads (.rodata, .cask_resource).
"""

from __future__ import annotations

import os
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from . import elf, fatbin
from .errors import ArchauditError
from .model import (
    CODE_OBJECT,
    DEVICE_LINK,
    EMBEDDED,
    EXECUTABLE,
    PTX,
    RELOCATABLE,
    SASS,
    STANDALONE,
    Container,
    Entry,
    Library,
    Problem,
)

try:
    from . import hip as _hip
except ImportError:  # pragma: no cover - the AMD reader is optional at import time
    _hip = None  # type: ignore[assignment]
try:
    from .claims import embedded_claim_markers, parse_embedded
except ImportError:  # pragma: no cover
    embedded_claim_markers = None  # type: ignore[assignment]
    parse_embedded = None  # type: ignore[assignment]

HEAD = 4 << 20  # always kept: ELF header, program headers, usually .dynstr
SHSTR_WINDOW = 1 << 20  # bytes before the section table kept in the hope .shstrtab is there
CLAIM_WINDOW = 4096
DEFAULT_MAX_PAYLOAD = 256 << 20  # one entry decoded at a time, never more than this
SEAM = 64  # longer than any pattern: what a window keeps between chunks
CHUNK_GUESS = 1 << 21  # a chunk is never larger than this; chunks ending before a skip target are not kept
DEVICE_SUFFIXES = (".cubin", ".fatbin", ".ptx", ".hsaco")
HIP_WRAPPER_MAGIC = b"FPIH"  # 0x48495046, the __hip_fatbin_wrapper record in .hipFatBinSegment

Chunks = Callable[[], Iterable[bytes]]


class _Capture:
    __slots__ = ("want", "stop", "out", "done")

    def __init__(self, want: int, stop: int, out: bytearray, done):
        self.want, self.stop, self.out, self.done = want, stop, out, done


class Source:
    """A forward-only window over a byte stream, with ranges captured as they pass."""

    def __init__(self, chunks: Iterable[bytes], size: int):
        self._it: Iterator[bytes] = iter(chunks)
        self.size = size
        self.buf = bytearray()
        self.base = 0  # file offset of buf[0]
        self.read = 0  # bytes pulled from the stream
        self._captures: list[tuple[int, int, bytearray]] = []

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
        chunk, lo, hi = got
        if keep:
            self.buf += chunk
        else:
            del self.buf[:]
            self.base = hi
        return True

    def skim(self, patterns: tuple[bytes, ...], stop: int) -> bool:
        """Pull the next chunk like _pull, but when it ends before `stop` and holds none of the
        patterns (also across the seam with the window's short tail) keep only its last
        SEAM bytes instead of copying it into the window: most of a library is such chunks."""
        got = self._next()
        if got is None:
            return False
        chunk, lo, hi = got
        if hi <= stop and len(self.buf) <= SEAM < len(chunk):
            seam = bytes(self.buf) + chunk[:SEAM]
            if not any(p in seam or p in chunk for p in patterns):
                self.buf = bytearray(chunk[-SEAM:])
                self.base = hi - SEAM
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
        for cap in finished:
            cap.done(cap.out)

    def ensure(self, stop: int) -> bool:
        while self.end < stop:
            if not self._pull():
                return False
        return True

    def release(self, upto: int) -> None:
        cut = min(upto, self.end) - self.base
        if cut > 0:
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


class _Scan:
    def __init__(self, path: str, size: int, decode: bool, max_payload: int):
        self.path = path
        self.size = size
        self.decode = decode
        self.max_payload = max_payload
        self.found: list[tuple[int, int, tuple[Entry, ...]]] = []  # (offset, size, entries)
        self.bundles: list[Container] = []
        self.wrappers: list[tuple[int, int, int]] = []  # (record offset, version, address)
        self.hip_wrappers: list[tuple[int, int]] = []  # (record offset, bundle address)
        self.problems: list[Problem] = []
        self.claims: list[str] = []
        self.pending: deque = deque()
        # Header-level rejects: real problems inside device-code sections, coincidences elsewhere.
        self.soft: list[Problem] = []
        self.pending_bytes = 0
        # Short markers cost a slow search over every library; the long one finds PyTorch's
        # gencode string in libtorch_cuda.so, which every CUDA torch wheel ships.
        self.markers: tuple[bytes, ...] = tuple(
            m for m in (embedded_claim_markers() if embedded_claim_markers else ()) if len(m) >= 16)

    def problem(self, code: str, message: str, offset: int | None = None) -> None:
        self.problems.append(Problem(code, message, offset))

    # -- the pass --
    def run(self, src: Source, zones: list[tuple[int, int, tuple[bytes, ...]]]) -> None:
        """Walk the stream zone by zone, searching each zone only for the patterns that can
        occur there (see _zones)."""
        cursor = 0
        for start, stop, patterns in zones:
            if cursor >= stop:
                continue
            cursor = max(cursor, start)
            if not patterns:
                src.skip_to(stop)
                cursor = stop
                continue
            cursor = self._zone(src, cursor, stop, patterns)
        src.drain()
        self.resolve()
        if src.read != self.size:
            self.problem("E002", f"stream ended after {src.read} of {self.size} bytes")

    def _zone(self, src: Source, cursor: int, stop: int, patterns: tuple[bytes, ...]) -> int:
        markers = self.markers
        nxt = {p: -1 for p in patterns}  # next occurrence at or after the cursor; -1: none up to upto[p]
        upto = {p: cursor for p in patterns}
        while True:
            best, best_pat = -1, b""
            for p in patterns:  # fatbin magic first; later patterns only up to the best so far
                at = nxt[p]
                limit = min(src.end, stop + len(p) - 1)
                if best >= 0:
                    limit = min(limit, best + len(p) - 1)
                if at < cursor and (at >= 0 or upto[p] < limit):
                    frm = max(cursor, upto[p] - len(p) + 1) if at < 0 else cursor
                    found = src.buf.find(p, frm - src.base, limit - src.base)
                    at = nxt[p] = (found + src.base) if found >= 0 else -1
                    upto[p] = limit
                if at >= 0 and (best < 0 or at < best):
                    best, best_pat = at, p
            if best < 0:
                if src.end >= stop + SEAM or src.end >= self.size:
                    return max(cursor, stop)
                keep = max(cursor, src.end - SEAM)
                src.release(keep)
                if not src.skim(patterns, stop):
                    return max(keep, stop)
                cursor = max(keep, src.base)
                for p in patterns:
                    upto[p] = max(upto[p], src.base)
                continue
            if best_pat == fatbin.MAGIC:
                cursor = self._container(src, best)
            elif best_pat == fatbin.WRAPPER_MAGIC:
                cursor = self._wrapper(src, best)
            elif best_pat == HIP_WRAPPER_MAGIC:
                cursor = self._hip_wrapper(src, best)
            elif best_pat in markers:
                cursor = self._claim(src, best)
            else:
                cursor = self._bundle(src, best)
            src.release(cursor)

    def _wrapper(self, src: Source, at: int) -> int:
        if at % 8 == 0 and src.ensure(at + fatbin.WRAPPER.size):
            rec = fatbin.parse_wrapper(src.buf, at - src.base)
            if rec:
                self.wrappers.append((at, rec[0], rec[1]))
                return at + fatbin.WRAPPER.size
        return at + 1

    def _hip_wrapper(self, src: Source, at: int) -> int:
        # __hip_fatbin_wrapper {u32 magic "HIPF", u32 version 1, void *bundle, void *unused}
        if at % 8 == 0 and src.ensure(at + 24):
            version = int.from_bytes(src.buf[at - src.base + 4:at - src.base + 8], "little")
            if version == 1:
                addr = int.from_bytes(src.buf[at - src.base + 8:at - src.base + 16], "little")
                self.hip_wrappers.append((at, addr))
                return at + 24
        return at + 1

    def _claim(self, src: Source, at: int) -> int:
        src.ensure(at + CLAIM_WINDOW)
        window = bytes(src.buf[at - src.base:at - src.base + CLAIM_WINDOW])
        found = parse_embedded(window) if parse_embedded else []
        self.claims.extend(c for c in found if c not in self.claims)
        return at + 1

    def _bundle(self, src: Source, at: int) -> int:
        head_need = 4096
        src.ensure(at + head_need)
        try:
            total = _hip.extent(bytes(src.buf[at - src.base:at - src.base + head_need]))
            if total is None:
                return at + 1
            if at + total > self.size:
                raise _hip.Malformed("E030", "bundle overruns the file")
        except _hip.Malformed as e:  # an impossible header: a coincidence unless in .hip_fatbin
            self.soft.append(Problem(e.code, f"HIP bundle at 0x{at:x}: {e}", at))
            return at + 1
        try:
            if total > self.max_payload * 4:
                raise _hip.Malformed("E032", f"bundle of {total} bytes is too large to verify")
            if not src.ensure(at + total):
                raise _hip.Malformed("E030", "bundle is truncated")
            blob = bytes(src.buf[at - src.base:at - src.base + total])
            self.bundles.append(_hip.parse(blob, at, "", max_decoded=self.max_payload))
            return at + total
        except _hip.Malformed as e:
            self.problem(e.code, f"HIP bundle at 0x{at:x}: {e}", at)
            return at + 1

    def _container(self, src: Source, at: int) -> int:
        if not src.ensure(at + fatbin.CONTAINER_HEADER.size):
            return at + 1
        head = fatbin.parse_container_header(src.buf, at - src.base)
        if head is None:
            return at + 1
        end = at + head.total
        if end > self.size:  # a coincidental magic unless it lies in a fatbin section
            self.soft.append(Problem("E011", f"fatbin container at 0x{at:x} declares {head.fat_size} bytes, "
                                             f"past the end of the file", at))
            return at + 1
        entries: list[Entry] = []
        pos = at + head.header_size
        try:
            while pos < end:
                if not src.ensure(pos + fatbin.ENTRY_HEADER.size):
                    raise fatbin.FatbinError("E011", "file ends inside an entry header", pos)
                eh = fatbin.parse_entry_header(src.buf, pos - src.base, end - pos, pos)
                if not src.ensure(pos + eh.header_size):
                    raise fatbin.FatbinError("E011", "file ends inside an entry header", pos)
                ident = fatbin.identifier(src.buf[pos - src.base:pos - src.base + eh.header_size], eh)
                entries.append(self._entry(src, pos, eh, ident))
                pos += eh.total
                src.release(pos)
        except fatbin.FatbinError as e:
            self.problem(e.code, f"fatbin container at 0x{at:x}: {e}", e.offset)
            self.found.append((at, head.total, ()))
            return end
        if self._entry_at(src, end):  # outside a fatbin section no accounting would notice
            self.problem("E011", f"fatbin container at 0x{at:x}: an entry follows its declared end, "
                                 f"so its size hides entries", end)
        self.found.append((at, head.total, tuple(entries)))
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

    def _frame_check(self, src: Source, pos: int, payload_at: int, eh: fatbin.EntryHeader) -> None:
        """Without decoding, still check what the payload's first bytes promise: a raw cubin is
        a CUDA ELF for the header's architecture; a zstd frame declares the header's size."""
        head = min(eh.payload_size, 64)
        if not src.ensure(payload_at + head):
            raise fatbin.FatbinError("E011", "file ends inside an entry payload", pos)
        first = bytes(src.buf[payload_at - src.base:payload_at - src.base + head])
        fatbin.check_payload_start(eh, first, pos)

    def _entry(self, src: Source, pos: int, eh: fatbin.EntryHeader, ident: str) -> Entry:
        kind = eh.kind
        payload_at = pos + eh.header_size
        entry = dict(vendor="nvidia", kind=kind, target=eh.target, code_version=eh.version,
                     compression=eh.compression, stored_size=eh.stored_size, size=eh.size,
                     offset=pos, identifier=ident, debug=bool(eh.flags & fatbin.FLAG_DEBUG))
        if not self.decode or kind == "lto":
            if kind != "lto":
                self._frame_check(src, pos, payload_at, eh)
            src.skip_to(payload_at + eh.payload_size)
            return Entry(**entry)
        if eh.payload_size > self.max_payload or eh.size > self.max_payload:
            raise fatbin.FatbinError("E012", f"{eh.target} entry of {max(eh.payload_size, eh.size)} "
                                             f"bytes exceeds the {self.max_payload}-byte bound", pos)
        if not src.ensure(payload_at + eh.payload_size):
            raise fatbin.FatbinError("E011", "file ends inside an entry payload", pos)
        raw = bytes(src.buf[payload_at - src.base:payload_at - src.base + eh.payload_size])
        # Decoding (zstd/LZ4, GIL-free) runs beside the inflating reader; results are collected
        # in order at the end, with the bytes in flight bounded.
        fut = _decoder().submit(_decode_entry, eh, raw, pos, self.max_payload, entry)
        self.pending.append((fut, len(raw) + eh.size))
        self.pending_bytes += len(raw) + eh.size
        while self.pending_bytes > MAX_IN_FLIGHT and len(self.pending) > 1:
            done, nbytes = self.pending.popleft()
            done.exception()  # wait; the result is read when the container is resolved
            self.pending_bytes -= nbytes
        return fut  # type: ignore[return-value]

    def resolve(self) -> None:
        """Replace decode futures by their entries; a failed decode fails its container."""
        resolved = []
        for at, total, entries in self.found:
            out = []
            try:
                for e in entries:
                    out.append(e.result() if isinstance(e, Future) else e)
            except fatbin.FatbinError as err:
                self.problem(err.code, f"fatbin container at 0x{at:x}: {err}", err.offset)
                out = []
            resolved.append((at, total, tuple(out)))
        self.found = resolved
        self.pending.clear()


_NAMES: dict[str, str] = {}  # one copy of each kernel name: the same kernel recurs once per target


def _interned(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(_NAMES.setdefault(n, n) for n in names)


def _decode_entry(eh: fatbin.EntryHeader, raw: bytes, pos: int, max_payload: int, entry: dict) -> Entry:
    data = fatbin.decode_payload(eh, raw, pos, max_payload)
    if eh.kind == SASS:
        try:
            target, kernels, toolkit = fatbin.cubin_facts(data)
        except (elf.ElfError, struct.error, IndexError) as e:
            raise fatbin.FatbinError("E014", f"{eh.target} cubin: {e}", pos) from None
        if target.rstrip("a") != f"sm_{eh.arch}":
            raise fatbin.FatbinError("E014", f"cubin says {target}, entry header says {eh.target}", pos)
        # From sm_90 on a cubin records the arch-specific 'a' in .nv.compat: it must agree.
        if eh.arch >= 90 and target.endswith("a") != (eh.suffix == "a"):
            raise fatbin.FatbinError("E014", f"cubin says {target}, entry header says {eh.target}", pos)
        return Entry(**entry, kernels=_interned(kernels), toolkit=toolkit, decoded=True,
                     unresolved=fatbin.cubin_unresolved(data))
    target, version, kernels = fatbin.ptx_facts(data)
    if target is None:
        raise fatbin.FatbinError("E014", f"{eh.target} PTX has no .target directive", pos)
    written = target.replace("compute_", "sm_")
    # The driver JIT-compiles for the text's .target: a suffix the header lacks (TensorFlow's
    # compute_90 entries whose text says sm_90a) is recorded for the rules to judge, while a
    # different architecture number is not the entry the header describes.
    if not _cuda_target(written) or written.rstrip("af") != eh.target.rstrip("af"):
        raise fatbin.FatbinError("E014", f"PTX says .target {target}, entry header says {eh.target}", pos)
    return Entry(**entry, kernels=_interned(kernels), decoded=True, ptx_target=written)


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
MAX_IN_FLIGHT = 64 << 20


def _decoder() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max(1, os.cpu_count() or 1), thread_name_prefix="archaudit-decode")
        return _POOL


def scan_stream(path: str, size: int, chunks: Chunks, *, decode: bool = False,
                max_payload: int = DEFAULT_MAX_PAYLOAD) -> Library:
    """Inventory one file from a factory of its byte chunks (called again only if needed)."""
    try:
        return _scan(path, size, chunks, decode, max_payload)
    except _ReadFailed as e:
        return Library(path, size, "other", problems=(Problem(e.code, str(e)),))
    except MemoryError:
        return Library(path, size, "other", problems=(Problem("E012", "ran out of memory while verifying"),))
    except Exception as e:  # noqa: BLE001 - fail closed: an input we could not handle is unverified
        return Library(path, size, "other", problems=(Problem(
            "E099", f"could not be verified: internal error {type(e).__name__}: {e}"),))


class _ReadFailed(ArchauditError):
    """A library that cannot be read to its end: the code of the finding it becomes."""

    def __init__(self, code: str, message: str):
        super().__init__(message, code=code)


def _scan(path: str, size: int, chunks: Chunks, decode: bool, max_payload: int) -> Library:
    src = Source(_guard(chunks()), size)
    src.ensure(64)
    head = bytes(src.buf[:64])
    lower = path.lower()
    if elf.is_elf(head):
        try:
            h = elf.parse_header(head, size)
        except elf.ElfError as e:
            return Library(path, size, "elf", problems=(Problem(e.code, f"malformed ELF: {e}"),))
        if h.machine in (elf.EM_CUDA, elf.EM_AMDGPU):
            return _device_elf(path, size, src, h, max_payload)
        return _host_elf(path, size, src, h, chunks, decode, max_payload)
    if head.startswith(fatbin.MAGIC) or (_hip and head.startswith(_hip.MAGICS)):
        scan = _Scan(path, size, decode, max_payload)
        scan.run(src, [(0, size, _patterns(scan, code=True, data=False))])
        containers = [Container("nvidia", STANDALONE, "", o, n, e) for o, n, e in scan.found]
        containers += [_with(c, role=STANDALONE) for c in scan.bundles]
        containers.sort(key=lambda c: c.offset)
        scan.problems.extend(scan.soft)  # a bare fatbin file is all device code
        if not containers and not scan.problems:
            scan.problem("E011", "not a valid fatbin container")
        return Library(path, size, "fatbin", tuple(containers), problems=tuple(scan.problems))
    if lower.endswith(".ptx"):
        return _ptx_file(path, size, src, max_payload)
    if lower.endswith(DEVICE_SUFFIXES):
        return Library(path, size, "other",
                       problems=(Problem("E014", "not a cubin, fatbin, PTX or code object"),))
    from . import macho, pe  # Windows and macOS libraries, read with this module's scanner
    if pe.is_pe(head):
        return pe.read(path, size, src, chunks, decode, max_payload)
    if macho.is_macho(head):
        return macho.read(path, size, src, decode, max_payload)
    return Library(path, size, "other", problems=(Problem("E010", "malformed ELF: not an ELF file"),))


def _guard(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Turn reader failures (zip member errors, I/O) into a read failure of this file."""
    try:
        yield from chunks
    except OSError as e:
        raise _ReadFailed("E001", f"cannot read: {e}") from None
    except Exception as e:  # noqa: BLE001 - zipread.MemberError and friends carry a code
        raise _ReadFailed(getattr(e, "code", "E002"), str(e)) from None


def _read_all(src: Source, size: int, max_payload: int) -> bytes:
    if size > max_payload:
        raise _ReadFailed("E012", f"{size} bytes exceed the {max_payload}-byte verification bound")
    src.ensure(size + 1)
    if src.end != size:
        raise _ReadFailed("E002", f"file has {src.end} bytes, expected {size}")
    return bytes(src.buf)


def _cuda_target(target: str) -> bool:
    from .arch import CudaTarget
    try:
        CudaTarget.parse(target)
    except ValueError:
        return False
    return True


def _ptx_file(path: str, size: int, src: Source, max_payload: int) -> Library:
    data = _read_all(src, size, max_payload)
    target, version, kernels = fatbin.ptx_facts(data)
    if not target or not target.startswith("sm_") and not target.startswith("compute_"):
        return Library(path, size, "ptx", problems=(Problem("E014", "PTX has no .target sm_XX directive"),))
    target = target.replace("compute_", "sm_")
    if not _cuda_target(target):
        return Library(path, size, "ptx",
                       problems=(Problem("E014", f"PTX .target {target!r} is not a CUDA architecture"),))
    entry = Entry("nvidia", PTX, target, version or (0, 0), "none", size, size, 0,
                  kernels=kernels, decoded=True, ptx_target=target)
    return Library(path, size, "ptx", (Container("nvidia", STANDALONE, "", 0, size, (entry,)),))


def _device_elf(path: str, size: int, src: Source, h: elf.Header, max_payload: int) -> Library:
    data = _read_all(src, size, max_payload)
    try:
        if h.machine == elf.EM_CUDA:
            target, kernels, toolkit = fatbin.cubin_facts(data)
            if not _cuda_target(target):
                raise fatbin.FatbinError("E014", f"cubin e_flags name no CUDA architecture ({target})")
            entry = Entry("nvidia", SASS, target, (1, h.abiversion), "none", size, size, 0,
                          kernels=kernels, toolkit=toolkit, decoded=True)
            fmt = "cubin"
        else:
            if _hip is None:
                raise _ReadFailed("E014", "AMD code objects cannot be read (reader missing)")
            small = elf.parse_small(data)
            target = _hip.target_from_elf(h.flags)
            kernels = tuple(sorted({n[:-3] for n, *_ in small.symbols() if n.endswith(".kd")}))
            entry = Entry("amd", CODE_OBJECT, target, (0, 0), "none", size, size, 0,
                          kernels=kernels, decoded=True)
            fmt = "hsaco"
    except (elf.ElfError, fatbin.FatbinError, ValueError) as e:
        return Library(path, size, "cubin", problems=(Problem(getattr(e, "code", "E014"), str(e)),))
    vendor = entry.vendor
    return Library(path, size, fmt, (Container(vendor, STANDALONE, "", 0, size, (entry,)),))


def _with(c: Container, **kw) -> Container:
    fields = {k: getattr(c, k) for k in Container.__slots__}
    fields.update(kw)
    return Container(**fields)


def _host_elf(path: str, size: int, src: Source, h: elf.Header, chunks: Chunks, decode: bool,
              max_payload: int) -> Library:
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
    dyn_names: dict[str, object] = {}

    def on_dynamic(raw: bytearray) -> None:
        # .dynstr usually precedes .dynamic, but patchelf moves it to the end of the file.
        entries = elf.dynamic_entries(bytes(raw))
        strtab = next((v for t, v in entries if t == elf.DT_STRTAB), None)
        base = elf.vaddr_to_offset(segments, strtab) if strtab is not None else None
        offs = [v for t, v in entries if t in (elf.DT_NEEDED, elf.DT_RPATH, elf.DT_RUNPATH)]
        if base is None or not offs:
            return
        lo, hi = base + min(offs), min(size, base + max(offs) + 4096)
        dyn_names.update(entries=entries, base=base, lo=lo)
        if lo >= src.base:
            dyn_names["strings"] = src.capture(lo, hi)
        elif hi <= len(head_capture):
            dyn_names["strings"] = head_capture[lo:hi]

    if dyn:
        src.capture(dyn.offset, dyn.offset + dyn.filesz, on_dynamic)
    scan = _Scan(path, size, decode, max_payload)
    scan.run(src, _zones(scan, size, segments))
    problems = scan.problems
    sections: list[elf.Section] = []
    if h.shnum:
        try:
            sections = elf.parse_sections(bytes(table), h.shnum, size)
            names = sections[h.shstrndx]
            lo = sh_start - SHSTR_WINDOW
            if names.offset >= max(lo, 0) and names.file_end <= sh_start and len(names_window) == sh_start - max(lo, 0):
                blob = bytes(names_window[names.offset - max(lo, 0):names.file_end - max(lo, 0)])
            elif names.file_end <= HEAD:
                blob = bytes(head_capture[names.offset:names.file_end])
            else:
                notes.append("second pass: the section name table lies away from the section table")
                blob = _fetch(chunks, names.offset, names.file_end, size)
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
    containers = _attribute(scan, sections, segments, problems)
    return Library(path, size, "elf", tuple(containers), needed, runpath, tuple(scan.claims),
                   tuple(problems), tuple(notes))


def _patterns(scan: _Scan, *, code: bool, data: bool, strings: bool = True) -> tuple[bytes, ...]:
    out = [fatbin.MAGIC]
    if data:
        out.append(fatbin.WRAPPER_MAGIC)
        if _hip is not None:
            out.append(HIP_WRAPPER_MAGIC)
    if _hip is not None:
        out.extend(_hip.MAGICS if code else [m for m in _hip.MAGICS if len(m) >= 16])
    if strings:
        out.extend(scan.markers)
    return tuple(out)


def _zones(scan: _Scan, size: int, segments) -> list[tuple[int, int, tuple[bytes, ...]]]:
    """Which patterns to search where, from the program headers. With separate code segments (ld -z separate-code, the
    default since binutils 2.31) an executable segment holds only machine code and is skipped;
    in older layouts, where .rodata and .nv_fatbin share the executable segment, nothing is."""
    loads = sorted((s for s in segments if s.type == elf.PT_LOAD and s.filesz), key=lambda s: s.offset)
    everything = _patterns(scan, code=True, data=True)
    if not loads:
        return [(0, size, everything)]
    # Separate-code layouts map the ELF header (offset 0) read-only and start machine code on a
    # page of its own; older ones map header, .text, .rodata and .nv_fatbin in one R+X segment.
    separate = not loads[0].executable and loads[0].offset == 0
    # Bytes outside every loaded segment (.symtab, .strtab, .comment) never reach memory, so the
    # runtime cannot register device code there: nothing to search.
    unloaded: tuple[bytes, ...] = ()
    zones: list[tuple[int, int, tuple[bytes, ...]]] = []
    pos = 0
    for seg in loads:
        start, stop = max(seg.offset, pos), seg.offset + seg.filesz
        if start > pos:
            zones.append((pos, start, unloaded))
        if stop <= start:
            continue
        if seg.executable:  # old layouts: .rodata and .nv_fatbin may be here, writable data is not
            pats = () if separate else _patterns(scan, code=False, data=False)
        elif seg.writable:
            pats = _patterns(scan, code=True, data=True, strings=False)
        else:
            pats = _patterns(scan, code=True, data=False)
        zones.append((start, stop, pats))
        pos = stop
    if pos < size:
        zones.append((pos, size, unloaded))
    return zones


def _fetch(chunks: Chunks, start: int, stop: int, size: int) -> bytes:
    src = Source(_guard(chunks()), size)
    if not src.skip_to(start) or not src.ensure(stop):
        raise elf.ElfError("range lies past the end of the file")
    return bytes(src.buf[:stop - start])


def _dynamic(names: dict, notes: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if "entries" not in names:
        return (), ()
    if "strings" not in names:
        notes.append("NEEDED/RUNPATH names passed before they could be captured; not listed")
        return (), ()
    strings, base, lo = bytes(names["strings"]), names["base"], names["lo"]
    needed: list[str] = []
    runpath: list[str] = []
    for tag, val in names["entries"]:
        if tag == elf.DT_NEEDED:
            needed.append(elf.cstring(strings, base + val - lo))
        elif tag in (elf.DT_RPATH, elf.DT_RUNPATH):
            runpath.extend(p for p in elf.cstring(strings, base + val - lo).split(":") if p)
    return tuple(needed), tuple(runpath)


ALIGN_SLACK = 8
HIP_ALIGN = 4096


def _attribute(scan: _Scan, sections: list[elf.Section], segments, problems: list[Problem],
               alignment: int = ALIGN_SLACK) -> list[Container]:
    """Name each container's section and role; check fatbin sections are fully accounted for
    (a gap between containers, or at either end, must be shorter than `alignment`)."""
    dlink = set()
    seg_sections = [s for s in sections if s.name == ".nvFatBinSegment"]
    for rec_at, version, addr in scan.wrappers:
        if version == 2 and any(s.offset <= rec_at < s.file_end for s in seg_sections):
            off = elf.vaddr_to_offset(segments, addr)
            if off is not None:
                dlink.add(off)
    device_sections = [s for s in sections if s.name in (".nv_fatbin", "__nv_relfatbin", ".hip_fatbin")]
    for p in scan.soft:
        if not sections or any(s.offset <= (p.offset or 0) < s.file_end for s in device_sections):
            problems.append(p)
    out: list[Container] = []
    by_section: dict[str, int] = {}
    for offset, size, entries in scan.found:
        sec = next((s for s in sections if s.type != elf.SHT_NOBITS and s.offset <= offset < s.file_end
                    and s.type != 0), None)
        name = sec.name if sec else ""
        if sec and offset + size > sec.file_end:
            problems.append(Problem("E011", f"fatbin container at 0x{offset:x} overruns section {name}", offset))
        if sections and sec is None:  # every byte a linker places is in a section
            problems.append(Problem("E011", f"fatbin container at 0x{offset:x} lies in no section", offset))
        if name == ".nv_fatbin":
            role = DEVICE_LINK if offset in dlink else EXECUTABLE
        elif name == "__nv_relfatbin":
            role = RELOCATABLE
        else:
            role = EMBEDDED
        by_section[name] = by_section.get(name, 0) + size
        out.append(Container("nvidia", role, name, offset, size, entries))
    # The CUDA runtime registers what .nvFatBinSegment's wrappers point at: each must be a
    # container that was found (one whose magic is damaged is not found at all).
    found_at = {o for o, _, _ in scan.found}
    for rec_at, _, addr in scan.wrappers:
        if addr and any(s.offset <= rec_at < s.file_end for s in seg_sections):
            off = elf.vaddr_to_offset(segments, addr)
            if off is not None and off not in found_at:
                problems.append(Problem("E011", f"fatbin wrapper at 0x{rec_at:x} registers 0x{off:x}, where no "
                                                f"fatbin container was found", off))
    # The HIP runtime registers what .hipFatBinSegment's wrappers point at: each must be a
    # bundle that was found and verified (a bundle whose magic is damaged is not found at all).
    hip_segs = [s for s in sections if s.name == ".hipFatBinSegment"]
    bundle_at = {b.offset for b in scan.bundles}
    for rec_at, addr in scan.hip_wrappers:
        # Position-independent libraries leave the address 0 for a relocation to fill at load.
        if addr and any(s.offset <= rec_at < s.file_end for s in hip_segs):
            off = elf.vaddr_to_offset(segments, addr)
            if off is not None and off not in bundle_at:
                problems.append(Problem("E030", f"HIP wrapper at 0x{rec_at:x} registers 0x{off:x}, where no "
                                                f"valid offload bundle was found", off))
    for b in scan.bundles:
        sec = next((s for s in sections
                    if s.offset <= b.offset < s.file_end and s.type not in (0, elf.SHT_NOBITS)), None)
        out.append(_with(b, section=sec.name if sec else ""))
    for s in sections:
        if s.name == ".hip_fatbin" and s.size and s.type != elf.SHT_NOBITS:
            inside = [b for b in scan.bundles if s.offset <= b.offset < s.file_end]
            covered = sum(b.size for b in inside)
            # bundles are page-aligned in the section: a gap of less than a page may follow each
            if s.size - covered >= HIP_ALIGN * (len(inside) + 1):
                problems.append(Problem("E030", f".hip_fatbin: {s.size - covered} of its {s.size} bytes are "
                                                f"not a valid offload bundle", s.offset))
        if s.name in (".nv_fatbin", "__nv_relfatbin") and not s.size:
            problems.append(Problem("E011", f"{s.name} is empty (nvcc never writes an empty fatbin section)",
                                    s.offset))
        if s.name in (".nv_fatbin", "__nv_relfatbin") and s.size:
            covered = by_section.get(s.name, 0)
            inside = sorted((o, n) for o, n, _ in scan.found if s.offset <= o < s.file_end)
            ends = [s.offset] + [o + n for o, n in inside]
            gaps = [o - e for (o, _), e in zip(inside, ends)] + [s.file_end - ends[-1]]
            # alignment padding may precede a container, but a section holding no container at
            # all (a header damaged, its size cut below one container) hides its code
            if not inside or max(gaps) >= alignment or covered > s.size:
                problems.append(Problem(
                    "E011", f"{s.name}: {s.size - covered} of its {s.size} bytes are not a valid "
                            f"fatbin container", s.offset))
    out.sort(key=lambda c: c.offset)
    return out


def library_from_bytes(path: str, data: bytes, **kw) -> Library:
    """Inventory a file already in memory (tests, small members)."""
    def chunks() -> Iterator[bytes]:
        for i in range(0, len(data), 1 << 20):
            yield data[i:i + (1 << 20)]
    return scan_stream(path, len(data), chunks, **kw)


def scan_file(path: str, display: str | None = None, **kw) -> Library:
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
        return Library(display or path, 0, "other", problems=(Problem("E001", f"cannot read: {e}"),))
    return scan_stream(display or path, size, chunks, **kw)
