"""Hostile inputs whose cost could grow faster than their bytes (issue 27 item 2): each is a
record repeated to fill a given size, so the reader's time and memory can be measured against
the input at several sizes (tests/fuzz/test_linear_bounds.py, benchmarks/bench_hostile.py)."""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

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


def finding_flood(size: int) -> bytes:
    """An uncompressed offload bundle header that declares no entries, every 32 bytes: one E030
    each, the finding flood of issue 27 item 2 (a 180 KB wheel inflating to 2 million of them)."""
    record = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", 0)
    assert len(record) == 32
    return _fill(record, size)


def flood_wheel(path: Path, size: int, member: str = "flood/data.hsaco") -> Path:
    """A wheel whose one data member is `size` bytes of finding_flood, deflated (a few KB per
    MiB): what a user would be handed, read by the real wheel reader."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("flood-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\n")
        z.writestr(member, finding_flood(size))
    return path


GENERATORS: dict[str, Callable[[int], bytes]] = {
    "ccob_v1_endless_frames": ccob_v1_endless_frames,
    "ccob_v1_empty_blocks": ccob_v1_empty_blocks,
    "empty_fatbin_containers": empty_fatbin_containers,
    "finding_flood": finding_flood,
}
