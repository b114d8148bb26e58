"""The record parsers of the scan, one method each, registered by magic (fatbin container,
.nvFatBinSegment and HIP wrappers, embedded claims, the JIT linker's name, offload bundles,
whole cubins outside any container, bare or as a zstd frame: frames.py), and what they found
(ScanResult).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial

from ..claims import embedded_claim_markers, parse_embedded
from ..findings import CODES, Code, Fold
from ..gpus import cuda as arch, vendor
from ..model import LTO, Container, Entry, Problem
from . import elf, fatbin, hip, zstdframe
from .decode import DecodePool, Decoding, result, whole_cubin
from .frames import Frames
from .search import Handler
from .stream import Source

CLAIM_WINDOW = 4096
PAD_WINDOW = 4096  # bytes kept after each container: alignment padding there must be zeros
BUNDLE_HEAD = 4096  # first look at an offload bundle; grown until its extent is known
# The bytes all offload-bundle extents of one library may look at, as a multiple of its size plus
# a constant. A real bundle's look grows x4 from BUNDLE_HEAD until its extent is known, so real
# bundles (which never overlap) look at under 6x their bytes; hostile ones (a CCOB v1 record
# every 32 bytes whose zstd frame never ends) would each look to the end of the file, and are
# cut off here, as E032, once the library's look-ahead is spent (docs/threat-model.md).
LOOKAHEAD_FACTOR = 8
LOOKAHEAD_SLACK = 16 << 20
HIP_WRAPPER_MAGIC = b"FPIH"  # 0x48495046, the __hip_fatbin_wrapper record in .hipFatBinSegment
# A 64-bit little-endian ELF of version 1: a whole cubin when its e_machine is EM_CUDA (190). A host
# library may carry one in its read-only data and load it itself (cuModuleLoadData); a cubin inside a
# fatbin container is never searched for (the container's record skips its bytes), so none is counted twice.
CUBIN_MAGIC = b"\x7fELF\x02\x01\x01"
# Bare zstd frames holding whole cubins are frames.py's records (ZSTD_MAGIC).
ZSTD_MAGIC = zstdframe.MAGIC


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


@dataclass(frozen=True, slots=True)
class FoundCubin:
    """A whole cubin outside any fatbin container: the driver loads it alone (cuModuleLoadData)."""

    offset: int
    size: int
    entry: Entry


@dataclass(slots=True)
class WalkedContainer:
    """A fatbin container as walked, its entries possibly still decoding."""

    offset: int
    size: int
    entries: list[Entry | Future[Entry]]
    trailing: bytes = b""  # the zero bytes after it (padding, up to PAD_WINDOW) and the byte ending them
    zeros: int = 0  # the zero bytes after it within the window looked at (PAD_WINDOW, or its slot's slack)

    def keep_padding(self, after: bytearray) -> None:
        """Keep of the bytes after the container only what the padding check reads: how many are
        zeros, and up to PAD_WINDOW of them with the first byte that is not (never a window per
        container: an empty container is 16 bytes)."""
        self.zeros = len(after) - len(after.lstrip(b"\0"))
        self.trailing = bytes(after[: min(self.zeros, PAD_WINDOW) + 1])


@dataclass(frozen=True, slots=True)
class FoundContainer:
    """A fatbin container the pass found, entries decoded (empty when it failed)."""

    offset: int
    size: int
    entries: tuple[Entry, ...]
    trailing: bytes = b""
    zeros: int = 0  # zero bytes right after it (WalkedContainer.zeros)

    @property
    def zeros_after(self) -> int:
        """The zero bytes known to follow the container."""
        return max(self.zeros, len(self.trailing) - len(self.trailing.lstrip(b"\0")))


SOFT_KEPT = 64  # soft problems of one code kept whole; past these only their offsets are


class SoftProblems:
    """Header-level rejects, which count only where attribution says (inside a device-code
    section, or anywhere in a library without a section table), so each must be kept until the
    section table is read at the end: every one's offset and code (9 bytes), and the first
    SOFT_KEPT of each code whole. A hostile stream of them (one per 32 bytes) costs a fraction of
    its own bytes, never a Python object each (docs/threat-model.md, "Bounded work")."""

    __slots__ = ("_codes", "_kept", "_offsets")

    def __init__(self) -> None:
        self._offsets = array("Q")
        self._codes = array("B")
        self._kept: dict[Code, list[Problem]] = {}

    def append(self, p: Problem) -> None:
        assert p.offset is not None  # a soft problem is where a magic was found
        self._offsets.append(p.offset)
        self._codes.append(_CODE_INDEX[p.code])
        kept = self._kept.setdefault(p.code, [])
        if len(kept) < SOFT_KEPT:
            kept.append(p)

    def __len__(self) -> int:
        return len(self._offsets)

    def counted(self, counts: Callable[[Code, int], bool] = lambda code, offset: True) -> list[Problem]:
        """The problems that count (`counts(code, offset)`), folded by code (findings.Fold), in
        stream order; one past the whole-kept ones is named by its code's title and offset."""
        fold: Fold[Problem] = Fold(lambda p: p.code)
        seen = dict.fromkeys(self._kept, 0)
        for off, ci in zip(self._offsets, self._codes):
            code = _CODES[ci]
            i = seen[code]
            seen[code] = i + 1
            if counts(code, off):
                fold.note(code, partial(_soft_at, self._kept[code], i, code, off))
        return fold.result()


def _soft_at(kept: list[Problem], i: int, code: Code, offset: int) -> Problem:
    """The i-th soft problem of its code: kept whole, or named by its code's title and offset."""
    return kept[i] if i < len(kept) else Problem(code, f"{CODES[code].title} at 0x{offset:x}", offset)


_CODES = tuple(Code)
_CODE_INDEX = {c: i for i, c in enumerate(_CODES)}


@dataclass
class ScanResult:
    """Everything one library's pass found, for attribution to sections."""

    containers: list[FoundContainer] = field(default_factory=list)
    bundles: list[Container] = field(default_factory=list)
    cubins: list[FoundCubin] = field(default_factory=list)  # whole cubins outside any container, bare or framed
    wrappers: list[FatbinWrapper] = field(default_factory=list)
    hip_wrappers: list[HipWrapper] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    linkers: list[str] = field(default_factory=list)  # strings naming a run-time device-code linker
    statements: list[str] = field(default_factory=list)  # sourced statements (STATEMENTS) found, each once
    runtimes: list[str] = field(default_factory=list)  # CUDA runtime versions linked in statically ("13.0")
    problems: list[Problem] = field(default_factory=list)  # folded by code (findings.Fold)
    # Header-level rejects: real problems inside device-code sections, coincidences elsewhere.
    soft: SoftProblems = field(default_factory=SoftProblems)


@dataclass(frozen=True, slots=True)
class ScanSettings:
    """How a library is read: decoding every payload (the default) or headers only (--fast),
    the largest payload verified in memory, and the decode pool shared by the run."""

    decode: bool = True
    max_payload: int = fatbin.DEFAULT_MAX_PAYLOAD  # one entry decoded at a time, never more than this
    pool: DecodePool | None = None
    # The zero bytes a toolchain may leave after a container of a given size, looked at whole
    # after each one (pe.msvc_slack: nvcc's host array for a DLL); None: PAD_WINDOW only.
    container_slack: Callable[[int], int] | None = None


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
        self.frames = Frames(size, settings.decode, settings.max_payload, self.decoding, self.problem)
        self.found = ScanResult()
        self.lookahead = LOOKAHEAD_FACTOR * size + LOOKAHEAD_SLACK
        self.lookahead_left = self.lookahead
        self.problems: Fold[Problem] = Fold(lambda p: p.code)  # one problem per code past FOLD_EXAMPLES

    def handlers(self) -> dict[bytes, Handler]:
        table: dict[bytes, Handler] = {
            fatbin.MAGIC: self.container,
            fatbin.WRAPPER_MAGIC: self.wrapper,
            HIP_WRAPPER_MAGIC: self.hip_wrapper,
        }
        for magic in hip.MAGICS:
            table[magic] = self.bundle
        table[CUBIN_MAGIC] = self.cubin
        table[ZSTD_MAGIC] = self.frames.frame
        for needle in MARKERS:
            table[needle] = self.claim
        table[LINKER_MARKER] = self.linker
        for text in STATEMENTS:
            table[text] = self._statement_handler(text)
        for marker in VERSION_MARKERS:
            table[marker] = self._version_handler(marker)
        table[RUNTIME_MARKER] = self.runtime
        table[RUNTIME_MARKER_A64] = self.runtime_a64
        table[RUNTIME_MARKER_PE] = self.runtime_pe
        return table

    def runtime(self, src: Source, at: int) -> int:
        """cudaRuntimeGetVersion of a statically linked CUDA runtime, x86-64 (RUNTIME_MARKER): the
        version it returns, the runtime's own (13000 for CUDA 13.0), kept once as "13.0"."""
        return self._runtime_imm32(src, at, RUNTIME_MARKER, RUNTIME_TAIL)

    def runtime_pe(self, src: Source, at: int) -> int:
        """The same record in MSVC's x64 code of a Windows library (RUNTIME_MARKER_PE)."""
        return self._runtime_imm32(src, at, RUNTIME_MARKER_PE, RUNTIME_TAIL_PE)

    def _runtime_imm32(self, src: Source, at: int, marker: bytes, tail: bytes) -> int:
        """The marker, the 32-bit immediate the function stores (its version) and the tail."""
        record = len(marker) + 4 + len(tail)
        src.ensure(at + record)
        body = bytes(src.buf[at - src.base : at - src.base + record])
        if len(body) == record and body.endswith(tail):
            self._keep_runtime(int.from_bytes(body[len(marker) : len(marker) + 4], "little"))
        return at + len(marker)

    def runtime_a64(self, src: Source, at: int) -> int:
        """The same function on aarch64 (RUNTIME_MARKER_A64): its version is the immediate of the
        `movz w2, #imm16` between the marker and RUNTIME_TAIL_A64."""
        src.ensure(at + RUNTIME_RECORD_A64)
        body = bytes(src.buf[at - src.base : at - src.base + RUNTIME_RECORD_A64])
        if len(body) == RUNTIME_RECORD_A64 and body.endswith(RUNTIME_TAIL_A64):
            word = int.from_bytes(body[len(RUNTIME_MARKER_A64) : len(RUNTIME_MARKER_A64) + 4], "little")
            if word & 0xFFE0001F == 0x52800002:  # movz w2, #imm16
                self._keep_runtime((word >> 5) & 0xFFFF)
        return at + len(RUNTIME_MARKER_A64)

    def _keep_runtime(self, version: int) -> None:
        if RUNTIME_VERSIONS[0] <= version < RUNTIME_VERSIONS[1] and version % 10 == 0:
            text = f"{version // 1000}.{version % 1000 // 10}"
            if text not in self.found.runtimes:
                self.found.runtimes.append(text)

    def _version_handler(self, marker: bytes) -> Handler:
        def found(src: Source, at: int) -> int:
            """A vendor's version string (data/vendor.json 'version'): the marker and the printable
            bytes after it, up to VERSION_WINDOW; the first VERSIONS_KEPT distinct ones of a marker."""
            src.ensure(at + VERSION_WINDOW)
            window = bytes(src.buf[at - src.base : at - src.base + VERSION_WINDOW])
            end = next((i for i, c in enumerate(window) if not 32 <= c < 127), len(window))
            text = window[:end].decode("ascii")
            said = self.found.statements
            if text not in said and sum(1 for t in said if t.startswith(marker.decode("ascii"))) < VERSIONS_KEPT:
                said.append(text)
            return at + len(marker)

        return found

    def _statement_handler(self, text: bytes) -> Handler:
        def found(src: Source, at: int) -> int:
            """A sourced statement (data/vendor.json), found whole in the library's own bytes."""
            said = self.found.statements
            if text.decode("utf-8") not in said:
                said.append(text.decode("utf-8"))
            return at + len(text)

        return found

    def problem(self, code: Code, message: str, offset: int | None = None) -> None:
        self.problems.note(code, lambda: Problem(code, message, offset))

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
            version = int.from_bytes(src.buf[at - src.base + 4 : at - src.base + 8], "little")
            if version == 1:
                addr = int.from_bytes(src.buf[at - src.base + 8 : at - src.base + 16], "little")
                self.found.hip_wrappers.append(HipWrapper(at, addr))
                return at + 24
        return at + 1

    def claim(self, src: Source, at: int) -> int:
        # the needle is the marker without its leading NUL, which must precede it (the byte the
        # window let go last when the marker starts it: a string right after a container)
        if (src.buf[at - 1 - src.base] if at > src.base else src.before) != 0:
            return at + 1
        src.ensure(at + CLAIM_WINDOW)
        window = b"\0" + bytes(src.buf[at - src.base : at - src.base + CLAIM_WINDOW - 1])
        claims = self.found.claims
        claims.extend(c for c in parse_embedded(window) if c not in claims)
        return at + 1

    def linker(self, src: Source, at: int) -> int:
        """A name holding nvJitLinkCreate (looked up by name, or imported), as far as the window
        around the hit holds it: the first few distinct names only."""
        src.ensure(at + LINKER_WINDOW)
        lo = max(src.base, at - LINKER_WINDOW)
        before = bytes(src.buf[lo - src.base : at - src.base])
        after = bytes(src.buf[at - src.base : at - src.base + LINKER_WINDOW])
        start = len(before)
        while start and before[start - 1] in _NAME_BYTES:
            start -= 1
        end = next((i for i, c in enumerate(after) if c not in _NAME_BYTES), len(after))
        name = (before[start:] + after[:end]).decode("ascii")
        found = self.found.linkers
        if len(found) < LINKERS_KEPT and name not in found:
            found.append(name)
        return at + len(LINKER_MARKER)

    def cubin(self, src: Source, at: int) -> int:
        """A whole cubin (an ELF whose e_machine is EM_CUDA) outside any container: read to the
        end of its furthest section or table, and parsed as the driver would load it alone. Any
        other ELF (the library's own header, a host object) is passed over."""
        if not src.ensure(at + 64):
            return at + 1
        head = bytes(src.buf[at - src.base : at - src.base + 64])
        if int.from_bytes(head[18:20], "little") != elf.EM_CUDA:
            return at + 1
        try:
            total = self._cubin_extent(src, at, head)
            if not src.ensure(at + total):
                raise fatbin.FatbinError("the file ends inside it", code=Code.E014)
            with memoryview(src.buf) as window:
                data = bytes(window[at - src.base : at - src.base + total])
            entry = whole_cubin(data, at)
        except (fatbin.FatbinError, elf.ElfError) as e:
            code = e.code if e.code in (Code.E012, Code.E014) else Code.E014
            self.problem(code, f"cubin at 0x{at:x} outside any fatbin container: {e.message}", at)
            return at + 1
        self.found.cubins.append(FoundCubin(at, total, entry))
        return at + total

    def _cubin_extent(self, src: Source, at: int, head: bytes) -> int:
        """The bytes a cubin starting at ``at`` spans: to the end of its section table, program
        headers or furthest section, whichever is last (nvcc writes the section table last)."""
        room = self.size - at
        h = elf.parse_header(head, room)
        if not h.shnum:
            raise fatbin.FatbinError("it has no section table", code=Code.E014)
        table_end = h.shoff + h.shnum * 64
        if table_end > self.settings.max_payload:
            raise fatbin.FatbinError(
                f"its section table ends past the {self.settings.max_payload}-byte bound", code=Code.E012
            )
        if not src.ensure(at + table_end):
            raise fatbin.FatbinError("the file ends inside its section table", code=Code.E014)
        names = at + h.shoff + 64 * h.shstrndx - src.base  # the section name table's own header, first
        if int.from_bytes(src.buf[names + 4 : names + 8], "little") != elf.SHT_STRTAB:
            raise fatbin.FatbinError("its section name table is not a string table", code=Code.E014)
        self._look_ahead(table_end)
        sections = elf.parse_sections(
            bytes(src.buf[at + h.shoff - src.base : at + table_end - src.base]), h.shnum, room
        )
        ends = [s.file_end for s in sections if s.type not in (0, elf.SHT_NOBITS)]
        total = max([table_end, h.phoff + h.phnum * 56, *ends])
        if total > self.settings.max_payload:
            raise fatbin.FatbinError(f"{total} bytes exceed the {self.settings.max_payload}-byte bound", code=Code.E012)
        self._look_ahead(total - table_end)
        return total

    def _look_ahead(self, n: int) -> None:
        """Spend ``n`` bytes of the library's look-ahead (shared with the offload bundles' extents):
        real cubins never overlap, so they spend less than the library's size; hostile headers
        (one every 64 bytes, each claiming a far section table) are cut off as E012 once it is spent."""
        if n > self.lookahead_left:
            raise fatbin.FatbinError(
                f"its extent is past the library's look-ahead bound of {self.lookahead} bytes", code=Code.E012
            )
        self.lookahead_left -= n

    def bundle(self, src: Source, at: int) -> int:
        total = self._bundle_extent(src, at)
        if total is None:
            return at + 1
        try:
            if total > self.settings.max_payload * 4:
                raise hip.Malformed(f"bundle of {total} bytes is too large to verify", code=Code.E032)
            if not src.ensure(at + total):
                raise hip.Malformed("bundle is truncated", code=Code.E030)
            blob = bytes(src.buf[at - src.base : at - src.base + total])
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
                look = min(need, have)
                if look > self.lookahead_left:
                    raise hip.Malformed(
                        f"bundle extent is not known within the library's look-ahead bound of {self.lookahead} bytes",
                        code=Code.E032,
                    )
                self.lookahead_left -= look
                total = hip.extent(bytes(src.buf[at - src.base : at - src.base + look]))
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
            self.found.soft.append(
                Problem(
                    Code.E011,
                    f"fatbin container at 0x{at:x} declares {head.fat_size} bytes, past the end of the file",
                    at,
                )
            )
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
                head_bytes = src.buf[pos - src.base : pos - src.base + eh.header_size]
                fatbin.check_options(head_bytes, eh, pos)
                ident = fatbin.identifier(head_bytes, eh)
                entries.append(self._entry(src, pos, eh, ident))
                pos += eh.total
                src.release(pos)
        except fatbin.FatbinError as e:
            self.problem(e.code, f"fatbin container at 0x{at:x}: {e}", e.offset)
            self.walked.append(WalkedContainer(at, head.total, []))
            return end
        if self._entry_at(src, end):  # outside a fatbin section no accounting would notice
            self.problem(
                Code.E011,
                f"fatbin container at 0x{at:x}: an entry follows its declared end, so its size hides entries",
                end,
            )
        walked = WalkedContainer(at, head.total, entries)
        self.walked.append(walked)
        slack = self.settings.container_slack
        window = PAD_WINDOW if slack is None else max(PAD_WINDOW, min(slack(head.total), self.size - end))
        src.capture(end, end + window, walked.keep_padding)
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
        entry = Entry(
            "nvidia",
            kind,
            eh.target,
            eh.version,
            eh.compression,
            eh.stored_size,
            eh.size,
            pos,
            ident,
            bool(eh.flags & fatbin.FLAG_DEBUG),
        )
        if not self.settings.decode or kind == LTO:
            if kind != LTO:
                self._frame_check(src, pos, payload_at, eh)
            src.skip_to(payload_at + eh.payload_size)
            return entry
        max_payload = self.settings.max_payload
        if eh.payload_size > max_payload or eh.size > max_payload:
            raise fatbin.FatbinError(
                f"{eh.target} entry of {max(eh.payload_size, eh.size)} bytes exceeds the {max_payload}-byte bound",
                code=Code.E012,
                offset=pos,
            )
        if not src.ensure(payload_at + eh.payload_size):
            raise fatbin.FatbinError("file ends inside an entry payload", code=Code.E011, offset=pos)
        with memoryview(src.buf) as window:  # one copy (a bytearray slice is a copy of its own)
            raw = bytes(window[payload_at - src.base : payload_at - src.base + eh.payload_size])
        return self.decoding.entry(eh, raw, pos, entry)

    def _frame_check(self, src: Source, pos: int, payload_at: int, eh: fatbin.EntryHeader) -> None:
        """Without decoding, still check what the payload's first bytes promise: a raw cubin is
        a CUDA ELF for the header's architecture; a zstd frame declares the header's size."""
        head = min(eh.payload_size, 64)
        if not src.ensure(payload_at + head):
            raise fatbin.FatbinError("file ends inside an entry payload", code=Code.E011, offset=pos)
        first = bytes(src.buf[payload_at - src.base : payload_at - src.base + head])
        fatbin.check_payload_start(eh, first, pos)

    def resolve(self) -> ScanResult:
        """Wait for the decodes, in stream order; a failed decode fails its container."""
        for w in self.walked:
            try:
                entries = tuple(result(e) for e in w.entries)
            except fatbin.FatbinError as err:
                self.problem(err.code, f"fatbin container at 0x{w.offset:x}: {err}", err.offset)
                entries = ()
            self.found.containers.append(FoundContainer(w.offset, w.size, entries, w.trailing, w.zeros))
        self.walked.clear()
        for offset, size, entry in self.frames.resolve():
            self.found.cubins.append(FoundCubin(offset, size, entry))
        self.found.problems += self.problems.result()
        return self.found


# Short markers cost a slow search over every library; the long one finds PyTorch's gencode
# string in libtorch_cuda.so, which every CUDA torch wheel ships.
MARKERS: tuple[bytes, ...] = tuple(m.lstrip(b"\0") for m in embedded_claim_markers() if len(m) >= 16)
# The call every user of nvJitLink makes, in the strings of a library that links device code
# at run time: the nvJitLinkCreate cuSPARSE 12.9 looks up in the libnvJitLink.so.13 it dlopens
# (it neither NEEDs nor imports it), CUDA 12's versioned __nvJitLinkCreate_12_* imports. One
# more needle for read-only data, like the claim markers (its cost: docs/rules.md).
LINKER_MARKER = b"nvJitLinkCreate"
# Strings a library's host code carries that state the GPU range of some of its kernels (NCCL's
# "FP8 reduction support begins with sm90 capable devices."), from data/vendor.json, each with
# its source: one more long needle each, like the claim markers; each is kept once when found.
# The strings only a vendor library carries (data/vendor.json 'identity': cuBLAS's
# "cublasGetCudartVersion"), which identify it with its file name: kept once each, like the
# statements; and the first bytes of each vendor version string ("NCCL version "), whose string
# is kept (VERSION_WINDOW bytes, VERSIONS_KEPT distinct ones a marker): one needle each.
STATEMENTS: tuple[bytes, ...] = tuple(dict.fromkeys([*(s.text for s in arch.statements()), *vendor.identity_strings()]))
VERSION_MARKERS: tuple[bytes, ...] = vendor.version_markers()
VERSION_WINDOW = 96
VERSIONS_KEPT = 4
# cudaRuntimeGetVersion of the CUDA runtime linked in statically (cudart_static), x86-64:
# "if (!version) return 1; *version = CUDART_VERSION; return 0;" is test rdi,rdi; je +11;
# movl $CUDART_VERSION,(rdi); xor eax,eax; ret. The same 14 bytes in CUDA 11.0's (NCCL 2.21.5
# cu11's libnccl.so.2: 11000), 12.4's (libcudart.so.12 of nvidia-cuda-runtime-cu12 12.4.127:
# 12040) and 13.0's (nvcc 13.0.88 -cudart static: 13000), measured (docs/rules.md). The runtime
# refuses a driver older than its family's floor (35, cudaErrorInsufficientDriver), whatever
# its kernels need: one more needle over machine code.
RUNTIME_MARKER = b"\x48\x85\xff\x74\x0b\xc7\x07"
RUNTIME_TAIL = b"\x31\xc0\xc3"
# On aarch64: mov x1, x0; cbz x0, +0x14; movz w2, #CUDART_VERSION; mov w0, #0; str w2, [x1]; ret.
# Measured in libcudart.so.12 of nvidia-cuda-runtime-cu12 12.4.127 (12040), libcudart.so.13 of
# nvidia-cuda-runtime 13.5.37 (13050) and libnccl.so.2 of nvidia-nccl-cu13 2.32.3, which links
# the runtime statically and needs no libcudart (13040), all manylinux aarch64 (docs/rules.md).
RUNTIME_MARKER_A64 = bytes.fromhex("e10300aaa00000b4")
RUNTIME_TAIL_A64 = bytes.fromhex("00008052220000b9c0035fd6")
RUNTIME_RECORD_A64 = len(RUNTIME_MARKER_A64) + 4 + len(RUNTIME_TAIL_A64)
# On Windows x64 (MSVC, the pointer in rcx): test rcx,rcx; jne +6; mov eax,1; ret; mov dword
# [rcx],CUDART_VERSION; xor eax,eax; ret. The exported cudaRuntimeGetVersion is a tracing wrapper
# around a body that also records the error (cudart64_12.dll: RVA 0x47ed0 calls 0xfba0), a body
# the linker leaves out of a library that never calls it (ctranslate2.dll has none); these 20
# bytes are its twin, a function the runtime's own table in .rdata points at (cudart64_12.dll:
# RVA 0x52e00, from 0x6a258), kept wherever the runtime is. Measured, all win_amd64 (docs/rules.md):
# cudart64_110.dll of nvidia-cuda-runtime-cu11 11.8.89 (11080), cudart64_12.dll of
# nvidia-cuda-runtime-cu12 12.4.127 (12040), ctranslate2.dll of ctranslate2 4.8.5 (12080), the
# modules of cupy-cuda13x 14.2.0 that link the runtime (13020). cudart64_13.dll of
# nvidia-cuda-runtime 13.5.37 holds none: it forwards to the driver's nvcudart_hybrid64.dll.
RUNTIME_MARKER_PE = bytes.fromhex("4885c97506b801000000c3c701")
RUNTIME_TAIL_PE = bytes.fromhex("33c0c3")
RUNTIME_MARKERS = (RUNTIME_MARKER, RUNTIME_MARKER_A64)  # an ELF of another machine: both searched
# ELF e_machine x86-64 and aarch64; PE machine x86-64 (IMAGE_FILE_MACHINE_AMD64; no e_machine is
# that large)
RUNTIME_BY_MACHINE = {62: (RUNTIME_MARKER,), 183: (RUNTIME_MARKER_A64,), 0x8664: (RUNTIME_MARKER_PE,)}
# CUDA 9.0 to 19.x, as CUDART_VERSION spells them (major*1000 + minor*10). Other getters share
# the function's shape: NCCL's ncclGetVersion returns 23203 for 2.32.3 (measured on aarch64),
# which a bound at CUDA 20 keeps out whatever NCCL's patch number; on Windows CUPTI's
# cuptiGetVersion returns its API version (18 in cupti64_2022.3.0.dll, 28 in cupti64_2025.2.1.dll),
# under the bound at CUDA 9.
RUNTIME_VERSIONS = (9000, 20000)
LINKER_WINDOW = 64
LINKERS_KEPT = 4
_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")


__all__ = [
    "CUBIN_MAGIC",
    "FatbinWrapper",
    "FoundContainer",
    "FoundCubin",
    "HIP_WRAPPER_MAGIC",
    "HipWrapper",
    "LINKER_MARKER",
    "LOOKAHEAD_FACTOR",
    "RUNTIME_BY_MACHINE",
    "RUNTIME_MARKER",
    "RUNTIME_MARKER_PE",
    "RUNTIME_MARKERS",
    "LOOKAHEAD_SLACK",
    "MARKERS",
    "PAD_WINDOW",
    "Records",
    "ScanResult",
    "ScanSettings",
    "SOFT_KEPT",
    "SoftProblems",
    "STATEMENTS",
    "VERSION_MARKERS",
    "VERSION_WINDOW",
    "VERSIONS_KEPT",
    "ZSTD_MAGIC",
]
