"""Real ROCm wheels from PyPI, read completely by archaudit.read.hip and checked against
LLVM's own tools (clang-offload-bundler, llvm-readelf, zstd) where installed.

Wheels are downloaded with pip into tests/wheels.py's cache ($ARCHAUDIT_WHEEL_CACHE, else
$XDG_CACHE_HOME/archaudit/wheels, else ~/.cache/archaudit/wheels) and reused from there.
"""

from __future__ import annotations

import hashlib
import re
import struct
import zipfile

import pytest

import amd_reference as ref
from archaudit import model
from archaudit.gpus import amd as gfx
from archaudit.read import hip
from reference_tools import missing_tool
from wheels import fetch

pytestmark = pytest.mark.slow

WHEELS = [
    pytest.param("cupy-rocm-7-0", "14.2.0", id="cupy-rocm-7-0"),  # CuPy for ROCm 7.0: cub/thrust/random modules
    pytest.param("jax-rocm7-plugin", "0.10.2", id="jax-rocm7-plugin"),  # jaxlib's ROCm kernels (linalg, prng, solver)
    # XLA's ROCm PJRT plugin, the bulk of JAX's device code (154 MB: the census tier, README "Tests")
    pytest.param("jax-rocm7-pjrt", "0.10.2", marks=pytest.mark.census, id="jax-rocm7-pjrt"),
]
MAGIC_RE = re.compile(b"|".join(re.escape(m) for m in hip.MAGICS))
HIP_WRAPPER = 24  # one __hip_fatbin_wrapper (magic, version, pointer, unused) per bundle


def read_library(data: bytes) -> tuple[dict, list[model.Container]]:
    """Parse every bundle of .hip_fatbin; check the section holds nothing else but
    zero padding, and that no bundle lies outside it."""
    secs = ref.elf_sections(data)
    mv = memoryview(data)
    off, size, _ = secs[".hip_fatbin"]
    end = off + size
    cs = []
    pos = off
    while True:
        m = MAGIC_RE.search(data, pos, end)
        gap = data[pos : m.start() if m else end]
        assert gap.count(0) == len(gap), f"non-zero bytes in .hip_fatbin at {pos:#x}"
        if not m:
            break
        n = hip.extent(mv[m.start() : m.start() + hip.MAX_HEADER])
        assert n is not None and m.start() + n <= end
        cs.append(hip.parse(bytes(mv[m.start() : m.start() + n]), m.start(), ".hip_fatbin"))
        pos = m.start() + n
    # magics elsewhere (outside .hip_fatbin) are coincidences in code or data
    stray = []
    for m in MAGIC_RE.finditer(data):
        if off <= m.start() < end:
            continue
        try:
            n = hip.extent(mv[m.start() : m.start() + hip.MAX_HEADER])
            if n is not None and m.start() + n <= len(data):
                hip.parse(bytes(mv[m.start() : m.start() + n]), m.start(), "?")
                stray.append(m.start())
        except hip.Malformed:
            pass
    assert not stray, f"bundles outside .hip_fatbin at {[hex(s) for s in stray]}"
    return secs, cs


def check_against_reference(data: bytes, secs: dict, cs: list[model.Container]) -> int:
    off, size, _ = secs[".hip_fatbin"]
    pieces = ref.split_section(data, off, size)
    assert [p for p, _ in pieces] == [c.offset for c in cs]
    n = 0
    for (_, piece), c in zip(pieces, cs):
        refs = ref.reference_bundle(piece)
        mine = {e.identifier: e for e in c.entries}
        assert sorted(mine) == sorted(r.ident for r in refs)
        for r in refs:
            e = mine[r.ident]
            if r.size is None:
                continue
            assert e.size == r.size, r.ident
            if e.compression == "none":
                assert hashlib.sha256(data[e.offset : e.offset + e.size]).hexdigest() == r.sha
            if r.target is not None:
                t, rt = gfx.parse_target(e.target), gfx.parse_target(r.target)
                assert t.processor == rt.processor, r.ident
                assert all(rt.feature(f) == v for f, v in t.features), r.ident
                assert frozenset(e.kernels or ()) == r.kernels, r.ident
            n += 1
    return n


@pytest.mark.parametrize("name,version", WHEELS)
def test_real_wheel_hip_code_read_fully(name, version):
    whl = fetch(name, version)
    libs = 0
    compared = 0
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            if info.is_dir() or info.file_size < 64:
                continue
            with z.open(info) as f:
                head = f.read(64)
            if head[:4] != b"\x7fELF":
                continue
            data = z.read(info)
            if head[18:20] == struct.pack("<H", hip.EM_AMDGPU):  # a bare code object member
                target, _, kernels = hip.read_code_object(data)
                gfx.parse_target(target)
                continue
            secs = ref.elf_sections(data)
            if ".hip_fatbin" not in secs:
                assert not any(m for m in MAGIC_RE.finditer(data) if _parses(data, m.start())), info.filename
                continue
            secs, cs = read_library(data)
            libs += 1
            assert cs, info.filename
            # the runtime registers one wrapper per bundle
            if ".hipFatBinSegment" in secs:
                assert secs[".hipFatBinSegment"][1] == HIP_WRAPPER * len(cs), info.filename
            for c in cs:
                assert c.entries and all(e.decoded and e.size > 0 for e in c.entries)
                assert all(e.kernels for e in c.entries)
            if ref.BUNDLER and (ref.ZSTD or all(data[c.offset : c.offset + 6] != b"CCOB\x03\x00" for c in cs)):
                compared += check_against_reference(data, secs, cs)
    assert libs > 0, f"{name}: no library with .hip_fatbin"
    if ref.BUNDLER is None:
        missing_tool("clang-offload-bundler", "not installed, for the entry-by-entry comparison")
    if compared == 0 and ref.ZSTD is None:
        missing_tool("zstd", "not installed, for the CCOB v3 comparison")
    assert compared > 0


def _parses(data: bytes, at: int) -> bool:
    mv = memoryview(data)
    try:
        n = hip.extent(mv[at : at + hip.MAX_HEADER])
        if n is None or at + n > len(data):
            return False
        hip.parse(bytes(mv[at : at + n]), at, "?")
        return True
    except hip.Malformed:
        return False


def test_rocm5_bundles_with_the_short_host_triple():
    """cupy-rocm-5-0 13.3.0: ROCm 5 names its host entry `host-x86_64-unknown-linux`; each of the
    three extension modules carries one bundle of nine code objects, gfx801 to gfx1012."""
    from archaudit.read.artifacts import inventory

    inv = inventory(str(fetch("cupy-rocm-5-0", "13.3.0")))
    device = [lib for lib in inv.libraries if lib.containers]
    assert len(device) == 3
    for lib in device:
        assert lib.problems == (), lib.path
        (bundle,) = lib.containers
        assert bundle.section == ".hip_fatbin"
        assert sorted(e.target for e in bundle.entries) == sorted(
            ["gfx801", "gfx802", "gfx803", "gfx900", "gfx906", "gfx908", "gfx1010", "gfx1011", "gfx1012"]
        )
        assert all(e.kernels for e in bundle.entries)
