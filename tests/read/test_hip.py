"""HIP offload bundles (archaudit.read.hip) and AMD target rules (archaudit.gpus.amd).

Fixtures in tests/fixtures/amd/bin were built by tests/fixtures/amd/build.sh with
Debian's clang. Where LLVM's tools are installed, every parse is compared entry by
entry with clang-offload-bundler and llvm-readelf (see amd_reference.py).
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import struct
import sys
import tracemalloc
import zlib
from pathlib import Path

import pytest
import zstandard

from reference_tools import needs_tool

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import amd_reference as ref  # noqa: E402
from archaudit import model
from archaudit.gpus import amd as gfx
from archaudit.read import hip  # noqa: E402
from helpers import PLAIN, ccob, parse_section

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
    for (poff, piece), c in zip(pieces, cs):
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
                assert set(e.kernels) == r.kernels


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
    for bad in ("", "gfx", "gfx9999", "sm_90", "gfx90a:xnack", "gfx90a:xnack+:xnack-", "gfx1100:xnack+",
                "gfx1030:sramecc-", "gfx90a:wavefrontsize64+"):
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
        "Instinct MI300X": "gfx942", "Instinct MI300A": "gfx942", "Instinct MI325X": "gfx942",
        "Instinct MI355X": "gfx950", "Instinct MI250X": "gfx90a", "Instinct MI250": "gfx90a",
        "Instinct MI210": "gfx90a", "Instinct MI100": "gfx908", "Instinct MI50": "gfx906",
        "Instinct MI60": "gfx906", "Radeon VII": "gfx906", "Radeon RX 7900 XTX": "gfx1100",
        "Radeon RX 7900 XT": "gfx1100", "Radeon RX 7800 XT": "gfx1101", "Radeon RX 7700 XT": "gfx1101",
        "Radeon RX 7600": "gfx1102", "Radeon RX 9070": "gfx1201", "Radeon RX 6900 XT": "gfx1030",
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


@pytest.mark.parametrize("bad", [
    "", "   ", "sm_80", "gfx90a;;gfx942", "gfx1100:xnack-", "--offload-arch=", "--offload-arch",
    "--offload-arch=native", "all", "gfx90a:foo+", "CUDA_ARCH=gfx90a", "--cuda-path=x", "gfx90a;sm_90",
    "hello world",
])
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


@pytest.mark.parametrize("host", ["host-x86_64-unknown-linux", "host-x86_64-unknown-linux-gnu-",
                                  "host-aarch64-unknown-linux-gnu"])
def test_host_triples_of_every_rocm_release(host):
    """ROCm 5 (cupy-rocm-5-0 13.3.0) writes the host triple without its environment part."""
    co = (BIN / "gfx90a_xnack_on.hsaco").read_bytes()
    c = hip.parse(bundle_of([(host, b""), ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", co)]), 0, "")
    assert [e.target for e in c.entries] == ["gfx90a:xnack+"]


@pytest.mark.parametrize("ident", ["host-", "host--", "hostx-x86_64-unknown-linux", "host-x86_64"])
def test_malformed_host_ids_still_fail(ident):
    co = (BIN / "gfx90a_xnack_on.hsaco").read_bytes()
    raises("E030", lambda: hip.parse(bundle_of([(ident, b""), ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", co)]),
                                     0, ""))
