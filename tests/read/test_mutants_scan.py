"""What scan.py builds from a file, pinned where mutation testing found it loose
(docs/mutation.md).

Inputs are the nvcc- and clang-built fixtures (tests/fixtures/cuda/bin, tests/fixtures/amd/bin)
or their bytes with one fact changed. Facts expected come from the build (build.sh's -arch, the
kernels in the sources, NVCC_VERSION, llvm-readelf's REFERENCE.txt), never from the reader.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from archaudit.cli import main
from archaudit.model import CODE_OBJECT, PTX, SASS, STANDALONE, Container, Entry, Library, Problem
from archaudit.read import fatbin, hip, library, records, stream as window, zipread
from archaudit.read.stream import Chunks
from helpers import AMD_BIN as AMD, READELF, ccob, first_bundle, readelf_dynamic
from reference_tools import needs_tool

CUDA = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
FIXTURES_PE = CUDA.parent.parent / "pe" / "bin"
AXPY = "_Z4axpyfPKfPfi"  # kern.cu's `axpy(float, const float*, float*, int)`, Itanium-mangled
NVCC = tuple(int(x) for x in re.search(rb"release (\d+)\.(\d+)", (CUDA / "NVCC_VERSION").read_bytes()).groups())
PLAIN = first_bundle(AMD / "hip_two_plain.so")  # gfx1102 and gfx1200, uncompressed


def run(path, tmp_path, *claim: str) -> tuple[int, list[tuple[str, str]]]:
    out = tmp_path / "report.json"
    rc = main(["check", "--no-config", "-q", "--format", "json", "-o", str(out), str(path), *claim])
    doc = json.loads(out.read_text(encoding="utf-8"))
    return rc, [(f["code"], f["message"]) for t in doc["targets"] for f in t["findings"]]


def read(name: str, data: bytes, **kw: int) -> Library:
    return library.library_from_bytes(name, data, **kw)  # type: ignore[arg-type]


def problems(lib: Library) -> list[tuple[str, str, int | None]]:
    return [(p.code, p.message, p.offset) for p in lib.problems]


def test_ptx_file_without_a_target_directive_is_e014_not_an_internal_error(tmp_path):
    """nvcc's kern_80.ptx with its `.target` line removed: the architecture it is for is unknown,
    so it is malformed device code (E014), a finding and exit 1, not E099."""
    text = (CUDA / "kern_80.ptx").read_text()
    kept = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(".target"))
    assert kept != text.rstrip("\n")
    bad = tmp_path / "kern_no_target.ptx"
    bad.write_text(kept + "\n")
    rc, found = run(bad, tmp_path, "--arch", "8.0+PTX")
    assert rc == 1 and ("E014", "kern_no_target.ptx: PTX has no .target sm_XX directive") in found, found
    assert "E099" not in [c for c, _ in found]


# ---- bare device-code files: all of the file is one entry ---------------------------------------

def test_a_bare_cubin_is_one_standalone_sass_entry_of_its_architecture():
    data = (CUDA / "kern_sm80.cubin").read_bytes()  # nvcc -cubin -arch=sm_80 kern.cu
    entry = Entry("nvidia", SASS, "sm_80", (1, data[8]), "none", len(data), len(data), 0,
                  kernels=(AXPY,), toolkit=NVCC, decoded=True)
    assert read("kern_sm80.cubin", data) == Library(
        "kern_sm80.cubin", len(data), "cubin", (Container("nvidia", STANDALONE, "", 0, len(data), (entry,)),))


def test_a_bare_code_object_is_one_standalone_entry_of_its_target():
    data = (AMD / "gfx90a_xnack_on.hsaco").read_bytes()  # REFERENCE.txt: gfx90a:xnack+, 3 kernels
    kernels = ("_Z5scaleIdEvPT_S0_", "_Z5scaleIfEvPT_S0_", "saxpy")  # kernels.hip: scale<double/float>, saxpy
    entry = Entry("amd", CODE_OBJECT, "gfx90a:xnack+", (5, 0), "none", len(data), len(data), 0,
                  kernels=kernels, decoded=True, own_target="gfx90a:xnack+")
    assert read("k.hsaco", data) == Library(
        "k.hsaco", len(data), "hsaco", (Container("amd", STANDALONE, "", 0, len(data), (entry,)),))


def patched(data: bytes, at: int, fmt: str, change: Callable[[int], int]) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, change(struct.unpack_from(fmt, out, at)[0]))
    return bytes(out)


CUBIN = (CUDA / "kern_sm80.cubin").read_bytes()
HSACO = (AMD / "gfx90a_xnack_on.hsaco").read_bytes()


@pytest.mark.parametrize("name, data, code, message", [
    # e_flags bits 8-15 are a CUDA 12.9+ cubin's SM number
    ("k.cubin", patched(CUBIN, 48, "<I", lambda f: f & ~0xFF00), "E014",
     "cubin e_flags name no CUDA architecture (sm_0)"),
    # section 1's sh_size (section table at e_shoff, 64 bytes a row) past the end of the file
    ("k.hsaco", patched(HSACO, struct.unpack_from("<Q", HSACO, 0x28)[0] + 64 + 32, "<Q", lambda _: 1 << 30),
     "E010", "section 1 lies outside the file"),
    # EF_AMDGPU_MACH (e_flags bits 0-7) naming no processor
    ("k.hsaco", patched(HSACO, 48, "<I", lambda f: f | 0xFF), "E014", "unknown EF_AMDGPU_MACH 0x0ff"),
])
def test_a_device_elf_that_cannot_be_read_is_one_finding_and_no_code(name, data, code, message):
    assert read(name, data) == Library(name, len(data), "cubin", problems=(Problem(code, message),))


@pytest.mark.parametrize("data, code, message", [
    ((CUDA / "lib_sm80.so").read_bytes()[:40], "E010", "malformed ELF: ELF header is truncated"),
    (patched((CUDA / "lib_sm80.so").read_bytes(), 4, "<B", lambda _: 1), "E010",
     "malformed ELF: 32-bit ELF header of version 1 and size 20488, expected 1 and 52"),
])
def test_an_elf_header_that_cannot_be_read_is_a_finding(data, code, message):
    assert read("lib.so", data) == Library("lib.so", len(data), "elf", problems=(Problem(code, message),))


def ptx(text: str, name: str = "k.ptx") -> Library:
    return read(name, text.encode())


KERN_80 = (CUDA / "kern_80.ptx").read_text()  # nvcc -ptx -arch=compute_80 kern.cu


def test_a_bare_ptx_file_is_one_standalone_ptx_entry():
    version = tuple(int(x) for x in re.search(r"^\.version (\d+)\.(\d+)$", KERN_80, re.M).groups())
    size = len(KERN_80.encode())
    entry = Entry("nvidia", PTX, "sm_80", version, "none", size, size, 0, kernels=(AXPY,), decoded=True,
                  ptx_target="sm_80")
    assert ptx(KERN_80) == Library("k.ptx", size, "ptx", (Container("nvidia", STANDALONE, "", 0, size, (entry,)),))


def test_ptx_without_a_version_directive_has_version_zero():
    text = re.sub(r"^\.version .*\n", "", KERN_80, flags=re.M)
    (entry,) = ptx(text).containers[0].entries
    assert entry.code_version == (0, 0) and entry.target == "sm_80"


def test_ptx_naming_its_target_as_compute_is_read_as_that_sm():
    (entry,) = ptx(KERN_80.replace(".target sm_80", ".target compute_80")).containers[0].entries
    assert (entry.target, entry.ptx_target) == ("sm_80", "sm_80")


@pytest.mark.parametrize("target, message", [
    ("gfx90a", "PTX has no .target sm_XX directive"),
    ("sm_8x", "PTX .target 'sm_8x' is not a CUDA architecture"),
])
def test_ptx_whose_target_is_no_cuda_architecture_is_e014(target, message):
    text = KERN_80.replace(".target sm_80", f".target {target}")
    size = len(text.encode())
    assert ptx(text) == Library("k.ptx", size, "ptx", problems=(Problem("E014", message),))


def test_a_file_named_as_device_code_that_is_none_is_e014():
    data = b"\x00" * 100
    for name in ("k.cubin", "k.fatbin", "k.hsaco"):
        assert read(name, data) == Library(name, 100, "other", problems=(
            Problem("E014", "not a cubin, fatbin, PTX or code object"),))


# ---- bare containers: .fatbin files and offload bundles -----------------------------------------

KERN_FATBIN = (CUDA / "kern.fatbin").read_bytes()  # sm_80 cubin, zstd compute_90 PTX


def test_a_bare_fatbin_is_one_standalone_container():
    lib = read("k.fatbin", KERN_FATBIN)
    assert (lib.format, lib.size, lib.problems) == ("fatbin", len(KERN_FATBIN), ())
    (c,) = lib.containers
    assert (c.vendor, c.role, c.section, c.offset, c.size) == ("nvidia", STANDALONE, "", 0, len(KERN_FATBIN))
    assert [(e.target, e.kind, e.offset) for e in c.entries] == [("sm_80", SASS, 16), ("sm_90", PTX, 3448)]


def test_a_file_starting_with_a_container_magic_must_start_with_a_container():
    """A library whose first bytes were overwritten by the magic would otherwise pass with the
    containers it embeds read as standalone code."""
    data = fatbin.MAGIC + b"\x07" * 12 + KERN_FATBIN
    lib = read("k.fatbin", data)
    assert [c.offset for c in lib.containers] == [16]
    assert problems(lib) == [("E011", "the file starts with a container magic, but its first valid container "
                                      "starts at 0x10", 0)]


def test_a_file_starting_with_a_container_magic_and_holding_none_is_e011():
    assert problems(read("k.fatbin", fatbin.MAGIC + b"\0" * 60)) == [("E011", "not a valid fatbin container", None)]


def test_a_container_whose_declared_size_leaves_out_an_entry_is_e011():
    """kern.fatbin with its fat_size 472 bytes short: the PTX entry at 3448 would lie outside
    every container, and no section tells a bare file's containers apart."""
    data = patched(KERN_FATBIN, 8, "<Q", lambda n: n - 472)
    lib = read("k.fatbin", data)
    assert [(c.offset, c.size) for c in lib.containers] == [(0, 3448)]
    assert problems(lib) == [("E011", "fatbin container at 0x0: an entry follows its declared end, so its size "
                                      "hides entries", 3448)]


def test_a_container_declaring_more_than_the_file_is_the_only_finding():
    data = KERN_FATBIN[:-8]  # the header still declares the whole container
    head = fatbin.parse_container_header(KERN_FATBIN)
    assert head is not None
    assert problems(read("k.fatbin", data)) == [
        ("E011", f"fatbin container at 0x0 declares {head.fat_size} bytes, past the end of the file", 0)]


def test_a_bare_offload_bundle_is_one_standalone_amd_container():
    lib = read("k.hipfb", PLAIN)
    assert (lib.format, lib.size, lib.problems) == ("fatbin", len(PLAIN), ())
    (c,) = lib.containers
    assert (c.vendor, c.role, c.section, c.offset, c.size) == ("amd", STANDALONE, "", 0, len(PLAIN))
    assert [e.target for e in c.entries] == ["gfx1102", "gfx1200"]  # REFERENCE.txt


def test_a_bundle_up_to_four_times_the_payload_bound_is_verified():
    assert len(PLAIN) % 4 == 0
    lib = read("k.hipfb", PLAIN, max_payload=len(PLAIN) // 4)
    assert not lib.problems and [e.target for e in lib.containers[0].entries] == ["gfx1102", "gfx1200"]
    lib = read("k.hipfb", PLAIN, max_payload=len(PLAIN) // 4 - 1)
    assert problems(lib) == [("E032", f"HIP bundle at 0x0: E032: bundle of {len(PLAIN)} bytes is too large "
                                      "to verify", 0)] and not lib.containers


def test_a_bundle_cut_short_overruns_the_file():
    assert problems(read("k.hipfb", PLAIN[:-100])) == [("E030", "HIP bundle at 0x0: E030: bundle overruns the file", 0)]


def test_a_stream_ending_inside_a_bundle_is_a_truncated_bundle():
    def chunks() -> Iterator[bytes]:
        yield PLAIN[:-100]
    lib = library.scan_stream("k.hipfb", len(PLAIN), chunks)
    assert problems(lib) == [("E030", "HIP bundle at 0x0: E030: bundle is truncated", 0),
                             ("E002", f"stream ended after {len(PLAIN) - 100} of {len(PLAIN)} bytes", None)]


def test_a_version_1_bundle_whose_stream_is_cut_is_truncated():
    v1 = ccob(PLAIN, 1, "zstd")  # states no size: its zstd frame must be walked
    assert problems(read("k.hipfb", v1[:len(v1) // 2])) == [("E030", "HIP bundle at 0x0: E030: bundle is truncated", 0)]


def test_a_version_1_bundle_cut_short_after_another_bundle_is_truncated():
    v1 = ccob(PLAIN, 1, "zstd")
    lib = read("k.hipfb", PLAIN + v1[:len(v1) // 2])
    assert [c.offset for c in lib.containers] == [0]
    assert problems(lib) == [("E030", f"HIP bundle at 0x{len(PLAIN):x}: E030: bundle is truncated", len(PLAIN))]


def test_a_version_1_bundle_header_is_read_up_to_four_times_the_payload_bound():
    """A v1 stream is walked for its extent up to max(MAX_HEADER, 4 x the payload bound); past
    that it is too large (E032), never skipped; within it, the bundle is decoded (and here
    refused for its declared size, E032 too)."""
    noise = os.urandom(4_400_000)  # stored as raw zstd blocks: longer than MAX_HEADER (4,292,640)
    v1 = ccob(noise, 1, "zstd")
    assert problems(read("k.hipfb", v1, max_payload=1 << 18)) == [
        ("E032", "HIP bundle at 0x0: E032: bundle header is not complete within 4292640 bytes", 0)]
    assert problems(read("k.hipfb", v1, max_payload=2 << 20)) == [
        ("E032", "HIP bundle at 0x0: E032: compressed bundle declares 4400000 bytes, above the 2097152-byte limit", 0)]


# ---- reading a whole file, and headers only ------------------------------------------------------

def stream(name: str, size: int, *chunks: bytes, decode: bool = True) -> Library:
    return library.scan_stream(name, size, lambda: iter(chunks), decode=decode)


def test_a_bare_device_file_is_read_whole_only_up_to_the_payload_bound():
    data = (CUDA / "kern_sm80.cubin").read_bytes()
    assert read("k.cubin", data, max_payload=len(data)).containers
    assert read("k.cubin", data, max_payload=len(data) - 1) == Library("k.cubin", len(data), "other", problems=(
        Problem("E012", f"{len(data)} bytes exceed the {len(data) - 1}-byte verification bound"),))


@pytest.mark.parametrize("name", ["kern_sm80.cubin", "kern_80.ptx"])
def test_a_bare_device_file_longer_than_its_declared_size_is_e002(name):
    """The zip directory says how long a member is; a stream that gives one byte more (here in
    a chunk of its own) is not the member that was declared."""
    data = (CUDA / name).read_bytes()
    assert stream(name, len(data), data, b"x") == Library(name, len(data), "other", problems=(
        Problem("E002", f"file has {len(data) + 1} bytes, expected {len(data)}"),))


def test_headers_only_reads_the_fixture_containers_clean():
    lib = stream("k.fatbin", len(KERN_FATBIN), KERN_FATBIN, decode=False)
    assert not lib.problems and [(e.target, e.decoded) for e in lib.containers[0].entries] == [
        ("sm_80", False), ("sm_90", False)]


def test_headers_only_still_checks_a_payload_start_against_its_header():
    data = bytearray(KERN_FATBIN)
    cubin_at = 16 + 64  # the sm_80 entry's payload: a cubin whose e_flags say its SM in bits 8-15
    flags = struct.unpack_from("<I", data, cubin_at + 48)[0]
    struct.pack_into("<I", data, cubin_at + 48, (flags & ~0xFF00) | (86 << 8))
    lib = stream("k.fatbin", len(data), bytes(data), decode=False)
    assert problems(lib) == [("E014", "fatbin container at 0x0: cubin says sm_86, entry header says sm_80", 16)]


def test_headers_only_a_stream_ending_inside_a_payload_start_is_e011():
    cut = 16 + 64 + 30  # 30 bytes into the first payload
    lib = stream("k.fatbin", len(KERN_FATBIN), KERN_FATBIN[:cut], decode=False)
    assert problems(lib) == [("E011", "fatbin container at 0x0: file ends inside an entry payload", 16),
                             ("E002", f"stream ended after {cut} of {len(KERN_FATBIN)} bytes", None)]


# ---- attribution: every container in a section, every fatbin section accounted for --------------

def elf_sections(data: bytes) -> tuple[int, dict[str, tuple[int, int, int, int]]]:
    """(section table offset, name -> (index, sh_offset, sh_size, sh_addralign)), read with struct
    from the ELF header as the gABI lays it out (not with archaudit.read.elf)."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
    rows = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + 64 * i) for i in range(shnum)]
    names = rows[shstrndx][4]
    out = {}
    for i, r in enumerate(rows):
        end = data.index(b"\0", names + r[0])
        out[data[names + r[0]:end].decode()] = (i, r[4], r[5], r[8])
    return shoff, out


def with_section(data: bytes, name: str, *, offset: int | None = None, size: int | None = None,
                 addralign: int | None = None, zero_after: int = 0) -> bytes:
    """The library with one section header field changed (and, with zero_after, that many bytes
    after the section's old end set to zero: the next section's, which no reader here judges)."""
    shoff, secs = elf_sections(data)
    i, off, sz, _ = secs[name]
    out = bytearray(data)
    out[off + sz:off + sz + zero_after] = bytes(zero_after)
    for field_at, value in ((24, offset), (32, size), (48, addralign)):
        if value is not None:
            struct.pack_into("<Q", out, shoff + 64 * i + field_at, value)
    return bytes(out)


LIB_SM80 = (CUDA / "lib_sm80.so").read_bytes()  # .nv_fatbin: a device-link and an executable container
_, _SECS = elf_sections(LIB_SM80)
_, FATBIN_AT, FATBIN_SIZE, _ = _SECS[".nv_fatbin"]


def containers(lib: Library) -> list[tuple[str, str, int, int]]:
    return [(c.section, c.role, c.offset, c.size) for c in lib.containers]


def test_a_librarys_containers_are_named_for_their_section_and_role():
    lib = read("lib.so", LIB_SM80)
    assert containers(lib) == [(".nv_fatbin", "device-link", FATBIN_AT, 1536),
                               (".nv_fatbin", "executable", FATBIN_AT + 1536, 3448)] and not lib.problems
    assert (lib.format, lib.size, lib.notes, lib.runpath) == ("elf", len(LIB_SM80), (), ())
    rdc = read("lib.so", (CUDA / "lib_rdc.so").read_bytes())  # __nv_relfatbin starts where .nv_fatbin ends
    assert [(s, r) for s, r, _, _ in containers(rdc)] == [
        (".nv_fatbin", "device-link"), ("__nv_relfatbin", "relocatable"), ("__nv_relfatbin", "relocatable")]
    assert not rdc.problems
    incbin = read("lib.so", (CUDA.parent.parent / "readers" / "bin" / "lib_incbin_text.so").read_bytes())
    assert [(s, r) for s, r, _, _ in containers(incbin)] == [(".text", "embedded")] and not incbin.problems


def test_a_container_overrunning_its_section_is_e011_twice():
    lib = read("lib.so", with_section(LIB_SM80, ".nv_fatbin", size=FATBIN_SIZE - 8))
    assert problems(lib) == [
        ("E011", f"fatbin container at 0x{FATBIN_AT + 1536:x} overruns section .nv_fatbin", FATBIN_AT + 1536),
        ("E011", f".nv_fatbin: its containers declare {FATBIN_SIZE} bytes, 8 more than the section holds", FATBIN_AT)]


def test_an_empty_fatbin_section_and_containers_in_no_section():
    lib = read("lib.so", with_section(LIB_SM80, ".nv_fatbin", size=0))
    assert containers(lib) == [("", "embedded", FATBIN_AT, 1536), ("", "embedded", FATBIN_AT + 1536, 3448)]
    assert problems(lib) == [
        ("E011", f"fatbin container at 0x{FATBIN_AT:x} lies in no section", FATBIN_AT),
        ("E011", f"fatbin container at 0x{FATBIN_AT + 1536:x} lies in no section", FATBIN_AT + 1536),
        ("E011", ".nv_fatbin is empty (nvcc never writes an empty fatbin section)", FATBIN_AT)]


INCBIN = (CUDA.parent.parent / "readers" / "bin" / "lib_incbin_text.so").read_bytes()  # a container in .text
INCBIN_AT = 0x1100


def renamed(data: bytes, name: str, to: str) -> bytes:
    """The library with section `name` named as section `to` is (its sh_name)."""
    shoff, secs = elf_sections(data)
    at, named = shoff + 64 * secs[name][0], shoff + 64 * secs[to][0]
    return data[:at] + data[named:named + 4] + data[at + 4:]


EMPTY_OUTSIDE = ("is empty (nvcc writes empty ones only in its fatbin section): nothing accounts for the bytes "
                 "after it")


def test_a_container_cut_to_nothing_outside_a_fatbin_section_is_e011():
    """As in a DLL's .rdata (test_pe.py): an embedded container's size cut to 0 hides its entry.
    The entry header after its declared end shows it; with that header damaged too, only the
    empty container does: nvcc writes empty containers only in .nv_fatbin, accounted there."""
    (c,) = read("lib.so", INCBIN).containers
    assert (c.offset, c.section, c.role, len(c.entries)) == (INCBIN_AT, ".text", "embedded", 1)
    cut = patched(INCBIN, INCBIN_AT + 8, "<Q", lambda _: 0)
    empty = ("E011", f"fatbin container at 0x{INCBIN_AT:x} in .text {EMPTY_OUTSIDE}", INCBIN_AT)
    assert problems(read("lib.so", cut)) == [
        ("E011", f"fatbin container at 0x{INCBIN_AT:x}: an entry follows its declared end, so its size hides "
                 f"entries", INCBIN_AT + 16), empty]
    lib = read("lib.so", patched(cut, INCBIN_AT + 16 + 2, "<H", lambda _: 0))  # and the entry's version
    # the entry's uncompressed cubin, no longer inside any container, is a whole cubin of its own
    assert [(c.section, c.role, len(c.entries)) for c in lib.containers] == [(".text", "embedded", 0),
                                                                            (".text", "cubin", 1)]
    assert problems(lib) == [empty]


def test_nvlinks_empty_container_is_accounted_in_nv_fatbin_only():
    """lib_ptx90.so's device-link container holds no entry: in .nv_fatbin the section's accounting
    covers it; the same bytes in a section named .rodata are E011, as in a DLL's .rdata."""
    data = (CUDA / "lib_ptx90.so").read_bytes()
    lib = read("lib.so", data)
    assert [(c.section, c.role, len(c.entries)) for c in lib.containers] == [
        (".nv_fatbin", "device-link", 0), (".nv_fatbin", "executable", 1)] and not lib.problems
    _, secs = elf_sections(data)
    at = secs[".nv_fatbin"][1]
    lib = read("lib.so", renamed(data, ".nv_fatbin", ".rodata"))
    assert [(c.section, c.role, len(c.entries)) for c in lib.containers] == [
        (".rodata", "embedded", 0), (".rodata", "embedded", 1)]
    assert problems(lib) == [("E011", f"fatbin container at 0x{at:x} in .rodata {EMPTY_OUTSIDE}", at)]


@pytest.mark.parametrize("lead, bad", [(7, False), (8, True)])
def test_bytes_before_the_first_container_are_fewer_than_the_alignment(lead, bad):
    lib = read("lib.so", with_section(LIB_SM80, ".nv_fatbin", offset=FATBIN_AT - lead, size=FATBIN_SIZE + lead))
    want = [("E011", f".nv_fatbin: {lead} of its {FATBIN_SIZE + lead} bytes are not a valid fatbin container",
             FATBIN_AT - lead)]
    assert problems(lib) == (want if bad else [])


@pytest.mark.parametrize("tail, addralign, bad", [(7, 8, False), (8, 8, True), (8, 256, False), (255, 256, False),
                                                  (256, 256, True)])
def test_zeros_after_the_last_container_are_shorter_than_the_sections_alignment(tail, addralign, bad):
    """aarch64 libraries align containers to 256 bytes: zero padding up to the section's own
    alignment may end it; more is not padding."""
    data = with_section(LIB_SM80, ".nv_fatbin", size=FATBIN_SIZE + tail, addralign=addralign, zero_after=tail)
    want = [("E011", f".nv_fatbin: {tail} of its {FATBIN_SIZE + tail} bytes are not a valid fatbin container",
             FATBIN_AT)]
    assert problems(read("lib.so", data)) == (want if bad else [])


def test_padding_after_a_container_must_be_zeros():
    data = with_section(LIB_SM80, ".nv_fatbin", size=FATBIN_SIZE + 7)  # the next section's bytes, not zeros
    assert problems(read("lib.so", data)) == [
        ("E011", f".nv_fatbin: 7 of its {FATBIN_SIZE + 7} bytes are not a valid fatbin container", FATBIN_AT)]


TWO_PLAIN = (AMD / "hip_two_plain.so").read_bytes()  # .hip_fatbin at 0x3000: bundles at +0 and +0x5000


def test_a_bundle_a_wrapper_registers_must_be_found_and_the_section_covered():
    data = bytearray(TWO_PLAIN)
    data[0x8000] ^= 0xFF  # the second bundle's magic
    lib = read("lib.so", bytes(data))
    assert [(c.section, c.offset) for c in lib.containers] == [(".hip_fatbin", 0x3000)]
    assert problems(lib) == [
        ("E030", "HIP wrapper at 0xc050 registers 0x8000, where no valid offload bundle was found", 0x8000),
        ("E030", ".hip_fatbin: 14344 of its 32152 bytes are not a valid offload bundle", 0x3000)]


@pytest.mark.parametrize("which, wrapper", [(0, 0x4088), (1, 0x40A0)])
def test_a_container_a_wrapper_registers_must_be_found(which, wrapper):
    """.nvFatBinSegment's records register both containers (the first, version 2, is nvlink's
    device-link container): one whose magic is damaged is not found, and that is E011."""
    at, size = [(FATBIN_AT, 1536), (FATBIN_AT + 1536, 3448)][which]
    data = bytearray(LIB_SM80)
    data[at] ^= 0xFF
    lib = read("lib.so", bytes(data))
    kept = [(FATBIN_AT, "device-link"), (FATBIN_AT + 1536, "executable")][1 - which]
    assert [(c.offset, c.role) for c in lib.containers] == [kept]
    assert problems(lib) == [
        ("E011", f"fatbin wrapper at 0x{wrapper:x} registers 0x{at:x}, where no fatbin container was found", at),
        ("E011", f".nv_fatbin: {size} of its {FATBIN_SIZE} bytes are not a valid fatbin container", FATBIN_AT)]


# ---- the payload bound on each entry ------------------------------------------------------------

def test_an_entry_up_to_the_payload_bound_is_decoded():
    lib = read("k.fatbin", KERN_FATBIN, max_payload=3368)  # the sm_80 cubin's size, stored as is
    assert not lib.problems and [e.decoded for e in lib.containers[0].entries] == [True, True]
    lib = read("k.fatbin", KERN_FATBIN, max_payload=3367)
    assert problems(lib) == [("E012", "fatbin container at 0x0: sm_80 entry of 3368 bytes exceeds the 3367-byte bound",
                              16)]


def test_a_compressed_entry_is_bounded_by_its_decoded_size_too():
    """kern.fatbin's compute_90 PTX alone in its container: 391 bytes of zstd, 904 decoded."""
    ptx_entry = KERN_FATBIN[3448:]
    data = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(ptx_entry)) + ptx_entry
    assert not read("k.fatbin", data, max_payload=904).problems
    assert problems(read("k.fatbin", data, max_payload=500)) == [
        ("E012", "fatbin container at 0x0: sm_90 entry of 904 bytes exceeds the 500-byte bound", 16)]


# ---- containers at the edges of the stream's chunks and of the file -----------------------------

def test_a_container_whose_header_straddles_a_chunk_boundary_is_found():
    """The search matches the magic and the version and header size after it (8 bytes); the
    rest of the 16-byte header arrives with the next 1 MiB chunk."""
    at = (1 << 20) - 8
    data = KERN_FATBIN + bytes(at - len(KERN_FATBIN)) + KERN_FATBIN
    lib = read("k.fatbin", data)
    assert [(c.offset, c.size, len(c.entries)) for c in lib.containers] == [(0, len(KERN_FATBIN), 2),
                                                                            (at, len(KERN_FATBIN), 2)]
    assert not lib.problems


def test_a_container_header_cut_by_the_end_of_the_file_ends_the_search():
    lib = read("k.fatbin", KERN_FATBIN + KERN_FATBIN[:12])
    assert [c.offset for c in lib.containers] == [0] and not lib.problems


# ---- host libraries: the dynamic segment's names, the section name table -------------------------

READERS = CUDA.parent.parent / "readers" / "bin"


@needs_tool("binutils readelf (apt-get install binutils)", READELF)
def test_needed_names_far_into_the_dynamic_string_table_are_read():
    """NEEDED is what makes a library that only links the CUDA runtime a GPU library: its names
    must be read wherever .dynstr holds them (here after 4 KiB of symbol names)."""
    path = READERS / "lib_many_exports.so"
    want = readelf_dynamic(path)
    assert want["NEEDED"] == ["libm.so.6", "libc.so.6"] and want["RUNPATH"] == ["$ORIGIN/../lib"]
    lib = read(path.name, path.read_bytes())
    assert (list(lib.needed), list(lib.runpath), lib.problems) == (want["NEEDED"], want["RUNPATH"], ())


def test_a_segment_outside_the_file_is_e010_and_nothing_else():
    phoff, = struct.unpack_from("<Q", LIB_SM80, 0x20)  # program header 0: PT_LOAD; p_filesz at +32
    data = patched(LIB_SM80, phoff + 32, "<Q", lambda _: len(LIB_SM80) + 1)
    assert read("lib.so", data) == Library("lib.so", len(data), "elf", problems=(
        Problem("E010", "malformed ELF: segment 0 lies outside the file"),))


def summary(lib: Library) -> tuple[object, ...]:
    return (lib.format, [(c.section, c.role, c.offset, c.size, len(c.entries)) for c in lib.containers],
            lib.needed, lib.runpath, lib.problems)


def moved_table(data: bytes, gap: int, names_gap: int | None = None) -> bytes:
    """The library with its section header table moved `gap` bytes past the end of the file
    (e_shoff patched) and, with names_gap, .shstrtab copied that far past the end first (its
    sh_offset patched): every section's bytes stay where they were."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
    table = bytearray(data[shoff:shoff + 64 * shnum])
    out = bytearray(data)
    if names_gap is not None:
        names_at, names_size = struct.unpack_from("<QQ", table, 64 * shstrndx + 24)
        out += bytes(names_gap)
        struct.pack_into("<Q", table, 64 * shstrndx + 24, len(out))
        out += data[names_at:names_at + names_size]
    out += bytes(gap)
    struct.pack_into("<Q", out, 0x28, len(out))
    return bytes(out + table)


def test_section_names_read_from_the_head_when_the_table_is_far_from_them():
    """.shstrtab more than SHSTR_WINDOW (1 MiB) before the section table but within the 4 MiB
    head that is always kept."""
    data = moved_table(LIB_SM80, (1 << 20) + 4096)
    lib = read("lib.so", data)
    assert summary(lib) == summary(read("lib.so", LIB_SM80)) and lib.notes == ()


def test_section_names_read_in_a_second_pass_when_neither_window_holds_them():
    data = moved_table(LIB_SM80, (1 << 20) + 4096, names_gap=5 << 20)
    lib = read("lib.so", data)
    assert summary(lib) == summary(read("lib.so", LIB_SM80))
    assert lib.notes == ("second pass: the section name table lies away from the section table",)


def test_section_names_read_from_the_window_before_a_table_past_the_first_mebibyte():
    data = moved_table(LIB_SM80, 0, names_gap=(1 << 20) + 4096)  # .shstrtab just before the table
    lib = read("lib.so", data)
    assert summary(lib) == summary(read("lib.so", LIB_SM80)) and lib.notes == ()


# ---- walking a container's entries ---------------------------------------------------------------

@pytest.mark.parametrize("header_size, cut, words", [
    (64, 16 + 30, "file ends inside an entry header"),  # inside the fixed 64 bytes
    (72, 16 + 68, "file ends inside an entry header"),  # inside a header declared 72 bytes long
    (64, 16 + 64 + 1000, "file ends inside an entry payload"),  # decoded, so read whole
])
def test_a_stream_ending_inside_an_entry_is_e011(header_size, cut, words):
    data = patched(KERN_FATBIN, 16 + 4, "<I", lambda _: header_size)
    lib = stream("k.fatbin", len(data), data[:cut])
    assert problems(lib) == [("E011", f"fatbin container at 0x0: {words}", 16),
                             ("E002", f"stream ended after {cut} of {len(data)} bytes", None)]


def test_an_entry_overrunning_its_container_is_e011():
    data = patched(KERN_FATBIN, 8, "<Q", lambda n: n - 8)  # fat_size 8 bytes short of the PTX entry's end
    assert problems(read("k.fatbin", data)) == [("E011", "fatbin container at 0x0: entry overruns its container",
                                                 3448)]


def test_a_payload_that_does_not_decode_is_a_finding_at_its_entry():
    data = bytearray(KERN_FATBIN)
    data[3448 + 80] ^= 0xFF  # the first byte of the PTX entry's zstd frame (its header is 80 bytes)
    lib = read("k.fatbin", bytes(data))
    assert [(p.code, p.offset) for p in lib.problems] == [("E012", 3448)]
    assert lib.problems[0].message.startswith("fatbin container at 0x0: sm_90 zstd payload does not decode: ")
    assert [len(c.entries) for c in lib.containers] == [0]  # a failed decode fails its container


# ---- header-level rejects: findings inside device-code sections, coincidences elsewhere ---------

@pytest.mark.parametrize("which, wrapper", [(0, 0x4088), (1, 0x40A0)])  # the first starts the section
def test_a_container_declaring_past_the_file_is_a_finding_inside_a_fatbin_section(which, wrapper):
    at, size = [(FATBIN_AT, 1536), (FATBIN_AT + 1536, 3448)][which]
    data = patched(LIB_SM80, at + 8, "<Q", lambda _: 1 << 30)  # its fat_size
    assert problems(read("lib.so", data)) == [
        ("E011", f"fatbin container at 0x{at:x} declares {1 << 30} bytes, past the end of the file", at),
        ("E011", f"fatbin wrapper at 0x{wrapper:x} registers 0x{at:x}, where no fatbin container was found", at),
        ("E011", f".nv_fatbin: {size} of its {FATBIN_SIZE} bytes are not a valid fatbin container", FATBIN_AT)]


def test_a_container_declaring_past_the_file_is_a_finding_where_there_are_no_sections():
    data = patched((READERS / "lib_noshdr_rx.so").read_bytes(), 0x2610 + 8, "<Q", lambda _: 1 << 30)
    lib = read("lib.so", data)
    # the container's uncompressed cubin, at 0x2610 + 16 + 64, is then a whole cubin of its own
    assert [(c.offset, c.role) for c in lib.containers] == [(0x2010, "embedded"), (0x2610 + 80, "cubin")]
    assert problems(lib) == [("E011", f"fatbin container at 0x2610 declares {1 << 30} bytes, past the end of the "
                                      "file", 0x2610)]


def test_an_impossible_bundle_header_is_a_finding_in_hip_fatbin_and_a_coincidence_elsewhere():
    data = patched(TWO_PLAIN, 0x8000 + 24, "<Q", lambda _: 5000)  # the second bundle's entry count
    assert problems(read("lib.so", data)) == [
        ("E030", "HIP bundle at 0x8000: E030: offload bundle declares 5000 entries", 0x8000),
        ("E030", "HIP wrapper at 0xc050 registers 0x8000, where no valid offload bundle was found", 0x8000),
        ("E030", ".hip_fatbin: 14344 of its 32152 bytes are not a valid offload bundle", 0x3000)]
    rodata = bytearray(TWO_PLAIN)  # .rodata at 0x2000: the same impossible header, as a string might be
    rodata[0x2000:0x2020] = hip.UNCOMPRESSED_MAGIC + (5000).to_bytes(8, "little")
    lib = read("lib.so", bytes(rodata))
    assert [c.offset for c in lib.containers] == [0x3000, 0x8000] and not lib.problems


@pytest.mark.parametrize("size, bad", [(25999, False), (26000, True)])
def test_hip_fatbin_may_hold_less_than_a_page_per_bundle_that_is_not_one(size, bad):
    """With the second bundle's magic damaged, one bundle (17,808 bytes) is left: the section may
    hold up to 2 pages (8,192 bytes) besides it, the page-alignment gaps after each bundle."""
    data = bytearray(with_section(TWO_PLAIN, ".hip_fatbin", size=size))
    data[0x8000] ^= 0xFF
    found = problems(read("lib.so", bytes(data)))
    assert found[0] == ("E030", "HIP wrapper at 0xc050 registers 0x8000, where no valid offload bundle was found",
                        0x8000)
    assert found[1:] == ([("E030", f".hip_fatbin: {size - 17808} of its {size} bytes are not a valid offload bundle",
                           0x3000)] if bad else [])


def test_bundles_in_no_section_are_read_with_no_section_name_and_are_e033():
    lib = read("lib.so", with_section(TWO_PLAIN, ".hip_fatbin", size=0))
    assert [(c.section, c.offset) for c in lib.containers] == [("", 0x3000), ("", 0x8000)]
    assert problems(lib) == [("E033", "HIP bundle at 0x3000 lies in no section", 0x3000),
                             ("E033", "HIP bundle at 0x8000 lies in no section", 0x8000)]


def test_a_bundle_overrunning_its_section_is_e033():
    """.hip_fatbin ends 8 bytes before its second bundle does: those bytes are the next section's."""
    lib = read("lib.so", with_section(TWO_PLAIN, ".hip_fatbin", size=32152 - 8))
    assert [(c.section, c.offset, c.size) for c in lib.containers] == [
        (".hip_fatbin", 0x3000, 17808), (".hip_fatbin", 0x8000, 11672)]
    assert problems(lib) == [("E033", "HIP bundle at 0x8000 overruns section .hip_fatbin", 0x8000)]


HOST = (CUDA / "lib_host.so").read_bytes()  # a host library: no device code, its section table last


@pytest.mark.parametrize("source", ["hip_multi.so", "hip_ccob_generic.so"])
def test_a_bundle_appended_after_the_elf_is_judged_and_lies_in_no_section(source):
    """An offload bundle (plain, or compressed: CCOB v2) written after a built library's end, as
    tests/fixtures/readers' lib_appended.so has a fatbin container: found, read entry for entry as
    in the library clang linked it into, and E033, as the container there is E011."""
    (linked,) = read("hip.so", (AMD / source).read_bytes()).containers
    bundle = (AMD / source).read_bytes()[linked.offset:linked.offset + linked.size]
    lib = read("lib.so", HOST + bundle)
    (c,) = lib.containers
    assert (c.offset, c.size, c.section) == (len(HOST), len(bundle), "")
    assert [replace(e, offset=e.offset - c.offset) for e in c.entries] == [
        replace(e, offset=e.offset - linked.offset) for e in linked.entries]
    assert problems(lib) == [("E033", f"HIP bundle at 0x{len(HOST):x} lies in no section", len(HOST))]


# ---- what is no library, and a stream that fails ------------------------------------------------

def test_a_file_no_reader_takes_is_e010():
    data = b"not a library\n" * 10
    assert read("lib.so", data) == Library("lib.so", len(data), "other", problems=(
        Problem("E010", "malformed ELF: not an ELF file"),))


@pytest.mark.parametrize("error, code, message", [
    (OSError(5, "Input/output error"), "E001", "cannot read: [Errno 5] Input/output error"),
    (zipread.MemberError("libk.so: CRC-32 does not match", code="E003"), "E003", "libk.so: CRC-32 does not match"),
    (ValueError("inflate failed"), "E002", "inflate failed"),
])
def test_a_stream_that_fails_midway_is_a_read_failure_of_its_code(error, code, message):
    """Chunks come from the zip reader (or a file): its failure mid-stream is the finding,
    never a library read from the bytes that came before it."""
    def chunks() -> Iterator[bytes]:
        yield LIB_SM80[:4096]
        raise error
    assert library.scan_stream("lib.so", len(LIB_SM80), chunks) == Library("lib.so", len(LIB_SM80), "other", problems=(
        Problem(code, message),))


def test_an_internal_error_is_e099_and_never_a_library_read_without_findings():
    """A chunk source that yields something other than bytes (a caller's bug) fails inside the
    reader: the guard turns that into E099 for the file, whatever the exception says."""
    lib = library.scan_stream("lib.so", len(LIB_SM80), lambda: iter([LIB_SM80[:4096], None]))  # type: ignore[list-item]
    assert (lib.path, lib.size, lib.format, lib.containers, [p.code for p in lib.problems]) == (
        "lib.so", len(LIB_SM80), "other", (), ["E099"])
    assert lib.problems[0].message.startswith("could not be verified: internal error TypeError: ")


# ---- the stream's chunking never changes what is found ------------------------------------------

def cut_at(data: bytes, *cuts: int) -> Chunks:
    """A chunk factory splitting `data` at these offsets (as a zip member's inflater might)."""
    edges = [0, *sorted(set(cuts)), len(data)]
    return lambda: iter([data[a:b] for a, b in zip(edges, edges[1:]) if b > a])


DAMAGED_SM80 = patched(LIB_SM80, FATBIN_AT + 1536, "<B", lambda b: b ^ 0xFF)  # the second container's magic
DAMAGED_HIP = patched(TWO_PLAIN, 0x8000, "<B", lambda b: b ^ 0xFF)  # the second bundle's magic
RECORDS = {  # where each library's records start: containers, wrappers, bundles
    "lib_sm80": (LIB_SM80, [FATBIN_AT, FATBIN_AT + 1536, 0x4088, 0x40A0]),
    "damaged_sm80": (DAMAGED_SM80, [FATBIN_AT, 0x4088, 0x40A0]),
    "damaged_hip": (DAMAGED_HIP, [0x3000, 0xC038, 0xC050]),
    "kern.fatbin": (KERN_FATBIN, [0, 16, 3448]),
}


@pytest.mark.parametrize("name", sorted(RECORDS))
@pytest.mark.parametrize("shift", [1, 4, 8, 17, 30])
def test_a_record_cut_by_a_chunk_boundary_reads_as_a_whole_one(name, shift):
    """Each record (container header, .nvFatBinSegment / .hipFatBinSegment wrapper) cut `shift`
    bytes after its start: the rest arrives with the next chunk, and what is found is the same."""
    data, starts = RECORDS[name]
    want = read(name, data)
    for at in starts:
        assert library.scan_stream(name, len(data), cut_at(data, at + shift)) == want, hex(at)


@pytest.mark.parametrize("name", sorted(RECORDS))
@pytest.mark.parametrize("size", [61, 509, 4093])
def test_any_chunk_size_reads_the_same_library(name, size):
    data, _ = RECORDS[name]
    assert library.scan_stream(name, len(data), cut_at(data, *range(size, len(data), size))) == read(name, data)


def test_the_reference_reads_of_the_chunking_tests():
    """What the chunkings above are compared with, against the build's facts."""
    assert [(c.offset, c.role) for c in read("x", LIB_SM80).containers] == [
        (FATBIN_AT, "device-link"), (FATBIN_AT + 1536, "executable")]
    assert [p.code for p in read("x", DAMAGED_SM80).problems] == ["E011", "E011"]
    assert [p.code for p in read("x", DAMAGED_HIP).problems] == ["E030", "E030"]


# ---- embedded claims: PyTorch's NVCC flags string, in read-only data only -------------------------

CLAIM = b"-gencode;arch=compute_80,code=sm_80"


def with_strings(data: bytes, *placed: tuple[int, bytes]) -> bytes:
    out = bytearray(data)
    for at, blob in placed:
        out[at:at + len(blob)] = blob
    return bytes(out)


# lib_sm80.so's segments: 0 R (0-0xa00), 1 R+X (0x1000-), 2 R (0x2000-0x3670: .nv_fatbin, then .rodata and
# .eh_frame, whose bytes no reader here judges), 3 R+W (0x3dc0-)
RODATA, TEXT, DATA = 13300, 4096 + 200, 16241


@pytest.mark.parametrize("where, found", [(RODATA, True), (TEXT, False), (DATA, False)],
                         ids=["read-only", "code", "writable"])
def test_an_embedded_claim_is_read_from_read_only_data(where, found):
    """A separate-code layout keeps string literals out of its executable segment, and writable
    data holds none: only the read-only segment is searched for them."""
    lib = read("lib.so", with_strings(LIB_SM80, (where, b"\0" + CLAIM + b"\0")))
    assert lib.embedded_claims == ((CLAIM.decode(),) if found else ()) and not lib.problems


def test_embedded_claims_in_order_each_once_and_only_after_a_nul():
    other = b"-gencode;arch=compute_90,code=sm_90"
    lib = read("lib.so", with_strings(LIB_SM80, (RODATA, b"\0" + CLAIM + b"\0"), (RODATA + 40, other + b"\0"),
                                      (RODATA + 80, CLAIM + b"\0"), (RODATA + 120, b"x" + other + b"\0")))
    assert lib.embedded_claims == (CLAIM.decode(), other.decode())
    lib = read("lib.so", with_strings(LIB_SM80, (RODATA, b"x" + CLAIM + b"\0")))
    assert lib.embedded_claims == ()


@pytest.mark.parametrize("shift", [1, 4, 7])
def test_a_container_cut_by_a_chunk_after_chunks_without_any_record(shift):
    """The search keeps only the last SEAM bytes of a chunk without a record; a magic cut by the
    next chunk boundary (`shift` bytes of it before the cut) is still found from that tail."""
    at = 20 * 509 - shift
    data = KERN_FATBIN + bytes(at - len(KERN_FATBIN)) + KERN_FATBIN
    lib = library.scan_stream("k.fatbin", len(data), cut_at(data, *range(509, len(data), 509)))
    assert lib == read("k.fatbin", data) and [c.offset for c in lib.containers] == [0, at]


def test_wrapper_magics_that_start_no_record_are_passed_over():
    """Both runtimes' wrapper records are 8-byte aligned in writable data: a magic at an odd
    offset there is a coincidence, and the search goes on past it."""
    data = with_strings(LIB_SM80, (DATA + 1, fatbin.WRAPPER_MAGIC), (DATA + 25, records.HIP_WRAPPER_MAGIC))
    assert read("lib.so", data) == read("lib.so", LIB_SM80)


# ---- which patterns are searched where (the program headers' zones) -------------------------------

def test_an_object_file_without_segments_is_searched_whole():
    """nvcc -c kern.cu: no program headers, so every byte is searched for every record."""
    lib = read("kern.o", (CUDA / "kern.o").read_bytes())
    assert [(c.section, c.role, c.size, [e.target for e in c.entries]) for c in lib.containers] == [
        (".nv_fatbin", "executable", 3448, ["sm_80"])] and not lib.problems


def test_a_container_in_bytes_no_segment_maps_is_found_and_lies_in_no_section():
    """Between lib_sm80.so's code segment (ends 0x1699) and its read-only one (0x2000): a copy of
    its 1,536-byte device-link container, which cuModuleLoadData could load from there."""
    at = 0x16A0
    data = with_strings(LIB_SM80, (at, LIB_SM80[FATBIN_AT:FATBIN_AT + 1536]))
    lib = read("lib.so", data)
    assert (at, "embedded", "") in [(c.offset, c.role, c.section) for c in lib.containers]
    assert problems(lib) == [("E011", f"fatbin container at 0x{at:x} lies in no section", at)]


def test_claims_are_not_read_from_bytes_past_the_last_segment():
    data = LIB_SM80 + b"\0" + CLAIM + b"\0"
    assert read("lib.so", data).embedded_claims == ()


def test_claims_are_read_from_code_in_a_layout_without_separate_code():
    """Older layouts map the ELF header, .text and .rodata in one R+X segment: its string
    literals are in the executable segment, which is then searched for claims."""
    phoff, = struct.unpack_from("<Q", LIB_SM80, 0x20)
    data = with_strings(LIB_SM80, (TEXT, b"\0" + CLAIM + b"\0"))
    assert read("lib.so", data).embedded_claims == ()  # separate code: not searched
    data = patched(data, phoff + 4, "<I", lambda _: 5)  # program header 0 (offset 0): R -> R+X
    assert read("lib.so", data).embedded_claims == (CLAIM.decode(),)


def test_a_load_segment_inside_another_does_not_end_the_zones():
    """Program header 5 (PT_NOTE inside the first PT_LOAD) relabelled PT_LOAD: the segments after
    it are still searched for what each may hold (wrappers in writable data)."""
    phoff, = struct.unpack_from("<Q", LIB_SM80, 0x20)
    data = patched(LIB_SM80, phoff + 5 * 56, "<I", lambda _: 1)
    assert summary(read("lib.so", data)) == summary(read("lib.so", LIB_SM80))


@pytest.mark.parametrize("flags, first", [(5, 5), (6, 4)], ids=["code, no separate code", "writable"])
def test_offload_bundles_are_found_in_code_and_writable_segments(flags, first):
    """hip_two_plain.so's .hip_fatbin lies in its read-only segment (program header 2): mapped
    R+X in a layout without separate code, or writable, its bundles are still found."""
    phoff, = struct.unpack_from("<Q", TWO_PLAIN, 0x20)
    data = patched(patched(TWO_PLAIN, phoff + 2 * 56 + 4, "<I", lambda _: flags), phoff + 4, "<I", lambda _: first)
    lib = read("lib.so", data)
    assert [(c.section, c.offset) for c in lib.containers] == [(".hip_fatbin", 0x3000), (".hip_fatbin", 0x8000)]
    assert not lib.problems


# ---- the entry points -----------------------------------------------------------------------------

def test_scan_file_reads_a_file_on_disk_with_the_callers_settings(tmp_path):
    path = tmp_path / "kern.fatbin"
    path.write_bytes(KERN_FATBIN)
    assert library.scan_file(str(path), "k.fatbin") == read("k.fatbin", KERN_FATBIN)
    fast = library.scan_file(str(path), decode=False)
    assert fast.path == str(path) and [e.decoded for e in fast.containers[0].entries] == [False, False]
    bounded = library.scan_file(str(path), max_payload=3367)
    assert [p.code for p in bounded.problems] == ["E012"]


def test_scan_file_of_a_file_that_cannot_be_read_is_e001(tmp_path):
    missing = tmp_path / "gone.so"
    lib = library.scan_file(str(missing), "lib.so")
    assert (lib.path, lib.size, lib.format, lib.containers) == ("lib.so", 0, "other", ())
    assert [(p.code, p.message.startswith("cannot read: ")) for p in lib.problems] == [("E001", True)]
    assert library.scan_file(str(missing)).path == str(missing)


def test_a_mach_o_library_is_read_by_the_mach_o_reader():
    data = (FIXTURES_PE / "macos_sm80.dylib").read_bytes()
    lib = read("libk.dylib", data)
    assert (lib.path, lib.size, lib.format, lib.problems) == ("libk.dylib", len(data), "macho", ())
    assert [(c.offset, c.size, [e.target for e in c.entries]) for c in lib.containers] == [(8192, 3448, ["sm_80"])]


# ---- zero padding between two containers, aligned to the section's start ---------------------------

def with_gap(gap: int, lead: int = 4, addralign: int = 16) -> bytes:
    """lib_sm80.so with its second container moved `gap` bytes on (zeros left between the two, the
    bytes after the section, __nv_module_id's, overwritten), the .nvFatBinSegment record that
    registers it (0x40A0, address at +8) following it, and .nv_fatbin starting `lead` bytes before
    its first container with alignment `addralign`."""
    second = FATBIN_AT + 1536
    out = bytearray(LIB_SM80)
    out[second:second + gap] = bytes(gap)
    out[second + gap:second + gap + 3448] = LIB_SM80[second:second + 3448]
    out = bytearray(patched(bytes(out), 0x40A8, "<Q", lambda a: a + gap))
    return with_section(bytes(out), ".nv_fatbin", offset=FATBIN_AT - lead, size=lead + FATBIN_SIZE + gap,
                        addralign=addralign)


@pytest.mark.parametrize("gap, lead, bad", [(12, 4, False), (8, 4, True), (16, 0, True)])
def test_zeros_between_containers_end_where_the_section_is_aligned(gap, lead, bad):
    """A container after zero padding must start at a multiple of the section's alignment counted
    from the section's start: with the section 4 bytes before the first container and aligned to
    16, 12 zeros after the 1,536-byte first one reach such a multiple (1,552) and 8 do not; 16
    zeros are a whole alignment, more than padding, even where they end at one. (A section whose
    offset is a multiple of 8 cannot tell an offset counted from the section from one counted
    from the file: both agree.)"""
    lib = read("lib.so", with_gap(gap, lead))
    second = FATBIN_AT + 1536 + gap
    assert containers(lib) == [(".nv_fatbin", "device-link", FATBIN_AT, 1536),
                               (".nv_fatbin", "executable", second, 3448)]
    size = lead + FATBIN_SIZE + gap
    want = [("E011", f".nv_fatbin: {gap + lead} of its {size} bytes are not a valid fatbin container",
             FATBIN_AT - lead)]
    assert problems(lib) == (want if bad else [])


# ---- a record longer than the zones after it ------------------------------------------------------

def test_a_container_longer_than_the_next_segment_does_not_end_the_search():
    """Program header 1 (R+X) stretched to end 8 bytes into the first container, program header 2
    (R) cut to 0x100 bytes: the container found in the code segment runs past all of segment 2,
    and the search goes on after it (the second container, the wrappers in the writable segment)."""
    phoff, = struct.unpack_from("<Q", LIB_SM80, 0x20)  # p_filesz at +32 of each 56-byte header
    data = patched(LIB_SM80, phoff + 56 + 32, "<Q", lambda _: FATBIN_AT + 8 - 0x1000)
    data = patched(data, phoff + 2 * 56 + 32, "<Q", lambda _: 0x100)
    lib = read("lib.so", data)
    assert containers(lib) == containers(read("lib.so", LIB_SM80)) == [
        (".nv_fatbin", "device-link", FATBIN_AT, 1536), (".nv_fatbin", "executable", FATBIN_AT + 1536, 3448)]
    assert not lib.problems


# ---- the byte before an embedded claim's marker ---------------------------------------------------

def claims_at(data: bytes, at: int, base: int = 0) -> list[str]:
    """What the claim parser reads from a marker at `at` with the window starting at `base`."""
    parser = records.Records(len(data), records.ScanSettings())
    src = window.Source([data], len(data))
    src.ensure(len(data))
    src.release(base)
    assert parser.claim(src, at) == at + 1
    return parser.found.claims


def test_a_claim_marker_is_read_only_after_a_nul():
    """The marker must follow a NUL (the start of a string): not at the very first byte, not after
    another byte, whether that byte is still in the window or the window has just let it go."""
    assert CLAIM.startswith(records.MARKERS[0])  # the search's needle: the marker without its NUL
    text = CLAIM + b"\0"
    assert claims_at(text, 0) == []
    for base in (0, 1):  # the byte before the marker in the window, or the last one it let go
        assert claims_at(b"\0" + text, 1, base) == [CLAIM.decode()]
        assert claims_at(b"x" + text, 1, base) == []
    assert claims_at(b"x\0" + text, 2, 2) == [CLAIM.decode()]


def test_a_claim_cut_by_a_chunk_boundary_after_its_marker_is_read_whole():
    """The search sees the marker once its bytes are in; the rest of the string comes with the
    next chunk, which the claim parser waits for (a cut string is no claim)."""
    at = RODATA + 1
    data = with_strings(LIB_SM80, (RODATA, b"\0" + CLAIM + b"\0"))
    for cut in (at + len(records.MARKERS[0]), at + len(records.MARKERS[0]) + 5):
        lib = library.scan_stream("lib.so", len(data), cut_at(data, cut))
        assert lib.embedded_claims == (CLAIM.decode(),), cut


def test_the_window_knows_the_last_byte_it_let_go():
    """Source.before is the byte at base - 1 however the window moved past it: released, pulled
    past whole (a skip of more than a chunk's worth), or skimmed down to its last SEAM bytes."""
    src = window.Source([b"ab\0cd"], 5)
    assert (src.base, src.before) == (0, -1)
    src.ensure(5)
    src.release(3)
    assert (src.base, src.before) == (3, 0)
    src.release(4)  # one byte
    assert (src.base, src.before) == (4, ord("c"))
    src.release(2)  # already let go: nothing moves
    assert (src.base, src.before) == (4, ord("c"))
    big = bytes(window.CHUNK_GUESS + 99) + b"x"
    src = window.Source([big, b"\0" * 10], len(big) + 10)
    assert src.skip_to(len(big)) and (src.base, src.before, len(src.buf)) == (len(big), ord("x"), 0)
    chunk = bytes(range(200))
    src = window.Source([chunk], 200)
    assert src.skim(lambda _: False, 1000)
    assert (src.base, src.before, bytes(src.buf)) == (200 - window.SEAM, chunk[-window.SEAM - 1], chunk[-window.SEAM:])


@pytest.mark.parametrize("lead", [b"\0", b""], ids=["own NUL", "the container's last byte"])
def test_a_claim_right_after_a_container_is_read(lead):
    """A claim string starting where the last container of .nv_fatbin ends (__nv_module_id's bytes
    overwritten): its NUL is either its own or the container's last byte, which the window has
    let go by the time the marker is found. Before, that claim was lost, and `check` judged by
    a later one (a fail-open when the first claims more, as below)."""
    end = FATBIN_AT + FATBIN_SIZE
    assert LIB_SM80[end - 1] == 0
    lib = read("lib.so", with_strings(LIB_SM80, (end, lead + CLAIM + b"\0")))
    assert lib.embedded_claims == (CLAIM.decode(),) and not lib.problems


def test_the_first_claim_right_after_a_container_is_the_one_check_judges_by(tmp_path):
    """Two claims: the first, right after .nv_fatbin (whose last byte is its NUL), also claims
    sm_90, which lib_sm80.so does not carry; the second only sm_80. `check` judges by the first."""
    first = b"-gencode;arch=compute_80,code=sm_80;-gencode;arch=compute_90,code=sm_90"
    path = tmp_path / "lib.so"
    path.write_bytes(with_strings(LIB_SM80, (FATBIN_AT + FATBIN_SIZE, first + b"\0"),
                                  (RODATA, b"\0" + CLAIM + b"\0")))
    rc, found = run(path, tmp_path)
    assert rc == 1 and "G001" in [c for c, _ in found], found


# ---- an AMD host object ---------------------------------------------------------------------------

def test_an_amd_object_file_without_segments_is_searched_for_bundles():
    """clang -c --offload-arch=gfx90a kernels.hip (hip_gfx90a.o): no program headers, so every byte
    is searched, offload bundles too; REFERENCE.txt lists its one bundle, for gfx90a."""
    data = (AMD / "hip_gfx90a.o").read_bytes()
    lib = read("hip_gfx90a.o", data)
    kernels = ("_Z5scaleIdEvPT_S0_", "_Z5scaleIfEvPT_S0_", "saxpy")  # kernels.hip
    assert [(c.vendor, c.section, c.offset, [(e.target, tuple(sorted(e.kernels))) for e in c.entries])
            for c in lib.containers] == [("amd", ".hip_fatbin", 0x1000, [("gfx90a", kernels)])]
    assert lib.format == "elf" and not lib.problems


def test_a_bundle_header_cut_by_the_end_of_the_file_far_into_it_is_truncated():
    """A plain bundle's header cut 100 bytes in, 4.4 MB into a bare file (past MAX_HEADER): the
    bytes left are counted from the bundle, not from the file's start, so it is truncated
    (E030), not a header too long to complete (E032)."""
    at = len(PLAIN) + 4_400_000
    lib = read("k.hipfb", PLAIN + b"\0" * 4_400_000 + PLAIN[:100], max_payload=1 << 16)
    assert [c.offset for c in lib.containers] == [0]
    assert problems(lib) == [("E030", f"HIP bundle at 0x{at:x}: E030: bundle is truncated", at)]


# ---- sourced statements (data/vendor.json statements): NCCL's fp8 refusal, whole, in any chunking ----

NCCL_FP8 = "FP8 reduction support begins with sm90 capable devices."
STATED = (Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin" / "fp8_stated"
          / "libnccl.so.2").read_bytes()


def test_a_statement_is_kept_when_the_library_holds_it_whole_in_any_chunking():
    """reduce_f8.cu built with -DSTATEMENT holds NCCL's string once in .rodata: found whole however
    the stream is cut, even through the string itself; with one byte of it changed (in the middle,
    or the last word) it is not found."""
    at = STATED.index(NCCL_FP8.encode())
    assert read("libnccl.so.2", STATED).statements == (NCCL_FP8,)
    for cut in (at + 1, at + 20, at + len(NCCL_FP8) - 1):
        assert library.scan_stream("libnccl.so.2", len(STATED), cut_at(STATED, cut)).statements == (NCCL_FP8,)
    changed = STATED[:at + 10] + b"X" + STATED[at + 11:]
    assert read("libnccl.so.2", changed).statements == ()
    unstated = STATED.replace(b"with sm90 capable devices.", b"with sm90 capable device!.")
    assert read("libnccl.so.2", unstated).statements == ()
