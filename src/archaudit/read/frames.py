"""The zstd-frame record of the scan: whole cubins a library keeps as bare zstd frames outside any
container (zstdframe.py reads the format), found by the frame magic in the one pass, each read as
the driver loads it once the library has decoded it (decode.framed_cubin), within bounds of the
library's size (docs/threat-model.md, "Bounded work").
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from ..findings import Code
from ..model import Entry
from . import elf, fatbin, zstdframe
from .decode import Decoding, framed_cubin_head, result
from .stream import Source

# A bare zstd frame (zstdframe.py) outside any container: a whole cubin when its first block
# decodes to one (cuBLASLt 13.1: 393 in .data and .ldata, 1.23 GB decoded from 85 MB, 2.3x the
# 542 MB library). The frames of one library may decode to FRAME_FACTOR times its size plus
# FRAME_SLACK in all (3.5x what cuBLASLt 13.1 needs); past that, E012. A zstd-compressed fatbin
# entry is inside its container, whose record skips its bytes: never counted twice.
# The stored bytes of a library's cubin frames are walked block by block to find where each
# ends: FRAME_WALK_FACTOR times its size plus FRAME_WALK_SLACK in all (cuBLASLt 13.1: 85 MB,
# 0.16x), spent whether a walk ends or fails; past it, E012.
FRAME_FACTOR = 8
FRAME_SLACK = 64 << 20
FRAME_WALK_FACTOR = 1
FRAME_WALK_SLACK = 1 << 20


@dataclass(frozen=True, slots=True)
class WalkedFrame:
    """A bare zstd frame holding a whole cubin, its entry possibly still decoding."""

    offset: int
    size: int
    entry: Entry | Future[Entry]


class Frames:
    """The frames of one library: the record parser for the frame magic (`frame`), the library's
    two frame bounds (bytes decoded, stored bytes walked), and the frames read, resolved in
    stream order (`resolve`). Problems go to `problem(code, message, offset)`."""

    def __init__(
        self,
        size: int,
        decode: bool,
        max_payload: int,
        decoding: Decoding,
        problem: Callable[[Code, str, int | None], None],
    ):
        self.decode = decode
        self.max_payload = max_payload
        self.decoding = decoding
        self.problem = problem
        self.walked: list[WalkedFrame] = []
        self.frame_bound = FRAME_FACTOR * size + FRAME_SLACK
        self.frame_left = self.frame_bound  # bytes the library's frames may still decode to
        self.frame_walk = FRAME_WALK_FACTOR * size + FRAME_WALK_SLACK
        self.frame_walk_left = self.frame_walk  # stored bytes of frames that may still be walked

    def frame(self, src: Source, at: int) -> int:
        """A bare zstd frame outside any container: its first block decoded to learn what it holds
        (`_peek`). A whole cubin is decoded in full (on the pool) and read as one, the frame's bytes
        skipped; one that cannot be read is E011/E012/E014, never skipped. A frame holding anything
        else, or whose header or first block does not decode (it says nothing of device code), is
        passed over; so is one that needs a dictionary (docs/threat-model.md)."""
        peeked = self._peek(src, at)
        if peeked is None:
            return at + 1
        head, first, holds = peeked
        try:
            if holds == "fatbin":
                raise fatbin.FatbinError(
                    "it holds a fatbin container, which check does not read inside a zstd frame", code=Code.E011
                )
            total = self._frame_extent(src, at, head)
            declared = head.content
            if declared is not None and declared > self.frame_left:
                raise fatbin.FatbinError(
                    f"it declares {declared} bytes, past the library's bound of "
                    f"{self.frame_bound} bytes decoded from zstd frames",
                    code=Code.E012,
                )
            with memoryview(src.buf) as window:
                raw = bytes(window[at - src.base : at - src.base + total])
            entry: Entry | Future[Entry]
            if not self.decode:
                entry = framed_cubin_head(first, total, declared, at)
            elif declared is None:  # decoded here, within what the library's bound has left
                entry = self.decoding.frame(raw, at, None, min(self.frame_left, self.max_payload))
                declared = result(entry).size
            else:
                entry = self.decoding.frame(raw, at, declared)
            self.frame_left -= declared or 0
        except (fatbin.FatbinError, elf.ElfError) as e:
            code = e.code if e.code in (Code.E011, Code.E012, Code.E014) else Code.E014
            self.problem(code, f"zstd frame at 0x{at:x} outside any fatbin container: {e.message}", at)
            return at + 1
        self.walked.append(WalkedFrame(at, total, entry))
        return at + total

    def _peek(self, src: Source, at: int) -> tuple[zstdframe.FrameHeader, bytes, zstdframe.Holds] | None:
        """The frame's header, its first block decoded, and the device code that says it holds;
        None where these bytes are no frame or hold no device code. Every byte a first block
        decodes to counts against the library's frame bound (one decodes to up to 128 KiB, from
        4 stored bytes): past it, E012 and nothing more is decoded."""
        src.ensure(at + zstdframe.MAX_HEADER)
        head = zstdframe.parse_header(bytes(src.buf[at - src.base : at - src.base + zstdframe.MAX_HEADER]))
        if head is None or head.dictionary:
            return None
        block_at = at + head.size
        src.ensure(block_at + zstdframe.BLOCK_HEADER)
        first_block = zstdframe.block(
            bytes(src.buf[block_at - src.base : block_at + zstdframe.BLOCK_HEADER - src.base])
        )
        block_end = block_at + zstdframe.BLOCK_HEADER + (first_block[1] if first_block else 0)
        if first_block is None or not src.ensure(block_end):
            return None
        if self.frame_left <= 0:
            self.problem(
                Code.E012,
                f"zstd frame at 0x{at:x} not read: the library's zstd frames decode past its "
                f"bound of {self.frame_bound} bytes",
                at,
            )
            return None
        first = zstdframe.first_bytes(bytes(src.buf[block_at - src.base : block_end - src.base]))
        holds = zstdframe.holds(first) if first is not None else None
        if first is None or holds is None:
            self.frame_left -= len(first or b"")
            return None
        return head, first, holds

    def _frame_extent(self, src: Source, at: int, head: zstdframe.FrameHeader) -> int:
        """The bytes a frame starting at ``at`` spans: its header, its blocks (each header says
        how many bytes it stores), its checksum; within the verification bound and what is left of
        the library's frame walk (FRAME_WALK_FACTOR x its size + FRAME_WALK_SLACK). The bytes walked
        are spent whether the walk ends or fails, so frames that never end (each walking into the
        next) cost that bound once, never a walk to the end of the file each."""
        pos = at + head.size
        bound = min(self.max_payload, self.frame_walk_left)
        buf = src.buf
        try:
            while True:
                if pos - at > bound:
                    raise fatbin.FatbinError(
                        f"it stores more than the {self.max_payload}-byte verification "
                        f"bound or the library's frame walk bound of {self.frame_walk} bytes",
                        code=Code.E012,
                    )
                i = pos - src.base
                if i + zstdframe.BLOCK_HEADER > len(buf):
                    if not src.ensure(pos + zstdframe.BLOCK_HEADER):
                        raise fatbin.FatbinError("the file ends inside it", code=Code.E012)
                    buf, i = src.buf, pos - src.base
                word = buf[i] | buf[i + 1] << 8 | buf[i + 2] << 16
                kind, size = (word >> 1) & 3, word >> 3
                if kind == 3 or size > zstdframe.MAX_BLOCK:
                    raise fatbin.FatbinError(f"its block at 0x{pos:x} has a reserved type or size", code=Code.E012)
                pos += zstdframe.BLOCK_HEADER + (1 if kind == 1 else size)
                if word & 1:
                    break
            pos += zstdframe.CHECKSUM if head.checksum else 0
            if pos - at > bound or not src.ensure(pos):
                raise fatbin.FatbinError(
                    "the file ends inside it" if pos - at <= bound else f"it stores more than the {bound}-byte bound",
                    code=Code.E012,
                )
        finally:
            self.frame_walk_left -= min(pos - at, self.frame_walk_left)
        return pos - at

    def resolve(self) -> list[tuple[int, int, Entry]]:
        """(offset, stored size, entry) of each frame read, in stream order; a failed decode is a
        problem (E012/E014), its frame no module."""
        out = []
        for f in self.walked:
            try:
                out.append((f.offset, f.size, result(f.entry)))
            except (fatbin.FatbinError, elf.ElfError) as err:
                code = err.code if err.code in (Code.E012, Code.E014) else Code.E014
                self.problem(
                    code, f"zstd frame at 0x{f.offset:x} outside any fatbin container: {err.message}", f.offset
                )
        self.walked.clear()
        return out


__all__ = ["FRAME_FACTOR", "FRAME_SLACK", "FRAME_WALK_FACTOR", "FRAME_WALK_SLACK", "Frames", "WalkedFrame"]
