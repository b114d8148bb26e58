"""The zip reader's fail-closed branches, each pinned in-process on a crafted archive
(docs/mutation.md).

test_hazards.py and test_zip_layouts.py prove the same branches end to end, but through
`archaudit check` in a child process, which a mutation run cannot see. Here every branch that
turns a disagreement between the places a zip records a fact into E002 or E003 is driven through
zipread itself: archives written by zipfile, then one recorded fact changed, and on the other
side the sound archive that must read cleanly (a reader that starts refusing good wheels fails
here too). Each case asserts the code and the words of its finding.
"""

from __future__ import annotations

import contextlib
import io
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, cast

import pytest

from archaudit.read import zipread
from archaudit.read.zipread import Member, MemberError, ZipError

CUDA = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
LIB = (CUDA / "lib_multi.so").read_bytes()  # 58 KiB, 8.5 KiB deflated: streamed, not held whole
SMALL = LIB[:3000]  # at most zipread.WHOLE: read and verified whole with its head
assert len(zlib.compress(LIB)) > 2 * zipread.WHOLE and len(SMALL) <= zipread.WHOLE


Data = bytes | bytearray  # an archive as written, or edited in place


def build(members: list[tuple[str, bytes]], method: int = zipfile.ZIP_DEFLATED, comment: bytes = b"") -> bytearray:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0))
            info.compress_type = method
            info.create_system = 3
            info.external_attr = 0o100644 << 16
            z.writestr(info, data)
        z.comment = comment
    return bytearray(buf.getvalue())


def eocd_at(data: Data) -> int:
    return data.rfind(b"PK\x05\x06")


def central_at(data: Data, index: int) -> int:
    """Offset of the index-th central-directory entry."""
    pos = struct.unpack_from("<L", data, eocd_at(data) + 16)[0]
    for _ in range(index):
        nlen, xlen, clen = struct.unpack_from("<3H", data, pos + 28)
        pos += 46 + nlen + xlen + clen
    return pos


def local_at(data: Data, index: int) -> int:
    return int(struct.unpack_from("<L", data, central_at(data, index) + 42)[0])


def read(data: Data, select: zipread.Select | None = None) -> tuple[list[str], list[zipread.Hazard]]:
    members, hazards = zipread.read_directory_bytes(bytes(data), select)
    return [m.name for m in members], hazards


def refused(data: Data, words: str) -> None:
    with pytest.raises(ZipError) as e:
        zipread.read_directory_bytes(bytes(data))
    assert e.value.code == "E002" and words in str(e.value), str(e.value)


def flagged(data: Data, code: str, name: str, words: str, select: zipread.Select | None = None) -> list[str]:
    names, hazards = read(data, select)
    assert any(c == code and n == name and words in msg for c, n, msg in hazards), hazards
    assert name not in names
    return names


TWO = [("demo/libgood.so", LIB), ("demo/libhide.so", LIB[::-1])]


# ---- the sound archives read as zipfile reads them ------------------------------------------------


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
@pytest.mark.parametrize("comment", [b"", b"a comment\0\0"], ids=["no comment", "comment ending in NULs"])
def test_sound_archives_list_what_zipfile_lists(method, comment):
    data = build([*TWO, ("demo/small.so", SMALL), ("demo/", b"")], method, comment)
    names, hazards = read(data, select=lambda name, head: head[:4] == b"\x7fELF")
    assert hazards == [] and names == zipfile.ZipFile(io.BytesIO(bytes(data))).namelist()
    members, _ = zipread.read_directory_bytes(bytes(data), lambda name, head: head[:4] == b"\x7fELF")
    by_name = {m.name: m for m in members}
    assert by_name["demo/small.so"].whole == SMALL and by_name["demo/libgood.so"].whole is None
    assert by_name["demo/libgood.so"].tag is True and by_name["demo/"].tag is None
    for m in members:
        assert (
            b"".join(zipread.iter_member(io.BytesIO(bytes(data)), m))
            == dict([*TWO, ("demo/small.so", SMALL), ("demo/", b"")])[m.name]
        )


def test_zip64_records_written_by_zipfile_are_read(monkeypatch):
    """Many members force zipfile to write a zip64 end record and locator before the end record."""
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 2)
    data = build([*TWO, ("demo/small.so", SMALL)])
    assert b"PK\x06\x06" in data and b"PK\x06\x07" in data
    names, hazards = read(data)
    assert hazards == [] and names == ["demo/libgood.so", "demo/libhide.so", "demo/small.so"]


def test_zip64_extra_fields_written_by_zipfile_are_read(monkeypatch):
    """A low ZIP64_LIMIT makes zipfile give each member a zip64 extra field and saturated sizes."""
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1000)
    data = build(TWO)
    members, hazards = zipread.read_directory_bytes(bytes(data))
    assert hazards == [] and [m.size for m in members] == [len(LIB), len(LIB)]
    assert b"".join(zipread.iter_member(io.BytesIO(bytes(data)), members[1])) == LIB[::-1]


def test_a_member_with_a_data_descriptor_is_read():
    """zipfile writing to a stream it cannot seek puts the CRC and sizes after the data (flag 8):
    the local header then holds zeros, which is no disagreement."""

    class Unseekable(io.BytesIO):
        def seekable(self) -> bool:
            return False

        def seek(self, *args: object) -> int:
            raise OSError("not seekable")

        def tell(self) -> int:
            raise OSError("not seekable")

    buf = Unseekable()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("demo/libgood.so", LIB)
    data = buf.getvalue()
    assert struct.unpack_from("<H", data, 6)[0] & 0x8
    names, hazards = read(data)
    assert hazards == [] and names == ["demo/libgood.so"]


def test_non_ascii_names_decode_as_zipfile_decodes_them():
    """Without the UTF-8 flag a name is cp437 (zipfile's rule); with it, UTF-8."""
    data = build([("demo/caf\u00e9.so", LIB), ("demo/plain.so", LIB)])
    at = central_at(data, 0)
    struct.pack_into("<H", data, at + 8, struct.unpack_from("<H", data, at + 8)[0] & ~0x800)
    lat = local_at(data, 0)
    struct.pack_into("<H", data, lat + 6, struct.unpack_from("<H", data, lat + 6)[0] & ~0x800)
    names, hazards = read(data)
    assert hazards == [] and names == zipfile.ZipFile(io.BytesIO(bytes(data))).namelist()
    assert names[0] == "demo/caf\u251c\u2310.so"  # the UTF-8 bytes of é read as cp437
    names, hazards = read(build([("demo/caf\u00e9.so", LIB)]))
    assert hazards == [] and names == ["demo/caf\u00e9.so"]


# ---- end records --------------------------------------------------------------------------------


def test_too_short_or_no_end_record():
    refused(b"PK\x05\x06", "end of central directory not found")
    data = build(TWO)
    refused(data[:-22] + b"\0" * 22, "end of central directory not found")
    refused(data[:-5], "end of central directory not found")  # the record cut short


def test_bytes_after_the_archive():
    data = build(TWO)
    refused(data + b"junk", "comment length does not reach the end")
    commented = build(TWO, comment=b"note")
    refused(commented[:-1], "comment length does not reach the end")


@pytest.mark.parametrize("field, at", [("disk", 4), ("directory disk", 6), ("entries on this disk", 8)])
def test_multi_disk_end_record(field, at):
    data = build(TWO)
    struct.pack_into("<H", data, eocd_at(data) + at, 1)
    refused(data, "multi-disk archives are not wheels")


@pytest.fixture
def zip64(monkeypatch: pytest.MonkeyPatch) -> Callable[[], bytearray]:
    def make() -> bytearray:
        monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 1)
        data = build(TWO)
        assert data.rfind(b"PK\x06\x06") == data.rfind(b"PK\x06\x07") - 56
        return data

    return make


@pytest.mark.parametrize(
    "at, value, words",
    [
        (4, 1, "multi-disk"),  # the locator's disk
        (16, 2, "multi-disk"),  # the locator's disk count
        (8, 0, "locator points elsewhere"),  # its record offset
    ],
)
def test_zip64_locator(zip64, at, value, words):
    data = zip64()
    loc = data.rfind(b"PK\x06\x07")
    struct.pack_into("<Q" if at == 8 else "<L", data, loc + at, value)
    refused(data, words)


def test_zip64_locator_with_no_room_for_a_record_before_it():
    """A locator right at the start of the file points at no record."""
    data = bytearray(
        struct.pack("<4sLQL", b"PK\x06\x07", 0, 0, 1) + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0, 0, 0, 0, 0)
    )
    refused(data, "locator points elsewhere")


@pytest.mark.parametrize(
    "at, fmt, value, words",
    [
        (0, "<4s", b"PK\x06\x08", "zip64 end of central directory is corrupt"),
        (4, "<Q", 45, "extensible data"),
        (16, "<L", 1, "multi-disk"),  # disk
        (20, "<L", 1, "multi-disk"),  # directory disk
        (24, "<Q", 1, "multi-disk"),  # entries on this disk
    ],
)
def test_zip64_record(zip64, at, fmt, value, words):
    data = zip64()
    rec = data.rfind(b"PK\x06\x06")
    struct.pack_into(fmt, data, rec + at, value)
    refused(data, words)


@pytest.mark.parametrize(
    "eocd_at_, fmt, words",
    [
        (10, "<H", "disagree on the member count"),
        (8, "<H", "disagree on the member count"),
        (12, "<L", "disagree on the directory size"),
        (16, "<L", "disagree on the directory offset"),
    ],
)
def test_end_record_and_zip64_record_disagree(zip64, eocd_at_, fmt, words):
    """The end record's own values, when not saturated, must be the zip64 record's."""
    data = zip64()
    end = eocd_at(data)
    struct.pack_into(fmt, data, end + eocd_at_, struct.unpack_from(fmt, data, end + eocd_at_)[0] + 1)
    refused(data, words)


@pytest.mark.parametrize(
    "eocd_at_, fmt, full", [(10, "<H", 0xFFFF), (8, "<H", 0xFFFF), (12, "<L", 0xFFFFFFFF), (16, "<L", 0xFFFFFFFF)]
)
def test_saturated_end_record_values_defer_to_the_zip64_record(zip64, eocd_at_, fmt, full):
    data = zip64()
    struct.pack_into(fmt, data, eocd_at(data) + eocd_at_, full)
    names, hazards = read(data)
    assert hazards == [] and names == ["demo/libgood.so", "demo/libhide.so"]


def test_directory_not_ending_where_the_end_record_begins():
    data = build(TWO)
    end = eocd_at(data)
    struct.pack_into("<L", data, end + 12, struct.unpack_from("<L", data, end + 12)[0] - 1)
    refused(data, "does not end where the end record begins")
    data = build(TWO)
    struct.pack_into("<L", data, end + 16, struct.unpack_from("<L", data, end + 16)[0] + 1)
    refused(data, "does not end where the end record begins")


def test_zip64_directory_not_ending_where_the_zip64_record_begins(zip64):
    data = zip64()
    rec = data.rfind(b"PK\x06\x06")
    struct.pack_into("<Q", data, rec + 40, struct.unpack_from("<Q", data, rec + 40)[0] - 1)
    struct.pack_into("<L", data, eocd_at(data) + 12, 0xFFFFFFFF)
    refused(data, "does not end where the end record begins")


# ---- the central directory ----------------------------------------------------------------------


def test_count_larger_than_the_directory_can_hold():
    data = build(TWO)
    for at in (8, 10):
        struct.pack_into("<H", data, eocd_at(data) + at, 40)
    refused(data, "central directory claims 40 members")


def test_count_lowered_hides_no_member():
    data = build([*TWO, ("demo/small.so", SMALL)])
    for at in (8, 10):
        struct.pack_into("<H", data, eocd_at(data) + at, 2)
    refused(data, "holds more than the 2 members its end record counts")


def test_corrupt_directory_entry():
    data = build(TWO)
    data[central_at(data, 1) : central_at(data, 1) + 4] = b"PK\x01\x03"
    refused(data, "central directory entry 1 is corrupt")


def test_directory_entry_overrunning_the_directory():
    data = build(TWO)
    struct.pack_into("<H", data, central_at(data, 1) + 32, 200)  # a comment longer than what is left
    refused(data, "central directory entry overruns the directory")


def test_name_flagged_utf8_that_is_not():
    data = build([("demo/libx\u00e9.so", LIB), ("demo/libgood.so", LIB)])
    at = central_at(data, 0)
    data[at + 46 + len("demo/libx")] = 0xFF  # the first byte of é's UTF-8: now invalid UTF-8
    names, hazards = read(data)
    assert [(c, msg) for c, _, msg in hazards] == [
        ("E002", "name is flagged UTF-8 but is not (zipfile cannot read it)")
    ]
    assert names == ["demo/libgood.so"]


@pytest.mark.parametrize(
    "name, words",
    [
        ("/abs/libk.so", "absolute member path"),
        ("\\abs\\libk.so", "absolute member path"),
        ("C:/x/libk.so", "absolute member path"),
        ("../evil/libk.so", "escapes the archive"),
        ("demo/../../libk.so", "escapes the archive"),
        ("demo\\..\\libk.so", "escapes the archive"),
    ],
)
def test_unsafe_member_names(name, words):
    flagged(build([(name, LIB), ("demo/libgood.so", LIB)]), "E003", name, words)


def test_nul_byte_in_a_member_name():
    """zipfile cuts a name at its NUL when writing; the bytes are changed after."""
    data = build([("demo/libXk.so", LIB), ("demo/libgood.so", LIB)])
    for at in (central_at(data, 0) + 46, local_at(data, 0) + 30):
        data[at + len("demo/lib")] = 0
    flagged(data, "E003", "demo/lib\x00k.so", "NUL byte in member name")


@pytest.mark.parametrize("name", ["demo/..lib.so", "demo/lib..so", "demo/a:b.so", "demo/x/.../lib.so"])
def test_names_that_only_look_unsafe(name):
    names, hazards = read(build([(name, LIB)]))
    assert hazards == [] and names == [name]


def test_symlink_member_only_when_made_on_unix():
    data = build([("demo/link.so", b"libgood.so"), ("demo/libgood.so", LIB)])
    at = central_at(data, 0)
    struct.pack_into("<L", data, at + 38, 0o120777 << 16)
    flagged(data, "E003", "demo/link.so", "member is a symbolic link")
    struct.pack_into("<H", data, at + 4, 0x0014)  # made by MS-DOS: the attributes carry no unix mode
    names, hazards = read(data)
    assert hazards == [] and names == ["demo/link.so", "demo/libgood.so"]


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_duplicate_member_names():
    data = build([("demo/libk.so", LIB), ("demo/libk.so", LIB[::-1])])
    names, hazards = read(data)
    assert names == ["demo/libk.so"] and hazards == [("E003", "demo/libk.so", "member listed twice")]


def test_member_data_outside_the_archive():
    data = build(TWO)
    at = central_at(data, 1)
    struct.pack_into("<L", data, at + 42, central_at(data, 0) - 29)  # its header would run into the directory
    flagged(data, "E003", "demo/libhide.so", "member data lies outside the archive")
    data = build(TWO)
    struct.pack_into("<L", data, central_at(data, 1) + 20, len(data) + 1)
    flagged(data, "E003", "demo/libhide.so", "member data lies outside the archive")


def test_the_last_byte_before_the_directory_is_inside_the_archive():
    """A member header ending exactly where the directory begins is inside (an empty member)."""
    data = build([("demo/libgood.so", LIB), ("e", b"")], zipfile.ZIP_STORED)
    assert local_at(data, 1) + 30 + 1 == central_at(data, 0)
    names, hazards = read(data)
    assert hazards == [] and names == ["demo/libgood.so", "e"]


def raw_member(name: str, stream: bytes, crc: int, size: int, method: int = 8) -> bytes:
    """One member as given, its sizes past 4 GiB in a zip64 extra field."""
    raw = name.encode()
    extra = struct.pack("<HHQ", 1, 8, size) if size >= 0xFFFFFFFF else b""
    small = min(size, 0xFFFFFFFF)
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(stream), small, len(raw), 0)
    central = (
        struct.pack(
            "<4s6H3L5H2L",
            b"PK\x01\x02",
            0x031E,
            20,
            0,
            method,
            0,
            0x21,
            crc,
            len(stream),
            small,
            len(raw),
            len(extra),
            0,
            0,
            0,
            0o100644 << 16,
            0,
        )
        + raw
        + extra
    )
    return (
        local
        + raw
        + stream
        + central
        + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central), len(local) + len(raw) + len(stream), 0)
    )


@pytest.mark.parametrize(
    "stream_len, size, words",
    [
        (2000, zipread.MAX_MEMBER + 1, f"declares {zipread.MAX_MEMBER + 1} bytes uncompressed (zip bomb?)"),
        (2000, zipread.MAX_RATIO * 2000 + 1, "declares a 1000:1 compression ratio (zip bomb?)"),
        (1, (1 << 20) + 1, "declares a 1048577:1 compression ratio (zip bomb?)"),
        (0, (1 << 20) + 1, "declares a 1048577:1 compression ratio (zip bomb?)"),
    ],
)
def test_declared_sizes_that_are_zip_bombs(stream_len, size, words):
    """Judged from the directory alone: nothing is inflated."""
    flagged(raw_member("demo/big.so", bytes(stream_len), 0, size), "E003", "demo/big.so", words)


@pytest.mark.parametrize(
    "stream_len, size",
    [
        (2000, zipread.MAX_RATIO * 2000),  # MAX_RATIO:1 exactly
        (1, 1 << 20),  # 1 MiB at any ratio
        (8, zipread.MAX_MEMBER),  # the largest member, at its bound (2 GiB:1, over 1 MiB)
    ],
)
def test_declared_sizes_at_the_bounds_are_not_bombs(stream_len, size):
    _, hazards = read(raw_member("demo/big.so", bytes(stream_len), 0, size))
    assert not [h for h in hazards if "zip bomb" in h[2]] or size == zipread.MAX_MEMBER, hazards
    if size == zipread.MAX_MEMBER:
        assert [w for _, _, w in hazards] == [f"declares a {size // stream_len}:1 compression ratio (zip bomb?)"]


# ---- extra fields -------------------------------------------------------------------------------


def with_extra(extra: bytes, index: int = 1, data: bytearray | None = None) -> bytearray:
    data = build(TWO) if data is None else data
    at = central_at(data, index)
    nlen, xlen = struct.unpack_from("<2H", data, at + 28)
    struct.pack_into("<H", data, at + 30, xlen + len(extra))
    data[at + 46 + nlen + xlen : at + 46 + nlen + xlen] = extra
    end = eocd_at(data)
    struct.pack_into("<L", data, end + 12, struct.unpack_from("<L", data, end + 12)[0] + len(extra))
    return data


@pytest.mark.parametrize(
    "extra, words",
    [
        (struct.pack("<HH", 0xCAFE, 40) + b"short", "extra field 0xcafe overruns its entry"),
        (struct.pack("<HHQ", 1, 8, 0) * 2, "two zip64 extra fields"),
        (b"\x01\x00", "extra fields overrun their entry"),
        (struct.pack("<HHQ", 0xCAFE, 8, 0) + b"\x01", "extra fields overrun their entry"),
    ],
)
def test_malformed_extra_fields(extra, words):
    flagged(with_extra(extra), "E002", "demo/libhide.so", words)


def test_unknown_extra_fields_are_skipped():
    names, hazards = read(with_extra(struct.pack("<HHL", 0xCAFE, 4, 7) + struct.pack("<HH", 0xBEEF, 0)))
    assert hazards == [] and names == ["demo/libgood.so", "demo/libhide.so"]


def saturate(data: bytearray, index: int, fields: tuple[int, ...]) -> None:
    at = central_at(data, index)
    for off in fields:
        struct.pack_into("<L", data, at + off, 0xFFFFFFFF)


def test_zip64_extra_field_gives_the_saturated_values_in_order():
    """usize, then csize, then the header offset, each only when its header field is saturated."""
    data = build(TWO)
    at = central_at(data, 1)
    usize, offset = struct.unpack_from("<L", data, at + 24)[0], struct.unpack_from("<L", data, at + 42)[0]
    saturate(data, 1, (24, 42))
    data = with_extra(struct.pack("<HHQQ", 1, 16, usize, offset), data=data)
    members, hazards = zipread.read_directory_bytes(bytes(data))
    assert hazards == [] and (members[1].size, members[1].header_offset) == (usize, offset)
    assert b"".join(zipread.iter_member(io.BytesIO(bytes(data)), members[1])) == LIB[::-1]


@pytest.mark.parametrize("fields", [(24,), (20,), (42,), (20, 24)])
def test_zip64_extra_field_too_short_for_what_is_saturated(fields):
    data = build(TWO)
    saturate(data, 1, fields)
    flagged(
        with_extra(struct.pack("<HH", 1, 0), data=data), "E002", "demo/libhide.so", "zip64 extra field is too short"
    )


@pytest.mark.parametrize("fields", [(24,), (20,), (42,)])
def test_saturated_sizes_without_a_zip64_extra_field(fields):
    """Saturated header values and extra fields, none of them zip64: E002."""
    data = build(TWO)
    saturate(data, 1, fields)
    data = with_extra(struct.pack("<HHL", 0xCAFE, 4, 7), data=data)
    flagged(data, "E002", "demo/libhide.so", "zip64 sizes announced but no zip64 extra field")


def unicode_path(raw_name: bytes, alt: str, version: int = 1, crc: int | None = None) -> bytes:
    body = bytes([version]) + struct.pack("<L", zlib.crc32(raw_name) if crc is None else crc) + alt.encode()
    return struct.pack("<HH", 0x7075, len(body)) + body


def test_unicode_path_naming_the_member_otherwise():
    data = with_extra(unicode_path(b"demo/libhide.so", "demo/other.so"))
    flagged(data, "E002", "demo/libhide.so", "its Unicode Path extra field names it 'demo/other.so'")


@pytest.mark.parametrize(
    "extra",
    [
        unicode_path(b"demo/libhide.so", "demo/libhide.so"),  # the same name
        unicode_path(b"demo/libhide.so", ""),  # no name
        unicode_path(b"demo/libhide.so", "demo/other.so", version=2),  # a version zipfile ignores
        unicode_path(b"demo/libhide.so", "demo/other.so", crc=1),  # for another name: zipfile ignores it
        struct.pack("<HH", 0x7075, 4) + b"\x01abc",  # too short to hold a CRC
    ],
)
def test_unicode_path_fields_zipfile_does_not_apply(extra):
    names, hazards = read(with_extra(extra))
    assert hazards == [] and names == ["demo/libgood.so", "demo/libhide.so"]


# ---- local headers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "at, fmt, value, words",
    [
        (0, "<4s", b"PK\x03\x05", "local header missing"),
        (30, "<4s", b"demX", "local header names it"),
        (8, "<H", 0, "disagree on its compression or encryption"),
        (6, "<H", 1, "disagree on its compression or encryption"),
        (14, "<L", 0x12345678, "disagree on its CRC or sizes"),
        (18, "<L", 1, "disagree on its CRC or sizes"),
        (22, "<L", 1, "disagree on its CRC or sizes"),
    ],
)
def test_local_header_disagreeing_with_the_directory(at, fmt, value, words):
    data = build(TWO)
    struct.pack_into(fmt, data, local_at(data, 1) + at, value)
    for select in (None, lambda name, head: True):
        names = flagged(data, "E002", "demo/libhide.so", words, select)
        assert names == ["demo/libgood.so"]


def test_local_header_name_of_another_length():
    """A local name longer than the directory's is read in full, and differs."""
    data = build(TWO)
    at = local_at(data, 1)
    struct.pack_into("<H", data, at + 26, len("demo/libhide.so") + 1)
    for select in (None, lambda name, head: True):
        flagged(data, "E002", "demo/libhide.so", "local header names it 'demo/libhide.so", select)


def test_local_header_with_saturated_sizes_defers_to_the_directory(monkeypatch):
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1000)
    data = build(TWO)
    at = zipread.read_directory_bytes(bytes(data))[0][1].header_offset
    assert struct.unpack_from("<2L", data, at + 18) == (0xFFFFFFFF, 0xFFFFFFFF)
    names, hazards = read(data, lambda name, head: True)
    assert hazards == [] and names == ["demo/libgood.so", "demo/libhide.so"]


def test_a_data_descriptor_does_not_excuse_a_name_or_method():
    data = build(TWO)
    at = local_at(data, 1)
    struct.pack_into("<H", data, at + 6, 0x8)
    struct.pack_into("<L", data, at + 14, 0)
    names, hazards = read(data)
    assert hazards == [] and names == ["demo/libgood.so", "demo/libhide.so"]
    struct.pack_into("<H", data, at + 8, 0)
    flagged(data, "E002", "demo/libhide.so", "disagree on its compression")


def test_overlapping_members_are_both_refused():
    """b's compressed size, in its directory entry and local header, reaches into c's header."""
    data = build([("demo/a.so", LIB), ("demo/b.so", LIB), ("demo/c.so", SMALL)])
    names, hazards = read(data)
    assert hazards == []
    for at in (central_at(data, 1) + 20, local_at(data, 1) + 18):
        struct.pack_into("<L", data, at, struct.unpack_from("<L", data, at)[0] + 10)
    names, hazards = read(data)
    assert names == ["demo/a.so"], hazards
    got = sorted((c, n) for c, n, _ in hazards)
    assert ("E003", "demo/b.so") in got and ("E003", "demo/c.so") in got


def test_member_data_running_into_the_directory():
    data = build(TWO, zipfile.ZIP_STORED)
    at = central_at(data, 1)
    for off in (20, 24):  # stored: both sizes one more than the data
        struct.pack_into("<L", data, at + off, len(LIB) + 1)
    lat = local_at(data, 1)
    for off in (18, 22):
        struct.pack_into("<L", data, lat + off, len(LIB) + 1)
    names, hazards = read(data)
    assert names == ["demo/libgood.so"]
    assert hazards == [("E003", "demo/libhide.so", "member data overlaps 'the central directory' (zip bomb?)")]


def test_a_header_inside_the_data_before_it_is_not_inflated():
    data = build([("demo/a.so", LIB), ("demo/b.so", SMALL)], zipfile.ZIP_STORED)
    at = central_at(data, 1)
    inner = local_at(data, 0) + 100
    data[inner : inner + 30 + 9] = data[local_at(data, 1) : local_at(data, 1) + 39]
    struct.pack_into("<L", data, at + 42, inner)
    heads: list[str] = []
    members, hazards = zipread.read_directory_bytes(bytes(data), lambda name, head: heads.append(name))
    assert heads == ["demo/a.so"] and members == []
    assert sorted((c, n) for c, n, _ in hazards) == [("E003", "demo/a.so"), ("E003", "demo/b.so")]


# ---- member data --------------------------------------------------------------------------------


def first_member(data: Data, select: zipread.Select | None = None) -> Member:
    members, hazards = zipread.read_directory_bytes(bytes(data), select)
    assert hazards == []
    return members[0]


def streamed(data: Data, m: Member) -> bytes:
    return b"".join(zipread.iter_member(io.BytesIO(bytes(data)), m))


def in_place(data: Data, m: Member, n: int = zipread.HEAD, whole: bool = True) -> tuple[bytes, bytes | None]:
    view = bytes(data)
    return zipread.member_head(lambda at, k: view[at : at + k], m, n, whole=whole)


@contextlib.contextmanager
def member_error(code: str, words: str) -> Iterator[None]:
    with pytest.raises(MemberError) as e:
        yield
    assert e.value.code == code and words in str(e.value), str(e.value)


def both_readers_refuse(data: Data, m: Member, code: str, words: str, held_whole: bool = True) -> None:
    """The streaming reader refuses the member, and so does the in-place one where the member is
    held whole (``held_whole``)."""
    with member_error(code, words):
        streamed(data, m)
    if held_whole:
        with member_error(code, words):
            in_place(data, m)


def corrupt_crc(data: bytearray) -> None:
    for at in (central_at(data, 0) + 16, local_at(data, 0) + 14):
        struct.pack_into("<L", data, at, struct.unpack_from("<L", data, at)[0] ^ 1)


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_crc_mismatch(method):
    for payload in (SMALL, LIB):
        data = build([("demo/libk.so", payload)], method)
        corrupt_crc(data)
        m = first_member(data)
        both_readers_refuse(data, m, "E002", "CRC mismatch", held_whole=payload is SMALL)
        if payload is SMALL:
            _, hazards = read(data, lambda name, head: True)  # read whole with its head, when selected
            assert [(c, w) for c, _, w in hazards] == [("E002", "CRC mismatch (corrupt or changed while read)")]
        else:
            assert in_place(data, m) == (payload[: zipread.HEAD], None)  # a head alone is not verified


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_member_declaring_more_bytes_than_it_holds(method):
    for payload in (SMALL, LIB):
        data = build([("demo/libk.so", payload)], method)
        for at in (central_at(data, 0) + 24, local_at(data, 0) + 22):
            struct.pack_into("<L", data, at, len(payload) + 1)
        if method == zipfile.ZIP_STORED:
            for at in (central_at(data, 0) + 20, local_at(data, 0) + 18):
                struct.pack_into("<L", data, at, len(payload) + 1)
        members, _ = zipread.read_directory_bytes(bytes(data))
        if not members:  # stored and one byte longer: it runs into the directory (E003 there)
            continue
        m = members[0]
        with member_error("E002", "inflates to"):
            streamed(data, m)
        if payload is SMALL:
            with member_error("E002", ""):
                in_place(data, m)


@pytest.mark.parametrize("payload", [SMALL, LIB], ids=["whole", "streamed"])
def test_member_inflating_past_its_declared_size(payload):
    data = build([("demo/libk.so", payload)])
    for at in (central_at(data, 0) + 24, local_at(data, 0) + 22):
        struct.pack_into("<L", data, at, len(payload) - 1)
    m = first_member(data)
    with member_error("E003", f"inflates past its declared {len(payload) - 1} bytes"):
        streamed(data, m)
    if payload is SMALL:
        with member_error("E003", "inflates past its declared"):
            in_place(data, m)


def test_stored_member_whose_sizes_disagree():
    data = build([("demo/libk.so", SMALL)], zipfile.ZIP_STORED)
    for at in (central_at(data, 0) + 24, local_at(data, 0) + 22):
        struct.pack_into("<L", data, at, len(SMALL) - 1)
    m = first_member(data)
    both_readers_refuse(data, m, "E002", "stored member's sizes disagree")
    with member_error("E002", "stored member's sizes disagree"):
        in_place(data, m, whole=False)


def test_truncated_member_data():
    for payload, method in ((SMALL, zipfile.ZIP_STORED), (LIB, zipfile.ZIP_DEFLATED), (SMALL, zipfile.ZIP_DEFLATED)):
        data = build([("demo/libk.so", payload)], method)
        m = first_member(data)
        cut = bytes(data[: m.data_offset + m.compressed_size // 2])
        with member_error("E002", "truncated"):
            streamed(cut, m)
        # held whole, a stored member cut short is read short: its size check says so
        if payload is SMALL:  # a large member's head alone is read, which the cut does not reach
            with member_error("E002", "inflates to" if method == zipfile.ZIP_STORED else "truncated"):
                in_place(cut, m)


def test_deflate_stream_ending_early_or_followed_by_data():
    """A deflate stream that ends before the compressed size says, or that has bytes after it."""
    for payload in (SMALL, LIB):
        stream = zlib.compress(payload)[2:-4]
        crc = zlib.crc32(payload)
        padded = raw_member("demo/libk.so", stream + b"\0\0\0\0", crc, len(payload))
        m = first_member(padded)
        both_readers_refuse(padded, m, "E002", "member has data after its deflate stream", held_whole=payload is SMALL)
        cut = zlib.compressobj(9, zlib.DEFLATED, -15)
        partial = cut.compress(payload) + cut.flush(zlib.Z_SYNC_FLUSH)  # no final block
        short = raw_member("demo/libk.so", partial, crc, len(payload))
        m = first_member(short)
        both_readers_refuse(short, m, "E002", "deflate stream is truncated", held_whole=payload is SMALL)


def test_corrupt_deflate_data():
    bad = raw_member("demo/libk.so", b"\xff" * 64, 0, 3000)
    m = first_member(bad)
    both_readers_refuse(bad, m, "E002", "corrupt deflate data")


def test_deflate_data_yielding_no_head_within_its_bound():
    """Empty stored deflate blocks yield nothing: a head that needs more than HEAD_INPUT
    compressed bytes is refused, not read to the end."""
    empty_block = b"\x00\x00\x00\xff\xff"
    stream = empty_block * (2 * zipread.HEAD_INPUT // len(empty_block)) + zlib.compress(SMALL)[2:-4]
    data = raw_member("demo/libk.so", stream, zlib.crc32(SMALL), 5000)
    m = first_member(data)
    with member_error("E002", f"first {zipread.HEAD_INPUT} compressed bytes"):
        in_place(data, m, whole=False)


def test_encrypted_and_unknown_methods():
    data = build([("demo/libk.so", SMALL)])
    for at in (central_at(data, 0) + 8, local_at(data, 0) + 6):
        struct.pack_into("<H", data, at, struct.unpack_from("<H", data, at)[0] | 1)
    m = first_member(data)
    both_readers_refuse(data, m, "E002", "member is encrypted")
    _, hazards = read(data, lambda name, head: True)
    assert [(c, w) for c, _, w in hazards] == [("E002", "member is encrypted")]
    data = build([("demo/libk.so", SMALL)], zipfile.ZIP_BZIP2)
    m = first_member(data)
    both_readers_refuse(data, m, "E002", "unsupported compression method 12")


def test_streaming_a_member_whose_offset_is_unknown_reads_its_local_header():
    data = build(TWO)
    m = first_member(data)
    unknown = Member(m.name, m.method, m.flags, m.crc, m.compressed_size, m.size, m.header_offset, m.mode)
    assert unknown.data_offset == -1 and streamed(data, unknown) == LIB
    broken = bytearray(data)
    broken[m.header_offset : m.header_offset + 4] = b"PK\x00\x00"
    with member_error("E002", "local header missing"):
        streamed(broken, unknown)


def test_small_chunks_stream_the_same_bytes():
    """Output bounded per inflate step: chunk by chunk, the same bytes and the same CRC check."""
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        data = build([("demo/libk.so", LIB)], method)
        m = first_member(data)
        chunks = list(zipread.iter_member(io.BytesIO(bytes(data)), m, chunk=4096))
        assert b"".join(chunks) == LIB and max(map(len, chunks)) <= 4096 and len(chunks) > 2
        corrupt_crc(data)
        m = first_member(data)
        with member_error("E002", "CRC mismatch"):
            list(zipread.iter_member(io.BytesIO(bytes(data)), m, chunk=4096))


def test_a_head_is_the_first_bytes_of_the_member():
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        data = build([("demo/libk.so", LIB), ("demo/small.so", SMALL)], method)
        members, _ = zipread.read_directory_bytes(bytes(data))
        assert in_place(data, members[0], 100) == (LIB[:100], None)
        assert in_place(data, members[0], 100, whole=False) == (LIB[:100], None)
        assert in_place(data, members[1], 100) == (SMALL[:100], SMALL)
        assert in_place(data, members[1], 100, whole=False) == (SMALL[:100], None)


def test_a_member_one_byte_past_a_chunk_streams_whole():
    """ISA-L takes all of a call's input and holds the output past the chunk: a member of
    CHUNK + 1 bytes in one read ends with one byte still in the inflater, not a truncated stream."""
    payload = (LIB * (zipread.CHUNK // len(LIB) + 1))[: zipread.CHUNK + 1]
    data = build([("demo/libk.so", payload)])
    m = first_member(data)
    assert m.compressed_size < zipread.CHUNK
    assert streamed(data, m) == payload


# ---- archives on disk, and stored zips read in place --------------------------------------------


def test_an_archive_on_disk_reads_as_in_memory(tmp_path):
    data = bytes(build([*TWO, ("demo/small.so", SMALL)]))
    (tmp_path / "w.whl").write_bytes(data)
    on_disk = zipread.read_directory(str(tmp_path / "w.whl"), lambda name, head: head[:4])
    assert on_disk == zipread.read_directory_bytes(data, lambda name, head: head[:4])
    assert [m.tag for m in on_disk[0]] == [LIB[:4], LIB[::-1][:4], SMALL[:4]]
    with pytest.raises(ZipError) as e:
        zipread.read_directory(str(tmp_path / "missing.whl"))
    assert e.value.code == "E002" and str(e.value).startswith("cannot read: ")
    (tmp_path / "cut.whl").write_bytes(data[:-30])
    with pytest.raises(ZipError):
        zipread.read_directory(str(tmp_path / "cut.whl"))


def test_a_stored_zip_inside_an_archive_is_read_through_a_window(tmp_path):
    """A window on bytes [base, base + size) of a file reads as a file of its own: the inner
    zip's members, heads and data are those of the inner zip, and nothing past its end is read."""
    inner = bytes(build([*TWO, ("demo/small.so", SMALL)]))
    outer = tmp_path / "o.whl"
    outer.write_bytes(b"x" * 100 + inner + b"y" * 50)
    w = zipread.Window(open(outer, "rb"), 100, len(inner))
    with w:
        assert w.readable() and w.seekable() and w.tell() == 0
        assert w.pread(0, 4) == b"PK\x03\x04" and w.pread(len(inner) - 2, 10) == inner[-2:]
        assert w.pread(len(inner), 1) == b"" and w.pread(-1, 4) == b"" and w.pread(5, 0) == b""
        members, hazards = zipread.read_directory_at(w.pread, len(inner), lambda name, head: head[:4])
        assert (members, hazards) == zipread.read_directory_bytes(inner, lambda name, head: head[:4])
        assert w.seek(10) == 10 and w.read(4) == inner[10:14] and w.tell() == 14
        assert w.seek(2, 1) == 16 and w.read(2) == inner[16:18]
        assert w.seek(-3, 2) == len(inner) - 3 and w.read() == inner[-3:] and w.read(5) == b""
        for m in members:
            # a Window is an io.RawIOBase, which typing.IO does not name
            want = dict([*TWO, ("demo/small.so", SMALL)])[m.name]
            assert b"".join(zipread.iter_member(cast(IO[bytes], w), m)) == want
    assert w.closed


# ---- heads read in steps ------------------------------------------------------------------------

NOISE = __import__("random").Random(19).randbytes(4000)  # incompressible: its stream needs several reads
BIG_NOISE = __import__("random").Random(20).randbytes(100_000)  # deflates to more than HEAD_INPUT


def test_incompressible_members_are_read_whole_and_by_head_in_several_steps():
    data = build([("demo/noise.so", NOISE), ("demo/big.so", BIG_NOISE), ("demo/libk.so", LIB)])
    members, hazards = zipread.read_directory_bytes(bytes(data), lambda name, head: head[:8])
    assert hazards == []
    noise, big, _ = members
    assert noise.compressed_size > 2 * 1024 and big.compressed_size > zipread.HEAD_INPUT
    assert noise.whole == NOISE and noise.tag == NOISE[:8]  # held whole: several reads, verified
    assert big.whole is None and big.tag == BIG_NOISE[:8]  # a head needs only its first bytes
    assert in_place(data, noise) == (NOISE[: zipread.HEAD], NOISE)
    assert in_place(data, big, 3000, whole=False) == (BIG_NOISE[:3000], None)


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_member_of_exactly_whole_bytes_is_held_whole(method):
    payload = (LIB * 2)[: zipread.WHOLE]
    data = build([("demo/libk.so", payload), ("demo/libl.so", payload + b"x")], method)
    members, hazards = zipread.read_directory_bytes(bytes(data), lambda name, head: True)
    assert hazards == [] and [m.whole for m in members] == [payload, None]


def test_a_whole_member_whose_stream_ends_after_its_last_byte():
    """All the bytes come in the first read, the end of the deflate stream in a later one (empty
    blocks between): still the whole member, not a truncated stream."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = c.compress(SMALL) + c.flush(zlib.Z_SYNC_FLUSH)
    assert len(stream) < 1024
    stream += b"\x00\x00\x00\xff\xff" * 400 + c.flush()
    data = raw_member("demo/libk.so", stream, zlib.crc32(SMALL), len(SMALL))
    m = first_member(data)
    assert in_place(data, m) == (SMALL[: zipread.HEAD], SMALL) and streamed(data, m) == SMALL


def test_the_head_bound_counts_compressed_bytes_read_so_far():
    """Empty blocks filling exactly the first four reads (1, 4, 16 and 64 KiB: past HEAD_INPUT)
    before any content: refused, though the content follows right after."""
    empty_block = b"\x00\x00\x00\xff\xff"
    reads = 1024 + 4096 + 16384 + 65536
    stream = empty_block * (reads // len(empty_block)) + zlib.compress(NOISE)[2:-4]
    assert reads % len(empty_block) == 0
    data = raw_member("demo/libk.so", stream, zlib.crc32(NOISE), len(NOISE))
    m = first_member(data)
    with member_error("E002", f"no 64 bytes of content in its first {zipread.HEAD_INPUT} compressed bytes"):
        in_place(data, m, 64, whole=False)
    assert streamed(data, m) == NOISE


def test_streaming_from_the_local_header_skips_its_extra_field(monkeypatch):
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1000)
    data = build(TWO)
    m = first_member(data)
    assert struct.unpack_from("<H", data, m.header_offset + 28)[0] > 0  # the local zip64 field
    unknown = Member(m.name, m.method, m.flags, m.crc, m.compressed_size, m.size, m.header_offset, m.mode)
    assert streamed(data, unknown) == LIB


# ---- what one bad member leaves of the others ---------------------------------------------------

AFTER = ("demo/after.so", SMALL)


@pytest.mark.parametrize(
    "at, fmt, value, words",
    [
        (30, "<4s", b"demX", "local header names it"),
        (8, "<H", 0, "disagree on its compression or encryption"),
        (14, "<L", 0x12345678, "disagree on its CRC or sizes"),
        (0, "<4s", b"PK\x03\x05", "local header missing"),
    ],
)
def test_a_bad_local_header_leaves_the_members_after_it(at, fmt, value, words):
    data = build([*TWO, AFTER])
    struct.pack_into(fmt, data, local_at(data, 1) + at, value)
    for select in (None, lambda name, head: True):
        assert flagged(data, "E002", "demo/libhide.so", words, select) == ["demo/libgood.so", "demo/after.so"]


def test_an_unreadable_head_leaves_the_members_after_it():
    data = build([*TWO, AFTER])
    for at in (central_at(data, 1) + 8, local_at(data, 1) + 6):
        struct.pack_into("<H", data, at, struct.unpack_from("<H", data, at)[0] | 1)  # encrypted
    names = flagged(data, "E002", "demo/libhide.so", "member is encrypted", lambda name, head: True)
    assert names == ["demo/libgood.so", "demo/after.so"]


def test_a_bad_extra_field_leaves_the_members_after_it():
    data = with_extra(b"\x01\x00", data=build([*TWO, AFTER]))
    assert flagged(data, "E002", "demo/libhide.so", "extra fields overrun") == ["demo/libgood.so", "demo/after.so"]


@pytest.mark.parametrize("reverse", [False, True], ids=["directory in file order", "directory reversed"])
def test_heads_are_read_in_file_order_whatever_the_directory_order(reverse):
    """b's header copied into a's data: in file order it lies inside the data before it, so its
    head is never read, in whichever order the directory lists them."""
    data = build([("demo/a.so", LIB), ("demo/b.so", SMALL)], zipfile.ZIP_STORED)
    inner = local_at(data, 0) + 100
    data[inner : inner + 39] = data[local_at(data, 1) : local_at(data, 1) + 39]
    struct.pack_into("<L", data, central_at(data, 1) + 42, inner)
    if reverse:
        start, end = central_at(data, 0), eocd_at(data)
        first, second = data[start : central_at(data, 1)], data[central_at(data, 1) : end]
        data[start:end] = second + first
    heads: list[str] = []
    members, hazards = zipread.read_directory_bytes(bytes(data), lambda name, head: heads.append(name))
    assert heads == ["demo/a.so"] and members == []


# ---- heads --------------------------------------------------------------------------------------

PE = (Path(__file__).resolve().parents[1] / "fixtures" / "pe" / "bin" / "sm80.dll").read_bytes()


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
@pytest.mark.parametrize("pad", [0, 3000], ids=["data within the prefetch", "data past the prefetch"])
def test_heads_are_64_bytes_and_512_for_a_pe_image(method, pad):
    """An ELF is known from its first 64 bytes; an MS-DOS stub points further, so a PE member
    gets HEAD bytes. A local extra field longer than the prefetch puts the data past what was
    read with the header: read on its own."""
    data = build([("demo/libk.so", LIB), ("demo/k.dll", PE), ("demo/small.so", SMALL)], method)
    if pad:
        written = [("demo/libk.so", LIB), ("demo/k.dll", PE), ("demo/small.so", SMALL)]
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as z:
            for name, payload in written:
                info = zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0))
                info.compress_type = method
                info.extra = struct.pack("<HH", 0xCAFE, pad) + bytes(pad)
                z.writestr(info, payload)
        data = bytearray(buf.getvalue())
        for i in range(3):  # the extra field is in the local header only
            at = central_at(data, i)
            nlen, xlen, clen = struct.unpack_from("<3H", data, at + 28)
            assert xlen == pad + 4
    heads: dict[str, bytes] = {}
    members, hazards = zipread.read_directory_bytes(bytes(data), lambda name, head: heads.setdefault(name, head))
    assert hazards == [], hazards
    assert heads == {"demo/libk.so": LIB[:64], "demo/k.dll": PE[: zipread.HEAD], "demo/small.so": SMALL[:64]}
    assert [m.whole for m in members] == [None, None, SMALL]


def test_only_tagged_members_are_held_whole():
    data = build([("demo/a.so", SMALL), ("demo/b.txt", SMALL)])
    members, hazards = zipread.read_directory_bytes(bytes(data), lambda name, head: name.endswith(".so"))
    assert hazards == [] and [(m.tag, m.whole) for m in members] == [(True, SMALL), (False, None)]


def test_local_name_flagged_utf8_that_is_not():
    """The directory names it validly; its local header's bytes are not UTF-8: E002, not a crash."""
    data = build([("demo/lib\u00e9.so", LIB), AFTER])
    at = local_at(data, 0) + 30 + len("demo/lib")
    data[at] = 0xFF
    flagged(data, "E002", "demo/lib\u00e9.so", "local header names it 'demo/lib\ufffd")


# ---- end records at the edges -------------------------------------------------------------------


def test_empty_archives_read_as_zipfile_reads_them(tmp_path):
    """22 bytes (an end record alone), with a comment, and with a comment as long as it may be."""
    for comment in (b"", b"x", b"c" * 0xFFFF):
        data = build([], comment=comment)
        assert len(data) == 22 + len(comment) and zipfile.ZipFile(io.BytesIO(bytes(data))).namelist() == []
        assert read(data) == ([], [])
        (tmp_path / "e.whl").write_bytes(data)
        assert zipread.read_directory(str(tmp_path / "e.whl")) == ([], [])
    data = build(TWO, comment=b"c" * 0xFFFF)
    assert read(data) == (["demo/libgood.so", "demo/libhide.so"], [])


def test_a_comment_holding_an_end_record_signature():
    """zipfile takes the last signature in reach: the one inside the comment, whose comment
    length does not reach the end, so the archive is refused rather than read otherwise."""
    data = build(TWO, comment=b"note PK\x05\x06" + bytes(18) + b" more")
    refused(data, "comment length does not reach the end")


def test_an_empty_zip64_archive():
    """A zip64 record at offset 0, its locator and a saturated end record: no members."""
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 0, 0, 0, 0)
    data = (
        record
        + struct.pack("<4sLQL", b"PK\x06\x07", 0, 0, 1)
        + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    )
    assert zipfile.ZipFile(io.BytesIO(data)).namelist() == []
    assert read(data) == ([], [])


# ---- directory entries at the edges -------------------------------------------------------------


def test_a_zip64_value_past_2_63_is_a_bomb_not_a_negative_size():
    data = build(TWO)
    saturate(data, 1, (24,))
    flagged(
        with_extra(struct.pack("<HHQ", 1, 8, (1 << 63) + 5), data=data),
        "E003",
        "demo/libhide.so",
        f"declares {(1 << 63) + 5} bytes uncompressed (zip bomb?)",
    )


def test_unicode_path_that_is_not_utf8():
    flagged(
        with_extra(unicode_path(b"demo/libhide.so", "demo/libhide.so")[:-2] + b"\xff\xfe"),
        "E002",
        "demo/libhide.so",
        "its Unicode Path extra field names it 'demo/libhide.\ufffd\ufffd'",
    )


def test_a_directory_whose_last_entry_is_cut_short():
    """The first entry's comment length reaches to 10 bytes before the directory's end, where the
    second entry's signature is: corrupt, not a crash."""
    data = build(TWO)
    first, second, end = central_at(data, 0), central_at(data, 1), eocd_at(data)
    clen = (end - 10) - (second)  # the comment swallows all of entry 1 but its first 10 bytes
    struct.pack_into("<H", data, first + 32, struct.unpack_from("<H", data, first + 32)[0] + clen)
    data[end - 10 : end] = data[second : second + 10]
    refused(data, "central directory entry 1 is corrupt")
