"""HIP offload bundles (archaudit.read.hip) and AMD target rules (archaudit.gpus.amd).

Fixtures in tests/fixtures/amd/bin were built by tests/fixtures/amd/build.sh with
Debian's clang. Where LLVM's tools are installed, every parse is compared entry by
entry with clang-offload-bundler and llvm-readelf (see amd_reference.py).
"""

from __future__ import annotations

import glob
import hashlib
import random
import re
import struct
import tracemalloc
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import zstandard

import amd_reference as ref
from archaudit import model
from archaudit.gpus import amd as gfx
from archaudit.read import hip
from helpers import PLAIN, ccob, first_bundle, parse_section
from reference_tools import needs_tool

BIN = Path(__file__).parents[1] / "fixtures" / "amd" / "bin"
SOS = sorted(BIN.glob("*.so"))
HSACOS = sorted(BIN.glob("*.hsaco"))

needs_bundler = needs_tool("clang-offload-bundler", ref.BUNDLER)
needs_readelf = needs_tool("llvm-readelf (one that names AMDGPU processors)", ref.READELF)


# --- fixtures -----------------------------------------------------------------


def test_fixtures_present():
    assert len(SOS) >= 4 and len(HSACOS) >= 2
    assert sum(p.stat().st_size for p in BIN.iterdir()) < 2_000_000


@pytest.mark.parametrize("path", SOS, ids=lambda p: p.name)
def test_fixture_section_parses_fully(path):
    data, cs = parse_section(path)
    assert cs, "no bundle in .hip_fatbin"
    for c in cs:
        assert c.vendor == "amd" and c.role == model.HIP and c.section == ".hip_fatbin"
        assert c.entries
        for e in c.entries:
            assert e.vendor == "amd" and e.kind == model.CODE_OBJECT and e.decoded
            assert e.size > 0 and e.kernels
            gfx.parse_target(e.target)  # a valid target ID
            assert e.identifier.endswith("-" + e.target) or gfx.normalise(e.identifier.split("--", 1)[1]) == e.target
            if e.compression == "none":
                co = data[e.offset : e.offset + e.size]
                assert co[:4] == b"\x7fELF" and struct.unpack_from("<H", co, 18)[0] == 224
                assert e.stored_size == e.size
            else:
                assert e.compression == "zstd" and e.offset == c.offset


def test_fixture_formats():
    kinds = {}
    for p in SOS:
        data, cs = parse_section(p)
        kinds[p.name] = [data[c.offset : c.offset + 4] for c in cs]
    assert kinds["hip_multi.so"] == [b"__CL"]
    assert kinds["hip_two_plain.so"] == [b"__CL", b"__CL"]
    assert kinds["hip_two_ccob.so"] == [b"CCOB", b"CCOB"]
    assert kinds["hip_ccob_generic.so"] == [b"CCOB"]


@needs_bundler
@pytest.mark.parametrize("path", SOS, ids=lambda p: p.name)
def test_fixture_agrees_with_reference(path):
    data, cs = parse_section(path)
    off, size, _ = ref.elf_sections(data)[".hip_fatbin"]
    pieces = ref.split_section(data, off, size)
    assert [p[0] for p in pieces] == [c.offset for c in cs]
    for (_, piece), c in zip(pieces, cs):
        refs = ref.reference_bundle(piece)
        mine = {e.identifier: e for e in c.entries}
        assert sorted(mine) == sorted(r.ident for r in refs)
        for r in refs:
            e = mine[r.ident]
            assert r.size is not None, f"the reference bundler could not extract {r.ident}"
            assert e.size == r.size
            if e.compression == "none":
                assert hashlib.sha256(data[e.offset : e.offset + e.size]).hexdigest() == r.sha
            if r.target is not None:
                # the ELF's own target is at least as specific as the bundle id's
                t, rt = gfx.parse_target(e.target), gfx.parse_target(r.target)
                assert t.processor == rt.processor
                assert all(rt.feature(n) == v for n, v in t.features)
                assert e.own_target == r.target  # the code object's own target, as llvm-readelf reads it
                assert frozenset(e.kernels or ()) == r.kernels


@needs_readelf
@pytest.mark.parametrize("path", HSACOS, ids=lambda p: p.name)
def test_target_from_elf_agrees_with_readelf(path):
    co = path.read_bytes()
    (e_flags,) = struct.unpack_from("<I", co, 48)
    want, kernels = ref.readelf_code_object(str(path))
    assert hip.target_from_elf(e_flags, co[8]) == want
    target, version, names = hip.read_code_object(co)
    assert target == want and set(names) == kernels and version >= 4


def test_target_from_elf_names_features():
    # the hsaco fixtures' names say what build.sh asked for
    got = {p.name: hip.read_code_object(p.read_bytes())[0] for p in HSACOS}
    assert got["gfx90a_xnack_on.hsaco"] == "gfx90a:xnack+"
    assert got["gfx942_sramecc_on_xnack_off.hsaco"] == "gfx942:sramecc+:xnack-"
    assert got["gfx1201.hsaco"] == "gfx1201"


def test_target_from_elf_table():
    assert hip.target_from_elf(0x04C) == "gfx942"
    assert hip.target_from_elf(0x04C | 0x100 | 0x400) == "gfx942"  # any, any
    assert hip.target_from_elf(0x03F | 0x300) == "gfx90a:xnack+"
    assert hip.target_from_elf(0x04C | 0x200 | 0xC00) == "gfx942:sramecc+:xnack-"
    assert hip.target_from_elf(0x054 | (1 << 24)) == "gfx11-generic"
    assert hip.target_from_elf(0x05F) == "gfx9-4-generic"
    assert hip.target_from_elf(0x03F | 0x100, abi_version=1) == "gfx90a:sramecc-:xnack+"  # v3 bits
    with pytest.raises(ValueError):
        hip.target_from_elf(0x0FE)


def _llvm_elf_headers():
    pats = ["/usr/include/llvm-*/llvm/BinaryFormat/ELF.h", "/usr/lib/llvm-*/include/llvm/BinaryFormat/ELF.h"]
    return sorted({p for pat in pats for p in glob.glob(pat)})


@needs_tool("LLVM headers (llvm-19-dev)", _llvm_elf_headers())
def test_mach_table_matches_llvm_header():
    checked = 0
    for header in _llvm_elf_headers():
        text = Path(header).read_text()
        for name, value in re.findall(r"EF_AMDGPU_MACH_AMDGCN_(GFX\w+)\s*=\s*(0x[0-9a-fA-F]+)", text):
            proc = "gfx" + name[3:].lower().replace("_", "-")
            if proc in gfx.processors():
                assert gfx.processors()[proc].mach == int(value, 16), proc
                checked += 1
    assert checked > 40


# --- synthetic compressed variants, built from a real uncompressed bundle -------


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("method", ["zlib", "zstd"])
def test_ccob_versions_and_methods(version, method):
    blob = ccob(PLAIN, version, method)
    tail = b"\0" * 100  # alignment padding as in a section
    assert hip.extent(blob + tail) == len(blob)
    c = hip.parse(blob, 4096, ".hip_fatbin")
    plain = hip.parse(PLAIN, 0, ".hip_fatbin")
    assert c.size == len(blob)
    assert [(e.target, e.size, e.kernels) for e in c.entries] == [(e.target, e.size, e.kernels) for e in plain.entries]
    assert all(e.compression == method and e.offset == 4096 and e.stored_size == len(blob) for e in c.entries)
    if ref.BUNDLER and version in (1, 2):  # clang 19 reads versions 1 and 2
        assert sorted(ref.reference_bundle(blob, with_entries=False)) == sorted(e.identifier for e in c.entries)


def test_ccob_v1_extent_needs_whole_stream():
    for method in ("zlib", "zstd"):
        blob = ccob(PLAIN, 1, method)
        assert hip.extent(blob[: len(blob) - 1]) is None
        assert hip.extent(blob[:30]) is None
        assert hip.extent(blob + b"CCOB" + b"\0" * 40) == len(blob)


# --- malformed input -------------------------------------------------------------


def small_peak(fn):
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def raises(code, fn):
    with pytest.raises(hip.Malformed) as ei:
        fn()
    assert ei.value.code == code, ei.value
    return ei.value


def test_extent_short_head_is_none():
    n = hip.extent(PLAIN)
    assert n == len(PLAIN)
    for cut in (0, 3, 10, 24, 31, 40, 60):
        assert hip.extent(PLAIN[:cut]) is None
    assert hip.extent(ccob(PLAIN, 3, "zstd")[:31]) is None
    assert hip.extent(ccob(PLAIN, 2, "zstd")[:23]) is None


def test_truncated_bundle():
    raises("E030", lambda: hip.parse(PLAIN[:-1], 0, ".hip_fatbin"))
    raises("E030", lambda: hip.parse(PLAIN[:200], 0, ".hip_fatbin"))
    blob = ccob(PLAIN, 3, "zstd")
    raises("E030", lambda: hip.parse(blob[:-5], 0, ".hip_fatbin"))


def test_absurd_entry_count():
    bad = PLAIN[:24] + struct.pack("<Q", 1 << 60) + PLAIN[32:]
    peak = small_peak(lambda: raises("E030", lambda: hip.extent(bad)))
    assert peak < 1 << 20
    raises("E030", lambda: hip.extent(PLAIN[:24] + struct.pack("<Q", 0) + PLAIN[32:]))


def test_absurd_entry_fields():
    # first entry: offset at 32, size at 40, id length at 48
    raises("E030", lambda: hip.extent(PLAIN[:48] + struct.pack("<Q", 1 << 50) + PLAIN[56:]))
    raises("E030", lambda: hip.extent(PLAIN[:40] + struct.pack("<Q", 1 << 60) + PLAIN[48:]))
    raises("E030", lambda: hip.extent(PLAIN[:32] + struct.pack("<Q", 1 << 60) + PLAIN[40:]))


def test_entry_offset_inside_header():
    # point every entry with data at offset 8, inside the header
    hdr = bytearray(PLAIN)
    pos = 32
    for _ in range(struct.unpack_from("<Q", hdr, 24)[0]):
        off, size, n = struct.unpack_from("<QQQ", hdr, pos)
        if size:
            struct.pack_into("<Q", hdr, pos, 8)
        pos += 24 + n
    raises("E030", lambda: hip.extent(bytes(hdr)))


def test_ccob_declaring_4gib():
    blob = ccob(PLAIN, 3, "zstd", usize=4 << 30)
    peak = small_peak(lambda: raises("E032", lambda: hip.parse(blob, 0, ".hip_fatbin")))
    assert peak < 1 << 20
    # and with a limit the caller sets
    raises("E032", lambda: hip.parse(ccob(PLAIN, 2, "zstd"), 0, "s", max_decoded=len(PLAIN) - 1))


@pytest.mark.parametrize("method", ["zstd", "zlib"])
@pytest.mark.parametrize("version", [1, 2, 3])
def test_payload_shorter_or_longer_than_declared(method, version):
    raises("E031", lambda: hip.parse(ccob(PLAIN, version, method, usize=len(PLAIN) + 100), 0, "s"))
    raises("E031", lambda: hip.parse(ccob(PLAIN, version, method, usize=len(PLAIN) - 100), 0, "s"))


@pytest.mark.parametrize("method", ["zstd", "zlib"])
def test_decompression_bomb_stays_bounded(method):
    big = b"\0" * (64 << 20)
    payload = zlib.compress(big, 9) if method == "zlib" else zstandard.ZstdCompressor().compress(big)
    blob = ccob(PLAIN, 3, method, payload=payload)  # declares len(PLAIN) bytes
    peak = small_peak(lambda: raises("E031", lambda: hip.parse(blob, 0, "s")))
    assert peak < 8 << 20


def test_hash_mismatch():
    raises("E031", lambda: hip.parse(ccob(PLAIN, 3, "zstd", digest=12345), 0, "s"))


def test_corrupt_payload():
    blob = bytearray(ccob(PLAIN, 3, "zstd"))
    blob[40:60] = b"\xff" * 20
    raises("E031", lambda: hip.parse(bytes(blob), 0, "s"))


def test_unknown_ccob_version_and_method():
    blob = bytearray(ccob(PLAIN, 3, "zstd"))
    struct.pack_into("<H", blob, 4, 9)
    raises("E030", lambda: hip.extent(bytes(blob)))
    blob = bytearray(ccob(PLAIN, 3, "zstd"))
    struct.pack_into("<H", blob, 6, 7)
    raises("E030", lambda: hip.extent(bytes(blob)))


def _entry_header(bundle: bytes, target: str) -> tuple[int, int, int]:
    """(header position, offset, size) of the entry whose id ends with target."""
    pos = 32
    for _ in range(struct.unpack_from("<Q", bundle, 24)[0]):
        off, size, n = struct.unpack_from("<QQQ", bundle, pos)
        if bundle[pos + 24 : pos + 24 + n].decode().endswith("--" + target):
            return pos, off, size
        pos += 24 + n
    raise AssertionError(target)


def test_code_object_not_amdgpu():
    _, off, _ = _entry_header(PLAIN, "gfx1100")
    bad = bytearray(PLAIN)
    struct.pack_into("<H", bad, off + 18, 62)  # EM_X86_64
    e = raises("E030", lambda: hip.parse(bytes(bad), 0, "s"))
    assert "224" in e.message
    bad = bytearray(PLAIN)
    bad[off : off + 4] = b"JUNK"
    raises("E030", lambda: hip.parse(bytes(bad), 0, "s"))
    # and inside a compressed bundle
    bad = bytearray(PLAIN)
    struct.pack_into("<H", bad, off + 18, 62)
    raises("E030", lambda: hip.parse(ccob(bytes(bad), 2, "zstd"), 0, "s"))


def test_bundle_id_disagrees_with_code_object():
    pos, _, _ = _entry_header(PLAIN, "gfx1100")
    n = struct.unpack_from("<Q", PLAIN, pos + 16)[0]
    ident = PLAIN[pos + 24 : pos + 24 + n]
    bad = PLAIN.replace(ident, ident.replace(b"gfx1100", b"gfx1101"))
    e = raises("E030", lambda: hip.parse(bad, 0, "s"))
    assert "gfx1100" in e.message


def test_unknown_offload_kind():
    pos, _, _ = _entry_header(PLAIN, "gfx1100")
    n = struct.unpack_from("<Q", PLAIN, pos + 16)[0]
    ident = PLAIN[pos + 24 : pos + 24 + n]
    bad = PLAIN.replace(ident, ident.replace(b"hipv4", b"sycl5"))
    raises("E030", lambda: hip.parse(bad, 0, "s"))


def test_garbage_is_not_a_bundle():
    raises("E030", lambda: hip.extent(b"__CLANG_OFFLOAD_BUNDLX" + b"\0" * 40))
    raises("E030", lambda: hip.extent(b"CCOB\x0f\x84!\x02\x00\x00\x81?CPCH" + b"\0" * 40))


# --- gfx: targets, rules, catalog, claims ------------------------------------------


def test_parse_targets():
    assert gfx.normalise("gfx90a") == "gfx90a"
    assert gfx.normalise("gfx90a:xnack-") == "gfx90a:xnack-"
    assert gfx.normalise("gfx942:xnack-:sramecc+") == "gfx942:sramecc+:xnack-"
    assert gfx.normalise("GFX11-Generic") == "gfx11-generic"
    assert gfx.normalise("gfx9-4-generic:sramecc+") == "gfx9-4-generic:sramecc+"
    t = gfx.parse_target("gfx942:sramecc+:xnack-")
    assert t.processor == "gfx942" and t.feature("xnack") is False and t.feature("sramecc") is True
    for bad in (
        "",
        "gfx",
        "gfx9999",
        "sm_90",
        "gfx90a:xnack",
        "gfx90a:xnack+:xnack-",
        "gfx1100:xnack+",
        "gfx1030:sramecc-",
        "gfx90a:wavefrontsize64+",
    ):
        with pytest.raises(ValueError):
            gfx.parse_target(bad)


def test_runs_on_exact_processor():
    assert gfx.runs_on("gfx90a", "gfx90a")
    assert not gfx.runs_on("gfx90a", "gfx908")
    assert not gfx.runs_on("gfx942", "gfx950")
    assert not gfx.runs_on("gfx1100", "gfx1101")


def test_runs_on_features():
    # unspecified in the code: either GPU setting
    assert gfx.runs_on("gfx90a", "gfx90a:xnack+")
    assert gfx.runs_on("gfx90a", "gfx90a:xnack-")
    # specified: must match the GPU's setting when given
    assert gfx.runs_on("gfx90a:xnack-", "gfx90a:xnack-")
    assert not gfx.runs_on("gfx90a:xnack-", "gfx90a:xnack+")
    assert not gfx.runs_on("gfx90a:xnack+", "gfx90a:xnack-")
    assert gfx.runs_on("gfx90a:xnack+", "gfx90a")  # GPU setting not given
    assert gfx.runs_on("gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-")
    assert not gfx.runs_on("gfx942:sramecc+:xnack-", "gfx942:sramecc-:xnack-")
    assert gfx.runs_on("gfx942:sramecc+", "gfx942:sramecc+:xnack+")


def test_runs_on_generic_families():
    for member in ("gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"):
        assert gfx.runs_on("gfx11-generic", member)
    assert not gfx.runs_on("gfx11-generic", "gfx1200")
    assert not gfx.runs_on("gfx11-generic", "gfx1030")
    assert gfx.runs_on("gfx9-generic", "gfx906") and not gfx.runs_on("gfx9-generic", "gfx90a")
    assert not gfx.runs_on("gfx9-generic", "gfx942")
    assert gfx.runs_on("gfx9-4-generic", "gfx942") and gfx.runs_on("gfx9-4-generic", "gfx950")
    assert gfx.runs_on("gfx10-3-generic", "gfx1032") and not gfx.runs_on("gfx10-3-generic", "gfx1010")
    assert gfx.runs_on("gfx10-1-generic", "gfx1010")
    assert gfx.runs_on("gfx12-generic", "gfx1201")
    assert gfx.runs_on("gfx9-4-generic:xnack-", "gfx942:xnack-")
    assert not gfx.runs_on("gfx9-4-generic:xnack-", "gfx942:xnack+")
    with pytest.raises(ValueError):
        gfx.runs_on("gfx11-generic", "gfx11-generic")  # a generic target is not a GPU


def test_generic_families_are_data():
    for name, p in gfx.processors().items():
        assert p.generic == bool(p.family), name
        for member in p.family:
            assert not gfx.processors()[member].generic
            # a generic target supports no feature its members all lack
            for f in ("xnack", "sramecc"):
                if p.supports(f):
                    assert any(gfx.processors()[m].supports(f) for m in p.family)


def test_gpu_catalog():
    want = {
        "Instinct MI300X": "gfx942",
        "Instinct MI300A": "gfx942",
        "Instinct MI325X": "gfx942",
        "Instinct MI355X": "gfx950",
        "Instinct MI250X": "gfx90a",
        "Instinct MI250": "gfx90a",
        "Instinct MI210": "gfx90a",
        "Instinct MI100": "gfx908",
        "Instinct MI50": "gfx906",
        "Instinct MI60": "gfx906",
        "Radeon VII": "gfx906",
        "Radeon RX 7900 XTX": "gfx1100",
        "Radeon RX 7900 XT": "gfx1100",
        "Radeon RX 7800 XT": "gfx1101",
        "Radeon RX 7700 XT": "gfx1101",
        "Radeon RX 7600": "gfx1102",
        "Radeon RX 9070": "gfx1201",
        "Radeon RX 6900 XT": "gfx1030",
        "Radeon RX 6800": "gfx1030",
    }
    cat = {g.name: g.target for g in gfx.gpus()}
    for name, target in want.items():
        assert cat[name] == target, name
    for g in gfx.gpus():
        p = gfx.parse_target(g.target)
        assert not gfx.processors()[p.processor].generic
    assert [g.target for g in gfx.lookup_gpu("mi300x")] == ["gfx942"]
    assert [g.target for g in gfx.lookup_gpu("RX 7900 XTX")] == ["gfx1100"]
    assert gfx.lookup_gpu("MI999") == []
    (rx7600,) = gfx.lookup_gpu("RX 7600")
    assert gfx.runs_on("gfx11-generic", rx7600.target)


def test_parse_amd_claim_spellings():
    assert gfx.parse_amd_claim("gfx90a;gfx942") == ["gfx90a", "gfx942"]
    assert gfx.parse_amd_claim("gfx90a;gfx1100") == ["gfx90a", "gfx1100"]
    assert gfx.parse_amd_claim("gfx90a,gfx1100") == ["gfx90a", "gfx1100"]
    assert gfx.parse_amd_claim("gfx90a, gfx1100") == ["gfx90a", "gfx1100"]
    assert gfx.parse_amd_claim("PYTORCH_ROCM_ARCH=gfx90a;gfx942") == ["gfx90a", "gfx942"]
    assert gfx.parse_amd_claim('AMDGPU_TARGETS="gfx906;gfx908;"') == ["gfx906", "gfx908"]
    assert gfx.parse_amd_claim("-DGPU_TARGETS=gfx1100,gfx1101") == ["gfx1100", "gfx1101"]
    assert gfx.parse_amd_claim("--offload-arch=gfx90a:xnack- --offload-arch=gfx942") == ["gfx90a:xnack-", "gfx942"]
    assert gfx.parse_amd_claim("--offload-arch=gfx942:xnack-:sramecc+") == ["gfx942:sramecc+:xnack-"]
    assert gfx.parse_amd_claim("--offload-arch gfx1100 --offload-arch=gfx11-generic") == ["gfx1100", "gfx11-generic"]
    assert gfx.parse_amd_claim("--offload-arch=gfx90a,gfx942 --amdgpu-target=gfx906") == ["gfx90a", "gfx942", "gfx906"]
    assert gfx.parse_amd_claim("gfx90a;gfx90a") == ["gfx90a"]


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "sm_80",
        "gfx90a;;gfx942",
        "gfx1100:xnack-",
        "--offload-arch=",
        "--offload-arch",
        "--offload-arch=native",
        "all",
        "gfx90a:foo+",
        "CUDA_ARCH=gfx90a",
        "--cuda-path=x",
        "gfx90a;sm_90",
        "hello world",
    ],
)
def test_parse_amd_claim_nonsense(bad):
    with pytest.raises(ValueError) as ei:
        gfx.parse_amd_claim(bad)
    assert str(ei.value)


# --- host triples -------------------------------------------------------------------


def bundle_of(entries: list[tuple[str, bytes]]) -> bytes:
    """An uncompressed offload bundle holding these (id, payload) entries, as clang lays it out."""
    header = 32 + sum(24 + len(ident) for ident, _ in entries)
    table, blobs, at = b"", b"", header
    for ident, payload in entries:
        table += struct.pack("<QQQ", at, len(payload), len(ident)) + ident.encode()
        blobs += payload
        at += len(payload)
    return hip.UNCOMPRESSED_MAGIC + struct.pack("<Q", len(entries)) + table + blobs


@pytest.mark.parametrize(
    "host", ["host-x86_64-unknown-linux", "host-x86_64-unknown-linux-gnu-", "host-aarch64-unknown-linux-gnu"]
)
def test_host_triples_of_every_rocm_release(host):
    """ROCm 5 (cupy-rocm-5-0 13.3.0) writes the host triple without its environment part."""
    co = (BIN / "gfx90a_xnack_on.hsaco").read_bytes()
    c = hip.parse(bundle_of([(host, b""), ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", co)]), 0, "")
    assert [e.target for e in c.entries] == ["gfx90a:xnack+"]


@pytest.mark.parametrize("ident", ["host-", "host--", "hostx-x86_64-unknown-linux", "host-x86_64"])
def test_malformed_host_ids_still_fail(ident):
    co = (BIN / "gfx90a_xnack_on.hsaco").read_bytes()
    raises("E030", lambda: hip.parse(bundle_of([(ident, b""), ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", co)]), 0, ""))


# ---- compressed offload bundles at their edges ----------------------------------------------------
# Compressed offload bundles at their edges, pinned where mutation testing found hip.py loose
# (docs/mutation.md).
#
# Every bundle here is a real clang-built one from tests/fixtures/amd/bin, compressed as LLVM's
# offload bundler does (CCOB v1-v3, zlib or zstd) with the zstd frame options and block kinds
# real encoders produce; each case asserts the finding code (E030 malformed, E031 does not
# decode to its declared size or hash, E032 too large) or the exact extent.

# A bundle whose MD5's low 64 bits have the top bit set (a signed read of the hash would differ).
HIGH = first_bundle(BIN / "hip_two_plain.so")
assert hashlib.md5(HIGH).digest()[7] >= 0x80 and HIGH[:4] != b"CCOB"


def raises_saying(code: str, fn: Callable[[], object], words: str = "") -> None:
    with pytest.raises(hip.Malformed) as e:
        fn()
    assert e.value.code == code and words in e.value.message, e.value


def targets(c: object) -> list[str]:
    return [e.target for e in c.entries]  # type: ignore[attr-defined]


def v1_zstd(frame: bytes, content: bytes) -> bytes:
    return ccob(content, 1, "zstd", payload=frame)


def digest(content: bytes) -> int:
    return int.from_bytes(hashlib.md5(content).digest()[:8], "little")


# ---- the hash, and sizes past 2**31 / 2**63 -------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("method", ["zlib", "zstd"])
def test_a_hash_with_its_top_bit_set_matches(version, method):
    plain = hip.parse(HIGH, 0, ".hip_fatbin")
    c = hip.parse(ccob(HIGH, version, method), 0, ".hip_fatbin")
    assert targets(c) == targets(plain) and targets(c)


def test_a_v1_bundle_declaring_3_gib_is_too_large_not_malformed():
    raises_saying("E032", lambda: hip.parse(ccob(PLAIN, 1, "zstd", usize=3 << 30), 0, "s"), "above the")


# ---- totals ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version, hsize", [(2, 24), (3, 32)])
def test_totals_that_cannot_hold_a_payload_or_are_absurd(version, hsize):
    blob = bytearray(ccob(PLAIN, version, "zstd"))
    fmt = "<I" if version == 2 else "<Q"
    for total in (hsize, hsize - 1, 0):
        struct.pack_into(fmt, blob, 8, total)
        raises_saying("E030", lambda: hip.extent(bytes(blob)), f"declares a total size of {total} bytes")
    if version == 3:
        struct.pack_into(fmt, blob, 8, hip.MAX_BUNDLE + 1)
        raises_saying("E030", lambda: hip.extent(bytes(blob)), "declares a total size")


@pytest.mark.parametrize("version, hsize", [(2, 24), (3, 32)])
def test_a_head_of_exactly_the_header_knows_the_extent(version, hsize):
    blob = ccob(PLAIN, version, "zstd")
    assert hip.extent(blob[:hsize]) == len(blob)
    assert hip.extent(blob[: hsize - 1]) is None


# ---- zstd frames as encoders write them (v1 has no total: its end is the frame's) -----------------


def frame(content: bytes, **params: object) -> bytes:
    return zstandard.ZstdCompressor(**params).compress(content)  # type: ignore[arg-type]


NOISE = random.Random(7).randbytes(300_000)  # incompressible: raw blocks, several of them
PADDED = PLAIN + bytes(200_000)  # zeros after the bundle: RLE blocks


@pytest.mark.parametrize(
    "content, params",
    [
        (PLAIN, {}),
        (PLAIN, {"write_checksum": True}),
        (PLAIN, {"write_content_size": False}),  # no single-segment flag: a window descriptor
        (PLAIN, {"write_content_size": False, "write_checksum": True}),
        (PADDED, {}),
        (PLAIN + NOISE, {}),
        (PLAIN + NOISE, {"write_checksum": True, "write_content_size": False}),
        (PLAIN[:200], {}),  # a one-byte content size in a single-segment frame
        (PLAIN[:1000], {}),  # a two-byte content size
    ],
    ids=[
        "plain",
        "checksum",
        "window",
        "window-checksum",
        "rle-blocks",
        "raw-blocks",
        "raw-window-checksum",
        "size-1-byte",
        "size-2-bytes",
    ],
)
def test_v1_zstd_extent_is_the_frame_as_encoded(content, params):
    f = frame(content, **params)
    blob = v1_zstd(f, content)
    assert hip.extent(blob + b"CCOB" + bytes(40)) == len(blob)
    assert hip.extent(blob[:-1]) is None
    if content[:24] == PLAIN[:24] and len(content) >= len(PLAIN):
        assert targets(hip.parse(blob, 0, "s")) == targets(hip.parse(PLAIN, 0, "s"))


def with_header(f: bytes, fhd: int, extra: bytes, drop: int) -> bytes:
    """The frame with another frame-header descriptor: ``extra`` bytes inserted after it and
    ``drop`` bytes of the old header fields removed (the blocks are unchanged)."""
    return f[:4] + bytes([fhd]) + extra + f[5 + drop :]


@pytest.mark.parametrize("did_flag, did_len", [(1, 1), (2, 2), (3, 4)])
def test_v1_zstd_extent_with_a_dictionary_id(did_flag, did_len):
    """A frame naming its dictionary: the id's 1, 2 or 4 bytes follow the window descriptor."""
    f = frame(PLAIN, write_content_size=False)
    fhd = f[4]
    assert fhd & 0x23 == 0  # no single segment, no dictionary id
    g = with_header(f, fhd | did_flag, f[5:6] + bytes(range(1, did_len + 1)), 1)
    assert hip.extent(v1_zstd(g, PLAIN) + bytes(8)) == 20 + len(g)


@pytest.mark.parametrize("fcs_flag, fcs_len", [(1, 2), (2, 4), (3, 8)])
def test_v1_zstd_extent_with_each_content_size_width(fcs_flag, fcs_len):
    """A window descriptor, then a content size of 2, 4 or 8 bytes."""
    f = frame(PLAIN, write_content_size=False)
    fhd = f[4]
    g = with_header(f, (fhd & 0x3F) | (fcs_flag << 6), f[5:6] + bytes(fcs_len), 1)
    assert hip.extent(v1_zstd(g, PLAIN) + bytes(8)) == 20 + len(g)
    single = frame(PLAIN)
    assert single[4] & 0x20
    h = with_header(single, (single[4] & 0x3F) | (fcs_flag << 6), bytes(fcs_len), (1, 2, 4, 8)[single[4] >> 6])
    assert hip.extent(v1_zstd(h, PLAIN) + bytes(8)) == 20 + len(h)


def test_v1_zstd_frames_that_are_not():
    f = frame(PLAIN)
    raises_saying("E031", lambda: hip.extent(v1_zstd(b"\x28\xb5\x2f\xfe" + f[4:], PLAIN)), "is not a zstd frame")
    header_len = 5 + (1, 2, 4, 8)[f[4] >> 6]
    bad = bytearray(f)
    bad[header_len] = (bad[header_len] & ~0x06) | 0x06  # block type 3: reserved
    raises_saying("E031", lambda: hip.extent(v1_zstd(bytes(bad), PLAIN)), "reserved block type")
    assert hip.extent(v1_zstd(f[:5], PLAIN)) is None
    assert hip.extent(v1_zstd(f[: header_len + 2], PLAIN)) is None


# ---- zlib streams ----------------------------------------------------------------------------------


def test_v1_zlib_extent_over_several_chunks():
    content = PLAIN + NOISE * 4  # 1.2 MB that does not compress: the stream is read in chunks
    blob = ccob(content, 1, "zlib")
    assert len(blob) > 1 << 20
    assert hip.extent(blob + b"CCOB" + bytes(40)) == len(blob)
    assert targets(hip.parse(blob, 0, "s")) == targets(hip.parse(PLAIN, 0, "s"))


def test_v1_zlib_stream_decoding_past_its_size_or_not_at_all():
    bomb = zlib.compress(bytes(8 << 20), 9)
    raises_saying("E031", lambda: hip.extent(ccob(PLAIN, 1, "zlib", payload=bomb)), "decodes past its declared")
    raises_saying(
        "E031",
        lambda: hip.extent(ccob(PLAIN, 1, "zlib", payload=b"\x78\x9c" + b"\xff" * 60)),
        "zlib payload does not decode",
    )


@pytest.mark.parametrize("version", [2, 3])
def test_zlib_payloads_that_are_not_exactly_the_bundle(version):
    good = zlib.compress(PLAIN, 9)
    raises_saying(
        "E031", lambda: hip.parse(ccob(PLAIN, version, "zlib", payload=good[:-4]), 0, "s"), "zlib payload is truncated"
    )  # every byte, but no end of stream (its checksum)
    raises_saying(
        "E031",
        lambda: hip.parse(ccob(PLAIN, version, "zlib", payload=good[: len(good) // 2]), 0, "s"),
        "zlib payload is truncated",
    )
    raises_saying(
        "E031",
        lambda: hip.parse(ccob(PLAIN, version, "zlib", payload=good + b"junk"), 0, "s"),
        "4 bytes follow the zlib stream",
    )
    raises_saying(
        "E031",
        lambda: hip.parse(ccob(PLAIN, version, "zlib", payload=b"\x78\x9c" + b"\xff" * 60), 0, "s"),
        "zlib payload does not decode",
    )


@pytest.mark.parametrize("method", ["zlib", "zstd"])
def test_a_payload_longer_than_declared_is_refused_even_when_the_declared_part_is_sound(method):
    """The payload decodes to the bundle and then zeros; the header declares (and hashes) the
    bundle alone. The bytes past it are not the bundle's: E031."""
    longer = PLAIN + bytes(100)
    payload = zlib.compress(longer) if method == "zlib" else frame(longer)
    blob = ccob(PLAIN, 3, method, payload=payload)
    raises_saying("E031", lambda: hip.parse(blob, 0, "s"), "decodes to more than its declared")


@pytest.mark.parametrize("method", ["zlib", "zstd"])
def test_a_bundle_larger_than_one_chunk_decodes(method):
    """2 MiB of zeros after the bundle (padding) decode in several chunks."""
    content = PLAIN + bytes(2 << 20)
    c = hip.parse(ccob(content, 3, method), 0, "s")
    assert targets(c) == targets(hip.parse(PLAIN, 0, "s"))


def test_a_zstd_payload_of_two_frames_is_read_across_them():
    half = len(PLAIN) // 2
    payload = frame(PLAIN[:half]) + frame(PLAIN[half:])
    c = hip.parse(ccob(PLAIN, 3, "zstd", payload=payload), 0, "s")
    assert targets(c) == targets(hip.parse(PLAIN, 0, "s"))


def test_real_compressed_sections_parse_to_their_plain_twins():
    """hip_ccob_generic.so and hip_two_ccob.so: clang's own compressed bundles."""
    for name in ("hip_ccob_generic.so", "hip_two_ccob.so"):
        _, cs = parse_section(BIN / name)
        assert cs and all(e.compression in ("zlib", "zstd") for c in cs for e in c.entries), name


# ---- declared sizes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "usize, code, words",
    [
        (31, "E030", "declares 31 uncompressed bytes"),  # smaller than a bundle header
        (hip.MAX_BUNDLE + 1, "E030", f"declares {hip.MAX_BUNDLE + 1} uncompressed bytes"),
        (hip.MAX_BUNDLE, "E032", "above the"),  # believable, but above the decode limit
    ],
)
def test_declared_uncompressed_sizes(usize, code, words):
    raises_saying(code, lambda: hip.parse(ccob(PLAIN, 3, "zstd", usize=usize), 0, "s"), words)


def test_v1_zlib_stream_counted_across_chunks():
    """8 MiB of zeros declared as 2 MiB: each inflate step yields at most a chunk (1 MiB), the sum
    passes the declared size."""
    bomb = zlib.compress(bytes(8 << 20), 9)
    raises_saying(
        "E031",
        lambda: hip.extent(ccob(PLAIN, 1, "zlib", payload=bomb, usize=2 << 20)),
        f"decodes past its declared {2 << 20} bytes",
    )


@pytest.mark.parametrize("checksum", [False, True])
def test_v1_zstd_frame_ending_with_an_empty_last_block_at_the_end_of_the_data(checksum):
    f = frame(b"", write_checksum=checksum)
    blob = v1_zstd(f, PLAIN)
    assert hip.extent(blob) == len(blob)


# ---- entry ids and the code objects they hold ------------------------------------------------------


def replace_id(bundle: bytes, old: bytes, new: bytes) -> bytes:
    assert len(old) == len(new) and bundle.count(old) >= 1
    at = bundle.index(old)
    return bundle[:at] + new + bundle[at + len(old) :]


@pytest.mark.parametrize(
    "old, new",
    [
        (b"hipv4-amdgcn-amd-amdhsa--gfx1100", b"hipv4-amdgcn-xyz-amdhsa--gfx1100"),
        (b"hipv4-amdgcn-amd-amdhsa--gfx1100", b"hipv4-nvptx6-amd-amdhsa--gfx1100"),
        (b"hipv4-amdgcn-amd-amdhsa--gfx1100", b"hipv4-amdgcn-amd-cudaxx--gfx1100"),
    ],
)
def test_a_device_entry_of_another_triple_is_refused(old, new):
    raises_saying(
        "E030", lambda: hip.parse(replace_id(PLAIN, old, new), 0, "s"), "is not an amdgcn-amd-amdhsa device entry"
    )


@pytest.mark.parametrize("ident", [b"host--unknown-linux", b"host-x86_64--linux-"])
def test_a_host_id_with_an_empty_triple_part_is_refused(ident):
    """Host entries are skipped unjudged, so only a real host triple may name one."""
    bundle = replace_id(PLAIN, b"hipv4-amdgcn-amd-amdhsa--gfx1100"[: len(ident)], ident)
    raises_saying("E030", lambda: hip.parse(bundle, 0, "s"), "bundle id")


def test_a_code_object_built_for_other_features_than_its_id_says():
    """gfx90a:xnack- in the id, an xnack- code object: renamed xnack+, the id disagrees."""
    bundle = replace_id(PLAIN, b"gfx90a:xnack-", b"gfx90a:xnack+")
    raises_saying("E030", lambda: hip.parse(bundle, 0, "s"), "holds a code object built for gfx90a:xnack-")


def test_an_id_listed_twice_is_refused():
    """hip_two_plain.so's bundle lists gfx1102 and gfx1200 (ids of one length): the second renamed
    gfx1102 lists gfx1102 twice."""
    bundle = replace_id(HIGH, b"hipv4-amdgcn-amd-amdhsa--gfx1200", b"hipv4-amdgcn-amd-amdhsa--gfx1102")
    raises_saying("E030", lambda: hip.parse(bundle, 0, "s"), "bundle id hipv4-amdgcn-amd-amdhsa--gfx1102 appears twice")


def test_bytes_between_entries_must_be_zero():
    c = hip.parse(PLAIN, 0, "s")
    entries = sorted(c.entries, key=lambda e: e.offset)
    gap_at = entries[0].offset + entries[0].size  # padding after the first code object
    assert gap_at < entries[1].offset  # clang aligns each code object: zeros between them
    bad = bytearray(PLAIN)
    bad[gap_at] = 1
    raises_saying("E030", lambda: hip.parse(bytes(bad), 0, "s"), "belong to no entry")


def test_code_objects_are_version_5_as_clang_19_writes_them():
    """clang 19 (tests/fixtures/amd/bin/CLANG_VERSION) defaults to code object v5."""
    assert {e.code_version for e in hip.parse(PLAIN, 0, "s").entries} == {(5, 0)}


# ---- bundle headers at their bounds ----------------------------------------------------------------


def header(entries: list[tuple[int, int, bytes]]) -> bytes:
    out = hip.UNCOMPRESSED_MAGIC + struct.pack("<Q", len(entries))
    for off, size, ident in entries:
        out += struct.pack("<QQQ", off, size, len(ident)) + ident
    return out


def test_the_most_entries_and_the_longest_id_a_header_may_hold():
    most = header([(0, 0, b"h")] * hip.MAX_ENTRIES)
    assert hip.extent(most) == len(most)
    raises_saying(
        "E030",
        lambda: hip.extent(header([(0, 0, b"h")] * (hip.MAX_ENTRIES + 1))),
        f"declares {hip.MAX_ENTRIES + 1} entries",
    )
    for n in (1, hip.MAX_ID_LEN):
        one = header([(0, 0, b"h" * n)])
        assert hip.extent(one) == len(one)
    raises_saying("E030", lambda: hip.extent(header([(0, 0, b"h" * (hip.MAX_ID_LEN + 1))])), "has an id of 1025 bytes")
    raises_saying("E030", lambda: hip.extent(header([(0, 0, b"")])), "has an id of 0 bytes")


def test_offsets_and_sizes_up_to_the_believable_bound():
    assert hip.extent(header([(hip.MAX_BUNDLE, 0, b"h")])) is not None
    assert hip.extent(header([(64, hip.MAX_BUNDLE, b"h")])) == 64 + hip.MAX_BUNDLE
    for off, size in ((hip.MAX_BUNDLE + 1, 0), (64, hip.MAX_BUNDLE + 1)):
        raises_saying("E030", partial(hip.extent, header([(off, size, b"h")])), f"declares offset {off}, size {size}")


def test_a_head_of_exactly_the_header_knows_the_bundle_extent():
    n = struct.unpack_from("<Q", PLAIN, 24)[0]
    pos = 32
    for _ in range(n):
        pos += 24 + struct.unpack_from("<Q", PLAIN, pos + 16)[0]
    assert hip.extent(PLAIN[:pos]) == len(PLAIN)
    assert hip.extent(PLAIN[: pos - 1]) is None
    first_id_end = 32 + 24 + struct.unpack_from("<Q", PLAIN, 48)[0]
    assert hip.extent(PLAIN[: first_id_end + 24]) is None  # the next record, but not its id
    raises_saying("E030", lambda: hip.extent(PLAIN[:24] + struct.pack("<Q", 0)), "declares 0 entries")  # 32 bytes


@pytest.mark.parametrize(
    "ident, words",
    [
        (b"hipv4-amdgcn-amd-amdhsa--gfx1100", None),
        (b"hipv4-amdgcn-amd-amdhsa--gfx9999", "bundle id 'hipv4-amdgcn-amd-amdhsa--gfx9999': "),
        # four fields (clang 11 and older wrote hip-amdgcn-amd-amdhsa-gfx906): the target is what follows
        (b"hipv4-amdgcn-amd-amdhsa-xgfx1100", "unknown AMD processor 'xgfx1100'"),
        (b"hipv4-amdgcn-amd-amdhsa--gfx11\xff0", "id is not ASCII"),
        (b"hipv4-amdgcn-amd-amdhsa--gfx11\x070", "is not printable"),
    ],
)
def test_entry_ids_that_name_no_target(ident, words):
    bundle = replace_id(PLAIN, b"hipv4-amdgcn-amd-amdhsa--gfx1100", ident)
    if words is None:
        assert "gfx1100" in targets(hip.parse(bundle, 0, "s"))
    else:
        raises_saying("E030", lambda: hip.parse(bundle, 0, "s"), words)


def test_no_bundle_magic():
    raises_saying("E030", lambda: hip.extent(b"__CLANG_OFFLOAD_BUNDLX__" + bytes(40)), "no offload bundle magic")
    raises_saying("E030", lambda: hip.extent(b"__CLANG"[:4] + b"X"), "no offload bundle magic")


# ---- code objects ---------------------------------------------------------------------------------

HSACO = (BIN / "gfx90a_xnack_on.hsaco").read_bytes()
# tests/fixtures/amd/src/kernels.hip: extern "C" saxpy, and scale<float>, scale<double> (Itanium mangling)
SOURCE_KERNELS = {"saxpy", "_Z5scaleIfEvPT_S0_", "_Z5scaleIdEvPT_S0_"}


def sections(co: bytes) -> list[tuple[int, ...]]:
    (shoff,) = struct.unpack_from("<Q", co, 40)
    (shnum,) = struct.unpack_from("<H", co, 60)
    return [struct.unpack_from("<IIQQQQIIQQ", co, shoff + i * 64) for i in range(shnum)]


def test_code_object_kernels_are_the_sources():
    target, version, kernels = hip.read_code_object(HSACO)
    assert (target, version, set(kernels)) == ("gfx90a:xnack+", 5, SOURCE_KERNELS)
    for e in hip.parse(PLAIN, 0, "s").entries:
        assert set(e.kernels or ()) == SOURCE_KERNELS


def test_code_object_without_a_symtab_reads_its_dynsym():
    co = bytearray(HSACO)
    (shoff,) = struct.unpack_from("<Q", co, 40)
    (i,) = [i for i, s in enumerate(sections(HSACO)) if s[1] == 2]
    struct.pack_into("<I", co, shoff + i * 64 + 4, 0)  # SHT_SYMTAB -> SHT_NULL
    assert set(hip.read_code_object(bytes(co))[2]) == SOURCE_KERNELS


def edit(co: bytes, at: int, fmt: str, value: int) -> bytes:
    out = bytearray(co)
    struct.pack_into(fmt, out, at, value)
    return bytes(out)


def test_code_object_tables_that_lie_outside_it():
    n = len(HSACO)
    (shoff,) = struct.unpack_from("<Q", HSACO, 40)
    (shnum,) = struct.unpack_from("<H", HSACO, 60)
    assert hip.read_code_object(edit(HSACO, 60, "<H", 0))[2] == ()  # no sections: no kernels named
    for at, fmt, value in ((58, "<H", 32), (40, "<Q", n + 1), (40, "<Q", n - shnum * 64 + 1)):
        raises_saying(
            "E030", partial(hip.read_code_object, edit(HSACO, at, fmt, value)), "section headers lie outside it"
        )
    (i,) = [i for i, s in enumerate(sections(HSACO)) if s[1] == 2]
    sym = shoff + i * 64
    _, _, _, _, off, size, link, _, _, _ = sections(HSACO)[i]
    for at, fmt, value in ((sym + 56, "<Q", 16), (sym + 32, "<Q", n - size + 1), (sym + 40, "<I", shnum)):
        raises_saying("E030", partial(hip.read_code_object, edit(HSACO, at, fmt, value)), "symbol table is malformed")
    strsec = shoff + link * 64
    str_size = sections(HSACO)[link][5]
    raises_saying(
        "E030",
        lambda: hip.read_code_object(edit(HSACO, strsec + 24, "<Q", n - str_size + 1)),
        "string table lies outside it",
    )
    kd = [j for j in range(size // 24) if HSACO[off + j * 24 + 4] & 0xF == 1]
    raises_saying(
        "E030",
        lambda: hip.read_code_object(edit(HSACO, off + kd[0] * 24, "<I", str_size)),
        "symbol name lies outside its string table",
    )


@pytest.mark.parametrize(
    "at, value, words",
    [
        (4, 1, "not a little-endian ELF64"),
        (5, 2, "not a little-endian ELF64"),
        (7, 0, "OS ABI 0 is not AMDGPU HSA"),
        (8, 9, "ABI version 9 is unknown"),
        (8, 0, "ABI version 0 is unknown"),
    ],
)
def test_code_object_identity_bytes(at, value, words):
    raises_saying("E030", lambda: hip.read_code_object(HSACO[:at] + bytes([value]) + HSACO[at + 1 :]), words)


def test_code_object_v3_and_v4_feature_bits():
    """Code object v3 (EI_ABIVERSION 1) has one bit per feature, clear meaning off; v4 on
    (EI_ABIVERSION 2 and later) two bits per feature, 0 and 1 meaning unspecified."""
    gfx906 = next(
        m for m, p in __import__("archaudit.gpus.amd", fromlist=["x"]).processor_by_mach().items() if p.name == "gfx906"
    )
    assert hip.target_from_elf(gfx906, 1) == "gfx906:sramecc-:xnack-"
    assert hip.target_from_elf(gfx906 | hip.EF_AMDGPU_FEATURE_XNACK_V3, 1) == "gfx906:sramecc-:xnack+"
    assert hip.target_from_elf(gfx906 | hip.EF_AMDGPU_FEATURE_SRAMECC_V3, 1) == "gfx906:sramecc+:xnack-"
    assert hip.target_from_elf(gfx906 | (0x2 << 8), 2) == "gfx906:xnack-"
    assert hip.target_from_elf(gfx906 | (0x3 << 10), 2) == "gfx906:sramecc+"
    with pytest.raises(ValueError, match="predates target IDs"):
        hip.target_from_elf(gfx906, 0)


def test_compressed_bundles_holding_no_whole_bundle():
    """The payload decodes to its declared size and hash, but what it holds is not a bundle,
    or a bundle cut short."""
    junk = bytes(range(256)) * 2
    raises_saying("E030", lambda: hip.parse(ccob(junk, 3, "zstd"), 0, "s"), "does not hold an offload bundle")
    cut = PLAIN[:-100]
    raises_saying("E030", lambda: hip.parse(ccob(cut, 3, "zstd"), 0, "s"), "inside the compressed bundle is truncated")


def test_a_declared_size_at_the_decode_limit_is_decoded():
    c = hip.parse(ccob(PLAIN, 3, "zstd"), 0, "s", max_decoded=len(PLAIN))
    assert targets(c) == targets(hip.parse(PLAIN, 0, "s"))


def test_a_code_object_for_an_unknown_processor():
    raises_saying(
        "E030", lambda: hip.read_code_object(edit(HSACO, 48, "<I", 0x0FF)), "code object: unknown EF_AMDGPU_MACH"
    )


@pytest.mark.parametrize("method", ["zlib", "zstd"])
def test_a_payload_one_chunk_past_a_large_declared_size_is_refused(method):
    """Over 1 MiB the payload is decoded a chunk (1 MiB) at a time: with the declared size a whole
    number of chunks (3 MiB: the bundle and zero padding), the byte past it must still be read."""
    content = PLAIN + bytes((3 << 20) - len(PLAIN))
    longer = content + bytes(100)
    payload = zlib.compress(longer) if method == "zlib" else frame(longer)
    raises_saying(
        "E031",
        lambda: hip.parse(ccob(content, 3, method, payload=payload), 0, "s"),
        "decodes to more than its declared",
    )


# ---- kernel names at the edges of the symbol and string tables ------------------------------------

K = (BIN / "gfx90a_kernel_k.hsaco").read_bytes()  # clang: one kernel named "k" (src/one_letter.hip)


def symbol_table(co: bytes) -> tuple[int, int, int, int]:
    """(offset, size) of .symtab and (offset, size) of its string table."""
    secs = sections(co)
    (sym,) = [s for s in secs if s[1] == 2]
    return sym[4], sym[5], secs[sym[6]][4], secs[sym[6]][5]


def test_a_one_letter_kernel_is_named():
    assert hip.read_code_object(K) == ("gfx90a", 5, ("k",))


def symbol_name(co: bytes, record: bytes) -> bytes:
    _, _, str_off, _ = symbol_table(co)
    at = str_off + struct.unpack_from("<I", record)[0]
    return co[at : co.index(b"\0", at)]


def test_a_kernel_descriptor_that_is_the_last_symbol_is_read():
    """Another linker may order the symbols otherwise: with k.kd moved to the last record of
    .symtab (after __hip_cuid_), the kernel is still found."""
    off, size, _, _ = symbol_table(K)
    records = [K[at : at + 24] for at in range(off, off + size, 24)]
    (kd,) = [j for j, r in enumerate(records) if symbol_name(K, r) == b"k.kd"]
    assert kd < len(records) - 1
    moved = records[:kd] + records[kd + 1 :] + [records[kd]]
    assert hip.read_code_object(K[:off] + b"".join(moved) + K[off + size :])[2] == ("k",)


def test_an_object_name_the_string_table_does_not_end_is_malformed():
    """The string table cut inside its last object symbol's name (__hip_cuid_...): no NUL ends
    that name inside the table, so the table is not the one the symbols were written for."""
    secs = sections(HSACO)
    (sym,) = [s for s in secs if s[1] == 2]
    _, _, str_off, str_size = symbol_table(HSACO)
    cuid = HSACO.index(b"__hip_cuid_", str_off) - str_off
    assert cuid + 16 < str_size
    (shoff,) = struct.unpack_from("<Q", HSACO, 40)
    raises_saying(
        "E030",
        lambda: hip.read_code_object(edit(HSACO, shoff + sym[6] * 64 + 32, "<Q", cuid + 16)),
        "symbol name lies outside its string table",
    )


def test_a_kernel_name_that_is_not_utf8_is_read_with_a_replacement_character():
    """LLVM writes ASCII names; a byte that is no UTF-8 in one is shown as U+FFFD, not a crash."""
    _, _, str_off, _ = symbol_table(HSACO)
    at = HSACO.index(b"_Z5scaleIdEvPT_S0_.kd", str_off) + 2
    co = HSACO[:at] + b"\xff" + HSACO[at + 1 :]
    assert set(hip.read_code_object(co)[2]) == SOURCE_KERNELS - {"_Z5scaleIdEvPT_S0_"} | {"_Z\ufffdscaleIdEvPT_S0_"}
