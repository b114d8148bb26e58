"""The checks between a fatbin entry's header and its payload, pinned where mutation testing found
fatbin.py loose (docs/mutation.md).

Entries are nvcc's: tests/fixtures/cuda/bin/kern.fatbin holds an sm_80 cubin and a
zstd-compressed compute_90 PTX (nvcc -Xfatbin -compress-all). Each case changes one header field
or payload byte and asserts the finding code and its words; the untouched entry beside it must
still read.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import zstandard

import oracle
from archaudit.model import Entry
from archaudit.read import decode, fatbin
from archaudit.read.decode import DecodePool
from archaudit.read.fatbin import FatbinError
from archaudit.read.library import scan_file, scan_stream
from helpers import CUBIN, sass_entry
from reference_tools import needs_tool

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
FATBIN = (BIN / "kern.fatbin").read_bytes()
SASS_AT, PTX_AT = 16, 3448  # the two entries' headers
ROOM = 16 + fatbin.parse_container_header(FATBIN).fat_size  # type: ignore[union-attr]


def entry(at: int = SASS_AT, data: bytes = FATBIN, room: int | None = None) -> fatbin.EntryHeader:
    return fatbin.parse_entry_header(data, at, ROOM - at if room is None else room, at)


def patched(at: int, fmt: str, field: int, value: int) -> bytes:
    data = bytearray(FATBIN)
    struct.pack_into(fmt, data, at + field, value)
    return bytes(data)


def refused(code: str, words: str, fn: object, *args: object) -> None:
    with pytest.raises(FatbinError) as e:
        fn(*args)  # type: ignore[operator]
    assert e.value.code == code and words in e.value.message, (e.value.code, e.value.message)


def test_the_fixture_entries_read():
    sass, ptx = entry(), entry(PTX_AT)
    assert (sass.target, sass.compression, ptx.compression) == ("sm_80", "none", "zstd")
    assert entry(room=sass.total).total == sass.total  # an entry filling its room exactly


# ---- entry headers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "room, words", [(63, "63 bytes left in the container, too few for an entry"), (64, "entry overruns its container")]
)
def test_room_for_an_entry(room, words):
    refused("E011", words, entry, SASS_AT, FATBIN, room)


@pytest.mark.parametrize(
    "kind, code, words",
    [
        (3, "E013", "entry kind 3 is unknown"),
        (0, "E013", "entry kind 0 is unknown"),
        (4, "E013", "entry kind 4 (pre-ELF cubin) cannot be verified"),
    ],
)
def test_entry_kinds(kind, code, words):
    refused(code, words, entry, SASS_AT, patched(SASS_AT, "<H", 0, kind))


def test_entry_version():
    refused("E011", "entry version 0x0102, expected 0x0101", entry, SASS_AT, patched(SASS_AT, "<H", 2, 0x0102))


@pytest.mark.parametrize("hsize", [56, 68, 4104, 0])
def test_impossible_entry_header_sizes(hsize):
    refused("E011", f"entry header size {hsize} is impossible", entry, SASS_AT, patched(SASS_AT, "<I", 4, hsize))


def test_largest_entry_header_size_is_possible_when_it_fits():
    data = patched(SASS_AT, "<I", 4, fatbin.MAX_ENTRY_HEADER)
    refused("E011", "entry overruns its container", entry, SASS_AT, data)  # 4096 + payload > room
    assert entry(SASS_AT, data, fatbin.MAX_ENTRY_HEADER + 3368).header_size == fatbin.MAX_ENTRY_HEADER


@pytest.mark.parametrize("arch, ok", [(9, False), (10, True), (999, True), (1000, False)])
def test_architecture_bounds(arch, ok):
    data = patched(SASS_AT, "<I", 28, arch)
    if ok:
        assert entry(SASS_AT, data).arch == arch
    else:
        refused("E011", f"architecture {arch} is impossible", entry, SASS_AT, data)


def test_compressed_entry_sizes():
    csize = entry(PTX_AT).compressed_size
    refused(
        "E011",
        f"compressed size {392 + 8} exceeds the payload area 392",
        entry,
        PTX_AT,
        patched(PTX_AT, "<I", 16, 392 + 8),
    )
    assert entry(PTX_AT, patched(PTX_AT, "<I", 16, 392)).compressed_size == 392 >= csize
    refused("E011", "compressed entry declares no uncompressed size", entry, PTX_AT, patched(PTX_AT, "<Q", 56, 0))


@pytest.mark.parametrize("id_off, id_len, ok", [(63, 4, False), (64, 17, False), (64, 16, True), (8, 0, True)])
def test_identifier_within_the_entry_header(id_off, id_len, ok):
    """The PTX entry's header is 80 bytes: an identifier must lie in bytes 64..80."""
    data = bytearray(FATBIN)
    struct.pack_into("<II", data, PTX_AT + 32, id_off, id_len)
    if ok:
        assert entry(PTX_AT, bytes(data)).identifier_length == id_len
    else:
        refused("E011", "identifier lies outside the entry header", entry, PTX_AT, bytes(data))


# ---- payload starts, for audits that do not decode ----------------------------------------------


def test_a_cubin_payload_start_must_be_the_cubin_its_header_says():
    h = entry()
    fatbin.check_payload_start(h, CUBIN[:64], 0)
    refused("E014", "sm_80 payload is not an ELF cubin", fatbin.check_payload_start, h, CUBIN[:51], 0)
    refused("E014", "sm_80 payload is not an ELF cubin", fatbin.check_payload_start, h, b"\x7fELG" + CUBIN[4:64], 0)
    other = bytearray(CUBIN[:64])
    struct.pack_into("<H", other, 18, 62)  # x86-64
    refused("E014", "not a CUDA ELF (e_machine 62)", fatbin.check_payload_start, h, bytes(other), 0)
    sm90 = (BIN / "kern_sm90.cubin").read_bytes()[:64]
    refused("E014", "cubin says sm_90, entry header says sm_80", fatbin.check_payload_start, h, sm90, 0)
    for name, arch in (("kern_sm75.cubin", 75), ("kern_sm120.cubin", 120)):  # nvcc 13 (ELF ABI 8) at both ends
        cub = (BIN / name).read_bytes()[:64]
        fatbin.check_payload_start(entry(SASS_AT, patched(SASS_AT, "<I", 28, arch)), cub, 0)


READERS = BIN.parent.parent / "readers" / "bin"


@needs_tool("cuobjdump", oracle.find_cuobjdump())
def test_cuobjdump_reads_the_cuda_12_cubin_as_sm_90():
    """The reference for the test below: cuobjdump names the ELF ABI 7 cubin's architecture."""
    assert [t for kind, t in oracle.list_entries(READERS / "cuda12_sm90.cubin") if kind == "ELF"] == ["sm_90"]


def test_a_cuda_12_cubin_start_is_read_in_the_e_flags_layout_of_its_elf_abi():
    """Before CUDA 12.9 (ELF ABI version 7) a cubin's e_flags hold the architecture in the low
    byte, from ABI 8 in the second byte. cuda12_sm90.cubin is ptxas 12.8's (flags 0x5a055a: 90
    in the low byte, 5 in the second); cuobjdump reads it as sm_90."""
    old = (READERS / "cuda12_sm90.cubin").read_bytes()[:64]
    assert old[8] == 7 and struct.unpack_from("<I", old, 48)[0] & 0xFFFF == 0x055A
    sm90 = entry(SASS_AT, patched(SASS_AT, "<I", 28, 90))
    fatbin.check_payload_start(sm90, old, 0)
    refused("E014", "cubin says sm_90, entry header says sm_80", fatbin.check_payload_start, entry(), old, 0)
    as_abi8 = old[:8] + b"\x08" + old[9:]  # the same flags read in the new layout: sm_5
    refused("E014", "cubin says sm_5, entry header says sm_90", fatbin.check_payload_start, sm90, as_abi8, 0)
    new = CUBIN[:64]  # nvcc 13: ABI 8, 80 in the second byte
    refused(
        "E014",
        "cubin says sm_4, entry header says sm_80",
        fatbin.check_payload_start,
        entry(),
        new[:8] + b"\x07" + new[9:],
        0,
    )


def test_a_zstd_payload_start_must_be_a_frame_of_the_declared_size():
    h = entry(PTX_AT)
    payload = FATBIN[PTX_AT + h.header_size : PTX_AT + h.header_size + 64]
    fatbin.check_payload_start(h, payload, 0)
    refused(
        "E012",
        "zstd payload does not start with a zstd frame",
        fatbin.check_payload_start,
        h,
        b"\x28\xb5\x2f\xfe" + payload[4:],
        0,
    )
    refused("E012", "zstd frame header is corrupt", fatbin.check_payload_start, h, payload[:5], 0)
    wrong = entry(PTX_AT, patched(PTX_AT, "<Q", 56, h.uncompressed_size + 1))
    refused(
        "E012",
        f"zstd frame declares {h.uncompressed_size} bytes, header says {h.uncompressed_size + 1}",
        fatbin.check_payload_start,
        wrong,
        payload,
        0,
    )
    unknown = zstandard.ZstdCompressor(write_content_size=False).compress(b"x" * 100)
    fatbin.check_payload_start(h, unknown[:64], 0)  # a frame without a size: the decode checks it


# ---- zstd payloads decoded --------------------------------------------------------------------


def ptx_entry_with(payload: bytes, usize: int) -> tuple[fatbin.EntryHeader, bytes]:
    """The PTX entry's header with another payload of the same compressed size budget."""
    h = entry(PTX_AT)
    data = bytearray(FATBIN)
    struct.pack_into("<I", data, PTX_AT + 16, len(payload))
    struct.pack_into("<I", data, PTX_AT + 8, len(payload))
    struct.pack_into("<Q", data, PTX_AT + 56, usize)
    return fatbin.parse_entry_header(bytes(data), PTX_AT, h.header_size + len(payload), PTX_AT), payload


PTX_TEXT = fatbin.decode_payload(entry(PTX_AT), FATBIN[PTX_AT + 80 : PTX_AT + 80 + 392], 0)


@pytest.mark.parametrize(
    "frames",
    [[{"write_content_size": False}], [{"write_content_size": False}, {"write_content_size": False}], [{}, {}]],
    ids=["one frame without a size", "two frames without sizes", "two frames with sizes"],
)
def test_zstd_payloads_whose_size_is_not_in_one_frame(frames):
    cut = len(PTX_TEXT) // len(frames)
    parts = [PTX_TEXT[i * cut : (i + 1) * cut if i + 1 < len(frames) else None] for i in range(len(frames))]
    payload = b"".join(zstandard.ZstdCompressor(**p).compress(x) for p, x in zip(frames, parts))
    h, data = ptx_entry_with(payload, len(PTX_TEXT))
    if frames[0].get("write_content_size", True):  # the first frame names its own (smaller) size
        refused("E012", "payload does not decode: frame says", fatbin.decode_payload, h, data, 0)
        return
    assert fatbin.decode_payload(h, data, 0) == PTX_TEXT
    shorter, data = ptx_entry_with(payload, len(PTX_TEXT) + 1)
    refused(
        "E012",
        f"decodes to {len(PTX_TEXT)} bytes, header says {len(PTX_TEXT) + 1}",
        fatbin.decode_payload,
        shorter,
        data,
        0,
    )
    longer, data = ptx_entry_with(payload, len(PTX_TEXT) - 10)
    refused(
        "E012",
        f"decodes to {len(PTX_TEXT) - 9} bytes, header says {len(PTX_TEXT) - 10}",
        fatbin.decode_payload,
        longer,
        data,
        0,
    )


def test_zstd_payload_larger_than_the_bound_or_its_own_frame():
    h = entry(PTX_AT)
    payload = FATBIN[PTX_AT + 80 : PTX_AT + 80 + 392]
    refused(
        "E012",
        f"declares {h.uncompressed_size} bytes, more than the {h.uncompressed_size - 1}-byte",
        fatbin.decode_payload,
        h,
        payload,
        0,
        h.uncompressed_size - 1,
    )
    assert fatbin.decode_payload(h, payload, 0, h.uncompressed_size) == PTX_TEXT
    refused("E012", "payload does not decode", fatbin.decode_payload, h, payload[:100], 0)


def test_a_zstd_payload_whose_first_frame_is_exactly_the_declared_size_and_more_follows():
    """Two frames without sizes, the first exactly the declared bytes: the one byte more that
    the second frame yields must be seen (E012), not the declared bytes returned."""
    c = zstandard.ZstdCompressor(write_content_size=False)
    payload = c.compress(PTX_TEXT) + c.compress(b"extra")
    h, data = ptx_entry_with(payload, len(PTX_TEXT))
    refused(
        "E012", f"decodes to {len(PTX_TEXT) + 1} bytes, header says {len(PTX_TEXT)}", fatbin.decode_payload, h, data, 0
    )


def test_an_uncompressed_ptx_payload_start_is_not_checked_as_a_cubin():
    data = bytearray(FATBIN)
    flags_at = PTX_AT + 40
    struct.pack_into("<Q", data, flags_at, struct.unpack_from("<Q", data, flags_at)[0] & ~fatbin.FLAG_ZSTD)
    h = entry(PTX_AT, bytes(data))
    assert h.compression == "none" and h.kind == "ptx"
    fatbin.check_payload_start(h, PTX_TEXT[:64], 0)


# ---- decoded entries: the payload must agree with its header ------------------------------------


def base(h: fatbin.EntryHeader) -> Entry:
    return Entry("nvidia", "sass", h.target)


def test_a_decoded_cubin_entry_names_its_kernels_and_nothing_unresolved():
    h, payload = sass_entry(CUBIN, 80)
    e = decode.decode_entry(h, payload, 4096, fatbin.DEFAULT_MAX_PAYLOAD, base(h))
    assert e.decoded and e.kernels and e.unresolved == () and e.toolkit is not None


def test_an_arch_specific_cubin_agrees_with_an_arch_specific_header():
    cubin = (BIN / "kern_sm90a.cubin").read_bytes()
    h, payload = sass_entry(cubin, 90, fatbin.FLAG_ARCH_SPECIFIC)
    assert h.target == "sm_90a"
    assert decode.decode_entry(h, payload, 0, fatbin.DEFAULT_MAX_PAYLOAD, base(h)).decoded
    plain, payload = sass_entry(cubin, 90)
    refused(
        "E014",
        "cubin says sm_90a, entry header says sm_90",
        decode.decode_entry,
        plain,
        payload,
        0,
        fatbin.DEFAULT_MAX_PAYLOAD,
        base(plain),
    )


def test_a_compressed_cubin_is_bounded_by_the_callers_limit():
    h, payload = sass_entry(CUBIN, 80, zstd=True)
    assert decode.decode_entry(h, payload, 0, len(CUBIN), base(h)).decoded
    with pytest.raises(FatbinError) as e:
        decode.decode_entry(h, payload, 4096, len(CUBIN) - 1, base(h))
    assert e.value.code == "E012" and e.value.offset == 4096 and "verification bound" in e.value.message


def test_a_cubin_whose_sections_cannot_be_read_is_e014():
    bad = bytearray(CUBIN)
    struct.pack_into("<Q", bad, 40, len(CUBIN) + 64)  # e_shoff past the end
    h, payload = sass_entry(bytes(bad), 80)
    with pytest.raises(FatbinError) as e:
        decode.decode_entry(h, payload, 4096, fatbin.DEFAULT_MAX_PAYLOAD, base(h))
    assert e.value.code == "E014" and e.value.message.startswith("sm_80 cubin: ") and e.value.offset == 4096


# ---- PTX entries decoded -------------------------------------------------------------------------


def ptx_text_entry(text: bytes) -> tuple[fatbin.EntryHeader, bytes]:
    return ptx_entry_with(zstandard.ZstdCompressor().compress(text), len(text))


def ptx_base(h: fatbin.EntryHeader) -> Entry:
    return Entry("nvidia", "ptx", h.target.replace("sm_", "compute_"))


def test_a_decoded_ptx_entry_names_its_target_and_kernels():
    h, payload = ptx_text_entry(PTX_TEXT)
    e = decode.decode_entry(h, payload, 0, fatbin.DEFAULT_MAX_PAYLOAD, ptx_base(h))
    assert (e.decoded, e.ptx_target, e.kernels) == (True, "sm_90", ("_Z4axpyfPKfPfi",))
    arch_specific = PTX_TEXT.replace(b".target sm_90\n", b".target sm_90a\n")
    h, payload = ptx_text_entry(arch_specific)
    assert decode.decode_entry(h, payload, 0, fatbin.DEFAULT_MAX_PAYLOAD, ptx_base(h)).ptx_target == "sm_90a"


@pytest.mark.parametrize(
    "text, words",
    [
        (PTX_TEXT.replace(b".target sm_90\n", b""), "sm_90 PTX has no .target directive"),
        (PTX_TEXT.replace(b".target sm_90\n", b".target sm_80\n"), "PTX says .target sm_80, entry header says sm_90"),
        (PTX_TEXT.replace(b".target sm_90\n", b".target gfx90a\n"), "PTX says .target gfx90a, entry header says sm_90"),
    ],
)
def test_ptx_whose_target_is_not_its_headers(text, words):
    h, payload = ptx_text_entry(text)
    with pytest.raises(FatbinError) as e:
        decode.decode_entry(h, payload, 4096, fatbin.DEFAULT_MAX_PAYLOAD, ptx_base(h))
    assert e.value.code == "E014" and e.value.message == words and e.value.offset == 4096


def test_a_ptx_entry_is_bounded_by_the_callers_limit():
    h, payload = ptx_text_entry(PTX_TEXT)
    with pytest.raises(FatbinError) as e:
        decode.decode_entry(h, payload, 4096, len(PTX_TEXT) - 1, ptx_base(h))
    assert e.value.code == "E012" and e.value.offset == 4096 and "verification bound" in e.value.message


def test_decode_failures_carry_their_entry_offset():
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(PTX_TEXT)
    h, payload = ptx_entry_with(unsized, len(PTX_TEXT) + 1)
    for call, words in (
        (lambda: fatbin.decode_payload(h, payload, 777), "decodes to"),
        (lambda: fatbin.decode_payload(h, payload, 777, len(PTX_TEXT)), "verification bound"),
    ):
        with pytest.raises(FatbinError) as e:
            call()
        assert e.value.code == "E012" and e.value.offset == 777 and words in e.value.message
    with pytest.raises(FatbinError) as e:
        fatbin.check_payload_start(entry(PTX_AT, patched(PTX_AT, "<Q", 56, 1)), FATBIN[PTX_AT + 80 : PTX_AT + 144], 777)
    assert e.value.code == "E012" and e.value.offset == 777


def test_lz4_entries_are_bounded_like_zstd_ones():
    data = bytearray(FATBIN)
    flags_at = PTX_AT + 40
    flags = struct.unpack_from("<Q", data, flags_at)[0] & ~fatbin.FLAG_ZSTD | fatbin.FLAG_LZ4
    struct.pack_into("<Q", data, flags_at, flags)
    assert entry(PTX_AT, bytes(data)).compression == "lz4"
    struct.pack_into("<I", data, PTX_AT + 16, 392 + 8)
    refused("E011", "compressed size 400 exceeds the payload area 392", entry, PTX_AT, bytes(data))
    struct.pack_into("<I", data, PTX_AT + 16, 300)
    struct.pack_into("<Q", data, PTX_AT + 56, 0)
    refused("E011", "compressed entry declares no uncompressed size", entry, PTX_AT, bytes(data))


def test_an_opaque_lto_payload_is_kept_as_stored():
    data = bytearray(FATBIN)
    struct.pack_into("<H", data, PTX_AT, 8)  # kind 8: LTO IR
    flags_at = PTX_AT + 40
    struct.pack_into("<Q", data, flags_at, struct.unpack_from("<Q", data, flags_at)[0] | fatbin.FLAG_OPAQUE_LTO)
    h = entry(PTX_AT, bytes(data))
    assert h.compression == "opaque"
    payload = FATBIN[PTX_AT + 80 : PTX_AT + 80 + 392]
    assert fatbin.decode_payload(h, payload, 0, 1) == payload  # not decoded, so not bounded either


def test_an_entry_identifier_is_read_from_its_header():
    data = bytearray(FATBIN)
    struct.pack_into("<II", data, PTX_AT + 32, 64, 16)
    data[PTX_AT + 64 : PTX_AT + 80] = b"kern.cu  -O3    "
    h = entry(PTX_AT, bytes(data))
    assert fatbin.identifier(bytes(data[PTX_AT : PTX_AT + 80]), h) == "kern.cu  -O3"


def test_payload_start_and_decoded_payload_findings_carry_the_entrys_offset():
    """Every refusal of check_payload_start and decode_entry names where its entry is."""
    h, sm90 = entry(), (BIN / "kern_sm90.cubin").read_bytes()
    other = bytearray(CUBIN[:64])
    struct.pack_into("<H", other, 18, 62)
    ptx = entry(PTX_AT)
    frame = FATBIN[PTX_AT + ptx.header_size : PTX_AT + ptx.header_size + 64]
    wrong_arch, wrong_payload = sass_entry(sm90, 80)
    plain, arch_specific = sass_entry((BIN / "kern_sm90a.cubin").read_bytes(), 90)
    calls = [
        ("E014", lambda: fatbin.check_payload_start(h, CUBIN[:51], 777)),
        ("E014", lambda: fatbin.check_payload_start(h, bytes(other), 777)),
        ("E014", lambda: fatbin.check_payload_start(h, sm90[:64], 777)),
        ("E012", lambda: fatbin.check_payload_start(ptx, b"\x28\xb5\x2f\xfe" + frame[4:], 777)),
        ("E012", lambda: fatbin.check_payload_start(ptx, frame[:5], 777)),
        (
            "E014",
            lambda: decode.decode_entry(wrong_arch, wrong_payload, 777, fatbin.DEFAULT_MAX_PAYLOAD, base(wrong_arch)),
        ),
        ("E014", lambda: decode.decode_entry(plain, arch_specific, 777, fatbin.DEFAULT_MAX_PAYLOAD, base(plain))),
    ]
    for code, call in calls:
        with pytest.raises(FatbinError) as e:
            call()
        assert (e.value.code, e.value.offset) == (code, 777), e.value.message


@pytest.mark.parametrize(
    "at, data, room",
    [
        (SASS_AT, FATBIN, 63),  # too few bytes for an entry
        (SASS_AT, patched(SASS_AT, "<H", 0, 3), None),  # unknown kind
        (SASS_AT, patched(SASS_AT, "<H", 0, 4), None),  # pre-ELF cubin
        (SASS_AT, patched(SASS_AT, "<H", 2, 0x0102), None),  # version
        (SASS_AT, patched(SASS_AT, "<I", 4, 56), None),  # header size
        (SASS_AT, FATBIN, 64),  # overruns its container
        (PTX_AT, patched(PTX_AT, "<I", 16, 392 + 8), None),  # compressed size past the payload area
        (PTX_AT, patched(PTX_AT, "<Q", 56, 0), None),  # no uncompressed size
        (SASS_AT, patched(SASS_AT, "<I", 28, 9), None),  # architecture
        (PTX_AT, patched(PTX_AT, "<Q", 32, 63 | 4 << 32), None),  # identifier outside the header
    ],
    ids=["room", "kind", "kind-4", "version", "header-size", "overrun", "csize", "usize", "arch", "identifier"],
)
def test_entry_header_findings_carry_the_entrys_offset(at, data, room):
    with pytest.raises(FatbinError) as e:
        fatbin.parse_entry_header(data, at, ROOM - at if room is None else room, 4242)
    assert e.value.offset == 4242 and e.value.code in ("E011", "E013"), e.value.message


# ---- container and wrapper headers, with each cubin reader ----------------------------------------
# Pinned where mutation testing found fatbin.py loose (docs/mutation.md); what a cubin's or a PTX
# text's payload says is codefacts.py's (test_codefacts.py). Each test below runs with each cubin
# reader (conftest.each_cubin_reader).


@pytest.mark.usefixtures("each_cubin_reader")
def test_a_container_header_is_version_1_with_a_16_byte_header():
    data = (BIN / "kern.fatbin").read_bytes()
    (fat_size,) = struct.unpack_from("<Q", data, 8)
    assert fatbin.parse_container_header(data) == fatbin.ContainerHeader(1, 16, fat_size)
    assert fatbin.parse_container_header(b"\0" * 8 + data[:16], 8) == fatbin.ContainerHeader(1, 16, fat_size)
    assert fatbin.parse_container_header(data[:16]) is not None and fatbin.parse_container_header(data[:15]) is None
    for version, header_size in ((2, 16), (1, 32), (0, 16)):
        head = data[:4] + struct.pack("<HH", version, header_size) + data[8:16]
        assert fatbin.parse_container_header(head) is None, (version, header_size)


@pytest.mark.usefixtures("each_cubin_reader")
def test_a_wrapper_record_is_version_1_or_2():
    record = fatbin.WRAPPER.pack(0x466243B1, 1, 0x1000, 0)
    assert fatbin.parse_wrapper(record, 0) == (1, 0x1000)
    assert fatbin.parse_wrapper(b"\0" * 4 + record, 4) == (1, 0x1000)
    assert fatbin.parse_wrapper(record[:-1], 0) is None
    assert fatbin.parse_wrapper(fatbin.WRAPPER.pack(0x466243B1, 3, 0x1000, 0), 0) is None


# ---- decoding into a worker's buffer (what a run with a decode pool does) ---------------------

COMPRESSED = ["lib_cmp_size.so", "lib_cmp_speed.so", "lib_cmp_speed_all.so", "lib_cmp_all.so", "kern.fatbin"]


def compressed_entries() -> list[tuple[str, fatbin.EntryHeader, bytes, int]]:
    """(file, entry header, payload as stored, offset) of every compressed entry of the fixtures."""
    out = []
    for name in COMPRESSED:
        data = (BIN / name).read_bytes()
        for c in scan_file(str(BIN / name), decode=False).containers:
            pos = c.offset + 16
            while pos < c.offset + c.size:
                h = fatbin.parse_entry_header(data, pos, c.offset + c.size - pos, pos)
                if h.compression in ("zstd", "lz4"):
                    out.append((name, h, data[pos + h.header_size : pos + h.total], pos))
                pos += h.total
    return out


@pytest.mark.usefixtures("each_cubin_reader")
def test_every_compressed_payload_decodes_into_a_buffer_as_it_decodes_alone():
    found = compressed_entries()
    assert {h.compression for _, h, _, _ in found} == {"zstd", "lz4"}
    buf = fatbin.DecodeBuffer()
    for name, h, payload, pos in found:
        alone = fatbin.decode_payload(h, payload, pos)
        assert bytes(fatbin.decode_payload_into(h, payload, pos, fatbin.DEFAULT_MAX_PAYLOAD, buf)) == alone, name
        assert len(alone) == h.uncompressed_size


@pytest.mark.usefixtures("each_cubin_reader")
def test_a_payload_past_the_bound_is_e012_in_a_buffer_too():
    buf = fatbin.DecodeBuffer()
    for _, h, payload, pos in compressed_entries():
        with pytest.raises(FatbinError) as e:
            fatbin.decode_payload_into(h, payload, pos, h.uncompressed_size - 1, buf)
        assert (e.value.code, e.value.offset) == ("E012", pos) and "verification bound" in e.value.message
        assert len(fatbin.decode_payload_into(h, payload, pos, h.uncompressed_size, buf)) == h.uncompressed_size


@pytest.mark.usefixtures("each_cubin_reader")
def test_a_corrupt_or_short_payload_is_e012_in_a_buffer_too():
    buf = fatbin.DecodeBuffer()
    for name, h, payload, pos in compressed_entries():
        cut = payload[: len(payload) // 2]
        with pytest.raises(FatbinError) as e:
            fatbin.decode_payload_into(h, cut, pos, fatbin.DEFAULT_MAX_PAYLOAD, buf)
        assert (e.value.code, e.value.offset) == ("E012", pos), (name, e.value.message)


@pytest.mark.usefixtures("each_cubin_reader")
def test_a_zstd_frame_longer_than_its_header_says_is_e012_in_a_buffer():
    """The header declares one byte less than the frame holds: the frame goes on past it."""
    for name, h, payload, pos in compressed_entries():
        if h.compression != "zstd":
            continue
        short = fatbin.EntryHeader(
            h.kind_code,
            h.header_size,
            h.payload_size,
            h.compressed_size,
            h.options_offset,
            h.version,
            h.arch,
            h.identifier_offset,
            h.identifier_length,
            h.flags,
            h.uncompressed_size - 1,
        )
        with pytest.raises(FatbinError) as e:
            fatbin.decode_payload_into(short, payload, pos, fatbin.DEFAULT_MAX_PAYLOAD, fatbin.DecodeBuffer())
        assert e.value.code == "E012", name


@pytest.mark.usefixtures("each_cubin_reader")
@pytest.mark.parametrize("name", COMPRESSED + ["lib_many.so", "lib_rdc.so"])
def test_a_decode_pool_inventories_as_the_scanning_thread_does(name):
    path = BIN / name
    data = path.read_bytes()
    alone = scan_file(str(path), decode=True)
    with DecodePool(2, max_in_flight=4096) as pool:  # a small bound: readers wait for the workers
        pooled = scan_stream(
            name,
            len(data),
            lambda: iter([data[i : i + 1000] for i in range(0, len(data), 1000)]),
            decode=True,
            pool=pool,
        )
        assert pool._in_flight == 0  # every job's bytes released: the bound holds for the next library
    assert pooled.containers == alone.containers and pooled.problems == alone.problems


@pytest.mark.usefixtures("each_cubin_reader")
def test_an_entry_identifier_absent_or_not_utf8():
    h = fatbin.EntryHeader(2, 64, 0, 0, 0, (1, 8), 80, 0, 0, 0, 0)
    assert fatbin.identifier(b"\0" * 64, h) == ""
    h = fatbin.EntryHeader(2, 64, 0, 0, 0, (1, 8), 80, 4, 6, 0, 0)
    assert fatbin.identifier(b"\0" * 4 + b" k\xffo.cu" + b"\0" * 54, h) == "k\ufffdo.c"


@pytest.mark.usefixtures("each_cubin_reader")
def test_short_data_at_an_offset_is_no_header():
    data = (BIN / "kern.fatbin").read_bytes()
    assert fatbin.parse_container_header(b"\0" * 8 + data[:15], 8) is None
    assert fatbin.parse_wrapper(b"\0" * 8 + fatbin.WRAPPER.pack(0x466243B1, 1, 0x1000, 0)[:-1], 8) is None


def zstd_ptx_entry(payload: bytes, usize: int) -> fatbin.EntryHeader:
    return fatbin.EntryHeader(1, 64, len(payload), len(payload), 0, (9, 0), 90, 0, 0, fatbin.FLAG_ZSTD, usize)


@pytest.mark.usefixtures("each_cubin_reader")
@pytest.mark.parametrize("layout", ["no content size", "two frames", "large, one frame"])
def test_zstd_payloads_the_fast_path_does_not_take_decode_alike(layout):
    """A frame that does not state its size, a payload of two frames (cubin_refused), and one large
    enough that the stream reader fills the buffer in several reads: into a buffer, as alone."""
    import zstandard

    text = (BIN / "kern_80.ptx").read_bytes()
    if layout == "no content size":
        payload = zstandard.ZstdCompressor(write_content_size=False).compress(text)
    elif layout == "two frames":
        payload = zstandard.ZstdCompressor().compress(text[:100]) + zstandard.ZstdCompressor().compress(text[100:])
    else:
        text = text * (4 << 20 // len(text) + 1)
        payload = zstandard.ZstdCompressor().compress(text)
    h = zstd_ptx_entry(payload, len(text))
    if layout == "two frames":  # cubin_refused: the entry's size is not one frame's (E012), whichever path
        for out in (None, fatbin.DecodeBuffer()):
            with pytest.raises(FatbinError) as e:
                fatbin.decode_payload_into(h, payload, 0, fatbin.DEFAULT_MAX_PAYLOAD, out)
            assert e.value.code == "E012" and "frame says 100 bytes" in e.value.message
        return
    into = fatbin.decode_payload_into(h, payload, 0, fatbin.DEFAULT_MAX_PAYLOAD, fatbin.DecodeBuffer())
    assert bytes(into) == fatbin.decode_payload(h, payload, 0) == text
    with pytest.raises(FatbinError) as e:
        fatbin.decode_payload_into(h, payload, 0, len(text) - 1, fatbin.DecodeBuffer())
    assert e.value.code == "E012"


@pytest.mark.usefixtures("each_cubin_reader")
def test_each_worker_decodes_into_its_own_buffer_and_large_payloads_into_one_shared():
    """A 1-worker pool: small jobs reuse the worker's buffer; a payload decoding to more than BIG
    (transformer-engine's 66 MB LZ4 entries) takes its turn in the one shared buffer."""
    from archaudit.model import Entry
    from archaudit.read import decode

    seen: list[fatbin.DecodeBuffer | None] = []

    def job(out: fatbin.DecodeBuffer | None) -> Entry:
        seen.append(out)
        return Entry("nvidia", "sass", "sm_80")

    with DecodePool(1) as pool:
        small = [decode.result(pool.submit(10, 100, job)) for _ in range(2)]
        big = decode.result(pool.submit(10, decode.BIG + 1, job))
        assert pool._in_flight == 0
    assert small == [Entry("nvidia", "sass", "sm_80")] * 2 and big == small[0]
    assert all(isinstance(b, fatbin.DecodeBuffer) for b in seen)
    assert seen[0] is seen[1] and seen[2] is not seen[0]
    assert pool.workers == 1
