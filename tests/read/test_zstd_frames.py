"""Whole cubins a host library keeps as bare zstd frames in its data and decompresses itself before
cuModuleLoadData (cuBLASLt 13.1 keeps 393 so in .data and .ldata). gcc-built fixtures
(tests/fixtures/cuda/build_zstd.sh: nvcc -cubin outputs compressed with zstandard, written into
.data as C arrays) and the real cuBLASLt.

cuobjdump does not list them: it reads fatbin containers only (`-all` reads every section's
containers, never a zstd frame), so a library whose only device code is a frame "does not contain
device code" to it. Decompressed, each frame is a cubin cuobjdump reads; the tests compare its
listing of those cubins with archaudit's entries (docs/cuobjdump.md). The frame record's own
cases (frames passed over, failing closed, the library's bounds) are test_frames.py's."""

from __future__ import annotations

import json
import struct
import tempfile
from collections import Counter
from pathlib import Path

import pytest

import oracle
from archaudit.cli import main
from archaudit.model import CUBIN, SASS
from archaudit.read.library import library_from_bytes, scan_file
from helpers import ZSTD_MAGIC as MAGIC, decode_zstd_frame as decode_one, is_cuda_elf, zstd_frames as frames
from reference_tools import needs_tool

BIN = oracle.FIXTURES
needs_cuobjdump = needs_tool("cuobjdump", oracle.find_cuobjdump())


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
