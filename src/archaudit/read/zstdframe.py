"""Bare zstd frames outside any container: the frame format (RFC 8878) as far as the scan needs it.

A library may keep device code as zstd frames in its data and decompress them itself before
cuModuleLoadData (cuBLASLt 13.1 keeps 393 cubins so in `.data` and `.ldata`). The scan finds a
frame by its magic, reads its header, decodes its first block only to learn what it holds, and
walks its block headers to learn where it ends (a frame states its decoded size, never its
stored one). Only a frame whose first bytes are device code is decoded whole (decode.py).
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from typing import Literal

import zstandard

from . import elf, fatbin

MAGIC = b"\x28\xb5\x2f\xfd"
MAX_HEADER = 18  # magic, descriptor, window, dictionary id (4) and content size (8)
BLOCK_HEADER = 3
MAX_BLOCK = 128 << 10  # no block holds or decodes to more (RFC 8878 3.1.1.2.4)
CHECKSUM = 4
Holds = Literal["cubin", "fatbin"]


@dataclass(frozen=True, slots=True)
class FrameHeader:
    """What a frame header says: its own length, the decoded size it declares (None: not
    declared), whether a dictionary decodes it, and whether a checksum ends it."""

    size: int
    content: int | None
    dictionary: int
    checksum: bool


def parse_header(head: bytes) -> FrameHeader | None:
    """The header of the frame `head` starts with, or None where these bytes are no frame
    header (a coincidental magic: a reserved bit set, or too few bytes)."""
    if len(head) < 6 or head[:4] != MAGIC:
        return None
    fhd = head[4]
    if fhd & 0x08:  # reserved bit
        return None
    single = (fhd >> 5) & 1
    dict_len = (0, 1, 2, 4)[fhd & 3]
    fcs_len = (single, 2, 4, 8)[fhd >> 6]
    pos = 5 + (0 if single else 1)
    size = pos + dict_len + fcs_len
    if len(head) < size:
        return None
    dictionary = int.from_bytes(head[pos : pos + dict_len], "little")
    content: int | None = None
    if fcs_len:
        content = int.from_bytes(head[pos + dict_len : size], "little") + (256 if fcs_len == 2 else 0)
    return FrameHeader(size, content, dictionary, bool(fhd & 0x04))


def block(head: bytes) -> tuple[bool, int] | None:
    """(last, stored bytes after its header) of the block whose 3-byte header `head` is; None
    for the reserved block type or a block larger than any block may be."""
    word = int.from_bytes(head[:BLOCK_HEADER], "little")
    kind, size = (word >> 1) & 3, word >> 3
    if kind == 3 or size > MAX_BLOCK:
        return None
    return bool(word & 1), (1 if kind == 1 else size)  # an RLE block stores its one byte


# A frame header that declares no size, no checksum and no dictionary, with a window of 128 KiB
# (exponent 17 - 10, mantissa 0): enough for any one block, which refers to no earlier one.
_PEEK_HEADER = MAGIC + b"\x00" + bytes([(17 - 10) << 3])


def first_bytes(first_block: bytes) -> bytes | None:
    """What a frame's first block (`first_block`: its 3-byte header and stored bytes) decodes to,
    or None where it does not decode (then the frame says nothing of what it holds). The block is
    decoded behind a header of its own, so what the frame's header declares (a size, a checksum)
    cannot hide what the block holds: a frame whose declared size is wrong still claims device
    code, and its full decoding then fails (E012)."""
    dctx = getattr(_LOCAL, "dctx", None)
    if dctx is None:
        dctx = _LOCAL.dctx = zstandard.ZstdDecompressor()
    try:
        return dctx.decompressobj().decompress(_PEEK_HEADER + first_block)
    except zstandard.ZstdError:
        return None


_LOCAL = threading.local()  # one decompression context per scanning thread: making one costs more than a peek


def holds(first: bytes) -> Holds | None:
    """What a frame's first decoded bytes say it holds: a CUDA ELF (e_machine EM_CUDA) is a
    whole cubin, a fatbin container's header a container; anything else is not device code."""
    if len(first) >= 20 and first[:4] == b"\x7fELF" and struct.unpack_from("<H", first, 18)[0] == elf.EM_CUDA:
        return "cubin"
    if fatbin.parse_container_header(first) is not None:
        return "fatbin"
    return None


__all__ = [
    "BLOCK_HEADER",
    "CHECKSUM",
    "FrameHeader",
    "Holds",
    "MAGIC",
    "MAX_BLOCK",
    "MAX_HEADER",
    "block",
    "first_bytes",
    "holds",
    "parse_header",
]
