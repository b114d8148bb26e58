"""Hostile inputs whose cost could grow faster than their bytes (issue 27 item 2): each is a
record repeated to fill a given size, so the reader's time and memory can be measured against
the input at several sizes (tests/fuzz/test_linear_bounds.py, benchmarks/bench_hostile.py)."""

from __future__ import annotations

import struct
from collections.abc import Callable

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _fill(record: bytes, size: int) -> bytes:
    return record * (size // len(record))


def ccob_v1_endless_frames(size: int) -> bytes:
    """A CCOB v1 (zstd) record every 32 bytes, whose frame never ends: its one block is a raw,
    not-last block of 29 bytes, which lands on the next record's block header, and so on to the
    end of the file. A v1 bundle states no size, so each record's extent is walked."""
    header = b"CCOB" + struct.pack("<HHIQ", 1, 1, 64, 0)  # v1, zstd, 64 bytes decoded, hash
    frame = ZSTD_MAGIC + b"\x00\x00"  # frame header: no content size, one window byte
    block = struct.pack("<I", 29 << 3)[:3]  # raw block of 29 bytes, not the last
    record = header + frame + block + bytes(3)
    assert len(record) == 32
    return _fill(record, size)


def ccob_v1_empty_blocks(size: int) -> bytes:
    """A CCOB v1 record every 32 bytes followed by empty raw blocks (3 bytes each, never the
    last): the walk that costs most per byte looked at."""
    header = b"CCOB" + struct.pack("<HHIQ", 1, 1, 64, 0)
    record = header + ZSTD_MAGIC + b"\x00\x00"
    return _fill(record + bytes(96 - len(record)), size)


def empty_fatbin_containers(size: int) -> bytes:
    """A 16-byte fatbin container with no entries, back to back."""
    return _fill(struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 0), size)


GENERATORS: dict[str, Callable[[int], bytes]] = {
    "ccob_v1_endless_frames": ccob_v1_endless_frames,
    "ccob_v1_empty_blocks": ccob_v1_empty_blocks,
    "empty_fatbin_containers": empty_fatbin_containers,
}
