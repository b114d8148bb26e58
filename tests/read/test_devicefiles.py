"""read/devicefiles.py: files that are device code themselves (a bare cubin, code object, PTX file,
fatbin or offload bundle), read whole or headers only.

Inputs are the nvcc- and clang-built fixtures (tests/fixtures/cuda/bin, tests/fixtures/amd/bin)
or their bytes with one fact changed. Facts expected come from the build (build.sh's -arch, the
kernels in the sources, NVCC_VERSION, llvm-readelf's REFERENCE.txt), never from the reader.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator

import pytest

from archaudit.findings import Code
from archaudit.model import CODE_OBJECT, PTX, SASS, STANDALONE, Container, Entry, Library, Problem
from archaudit.read import fatbin, library
from helpers import AMD_BIN, CUDA_BIN, KERN_FATBIN, PLAIN_TWO, ccob, patched, problems, read, run_check, stream_library

AXPY = "_Z4axpyfPKfPfi"  # kern.cu's `axpy(float, const float*, float*, int)`, Itanium-mangled
_RELEASE = re.search(rb"release (\d+)\.(\d+)", (CUDA_BIN / "NVCC_VERSION").read_bytes())
assert _RELEASE is not None
NVCC = (int(_RELEASE[1]), int(_RELEASE[2]))


def test_ptx_file_without_a_target_directive_is_e014_not_an_internal_error(tmp_path):
    """nvcc's kern_80.ptx with its `.target` line removed: the architecture it is for is unknown,
    so it is malformed device code (E014), a finding and exit 1, not E099."""
    text = (CUDA_BIN / "kern_80.ptx").read_text()
    kept = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(".target"))
    assert kept != text.rstrip("\n")
    bad = tmp_path / "kern_no_target.ptx"
    bad.write_text(kept + "\n")
    rc, found = run_check(bad, tmp_path, "--arch", "8.0+PTX")
    assert (
        rc == 1
        and (
            "E014",
            "kern_no_target.ptx: PTX has no .target sm_XX directive. Fix: rebuild it if it is "
            "the project's own, else report it to its vendor",
        )
        in found
    ), found
    assert "E099" not in [c for c, _ in found]


# ---- bare device-code files: all of the file is one entry ---------------------------------------


def test_a_bare_cubin_is_one_standalone_sass_entry_of_its_architecture():
    data = (CUDA_BIN / "kern_sm80.cubin").read_bytes()  # nvcc -cubin -arch=sm_80 kern.cu
    entry = Entry(
        "nvidia",
        SASS,
        "sm_80",
        (1, data[8]),
        "none",
        len(data),
        len(data),
        0,
        kernels=(AXPY,),
        toolkit=NVCC,
        decoded=True,
    )
    assert read("kern_sm80.cubin", data) == Library(
        "kern_sm80.cubin", len(data), "cubin", (Container("nvidia", STANDALONE, "", 0, len(data), (entry,)),)
    )


def test_a_bare_code_object_is_one_standalone_entry_of_its_target():
    data = (AMD_BIN / "gfx90a_xnack_on.hsaco").read_bytes()  # REFERENCE.txt: gfx90a:xnack+, 3 kernels
    kernels = ("_Z5scaleIdEvPT_S0_", "_Z5scaleIfEvPT_S0_", "saxpy")  # kernels.hip: scale<double/float>, saxpy
    entry = Entry(
        "amd",
        CODE_OBJECT,
        "gfx90a:xnack+",
        (5, 0),
        "none",
        len(data),
        len(data),
        0,
        kernels=kernels,
        decoded=True,
        own_target="gfx90a:xnack+",
    )
    assert read("k.hsaco", data) == Library(
        "k.hsaco", len(data), "hsaco", (Container("amd", STANDALONE, "", 0, len(data), (entry,)),)
    )


CUBIN = (CUDA_BIN / "kern_sm80.cubin").read_bytes()
HSACO = (AMD_BIN / "gfx90a_xnack_on.hsaco").read_bytes()


@pytest.mark.parametrize(
    "name, data, code, message",
    [
        # e_flags bits 8-15 are a CUDA 12.9+ cubin's SM number
        (
            "k.cubin",
            patched(CUBIN, 48, "<I", lambda f: f & ~0xFF00),
            "E014",
            "cubin e_flags name no CUDA architecture (sm_0)",
        ),
        # section 1's sh_size (section table at e_shoff, 64 bytes a row) past the end of the file
        (
            "k.hsaco",
            patched(HSACO, struct.unpack_from("<Q", HSACO, 0x28)[0] + 64 + 32, "<Q", lambda _: 1 << 30),
            "E010",
            "section 1 lies outside the file",
        ),
        # EF_AMDGPU_MACH (e_flags bits 0-7) naming no processor
        ("k.hsaco", patched(HSACO, 48, "<I", lambda f: f | 0xFF), "E014", "unknown EF_AMDGPU_MACH 0x0ff"),
    ],
)
def test_a_device_elf_that_cannot_be_read_is_one_finding_and_no_code(name, data, code, message):
    assert read(name, data) == Library(name, len(data), "cubin", problems=(Problem(code, message),))


@pytest.mark.parametrize(
    "data, code, message",
    [
        ((CUDA_BIN / "lib_sm80.so").read_bytes()[:40], "E010", "malformed ELF: ELF header is truncated"),
        (
            patched((CUDA_BIN / "lib_sm80.so").read_bytes(), 4, "<B", lambda _: 1),
            "E010",
            "malformed ELF: 32-bit ELF header of version 1 and size 20488, expected 1 and 52",
        ),
    ],
)
def test_an_elf_header_that_cannot_be_read_is_a_finding(data, code, message):
    assert read("lib.so", data) == Library("lib.so", len(data), "elf", problems=(Problem(code, message),))


def ptx(text: str, name: str = "k.ptx") -> Library:
    return read(name, text.encode())


KERN_80 = (CUDA_BIN / "kern_80.ptx").read_text()  # nvcc -ptx -arch=compute_80 kern.cu


def test_a_bare_ptx_file_is_one_standalone_ptx_entry():
    m = re.search(r"^\.version (\d+)\.(\d+)$", KERN_80, re.M)
    assert m is not None
    version = (int(m[1]), int(m[2]))
    size = len(KERN_80.encode())
    entry = Entry(
        "nvidia", PTX, "sm_80", version, "none", size, size, 0, kernels=(AXPY,), decoded=True, ptx_target="sm_80"
    )
    assert ptx(KERN_80) == Library("k.ptx", size, "ptx", (Container("nvidia", STANDALONE, "", 0, size, (entry,)),))


def test_ptx_without_a_version_directive_has_version_zero():
    text = re.sub(r"^\.version .*\n", "", KERN_80, flags=re.M)
    (entry,) = ptx(text).containers[0].entries
    assert entry.code_version == (0, 0) and entry.target == "sm_80"


def test_ptx_naming_its_target_as_compute_is_read_as_that_sm():
    (entry,) = ptx(KERN_80.replace(".target sm_80", ".target compute_80")).containers[0].entries
    assert (entry.target, entry.ptx_target) == ("sm_80", "sm_80")


@pytest.mark.parametrize(
    "target, message",
    [("gfx90a", "PTX has no .target sm_XX directive"), ("sm_8x", "PTX .target 'sm_8x' is not a CUDA architecture")],
)
def test_ptx_whose_target_is_no_cuda_architecture_is_e014(target, message):
    text = KERN_80.replace(".target sm_80", f".target {target}")
    size = len(text.encode())
    assert ptx(text) == Library("k.ptx", size, "ptx", problems=(Problem(Code.E014, message),))


def test_a_file_named_as_device_code_that_is_none_is_e014():
    data = b"\x00" * 100
    for name in ("k.cubin", "k.fatbin", "k.hsaco"):
        assert read(name, data) == Library(
            name, 100, "other", problems=(Problem(Code.E014, "not a cubin, fatbin, PTX or code object"),)
        )


# ---- bare containers: .fatbin files and offload bundles -----------------------------------------


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
    assert problems(lib) == [
        ("E011", "the file starts with a container magic, but its first valid container starts at 0x10", 0)
    ]


def test_a_file_starting_with_a_container_magic_and_holding_none_is_e011():
    assert problems(read("k.fatbin", fatbin.MAGIC + b"\0" * 60)) == [("E011", "not a valid fatbin container", None)]


def test_a_container_whose_declared_size_leaves_out_an_entry_is_e011():
    """kern.fatbin with its fat_size 472 bytes short: the PTX entry at 3448 would lie outside
    every container, and no section tells a bare file's containers apart."""
    data = patched(KERN_FATBIN, 8, "<Q", lambda n: n - 472)
    lib = read("k.fatbin", data)
    assert [(c.offset, c.size) for c in lib.containers] == [(0, 3448)]
    assert problems(lib) == [
        ("E011", "fatbin container at 0x0: an entry follows its declared end, so its size hides entries", 3448)
    ]


def test_a_container_declaring_more_than_the_file_is_the_only_finding():
    data = KERN_FATBIN[:-8]  # the header still declares the whole container
    head = fatbin.parse_container_header(KERN_FATBIN)
    assert head is not None
    assert problems(read("k.fatbin", data)) == [
        ("E011", f"fatbin container at 0x0 declares {head.fat_size} bytes, past the end of the file", 0)
    ]


def test_a_bare_offload_bundle_is_one_standalone_amd_container():
    lib = read("k.hipfb", PLAIN_TWO)
    assert (lib.format, lib.size, lib.problems) == ("fatbin", len(PLAIN_TWO), ())
    (c,) = lib.containers
    assert (c.vendor, c.role, c.section, c.offset, c.size) == ("amd", STANDALONE, "", 0, len(PLAIN_TWO))
    assert [e.target for e in c.entries] == ["gfx1102", "gfx1200"]  # REFERENCE.txt


def test_a_bundle_up_to_four_times_the_payload_bound_is_verified():
    assert len(PLAIN_TWO) % 4 == 0
    lib = read("k.hipfb", PLAIN_TWO, max_payload=len(PLAIN_TWO) // 4)
    assert not lib.problems and [e.target for e in lib.containers[0].entries] == ["gfx1102", "gfx1200"]
    lib = read("k.hipfb", PLAIN_TWO, max_payload=len(PLAIN_TWO) // 4 - 1)
    assert (
        problems(lib)
        == [("E032", f"HIP bundle at 0x0: E032: bundle of {len(PLAIN_TWO)} bytes is too large to verify", 0)]
        and not lib.containers
    )


def test_a_bundle_cut_short_overruns_the_file():
    assert problems(read("k.hipfb", PLAIN_TWO[:-100])) == [
        ("E030", "HIP bundle at 0x0: E030: bundle overruns the file", 0)
    ]


def test_a_stream_ending_inside_a_bundle_is_a_truncated_bundle():
    def chunks() -> Iterator[bytes]:
        yield PLAIN_TWO[:-100]

    lib = library.scan_stream("k.hipfb", len(PLAIN_TWO), chunks)
    assert problems(lib) == [
        ("E030", "HIP bundle at 0x0: E030: bundle is truncated", 0),
        ("E002", f"stream ended after {len(PLAIN_TWO) - 100} of {len(PLAIN_TWO)} bytes", None),
    ]


def test_a_version_1_bundle_whose_stream_is_cut_is_truncated():
    v1 = ccob(PLAIN_TWO, 1, "zstd")  # states no size: its zstd frame must be walked
    assert problems(read("k.hipfb", v1[: len(v1) // 2])) == [
        ("E030", "HIP bundle at 0x0: E030: bundle is truncated", 0)
    ]


def test_a_version_1_bundle_cut_short_after_another_bundle_is_truncated():
    v1 = ccob(PLAIN_TWO, 1, "zstd")
    lib = read("k.hipfb", PLAIN_TWO + v1[: len(v1) // 2])
    assert [c.offset for c in lib.containers] == [0]
    assert problems(lib) == [("E030", f"HIP bundle at 0x{len(PLAIN_TWO):x}: E030: bundle is truncated", len(PLAIN_TWO))]


def test_a_version_1_bundle_header_is_read_up_to_four_times_the_payload_bound():
    """A v1 stream is walked for its extent up to max(MAX_HEADER, 4 x the payload bound); past
    that it is too large (E032), never skipped; within it, the bundle is decoded (and here
    refused for its declared size, E032 too)."""
    noise = os.urandom(4_400_000)  # stored as raw zstd blocks: longer than MAX_HEADER (4,292,640)
    v1 = ccob(noise, 1, "zstd")
    assert problems(read("k.hipfb", v1, max_payload=1 << 18)) == [
        ("E032", "HIP bundle at 0x0: E032: bundle header is not complete within 4292640 bytes", 0)
    ]
    assert problems(read("k.hipfb", v1, max_payload=2 << 20)) == [
        ("E032", "HIP bundle at 0x0: E032: compressed bundle declares 4400000 bytes, above the 2097152-byte limit", 0)
    ]


# ---- reading a whole file, and headers only ------------------------------------------------------


def test_a_bare_device_file_is_read_whole_only_up_to_the_payload_bound():
    data = (CUDA_BIN / "kern_sm80.cubin").read_bytes()
    assert read("k.cubin", data, max_payload=len(data)).containers
    assert read("k.cubin", data, max_payload=len(data) - 1) == Library(
        "k.cubin",
        len(data),
        "other",
        problems=(Problem(Code.E012, f"{len(data)} bytes exceed the {len(data) - 1}-byte verification bound"),),
    )


@pytest.mark.parametrize("name", ["kern_sm80.cubin", "kern_80.ptx"])
def test_a_bare_device_file_longer_than_its_declared_size_is_e002(name):
    """The zip directory says how long a member is; a stream that gives one byte more (here in
    a chunk of its own) is not the member that was declared."""
    data = (CUDA_BIN / name).read_bytes()
    assert stream_library(name, len(data), data, b"x") == Library(
        name,
        len(data),
        "other",
        problems=(Problem(Code.E002, f"file has {len(data) + 1} bytes, expected {len(data)}"),),
    )


def test_headers_only_reads_the_fixture_containers_clean():
    lib = stream_library("k.fatbin", len(KERN_FATBIN), KERN_FATBIN, decode=False)
    assert not lib.problems and [(e.target, e.decoded) for e in lib.containers[0].entries] == [
        ("sm_80", False),
        ("sm_90", False),
    ]


def test_headers_only_still_checks_a_payload_start_against_its_header():
    data = bytearray(KERN_FATBIN)
    cubin_at = 16 + 64  # the sm_80 entry's payload: a cubin whose e_flags say its SM in bits 8-15
    flags = struct.unpack_from("<I", data, cubin_at + 48)[0]
    struct.pack_into("<I", data, cubin_at + 48, (flags & ~0xFF00) | (86 << 8))
    lib = stream_library("k.fatbin", len(data), bytes(data), decode=False)
    assert problems(lib) == [("E014", "fatbin container at 0x0: cubin says sm_86, entry header says sm_80", 16)]


def test_headers_only_a_stream_ending_inside_a_payload_start_is_e011():
    cut = 16 + 64 + 30  # 30 bytes into the first payload
    lib = stream_library("k.fatbin", len(KERN_FATBIN), KERN_FATBIN[:cut], decode=False)
    assert problems(lib) == [
        ("E011", "fatbin container at 0x0: file ends inside an entry payload", 16),
        ("E002", f"stream ended after {cut} of {len(KERN_FATBIN)} bytes", None),
    ]
