"""The zstd frame format as the scan reads it (zstdframe.py, RFC 8878): a frame's header, its
block headers, what its first block decodes to and what that says it holds. Frames are the
committed fixtures' (tests/fixtures/cuda/build_zstd.sh: nvcc-built cubins compressed into a
library's .data) and real cubins and a fatbin compressed here by zstandard with each header
layout; zstandard itself (its frame parameters, its decoder) is the reference."""

from __future__ import annotations

import struct

import pytest
import zstandard

import oracle
from archaudit.read import zstdframe
from helpers import is_cuda_elf, zstd_frames

BIN = oracle.FIXTURES
SM80 = (BIN / "kern_sm80.cubin").read_bytes()
FATBIN = (BIN / "kern.fatbin").read_bytes()
HOST = (BIN / "lib_host.so").read_bytes()
PTX = (BIN / "kern_80.ptx").read_bytes()
LARGE = b"".join(p.read_bytes() for p in sorted(BIN.glob("kern_sm*.cubin"))) * 8  # some 300 KB: several blocks
COMPRESSORS = {
    "size, no checksum": zstandard.ZstdCompressor(),
    "checksum": zstandard.ZstdCompressor(write_checksum=True),
    "no size": zstandard.ZstdCompressor(write_content_size=False),
    "no size, checksum, level 19": zstandard.ZstdCompressor(level=19, write_content_size=False, write_checksum=True),
}


def every_frame() -> list[tuple[str, bytes]]:
    """(what, bytes from the frame's start to the end of its data) of every frame: the fixture
    libraries' (their data after each, as the scan sees it) and each payload compressed each way."""
    out = []
    for name in ("lib_zstd_cubin_sm80.so", "lib_zstd_frames.so"):
        data = (BIN / name).read_bytes()
        out += [(f"{name}@0x{at:x}", data[at:]) for at, _ in zstd_frames(data)]
    for payload_name, payload in (("sm_80 cubin", SM80), ("fatbin", FATBIN), ("host ELF", HOST), ("PTX", PTX)):
        for how, c in COMPRESSORS.items():
            out.append((f"{payload_name}, {how}", c.compress(payload) + b"trailing data"))
    out.append(("every cubin, 8 times", zstandard.ZstdCompressor().compress(LARGE)))
    out.append(("one byte", zstandard.ZstdCompressor().compress(b"x")))
    out.append(("300 bytes", zstandard.ZstdCompressor().compress(bytes(range(256)) + bytes(44))))
    return out


FRAMES = every_frame()


def stored_length(frame: bytes) -> int:
    """How many bytes the frame at the start of `frame` spans, by zstandard's decoder."""
    d = zstandard.ZstdDecompressor().decompressobj()
    d.decompress(frame)
    assert d.eof
    return len(frame) - len(d.unused_data)


def test_the_frames_hold_every_header_layout_and_several_blocks():
    """Headers of several lengths (a declared size of 1, 2 or 4 bytes, or none; a window byte or a
    single segment), with and without a checksum, and a frame of several blocks."""
    layouts = {(zstandard.frame_header_size(f), zstandard.get_frame_parameters(f).has_checksum) for _, f in FRAMES}
    assert len({size for size, _ in layouts}) >= 3 and {checksum for _, checksum in layouts} == {True, False}
    assert len(LARGE) > 2 * zstdframe.MAX_BLOCK


@pytest.mark.parametrize("what, frame", FRAMES, ids=[w for w, _ in FRAMES])
def test_a_frame_header_says_what_zstandard_reads_in_it(what, frame):
    head = zstdframe.parse_header(frame[: zstdframe.MAX_HEADER])
    params = zstandard.get_frame_parameters(frame)
    assert head is not None, what
    assert head.size == zstandard.frame_header_size(frame)
    assert head.content == (None if params.content_size == zstandard.CONTENTSIZE_UNKNOWN else params.content_size)
    assert (head.dictionary, head.checksum) == (params.dict_id, params.has_checksum)


@pytest.mark.parametrize("what, frame", FRAMES, ids=[w for w, _ in FRAMES])
def test_the_block_headers_walk_to_where_the_frame_ends(what, frame):
    """Each block header's stored size leads to the next; the last, and the checksum where the
    header says there is one, end the frame where zstandard's decoder ends it."""
    head = zstdframe.parse_header(frame[: zstdframe.MAX_HEADER])
    assert head is not None
    pos, last, blocks = head.size, False, 0
    while not last:
        got = zstdframe.block(frame[pos : pos + zstdframe.BLOCK_HEADER])
        assert got is not None, (what, pos)
        last, stored = got
        assert stored <= zstdframe.MAX_BLOCK
        pos += zstdframe.BLOCK_HEADER + stored
        blocks += 1
    pos += zstdframe.CHECKSUM if head.checksum else 0
    assert pos == stored_length(frame), what
    assert blocks >= 3 or not what.startswith("every cubin")  # some 300 KB: 128 KiB a block at most


@pytest.mark.parametrize("what, frame", FRAMES, ids=[w for w, _ in FRAMES])
def test_the_first_block_decodes_to_the_frames_first_bytes_and_says_what_it_holds(what, frame):
    head = zstdframe.parse_header(frame[: zstdframe.MAX_HEADER])
    assert head is not None
    got = zstdframe.block(frame[head.size : head.size + zstdframe.BLOCK_HEADER])
    assert got is not None
    first = zstdframe.first_bytes(frame[head.size : head.size + zstdframe.BLOCK_HEADER + got[1]])
    whole = zstandard.ZstdDecompressor().decompressobj().decompress(frame)
    assert first is not None and first and whole.startswith(first), what
    expected = "cubin" if is_cuda_elf(whole) else "fatbin" if whole[:4] == FATBIN[:4] else None
    assert zstdframe.holds(first) == expected, what


def test_what_each_payload_holds():
    """The references' own answer, on the payloads compressed here: the cubin holds a cubin, the
    container a container, a host ELF and PTX text nothing."""
    said = {}
    for what, frame in FRAMES:
        head = zstdframe.parse_header(frame[: zstdframe.MAX_HEADER])
        assert head is not None
        got = zstdframe.block(frame[head.size : head.size + zstdframe.BLOCK_HEADER])
        assert got is not None
        first = zstdframe.first_bytes(frame[head.size : head.size + zstdframe.BLOCK_HEADER + got[1]])
        said[what.split(",")[0]] = zstdframe.holds(first or b"")
    assert {k: said[k] for k in ("sm_80 cubin", "fatbin", "host ELF", "PTX")} == {
        "sm_80 cubin": "cubin",
        "fatbin": "fatbin",
        "host ELF": None,
        "PTX": None,
    }


def test_bytes_that_are_no_frame_header_are_none():
    """Another magic, a reserved descriptor bit, and too few bytes for the header the descriptor
    announces: no frame."""
    frame = zstandard.ZstdCompressor().compress(SM80)
    assert zstdframe.parse_header(frame[:18]) is not None
    assert zstdframe.parse_header(b"\x28\xb5\x2f\xfe" + frame[4:18]) is None
    reserved = bytearray(frame[:18])
    reserved[4] |= 0x08
    assert zstdframe.parse_header(bytes(reserved)) is None
    size = zstandard.frame_header_size(frame)
    assert zstdframe.parse_header(frame[:size]) is not None and zstdframe.parse_header(frame[: size - 1]) is None
    assert zstdframe.parse_header(frame[:5]) is None


def test_a_reserved_or_oversized_block_is_none_and_an_rle_block_stores_one_byte():
    def header(last: int, kind: int, size: int) -> bytes:
        return struct.pack("<I", last | kind << 1 | size << 3)[:3]

    assert zstdframe.block(header(1, 0, 100)) == (True, 100)  # raw
    assert zstdframe.block(header(0, 1, 5000)) == (False, 1)  # RLE: one byte, repeated
    assert zstdframe.block(header(0, 2, zstdframe.MAX_BLOCK)) == (False, zstdframe.MAX_BLOCK)  # compressed
    assert zstdframe.block(header(1, 3, 10)) is None  # reserved type
    assert zstdframe.block(header(0, 2, zstdframe.MAX_BLOCK + 1)) is None
    # a frame of one RLE block, written by hand: no size declared, a window of 128 KiB
    rle = zstdframe.MAGIC + b"\x00" + bytes([7 << 3]) + header(1, 1, 1000) + b"\x07"
    assert zstandard.ZstdDecompressor().decompressobj().decompress(rle) == b"\x07" * 1000  # the reference
    head = zstdframe.parse_header(rle)
    assert head is not None and (head.size, head.content, head.checksum) == (6, None, False)
    assert zstdframe.block(rle[6:9]) == (True, 1) and stored_length(rle) == 6 + 3 + 1
    assert zstdframe.first_bytes(rle[6:]) == b"\x07" * 1000


def test_a_first_block_that_does_not_decode_is_none():
    frame = zstandard.ZstdCompressor().compress(SM80)
    size = zstandard.frame_header_size(frame)
    got = zstdframe.block(frame[size : size + 3])
    assert got is not None
    first_block = frame[size : size + 3 + got[1]]
    assert zstdframe.first_bytes(first_block) is not None
    assert not zstdframe.first_bytes(first_block[:-10])  # cut short: nothing (the scan peeks a whole block)
    assert zstdframe.first_bytes(first_block[:3] + b"\xff" * got[1]) is None  # its bytes garbled
