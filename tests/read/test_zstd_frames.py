"""Whole cubins a host library keeps as bare zstd frames in its data and decompresses itself before
cuModuleLoadData (cuBLASLt 13.1 keeps 393 so in .data and .ldata). gcc-built fixtures
(tests/fixtures/cuda/build_zstd.sh: nvcc -cubin outputs compressed with zstandard, written into
.data as C arrays) and the real cuBLASLt.

cuobjdump does not list them: it reads fatbin containers only (`-all` reads every section's
containers, never a zstd frame), so a library whose only device code is a frame "does not contain
device code" to it. Decompressed, each frame is a cubin cuobjdump reads; the tests compare its
listing of those cubins with archaudit's entries (docs/cuobjdump.md)."""

from __future__ import annotations

import json
import struct
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import zstandard

import oracle
from archaudit.cli import main
from archaudit.model import CUBIN, SASS
from archaudit.read import elf, frames as frame_records
from archaudit.read.library import library_from_bytes, scan_file
from reference_tools import needs_tool

BIN = oracle.FIXTURES
MAGIC = b"\x28\xb5\x2f\xfd"
needs_cuobjdump = needs_tool("cuobjdump", oracle.find_cuobjdump())


def frames(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, decoded bytes) of every zstd frame that decodes whole, found by bytes.find and
    decoded by zstandard: the tests' own reference, independent of archaudit's reader."""
    out = []
    at = data.find(MAGIC)
    while at >= 0:
        decoded = decode_one(data, at)
        if decoded is not None:
            out.append((at, decoded))
        at = data.find(MAGIC, at + 1)
    return out


def decode_one(data: bytes, at: int) -> bytes | None:
    """The one frame starting at `at`, decoded to its end by zstandard; None where it does not decode."""
    d = zstandard.ZstdDecompressor().decompressobj()
    try:
        out = d.decompress(memoryview(data)[at : at + (64 << 20)])
    except zstandard.ZstdError:
        return None
    return out if d.eof else None


def is_cuda_elf(decoded: bytes) -> bool:
    return decoded[:4] == b"\x7fELF" and struct.unpack_from("<H", decoded, 18)[0] == elf.EM_CUDA


def _check(capsys, path: str, *args: str) -> tuple[int, dict]:
    rc = main(["check", "-q", "--format", "json", "--no-config", path, *args])
    return rc, json.loads(capsys.readouterr().out)


def _codes(report: dict) -> list[str]:
    return [f["code"] for t in report["targets"] for f in t["findings"]]


def test_a_cubin_kept_as_a_zstd_frame_in_data_is_a_module_of_its_own():
    path = BIN / "lib_zstd_cubin_sm80.so"
    lib = scan_file(str(path))
    assert not lib.problems
    ((at, decoded),) = frames(path.read_bytes())
    (c,) = lib.containers
    assert (c.role, c.section, c.offset) == (CUBIN, ".data", at)
    (e,) = c.entries
    assert (e.kind, e.target, e.kernels, e.offset, e.compression) == (SASS, "sm_80", ("_Z4axpyfPKfPfi",), at, "zstd")
    assert (e.size, e.stored_size, c.size) == (len(decoded), c.size, e.stored_size)
    # what the library loads is the decoded frame: the same entry as that cubin read as a file
    (alone,) = library_from_bytes("kern.cubin", decoded).containers
    assert (alone.entries[0].target, alone.entries[0].kernels, alone.entries[0].toolkit) == (
        e.target,
        e.kernels,
        e.toolkit,
    )


@needs_cuobjdump
def test_cuobjdump_lists_no_frame_but_reads_each_decoded_cubin(tmp_path):
    """cuobjdump reads fatbin containers only: the library is no device code to it (the difference
    docs/cuobjdump.md explains). The frame decoded is a cubin it lists as archaudit does."""
    path = BIN / "lib_zstd_cubin_sm80.so"
    assert oracle.list_entries(path, all_sections=True) == []
    ((_, decoded),) = frames(path.read_bytes())
    cubin = tmp_path / "frame.cubin"
    cubin.write_bytes(decoded)
    (e,) = scan_file(str(path)).containers[0].entries
    assert oracle.list_entries(cubin) == [("ELF", e.target)]
    assert oracle.kernel_names(cubin) == {e.target: set(e.kernels or ())}


def test_only_frames_that_hold_device_code_are_counted():
    """Three frames: an sm_90 cubin (no size declared, a checksum: decoded within the bounds all
    the same), and the counter-examples just outside, a host x86-64 ELF and C text. Only the
    cubin is a module; the other two are no finding."""
    path = BIN / "lib_zstd_frames.so"
    found = frames(path.read_bytes())
    (cubin,) = [(at, d) for at, d in found if is_cuda_elf(d)]
    others = [d for _, d in found if not is_cuda_elf(d)]
    assert len(found) == 3 and sorted(d[:4] == b"\x7fELF" for d in others) == [False, True]
    assert [struct.unpack_from("<H", d, 18)[0] for d in others if d[:4] == b"\x7fELF"] == [62]  # x86-64
    lib = scan_file(str(path))
    assert not lib.problems
    assert [(c.role, c.section, c.offset, c.entries[0].target) for c in lib.containers] == [
        (CUBIN, ".data", cubin[0], "sm_90")
    ]
    assert lib.containers[0].entries[0].size == len(cubin[1])


def test_a_frame_that_holds_a_fatbin_container_fails_closed():
    """A frame whose first bytes are a fatbin container's header claims device code check does not
    read inside a frame: E011, never skipped, never coverage."""
    lib = scan_file(str(BIN / "lib_zstd_fatbin.so"))
    assert not lib.containers
    assert [p.code for p in lib.problems] == ["E011"] and "holds a fatbin container" in lib.problems[0].message


def test_a_framed_cubin_runs_on_its_own_sass_range_only(capsys):
    path = str(BIN / "lib_zstd_cubin_sm80.so")
    rc, rep = _check(capsys, path, "--arch", "80;86")
    assert rc == 0
    rc, rep = _check(capsys, path, "--arch", "80;90")
    assert rc == 1 and _codes(rep).count("G001") == 1


def test_detail_containers_shows_the_framed_cubin(capsys):
    rc = main(["check", "--no-config", "--detail", "containers", "--arch", "80", str(BIN / "lib_zstd_cubin_sm80.so")])
    text = capsys.readouterr().out
    assert rc == 0
    assert (
        "1 whole cubin stored as a zstd frame outside any container, loaded by the library itself, in .data: sm_80"
    ) in text


def test_fast_reads_the_frames_header_only_and_says_so(capsys):
    """--fast decodes no payload: the frame's first block names the cubin's architecture, and E015
    says its kernels and integrity are unverified."""
    lib = scan_file(str(BIN / "lib_zstd_cubin_sm80.so"), decode=False)
    (e,) = lib.containers[0].entries
    assert (e.target, e.decoded, e.kernels) == ("sm_80", False, None)
    rc, rep = _check(capsys, str(BIN / "lib_zstd_cubin_sm80.so"), "--arch", "80", "--fast")
    assert rc != 0 and "E015" in _codes(rep)


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


def test_the_frames_of_one_library_decode_within_a_bound_of_its_size(monkeypatch):
    """FRAME_FACTOR x the library's size + FRAME_SLACK (cuBLASLt 13.1 needs 2.3x): past it, E012.
    Here the slack and factor are cut so the one 3368-byte cubin is past them."""
    monkeypatch.setattr(frame_records, "FRAME_FACTOR", 0)
    monkeypatch.setattr(frame_records, "FRAME_SLACK", 3000)
    lib = scan_file(str(BIN / "lib_zstd_cubin_sm80.so"))
    assert not lib.containers
    assert [p.code for p in lib.problems] == ["E012"] and "bound of 3000 bytes" in lib.problems[0].message


def test_a_coincidental_magic_is_passed_over():
    """The magic followed by no valid frame (a reserved descriptor bit; a frame header whose first
    block does not decode) in a library's data: no module, no finding."""
    host = (BIN / "lib_host.so").read_bytes()
    junk = MAGIC + b"\x08" + bytes(40) + MAGIC + b"\x60\x00\x10" + b"\xff" * 40
    lib = library_from_bytes("lib.so", host + junk)
    assert not lib.containers and not lib.problems


@pytest.mark.census  # cuBLAS: 423 MB (the census tier, README "Quick start")
def test_cublaslt_13_1_keeps_393_cubins_as_zstd_frames():
    """nvidia-cublas 13.1.1.3's libcublasLt.so.13: 393 bare zstd frames outside any container (.data
    6, .ldata 387), each a cubin (the tests' own bytes.find + zstandard count them: 1.23 GB decoded
    from 85 MB); archaudit reads each as a module of its own with the architecture of its e_flags.
    The zstd-compressed entries of its fatbin containers (.nv_fatbin, .cask_resource) are not counted
    again. cuobjdump lists none of them; decoded, the first frame of each architecture it reads is a
    cubin it lists as archaudit does (it refuses 92 of the 94 sm_90 cubins, ELF ABI 7: "does not
    contain device code"; docs/cuobjdump.md)."""
    from archaudit.read.artifacts import inventory
    from wheels import fetch

    wheel = fetch("nvidia-cublas", "13.1.1.3")
    inv = inventory(str(wheel))
    (lib,) = [x for x in inv.libraries if x.path.endswith("libcublasLt.so.13")]
    framed = [c for c in lib.containers if c.role == CUBIN]
    assert not lib.problems
    assert Counter(c.section for c in framed) == {".ldata": 387, ".data": 6}
    assert all(e.compression == "zstd" for c in framed for e in c.entries)
    targets = Counter(c.entries[0].target for c in framed)
    assert targets == {"sm_120": 95, "sm_100": 95, "sm_90": 94, "sm_80": 94, "sm_75": 14, "sm_86": 1}
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("libcublasLt.so.13")))
    sections = {c.section for c in lib.containers if c.role != CUBIN}
    inside = [(c.offset, c.offset + c.size) for c in lib.containers if c.role != CUBIN]
    outside = [(at, d) for at, d in frames_outside(data, inside)]
    assert [at for at, _ in outside] == sorted(c.offset for c in framed)
    assert sum(len(d) for _, d in outside) == sum(c.entries[0].size for c in framed)
    assert sections == {".nv_fatbin", ".cask_resource"}
    tool = oracle.find_cuobjdump()
    if tool is None:
        return
    by_offset = {c.offset: c.entries[0] for c in framed}
    with tempfile.TemporaryDirectory() as tmp:
        for target in sorted(targets):
            for at, decoded in ((at, d) for at, d in outside if by_offset[at].target == target):
                cubin = Path(tmp, f"{at:x}.cubin")
                cubin.write_bytes(decoded)
                listed = oracle.list_entries(cubin)
                if listed:
                    assert listed == [("ELF", target)]
                    assert oracle.kernel_names(cubin) == {target: set(by_offset[at].kernels or ())}
                    break
            else:
                raise AssertionError(f"cuobjdump reads none of the {target} cubins")


def frames_outside(data: bytes, inside: list[tuple[int, int]]) -> list[tuple[int, bytes]]:
    """The frames of `data` that decode to a CUDA ELF and start in none of the `inside` ranges
    (the library's fatbin containers, whose entries are zstd frames too)."""
    out = []
    at = data.find(MAGIC)
    while at >= 0:
        if not any(lo <= at < hi for lo, hi in inside):
            decoded = decode_one(data, at) or b""
            if is_cuda_elf(decoded):
                out.append((at, decoded))
        at = data.find(MAGIC, at + 1)
    return out


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
