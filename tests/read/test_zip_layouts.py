"""Zip layouts on which zipfile (and so pip's installer) and a naive reader list different
members. archaudit must read exactly zipfile's members, or fail (E002) where the places a zip
records them disagree.

Each construction holds two libraries: lib_sm80.so (passes `--arch 80`) and
lib_ptx90.so (PTX for compute_90 only: fails it). The decoy directory, the one a reader following the end
record's offsets would take, lists only the passing library and a text file; the directory
zipfile reads lists the failing one too. Each test first asserts with zipfile itself that pip
would install the failing library.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

from archaudit.read import artifacts, plan, zipread
from helpers import WHEEL_NAME, assert_finding, check, findings

ROOT = Path(__file__).resolve().parents[2]
CUDA = ROOT / "tests" / "fixtures" / "cuda" / "bin"
GOOD = ("demo/libgood.so", (CUDA / "lib_sm80.so").read_bytes())
BAD = ("demo/libhide.so", (CUDA / "lib_ptx90.so").read_bytes())
DECOY = ("demo/readme.txt", b"nothing to see\n")  # named to the failing library's length
assert len(DECOY[0]) == len(BAD[0])
INFO = ("demo-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\n")  # what makes a zip a wheel pip installs


def pieces(members: list[tuple[str, bytes]]) -> tuple[bytes, dict[str, bytes]]:
    """(local headers and data of every member, central-directory entry of each by name),
    written by zipfile itself."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members:
            z.writestr(name, data)
    raw = buf.getvalue()
    eocd = raw.rfind(b"PK\x05\x06")
    _, _, _, _, count, cd_size, cd_offset, _ = struct.unpack_from("<4s4H2LH", raw, eocd)
    entries = {}
    pos = cd_offset
    for _ in range(count):
        nlen, xlen, clen = struct.unpack_from("<3H", raw, pos + 28)
        end = pos + 46 + nlen + xlen + clen
        entries[raw[pos + 46 : pos + 46 + nlen].decode()] = raw[pos:end]
        pos = end
    return raw[:cd_offset], entries


def eocd(count: int, cd_size: int, cd_offset: int) -> bytes:
    return struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, cd_size, cd_offset, 0)


def zip64_record(count: int, cd_size: int, cd_offset: int) -> bytes:
    return struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, cd_size, cd_offset)


def locator(record_offset: int) -> bytes:
    return struct.pack("<4sLQL", b"PK\x06\x07", 0, record_offset, 1)


def layout() -> tuple[bytes, bytes, bytes]:
    """(local data, decoy directory [good, decoy], real directory [good, bad])."""
    local, entries = pieces([GOOD, BAD, DECOY])
    return local, entries[GOOD[0]] + entries[DECOY[0]], entries[GOOD[0]] + entries[BAD[0]]


def zipfile_names(data: bytes) -> list[str]:
    return zipfile.ZipFile(io.BytesIO(data)).namelist()


def audit(tmp_path: Path, data: bytes) -> tuple[int, dict]:
    p = tmp_path / WHEEL_NAME
    p.write_bytes(data)
    code, rep, _ = check(tmp_path, p)
    return code, rep


def test_two_central_directories(tmp_path):
    """The end record's offset names the decoy directory; zipfile reads the directory that
    ends where the end record begins."""
    local, decoy, real = layout()
    assert len(decoy) == len(real)
    data = local + decoy + real + eocd(2, len(real), len(local))
    assert BAD[0] in zipfile_names(data)
    code, rep = audit(tmp_path, data)
    assert code == 2, findings(rep)
    assert_finding(rep, "E002", "does not end where the end record begins")


def test_zip64_locator_before_a_plain_end_record(tmp_path):
    """The end record is not saturated and names the decoy; a zip64 locator before it (which
    zipfile honours whatever the end record says) leads to the real directory."""
    local, decoy, real = layout()
    real_at = len(local) + len(decoy)
    rec_at = real_at + len(real)
    data = (
        local + decoy + real + zip64_record(2, len(real), real_at) + locator(rec_at) + eocd(2, len(decoy), len(local))
    )
    assert BAD[0] in zipfile_names(data)
    code, rep = audit(tmp_path, data)
    assert code == 2, findings(rep)
    assert_finding(rep, "E002", "the end record and the zip64 record disagree on the directory")


def test_two_zip64_records(tmp_path):
    """A saturated end record; the locator points at a zip64 record naming the decoy, while
    zipfile reads the zip64 record right before the locator, which names the real directory."""
    local, decoy, real = layout()
    rec_a = len(local) + len(decoy)
    real_at = rec_a + 56
    data = (
        local
        + decoy
        + zip64_record(2, len(decoy), len(local))
        + real
        + zip64_record(2, len(real), real_at)
        + locator(rec_a)
        + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    )
    assert BAD[0] in zipfile_names(data)
    code, rep = audit(tmp_path, data)
    assert code == 2, findings(rep)
    assert_finding(rep, "E002", "the zip64 locator points elsewhere")


def test_sound_zip64_end_records_are_read(tmp_path):
    """A saturated end record with a consistent zip64 record and locator is read, and lists
    what zipfile lists (so the audit judges the failing library)."""
    local, entries = pieces([GOOD, BAD, INFO])
    real = entries[GOOD[0]] + entries[BAD[0]] + entries[INFO[0]]
    rec_at = len(local) + len(real)
    data = (
        local
        + real
        + zip64_record(3, len(real), len(local))
        + locator(rec_at)
        + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    )
    members, hazards = zipread.read_directory_bytes(data)
    assert [m.name for m in members] == zipfile_names(data) and not hazards
    code, rep = audit(tmp_path, data)
    assert code == 1
    libs = {lib["path"] for t in rep["targets"] for lib in t["libraries"]}
    assert libs == {GOOD[0], BAD[0]}


def test_comment_length_must_reach_the_end(tmp_path):
    """Bytes after the end record that its comment length does not cover: another reader may
    look there for a second end record."""
    local, _, real = layout()
    data = local + real + eocd(2, len(real), len(local)) + b"trailing"
    code, rep = audit(tmp_path, data)
    assert code == 2
    assert_finding(rep, "E002", "comment length")


def test_unicode_path_field_naming_another_member(tmp_path):
    """Newer zipfile renames a member by its Info-ZIP Unicode Path extra field (0x7075): the
    name audited would not be the name installed."""
    local, entries = pieces([GOOD, BAD])
    entry = bytearray(entries[BAD[0]])
    raw = BAD[0].encode()
    field = struct.pack("<HHBL", 0x7075, 5 + len("demo/other.so"), 1, zlib.crc32(raw)) + b"demo/other.so"
    struct.pack_into("<H", entry, 30, len(field))
    entry = entry[: 46 + len(raw)] + field + entry[46 + len(raw) :]
    cd = entries[GOOD[0]] + bytes(entry)
    data = local + cd + eocd(2, len(cd), len(local))
    code, rep = audit(tmp_path, data)
    assert code in (1, 2)
    assert_finding(rep, "E002", "Unicode Path extra field names it 'demo/other.so'")


@pytest.mark.parametrize(
    "field, value, words",
    [("method", 0, "disagree on its compression"), ("crc", 0x12345678, "disagree on its CRC or sizes")],
)
def test_local_header_disagreeing_with_the_directory(tmp_path, field, value, words):
    written, entries = pieces([GOOD, BAD])
    local = bytearray(written)
    at = local.find(BAD[0].encode()) - 30
    struct.pack_into("<H" if field == "method" else "<L", local, at + (8 if field == "method" else 14), value)
    cd = entries[GOOD[0]] + entries[BAD[0]]
    data = bytes(local) + cd + eocd(2, len(cd), len(local))
    code, rep = audit(tmp_path, data)
    assert code in (1, 2)
    assert_finding(rep, "E002", words)


def test_member_list_agrees_with_zipfile_on_the_example_wheel():
    wheel = next((ROOT / "src" / "archaudit" / "examples").glob("*.whl"))
    members, hazards = zipread.read_directory(str(wheel))
    assert not hazards
    assert [m.name for m in members] == zipfile.ZipFile(wheel).namelist()


@pytest.mark.parametrize("limit", ["ZIP_FILECOUNT_LIMIT", "ZIP64_LIMIT"])
def test_zip64_archives_written_by_zipfile_are_read(tmp_path, monkeypatch, limit):
    """zipfile's own zip64 output (end records for many members, extra fields and saturated
    header sizes for large ones), forced on a small archive by lowering zipfile's limits: read
    without a finding, listing what zipfile lists."""
    monkeypatch.setattr(zipfile, limit, 2 if limit == "ZIP_FILECOUNT_LIMIT" else 1000)
    p = tmp_path / WHEEL_NAME
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        for name, data in (GOOD, BAD, DECOY):
            z.writestr(name, data)
    raw = p.read_bytes()
    assert b"PK\x06\x06" in raw or limit == "ZIP64_LIMIT"
    members, hazards = zipread.read_directory(str(p))
    assert not hazards and [m.name for m in members] == zipfile.ZipFile(p).namelist()
    code, rep = audit(tmp_path, raw)
    assert code == 1 and {GOOD[0], BAD[0]} <= set(findings_paths(rep)), findings(rep)


def findings_paths(report: dict) -> list[str]:
    return [lib["path"] for t in report["targets"] for lib in t["libraries"]]


@pytest.mark.parametrize(
    "extra, words",
    [
        (struct.pack("<HH", 0xCAFE, 40) + b"short", "extra field 0xcafe overruns its entry"),
        (struct.pack("<HHQ", 1, 8, 0) * 2, "two zip64 extra fields"),
        (b"\x01\x00", "extra fields overrun their entry"),
    ],
)
def test_malformed_extra_fields(tmp_path, extra, words):
    """Extra fields zipfile reads otherwise (or refuses): E002 for the member."""
    local, entries = pieces([GOOD, BAD])
    entry = bytearray(entries[BAD[0]])
    n = len(BAD[0])
    struct.pack_into("<H", entry, 30, len(extra))
    entry = entry[: 46 + n] + extra + entry[46 + n :]
    cd = entries[GOOD[0]] + bytes(entry)
    code, rep = audit(tmp_path, local + cd + eocd(2, len(cd), len(local)))
    assert code in (1, 2)
    assert_finding(rep, "E002", words)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, version",
    [
        ("nvidia-curand", "10.4.0.35"),
        pytest.param("nvidia-cublas", "13.1.1.3", marks=pytest.mark.census),
        pytest.param("torch", "2.14.1", marks=pytest.mark.census),
    ],
)
def test_member_list_agrees_with_zipfile_on_real_wheels(name, version):
    from wheels import fetch

    path = fetch(name, version)
    members, hazards = zipread.read_directory(str(path))
    assert not hazards
    assert [m.name for m in members] == zipfile.ZipFile(path).namelist()
    jobs, problems = plan._wheel_jobs(str(path))  # within the bounds on work, with room to spare
    assert not problems
    assert sum(j.size for j in jobs) * 4 < artifacts.BUDGET_RATIO * path.stat().st_size


class _ReadAt(io.RawIOBase):
    """A seekable file over read_at(offset, length), for zipfile (the reference reader)."""

    def __init__(self, read_at, size: int):
        super().__init__()
        self._read_at, self._size, self._pos = read_at, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = {0: pos, 1: self._pos + pos, 2: self._size + pos}[whence]
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, b) -> int:
        data = self._read_at(self._pos, max(0, min(len(b), self._size - self._pos)))
        b[: len(data)] = data
        self._pos += len(data)
        return len(data)


@pytest.mark.slow
@pytest.mark.parametrize("requirement", ["nvidia-cublas==13.1.1.3"])
def test_the_member_list_of_a_large_wheel_read_by_range_requests_agrees_with_zipfile(requirement):
    """The directory of a wheel of hundreds of MB, read in place on the index by range requests:
    archaudit's reader and zipfile's list the same members, and only the directory and the local
    headers are fetched (the census tier reads it whole; torch's thousands of local headers cost
    25 MB and minutes of round trips this way, so it stays in the census)."""
    from archaudit.index.remote import RangeReader
    from archaudit.index.targets import resolve

    ref = resolve(requirement, None, None).ref
    assert ref is not None and ref.size and ref.size > 300 << 20
    reader = RangeReader(ref.location)
    try:
        members, hazards = zipread.read_directory_at(reader.read_at, reader.size)
        assert not hazards
        with zipfile.ZipFile(io.BufferedReader(_ReadAt(reader.read_at, reader.size), 1 << 16)) as z:
            assert [m.name for m in members] == z.namelist()
        assert reader.fetched < reader.size // 100
    finally:
        reader.close()
