"""read/records.py: the scan's record parsers: the payload bound on each entry, a container's
entries walked, header-level rejects, embedded claims and sourced statements.

Inputs are the nvcc- and clang-built fixtures (tests/fixtures/cuda/bin, tests/fixtures/amd/bin)
or their bytes with one fact changed. Facts expected come from the build (build.sh's -arch, the
kernels in the sources, NVCC_VERSION, llvm-readelf's REFERENCE.txt), never from the reader.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import pytest

from archaudit.read import fatbin, hip, library, records, stream as window
from helpers import (
    AMD_BIN,
    CLAIM,
    CUDA_BIN,
    DATA,
    FATBIN_AT,
    FATBIN_SIZE,
    KERN_FATBIN,
    LIB_SM80,
    READERS,
    RODATA,
    TEXT,
    TWO_PLAIN,
    cut_at,
    patched,
    problems,
    read,
    run_check,
    stream_library,
    with_section,
    with_strings,
)

# ---- the payload bound on each entry ------------------------------------------------------------


def test_an_entry_up_to_the_payload_bound_is_decoded():
    lib = read("k.fatbin", KERN_FATBIN, max_payload=3368)  # the sm_80 cubin's size, stored as is
    assert not lib.problems and [e.decoded for e in lib.containers[0].entries] == [True, True]
    lib = read("k.fatbin", KERN_FATBIN, max_payload=3367)
    assert problems(lib) == [
        ("E012", "fatbin container at 0x0: sm_80 entry of 3368 bytes exceeds the 3367-byte bound", 16)
    ]


def test_a_compressed_entry_is_bounded_by_its_decoded_size_too():
    """kern.fatbin's compute_90 PTX alone in its container: 391 bytes of zstd, 904 decoded."""
    ptx_entry = KERN_FATBIN[3448:]
    data = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(ptx_entry)) + ptx_entry
    assert not read("k.fatbin", data, max_payload=904).problems
    assert problems(read("k.fatbin", data, max_payload=500)) == [
        ("E012", "fatbin container at 0x0: sm_90 entry of 904 bytes exceeds the 500-byte bound", 16)
    ]


# ---- walking a container's entries ---------------------------------------------------------------


@pytest.mark.parametrize(
    "header_size, cut, words",
    [
        (64, 16 + 30, "file ends inside an entry header"),  # inside the fixed 64 bytes
        (72, 16 + 68, "file ends inside an entry header"),  # inside a header declared 72 bytes long
        (64, 16 + 64 + 1000, "file ends inside an entry payload"),  # decoded, so read whole
    ],
)
def test_a_stream_ending_inside_an_entry_is_e011(header_size, cut, words):
    data = patched(KERN_FATBIN, 16 + 4, "<I", lambda _: header_size)
    lib = stream_library("k.fatbin", len(data), data[:cut])
    assert problems(lib) == [
        ("E011", f"fatbin container at 0x0: {words}", 16),
        ("E002", f"stream ended after {cut} of {len(data)} bytes", None),
    ]


def test_an_entry_overrunning_its_container_is_e011():
    data = patched(KERN_FATBIN, 8, "<Q", lambda n: n - 8)  # fat_size 8 bytes short of the PTX entry's end
    assert problems(read("k.fatbin", data)) == [("E011", "fatbin container at 0x0: entry overruns its container", 3448)]


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
        ("E011", f".nv_fatbin: {size} of its {FATBIN_SIZE} bytes are not a valid fatbin container", FATBIN_AT),
    ]


def test_a_container_declaring_past_the_file_is_a_finding_where_there_are_no_sections():
    data = patched((READERS / "lib_noshdr_rx.so").read_bytes(), 0x2610 + 8, "<Q", lambda _: 1 << 30)
    lib = read("lib.so", data)
    # the container's uncompressed cubin, at 0x2610 + 16 + 64, is then a whole cubin of its own
    assert [(c.offset, c.role) for c in lib.containers] == [(0x2010, "embedded"), (0x2610 + 80, "cubin")]
    assert problems(lib) == [
        ("E011", f"fatbin container at 0x2610 declares {1 << 30} bytes, past the end of the file", 0x2610)
    ]


def test_an_impossible_bundle_header_is_a_finding_in_hip_fatbin_and_a_coincidence_elsewhere():
    data = patched(TWO_PLAIN, 0x8000 + 24, "<Q", lambda _: 5000)  # the second bundle's entry count
    assert problems(read("lib.so", data)) == [
        ("E030", "HIP bundle at 0x8000: E030: offload bundle declares 5000 entries", 0x8000),
        ("E030", "HIP wrapper at 0xc050 registers 0x8000, where no valid offload bundle was found", 0x8000),
        ("E030", ".hip_fatbin: 14344 of its 32152 bytes are not a valid offload bundle", 0x3000),
    ]
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
    assert found[0] == (
        "E030",
        "HIP wrapper at 0xc050 registers 0x8000, where no valid offload bundle was found",
        0x8000,
    )
    assert found[1:] == (
        [("E030", f".hip_fatbin: {size - 17808} of its {size} bytes are not a valid offload bundle", 0x3000)]
        if bad
        else []
    )


def test_bundles_in_no_section_are_read_with_no_section_name_and_are_e033():
    lib = read("lib.so", with_section(TWO_PLAIN, ".hip_fatbin", size=0))
    assert [(c.section, c.offset) for c in lib.containers] == [("", 0x3000), ("", 0x8000)]
    assert problems(lib) == [
        ("E033", "HIP bundle at 0x3000 lies in no section", 0x3000),
        ("E033", "HIP bundle at 0x8000 lies in no section", 0x8000),
    ]


def test_a_bundle_overrunning_its_section_is_e033():
    """.hip_fatbin ends 8 bytes before its second bundle does: those bytes are the next section's."""
    lib = read("lib.so", with_section(TWO_PLAIN, ".hip_fatbin", size=32152 - 8))
    assert [(c.section, c.offset, c.size) for c in lib.containers] == [
        (".hip_fatbin", 0x3000, 17808),
        (".hip_fatbin", 0x8000, 11672),
    ]
    assert problems(lib) == [("E033", "HIP bundle at 0x8000 overruns section .hip_fatbin", 0x8000)]


HOST = (CUDA_BIN / "lib_host.so").read_bytes()  # a host library: no device code, its section table last


@pytest.mark.parametrize("source", ["hip_multi.so", "hip_ccob_generic.so"])
def test_a_bundle_appended_after_the_elf_is_judged_and_lies_in_no_section(source):
    """An offload bundle (plain, or compressed: CCOB v2) written after a built library's end, as
    tests/fixtures/readers' lib_appended.so has a fatbin container: found, read entry for entry as
    in the library clang linked it into, and E033, as the container there is E011."""
    (linked,) = read("hip.so", (AMD_BIN / source).read_bytes()).containers
    bundle = (AMD_BIN / source).read_bytes()[linked.offset : linked.offset + linked.size]
    lib = read("lib.so", HOST + bundle)
    (c,) = lib.containers
    assert (c.offset, c.size, c.section) == (len(HOST), len(bundle), "")
    assert [replace(e, offset=e.offset - c.offset) for e in c.entries] == [
        replace(e, offset=e.offset - linked.offset) for e in linked.entries
    ]
    assert problems(lib) == [("E033", f"HIP bundle at 0x{len(HOST):x} lies in no section", len(HOST))]


# ---- embedded claims: PyTorch's NVCC flags string, in read-only data only -------------------------


@pytest.mark.parametrize(
    "where, found", [(RODATA, True), (TEXT, False), (DATA, False)], ids=["read-only", "code", "writable"]
)
def test_an_embedded_claim_is_read_from_read_only_data(where, found):
    """A separate-code layout keeps string literals out of its executable segment, and writable
    data holds none: only the read-only segment is searched for them."""
    lib = read("lib.so", with_strings(LIB_SM80, (where, b"\0" + CLAIM + b"\0")))
    assert lib.embedded_claims == ((CLAIM.decode(),) if found else ()) and not lib.problems


def test_embedded_claims_in_order_each_once_and_only_after_a_nul():
    other = b"-gencode;arch=compute_90,code=sm_90"
    lib = read(
        "lib.so",
        with_strings(
            LIB_SM80,
            (RODATA, b"\0" + CLAIM + b"\0"),
            (RODATA + 40, other + b"\0"),
            (RODATA + 80, CLAIM + b"\0"),
            (RODATA + 120, b"x" + other + b"\0"),
        ),
    )
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
    path.write_bytes(with_strings(LIB_SM80, (FATBIN_AT + FATBIN_SIZE, first + b"\0"), (RODATA, b"\0" + CLAIM + b"\0")))
    rc, found = run_check(path, tmp_path)
    assert rc == 1 and "G001" in [c for c, _ in found], found


# ---- sourced statements (data/vendor.json statements): NCCL's fp8 refusal, whole, in any chunking ----

NCCL_FP8 = "FP8 reduction support begins with sm90 capable devices."
STATED = (
    Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin" / "fp8_stated" / "libnccl.so.2"
).read_bytes()


def test_a_statement_is_kept_when_the_library_holds_it_whole_in_any_chunking():
    """reduce_f8.cu built with -DSTATEMENT holds NCCL's string once in .rodata: found whole however
    the stream is cut, even through the string itself; with one byte of it changed (in the middle,
    or the last word) it is not found."""
    at = STATED.index(NCCL_FP8.encode())
    assert read("libnccl.so.2", STATED).statements == (NCCL_FP8,)
    for cut in (at + 1, at + 20, at + len(NCCL_FP8) - 1):
        assert library.scan_stream("libnccl.so.2", len(STATED), cut_at(STATED, cut)).statements == (NCCL_FP8,)
    changed = STATED[: at + 10] + b"X" + STATED[at + 11 :]
    assert read("libnccl.so.2", changed).statements == ()
    unstated = STATED.replace(b"with sm90 capable devices.", b"with sm90 capable device!.")
    assert read("libnccl.so.2", unstated).statements == ()
