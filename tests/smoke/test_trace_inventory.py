"""The trace probe's inventory (archaudit.smoke.trace_inventory): check's containers of the
mapped files found by the sha256 of the images the driver loaded, and the bare zstd frames
check does not read, on the nvcc-built fixtures in tests/fixtures/trace/.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from archaudit.read.library import scan_file
from archaudit.smoke import cupti, trace_inventory
from archaudit.smoke.report import FAIL, PASS
from archaudit.smoke.trace_inventory import Inventory
from archaudit.smoke.trace_judge import judge_trace
from archaudit.smoke.trace_records import Trace, read_trace
from smoke_helpers import H100, SM80, SM90, TRACE_BIN, TRACE_LIBS, api_exit, cubins, inventory, load_module


def _framed_library(tmp_path: Path) -> tuple[bytes, Path, int]:
    """The sm_90 cubin of lib_trace_sm90.so as a bare zstd frame after a host library's bytes (as
    cuBLASLt 13.1 keeps cubins in .ldata): the image, the file, the frame's offset."""
    import zstandard

    image = [i for i in cubins("lib_trace_sm90.so", tmp_path) if SM90 in cupti.cubin_functions(i)][0]
    host = (TRACE_BIN / "lib_trace_sm80.so").read_bytes()
    lib = tmp_path / "libloose.so"
    lib.write_bytes(host + b"\0" * 13 + zstandard.ZstdCompressor().compress(image) + b"\0" * 7)
    return image, lib, len(host) + 13


def _launched_from(tmp_path: Path, image: bytes) -> Trace:
    rec = cupti.Recorder()
    load_module(rec, image, 1)
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, SM90, 0)
    out = tmp_path / "records"
    out.mkdir()
    rec.write(str(out))
    return read_trace(str(out))


def test_a_launch_from_a_cubin_stored_as_a_zstd_frame_is_tied_to_its_container(tmp_path):
    """check reads a cubin a library keeps as a bare zstd frame (role cubin, its entry the frame):
    the image the driver loaded is that frame decoded, so its launch is tied to the container by
    its bytes and judged against check's prediction; nothing is left unread."""
    image, lib, at = _framed_library(tmp_path)
    t = _launched_from(tmp_path, image)
    inv = inventory([lib], {m.size for m in t.modules})
    ((li, ci, ei),) = [(s.library, s.container, s.entry) for s in inv.by_hash[hashlib.sha256(image).hexdigest()]]
    c = inv.libraries[li][1].containers[ci]
    assert ei is not None  # tied by its bytes, so the entry is known
    assert (c.role, c.offset, c.entries[ei].compression, c.entries[ei].size) == ("cubin", at, "zstd", len(image))
    assert inv.index_loose([str(lib)], t.modules) == [] and inv.loose == {}
    rows = judge_trace(t, inv, H100, (13, 0))
    assert [(r.subject, r.status) for r in rows] == [("libloose.so", PASS)]
    assert "1 launch(es) of 1 kernel(s)" in rows[0].reason and "sm_90 SASS" in rows[0].reason


def test_a_launch_from_a_frame_check_could_not_read_is_not_skipped(tmp_path):
    """Just outside it: a frame check refuses (here past a verification bound smaller than the
    cubin: E012) holds no container, so a launch from it is tied to the file and frame, and fails,
    never SKIPs."""
    image, lib, at = _framed_library(tmp_path)
    t = _launched_from(tmp_path, image)
    scanned = scan_file(str(lib), decode=True, max_payload=len(image) - 1)
    assert "E012" in [p.code for p in scanned.problems]
    inv = Inventory([(lib.name, scanned)])
    inv.index_kernels()
    assert inv.index_hashes([str(lib)], {m.size for m in t.modules}) == []
    assert hashlib.sha256(image).hexdigest() not in inv.by_hash  # not in check's containers
    assert inv.index_loose([str(lib)], t.modules) == []
    assert inv.loose == {hashlib.sha256(image).hexdigest(): ("libloose.so", at)}
    rows = judge_trace(t, inv, H100, (13, 0))
    assert [(r.subject, r.status) for r in rows] == [("libloose.so", FAIL)]
    assert f"bare zstd frames at 0x{at:x}): check does not read them" in rows[0].reason
    assert SM90 in rows[0].reason


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_loose_frames_are_found_across_read_boundaries(tmp_path, monkeypatch, chunk):
    import zstandard

    images = [b"\x7fELF" + bytes([k]) * (3000 + k) for k in range(3)]
    blob = bytearray(b"x" * 50)
    offsets = []
    for image in images:
        offsets.append(len(blob))
        blob += zstandard.ZstdCompressor().compress(image) + b"\x28\xb5\x2f\xfd" + b"y" * 5  # a stray magic too
    path = tmp_path / "blob"
    path.write_bytes(bytes(blob))
    monkeypatch.setattr(trace_inventory, "CHUNK", chunk)
    got = trace_inventory.loose_cubins(str(path), {len(i) for i in images[:2]}, 100)
    assert got == [(o, hashlib.sha256(i).hexdigest()) for o, i in zip(offsets[:2], images[:2])]
    # the budget bounds the decoding
    assert trace_inventory.loose_cubins(str(path), {len(i) for i in images}, 1) == got[:1]


def test_each_cubin_is_found_by_the_sha256_of_the_bytes_cuobjdump_extracts(tmp_path):
    """The images the driver loads are the cubins cuobjdump extracts (the oracle): each is found,
    by its bytes, in a container of the library it came from; only images of a loaded size are hashed."""
    made = {lib: cubins(lib, tmp_path) for lib in ("lib_trace_sm90.so", "lib_trace_sm80.so")}
    inv = inventory(TRACE_LIBS, {len(i) for images in made.values() for i in images})
    for lib, images in made.items():
        for image in images:
            sources = inv.by_hash[hashlib.sha256(image).hexdigest()]
            assert {inv.libraries[s.library][0] for s in sources} == {lib}
            assert all(s.entry is not None for s in sources)
    assert inventory(TRACE_LIBS, set()).by_hash == {}


def test_kernels_are_indexed_by_the_containers_that_define_them():
    inv = inventory(TRACE_LIBS, set())
    assert {inv.libraries[li][0] for li, _ in inv.by_kernel[SM90]} == {"lib_trace_sm90.so"}
    assert {inv.libraries[li][0] for li, _ in inv.by_kernel[SM80]} == {"lib_trace_sm80.so"}
    for kernel, places in inv.by_kernel.items():
        for li, ci in places:
            c = inv.libraries[li][1].containers[ci]
            assert c.vendor == "nvidia" and any(kernel in (e.kernels or ()) for e in c.entries)
