"""The zstd-frame record of the scan (frames.py): which bare zstd frames outside any container are
read as whole cubins, which are passed over, which fail closed (E011/E012), and the library's two
frame bounds (bytes decoded, stored bytes walked). gcc-built fixtures
(tests/fixtures/cuda/build_zstd.sh: nvcc -cubin outputs compressed with zstandard, written into
.data as C arrays), each case one change to their real frames."""

from __future__ import annotations

import struct

import pytest

import oracle
from archaudit.model import CUBIN
from archaudit.read import elf, frames as frame_records
from archaudit.read.library import library_from_bytes, scan_file
from helpers import ZSTD_MAGIC as MAGIC, zstd_frames as frames

BIN = oracle.FIXTURES


def test_a_frame_that_holds_a_fatbin_container_fails_closed():
    """A frame whose first bytes are a fatbin container's header claims device code check does not
    read inside a frame: E011, never skipped, never coverage."""
    lib = scan_file(str(BIN / "lib_zstd_fatbin.so"))
    assert not lib.containers
    assert [p.code for p in lib.problems] == ["E011"] and "holds a fatbin container" in lib.problems[0].message


def _frame_of(data: bytes) -> int:
    ((at, _),) = frames(data)
    return at


def _mutated(mutate) -> bytes:
    data = bytearray((BIN / "lib_zstd_cubin_sm80.so").read_bytes())
    mutate(data, _frame_of(bytes(data)))
    return bytes(data)


def _declare(data: bytearray, at: int, size: int) -> None:
    """Rewrite the frame's declared content size (the fixture's descriptor: single segment, 2-byte size)."""
    assert data[at + 4] >> 6 == 1 and data[at + 4] & 0x20
    struct.pack_into("<H", data, at + 5, size - 256)


@pytest.mark.parametrize(
    "what, mutate",
    [
        ("declares more than it decodes to", lambda d, at: _declare(d, at, 4000)),
        ("declares less than it decodes to", lambda d, at: _declare(d, at, 3000)),
    ],
)
def test_a_damaged_frame_that_holds_a_cubin_fails_closed(what, mutate):
    lib = library_from_bytes("lib.so", _mutated(mutate))
    assert not [c for c in lib.containers if c.role == CUBIN], what
    assert [p.code for p in lib.problems] == ["E012"], what


def test_a_framed_cubin_whose_checksum_is_wrong_fails_closed():
    """The sm_90 frame of lib_zstd_frames.so ends with its checksum: its first block still decodes
    to a CUDA ELF, so it claims device code, and the whole frame does not decode: E012."""
    data = bytearray((BIN / "lib_zstd_frames.so").read_bytes())
    (c,) = scan_file(str(BIN / "lib_zstd_frames.so")).containers
    data[c.offset + c.size - 1] ^= 0xFF
    lib = library_from_bytes("lib.so", bytes(data))
    assert not lib.containers
    assert [p.code for p in lib.problems] == ["E012"] and f"0x{c.offset:x}" in lib.problems[0].message


def test_a_frame_whose_first_block_does_not_decode_says_nothing_of_device_code():
    """Its first block's type set to the reserved one: neither the library's decompressor nor
    archaudit can learn what it holds, so it is no device code (a coincidental magic reads so)."""
    data = _mutated(lambda d, at: d.__setitem__(at + 7, d[at + 7] | 0x06))
    lib = library_from_bytes("lib.so", data)
    assert not lib.containers and not lib.problems


def test_a_frame_past_the_verification_bound_fails_closed():
    data = (BIN / "lib_zstd_cubin_sm80.so").read_bytes()
    lib = library_from_bytes("lib.so", data, max_payload=3000)
    assert [p.code for p in lib.problems] == ["E012"] and "verification bound" in lib.problems[0].message


def test_a_coincidental_magic_is_passed_over():
    """The magic followed by no valid frame (a reserved descriptor bit; a frame header whose first
    block does not decode) in a library's data: no module, no finding."""
    host = (BIN / "lib_host.so").read_bytes()
    junk = MAGIC + b"\x08" + bytes(40) + MAGIC + b"\x60\x00\x10" + b"\xff" * 40
    lib = library_from_bytes("lib.so", host + junk)
    assert not lib.containers and not lib.problems


def test_the_frames_of_one_library_decode_within_a_bound_of_its_size(monkeypatch):
    """FRAME_FACTOR x the library's size + FRAME_SLACK (cuBLASLt 13.1 needs 2.3x): past it, E012.
    Here the slack and factor are cut so the one 3368-byte cubin is past them."""
    monkeypatch.setattr(frame_records, "FRAME_FACTOR", 0)
    monkeypatch.setattr(frame_records, "FRAME_SLACK", 3000)
    lib = scan_file(str(BIN / "lib_zstd_cubin_sm80.so"))
    assert not lib.containers
    assert [p.code for p in lib.problems] == ["E012"] and "bound of 3000 bytes" in lib.problems[0].message


def test_frames_that_never_end_are_walked_within_one_bound_of_the_library(monkeypatch):
    """A frame every 29 bytes whose first block decodes to a CUDA ELF header and lands on the next
    frame's block header, to the end of the file: every one claims a cubin and fails (E012), and
    the walks together spend one bound of the library's size (FRAME_WALK_FACTOR x size +
    FRAME_WALK_SLACK, the slack cut to 0 here): the first frame walks to the end of the file,
    every later one is refused before walking."""
    monkeypatch.setattr(frame_records, "FRAME_WALK_SLACK", 0)
    cuda_elf = b"\x7fELF\x02\x01\x01" + bytes(11) + struct.pack("<H", elf.EM_CUDA)
    head = MAGIC + b"\x00\x38"
    record = head + struct.pack("<I", (len(cuda_elf) + len(head)) << 3)[:3] + cuda_elf
    host = (BIN / "lib_host.so").read_bytes()
    lib = library_from_bytes("lib.so", host + record * 2000)
    (e012,) = [p for p in lib.problems if p.code == "E012"]
    assert e012.count == 1999  # the last frame's first block runs past the file's end: no frame there
    assert "the file ends inside it" in e012.examples[0]
    assert all("frame walk bound" in m for m in e012.examples[1:]) and len(e012.examples) > 1
