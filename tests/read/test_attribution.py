"""read/attribution.py: every container a scan finds attributed to its section and role, every
fatbin section accounted for, the padding around containers.

Inputs are the nvcc- and clang-built fixtures (tests/fixtures/cuda/bin, tests/fixtures/amd/bin)
or their bytes with one fact changed. Facts expected come from the build (build.sh's -arch, the
kernels in the sources, NVCC_VERSION, llvm-readelf's REFERENCE.txt), never from the reader.
"""

from __future__ import annotations

import pytest

from helpers import (
    CUDA_BIN,
    FATBIN_AT,
    FATBIN_SIZE,
    LIB_SM80,
    TWO_PLAIN,
    containers,
    elf_sections,
    patched,
    problems,
    read,
    with_section,
)

# ---- attribution: every container in a section, every fatbin section accounted for --------------


def test_a_librarys_containers_are_named_for_their_section_and_role():
    lib = read("lib.so", LIB_SM80)
    assert (
        containers(lib)
        == [(".nv_fatbin", "device-link", FATBIN_AT, 1536), (".nv_fatbin", "executable", FATBIN_AT + 1536, 3448)]
        and not lib.problems
    )
    assert (lib.format, lib.size, lib.notes, lib.runpath) == ("elf", len(LIB_SM80), (), ())
    rdc = read("lib.so", (CUDA_BIN / "lib_rdc.so").read_bytes())  # __nv_relfatbin starts where .nv_fatbin ends
    assert [(s, r) for s, r, _, _ in containers(rdc)] == [
        (".nv_fatbin", "device-link"),
        ("__nv_relfatbin", "relocatable"),
        ("__nv_relfatbin", "relocatable"),
    ]
    assert not rdc.problems
    incbin = read("lib.so", (CUDA_BIN.parent.parent / "readers" / "bin" / "lib_incbin_text.so").read_bytes())
    assert [(s, r) for s, r, _, _ in containers(incbin)] == [(".text", "embedded")] and not incbin.problems


def test_a_container_overrunning_its_section_is_e011_twice():
    lib = read("lib.so", with_section(LIB_SM80, ".nv_fatbin", size=FATBIN_SIZE - 8))
    assert problems(lib) == [
        ("E011", f"fatbin container at 0x{FATBIN_AT + 1536:x} overruns section .nv_fatbin", FATBIN_AT + 1536),
        ("E011", f".nv_fatbin: its containers declare {FATBIN_SIZE} bytes, 8 more than the section holds", FATBIN_AT),
    ]


def test_an_empty_fatbin_section_and_containers_in_no_section():
    lib = read("lib.so", with_section(LIB_SM80, ".nv_fatbin", size=0))
    assert containers(lib) == [("", "embedded", FATBIN_AT, 1536), ("", "embedded", FATBIN_AT + 1536, 3448)]
    assert problems(lib) == [
        ("E011", f"fatbin container at 0x{FATBIN_AT:x} lies in no section", FATBIN_AT),
        ("E011", f"fatbin container at 0x{FATBIN_AT + 1536:x} lies in no section", FATBIN_AT + 1536),
        ("E011", ".nv_fatbin is empty (nvcc never writes an empty fatbin section)", FATBIN_AT),
    ]


INCBIN = (CUDA_BIN.parent.parent / "readers" / "bin" / "lib_incbin_text.so").read_bytes()  # a container in .text
INCBIN_AT = 0x1100


def renamed(data: bytes, name: str, to: str) -> bytes:
    """The library with section `name` named as section `to` is (its sh_name)."""
    shoff, secs = elf_sections(data)
    at, named = shoff + 64 * secs[name][0], shoff + 64 * secs[to][0]
    return data[:at] + data[named : named + 4] + data[at + 4 :]


EMPTY_OUTSIDE = "is empty (nvcc writes empty ones only in its fatbin section): nothing accounts for the bytes after it"


def test_a_container_cut_to_nothing_outside_a_fatbin_section_is_e011():
    """As in a DLL's .rdata (test_pe.py): an embedded container's size cut to 0 hides its entry.
    The entry header after its declared end shows it; with that header damaged too, only the
    empty container does: nvcc writes empty containers only in .nv_fatbin, accounted there."""
    (c,) = read("lib.so", INCBIN).containers
    assert (c.offset, c.section, c.role, len(c.entries)) == (INCBIN_AT, ".text", "embedded", 1)
    cut = patched(INCBIN, INCBIN_AT + 8, "<Q", lambda _: 0)
    empty = ("E011", f"fatbin container at 0x{INCBIN_AT:x} in .text {EMPTY_OUTSIDE}", INCBIN_AT)
    assert problems(read("lib.so", cut)) == [
        (
            "E011",
            f"fatbin container at 0x{INCBIN_AT:x}: an entry follows its declared end, so its size hides entries",
            INCBIN_AT + 16,
        ),
        empty,
    ]
    lib = read("lib.so", patched(cut, INCBIN_AT + 16 + 2, "<H", lambda _: 0))  # and the entry's version
    # the entry's uncompressed cubin, no longer inside any container, is a whole cubin of its own
    assert [(c.section, c.role, len(c.entries)) for c in lib.containers] == [
        (".text", "embedded", 0),
        (".text", "cubin", 1),
    ]
    assert problems(lib) == [empty]


def test_nvlinks_empty_container_is_accounted_in_nv_fatbin_only():
    """lib_ptx90.so's device-link container holds no entry: in .nv_fatbin the section's accounting
    covers it; the same bytes in a section named .rodata are E011, as in a DLL's .rdata."""
    data = (CUDA_BIN / "lib_ptx90.so").read_bytes()
    lib = read("lib.so", data)
    assert [(c.section, c.role, len(c.entries)) for c in lib.containers] == [
        (".nv_fatbin", "device-link", 0),
        (".nv_fatbin", "executable", 1),
    ] and not lib.problems
    _, secs = elf_sections(data)
    at = secs[".nv_fatbin"][1]
    lib = read("lib.so", renamed(data, ".nv_fatbin", ".rodata"))
    assert [(c.section, c.role, len(c.entries)) for c in lib.containers] == [
        (".rodata", "embedded", 0),
        (".rodata", "embedded", 1),
    ]
    assert problems(lib) == [("E011", f"fatbin container at 0x{at:x} in .rodata {EMPTY_OUTSIDE}", at)]


@pytest.mark.parametrize("lead, bad", [(7, False), (8, True)])
def test_bytes_before_the_first_container_are_fewer_than_the_alignment(lead, bad):
    lib = read("lib.so", with_section(LIB_SM80, ".nv_fatbin", offset=FATBIN_AT - lead, size=FATBIN_SIZE + lead))
    want = [
        (
            "E011",
            f".nv_fatbin: {lead} of its {FATBIN_SIZE + lead} bytes are not a valid fatbin container",
            FATBIN_AT - lead,
        )
    ]
    assert problems(lib) == (want if bad else [])


@pytest.mark.parametrize(
    "tail, addralign, bad", [(7, 8, False), (8, 8, True), (8, 256, False), (255, 256, False), (256, 256, True)]
)
def test_zeros_after_the_last_container_are_shorter_than_the_sections_alignment(tail, addralign, bad):
    """aarch64 libraries align containers to 256 bytes: zero padding up to the section's own
    alignment may end it; more is not padding."""
    data = with_section(LIB_SM80, ".nv_fatbin", size=FATBIN_SIZE + tail, addralign=addralign, zero_after=tail)
    want = [
        ("E011", f".nv_fatbin: {tail} of its {FATBIN_SIZE + tail} bytes are not a valid fatbin container", FATBIN_AT)
    ]
    assert problems(read("lib.so", data)) == (want if bad else [])


def test_padding_after_a_container_must_be_zeros():
    data = with_section(LIB_SM80, ".nv_fatbin", size=FATBIN_SIZE + 7)  # the next section's bytes, not zeros
    assert problems(read("lib.so", data)) == [
        ("E011", f".nv_fatbin: 7 of its {FATBIN_SIZE + 7} bytes are not a valid fatbin container", FATBIN_AT)
    ]


def test_a_bundle_a_wrapper_registers_must_be_found_and_the_section_covered():
    data = bytearray(TWO_PLAIN)
    data[0x8000] ^= 0xFF  # the second bundle's magic
    lib = read("lib.so", bytes(data))
    assert [(c.section, c.offset) for c in lib.containers] == [(".hip_fatbin", 0x3000)]
    assert problems(lib) == [
        ("E030", "HIP wrapper at 0xc050 registers 0x8000, where no valid offload bundle was found", 0x8000),
        ("E030", ".hip_fatbin: 14344 of its 32152 bytes are not a valid offload bundle", 0x3000),
    ]


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
        ("E011", f".nv_fatbin: {size} of its {FATBIN_SIZE} bytes are not a valid fatbin container", FATBIN_AT),
    ]


# ---- zero padding between two containers, aligned to the section's start ---------------------------


def with_gap(gap: int, lead: int = 4, addralign: int = 16) -> bytes:
    """lib_sm80.so with its second container moved `gap` bytes on (zeros left between the two, the
    bytes after the section, __nv_module_id's, overwritten), the .nvFatBinSegment record that
    registers it (0x40A0, address at +8) following it, and .nv_fatbin starting `lead` bytes before
    its first container with alignment `addralign`."""
    second = FATBIN_AT + 1536
    out = bytearray(LIB_SM80)
    out[second : second + gap] = bytes(gap)
    out[second + gap : second + gap + 3448] = LIB_SM80[second : second + 3448]
    out = bytearray(patched(bytes(out), 0x40A8, "<Q", lambda a: a + gap))
    return with_section(
        bytes(out), ".nv_fatbin", offset=FATBIN_AT - lead, size=lead + FATBIN_SIZE + gap, addralign=addralign
    )


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
    assert containers(lib) == [
        (".nv_fatbin", "device-link", FATBIN_AT, 1536),
        (".nv_fatbin", "executable", second, 3448),
    ]
    size = lead + FATBIN_SIZE + gap
    want = [
        ("E011", f".nv_fatbin: {gap + lead} of its {size} bytes are not a valid fatbin container", FATBIN_AT - lead)
    ]
    assert problems(lib) == (want if bad else [])
