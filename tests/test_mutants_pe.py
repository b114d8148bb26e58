"""PE import tables, long section names and the section names in findings, pinned where mutation
testing found pe.py loose (docs/mutation.md).

The import tables are those of the MSVC-built fixtures in tests/fixtures/pe/bin, read with
pe's own header parser, then cut or extended by whole records; each case asserts the DLL names
read or the E021 message.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from archaudit import pe
from archaudit.scan import library_from_bytes, scan_file

PE = Path(__file__).resolve().parent / "fixtures" / "pe" / "bin"


def directory(name: str, index: int) -> tuple[pe.Headers, bytes, int]:
    """(headers, the bytes of its import or delay-import directory as declared, declared size)."""
    data = (PE / name).read_bytes()
    h = pe.parse_headers(data[:pe.HEADERS_MAX], len(data))
    rva, size = h.directory(index)
    at = h.rva_to_offset(rva)
    assert rva and at is not None
    return h, data[at:at + size], size


def names(h: pe.Headers, data: bytes, rvas: list[int]) -> list[str]:
    out = []
    for rva in rvas:
        off = h.rva_to_offset(rva)
        assert off is not None
        out.append(data[off:data.index(b"\0", off)].decode())
    return out


def test_an_import_table_of_exactly_its_records_and_terminator():
    """sm80.dll's import directory, declared to the byte: every DLL, the terminator found in the
    last record; without the terminator, E021."""
    h, declared, _ = directory("sm80.dll", pe.DIR_IMPORT)
    rec = pe._IMPORT.size
    n = next(i for i in range(0, len(declared), rec) if not any(declared[i:i + rec])) // rec + 1
    table = declared[:n * rec]  # the records, the terminator last
    size = len(table)
    rvas = pe.import_name_rvas(table, False, h.image_base, size)
    assert rvas == pe.import_name_rvas(declared, False, h.image_base, len(declared))
    data = (PE / "sm80.dll").read_bytes()
    assert len(rvas) == n - 1 and "KERNEL32.dll" in names(h, data, rvas)
    with pytest.raises(pe.PeError, match="import directory has no terminating entry"):
        pe.import_name_rvas(table[:-rec], False, h.image_base, size)
    with pytest.raises(pe.PeError, match="import directory has no terminating entry"):
        pe.import_name_rvas(table[:-rec] + bytes(rec - 1), False, h.image_base, size)  # a partial record


def test_delay_import_descriptors_of_both_versions():
    """A version-2 descriptor (attribute bit 0 set) holds RVAs; a version-1 one holds virtual
    addresses, which the image base turns into RVAs."""
    h, table, size = directory("multi.dll", pe.DIR_DELAY_IMPORT) if _has_delay("multi.dll") else \
        directory(_delay_fixture(), pe.DIR_DELAY_IMPORT)
    rvas = pe.import_name_rvas(table, True, h.image_base, size)
    assert rvas
    rec = bytearray(table[:pe._DELAY.size])
    attributes, name = struct.unpack_from("<II", rec)
    assert attributes & 1
    struct.pack_into("<II", rec, 0, attributes & ~1, (h.image_base + name) & 0xFFFFFFFF)
    v1 = bytes(rec) + bytes(pe._DELAY.size)
    assert pe.import_name_rvas(v1, True, h.image_base & 0xFFFFFFFF, len(v1)) == [name]


def _has_delay(name: str) -> bool:
    data = (PE / name).read_bytes()
    h = pe.parse_headers(data[:pe.HEADERS_MAX], len(data))
    return bool(h.directory(pe.DIR_DELAY_IMPORT)[0])


def _delay_fixture() -> str:
    found = [p.name for p in sorted(PE.glob("*.dll")) if _has_delay(p.name)]
    assert found, "no fixture with a delay-import directory"
    return found[0]


@pytest.mark.parametrize("delay", [False, True])
def test_an_empty_directory_is_damage_only_when_it_declares_room_for_a_record(delay):
    rec = (pe._DELAY if delay else pe._IMPORT).size
    what = "delay-import" if delay else "import"
    assert pe.import_name_rvas(bytes(2 * rec), delay, 0, rec) == []  # a terminator alone
    assert pe.import_name_rvas(bytes(2 * rec), delay, 0, 2 * rec - 1) == []
    with pytest.raises(pe.PeError, match=f"{what} directory of {2 * rec} bytes lists no DLL"):
        pe.import_name_rvas(bytes(2 * rec), delay, 0, 2 * rec)


def test_the_most_imports_a_table_may_list():
    rec = pe._IMPORT.size
    one = struct.pack("<IIIII", 0x1000, 0, 0, 0x2000, 0x3000)
    table = one * pe.MAX_IMPORTS + bytes(rec)
    assert len(pe.import_name_rvas(table, False, 0, len(table))) == pe.MAX_IMPORTS
    table = one * (pe.MAX_IMPORTS + 1) + bytes(rec)
    with pytest.raises(pe.PeError, match=f"lists more than {pe.MAX_IMPORTS} DLLs"):
        pe.import_name_rvas(table, False, 0, len(table))


@pytest.mark.parametrize("name", ["/12a", "/\u0661\u0662", "/", "/-4"])
def test_a_long_section_name_that_is_no_offset(name):
    with pytest.raises(pe.PeError, match="is neither a name nor a string-table offset"):
        pe._long_offset(name)
    assert pe._long_offset("/123") == 123


def test_findings_name_the_sections_as_the_image_names_them():
    """A container grown past the end of .nv_fatb: the shared attribution speaks of ELF's
    .nv_fatbin and .nvFatBinSegment; a PE's findings say .nv_fatb and .nvFatBi."""
    lib = scan_file(str(PE / "sm80.dll"))
    last = lib.containers[-1]
    assert last.section == ".nv_fatb"
    data = bytearray((PE / "sm80.dll").read_bytes())
    struct.pack_into("<Q", data, last.offset + 8, last.size - 16 + 4096)
    bad = library_from_bytes("bad.dll", bytes(data))
    messages = [p.message for p in bad.problems if p.code == "E011"]
    assert f"fatbin container at 0x{last.offset:x} overruns section .nv_fatb" in messages, messages
    assert any(m.startswith("section .nvFatBi: ") for m in messages), messages
    assert not any(".nv_fatbin" in m or ".nvFatBinSegment" in m for m in messages), messages


def test_a_dll_whose_import_directory_lists_nothing_still_names_its_delay_loaded_dlls():
    """sm80_msvc.dll imports cudart64_13.dll and delay-loads nvcuda.dll. With its import
    directory emptied (a terminator alone, declared as one record), the delay-loaded driver is
    still read: a DLL that loads everything late is a GPU library all the same."""
    data = bytearray((PE / "sm80_msvc.dll").read_bytes())
    assert library_from_bytes("x.dll", bytes(data)).needed == ("cudart64_13.dll", "nvcuda.dll")
    h = pe.parse_headers(bytes(data[:pe.HEADERS_MAX]), len(data))
    rva, size = h.directory(pe.DIR_IMPORT)
    at = h.rva_to_offset(rva)
    assert at is not None and size == 2 * pe._IMPORT.size
    data[at:at + pe._IMPORT.size] = bytes(pe._IMPORT.size)
    lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    struct.pack_into("<I", data, lfanew + 24 + 112 + 8 * pe.DIR_IMPORT + 4, pe._IMPORT.size)
    lib = library_from_bytes("x.dll", bytes(data))
    assert lib.needed == ("nvcuda.dll",) and not lib.problems, (lib.needed, lib.problems)


# ---- the header checks at their bounds -------------------------------------------------------------

DLL = (PE / "sm80.dll").read_bytes()
LFANEW = struct.unpack_from("<I", DLL, 0x3C)[0]
NSECTIONS, OPT_SIZE = struct.unpack_from("<H", DLL, LFANEW + 6)[0], struct.unpack_from("<H", DLL, LFANEW + 20)[0]
TABLE = LFANEW + 24 + OPT_SIZE
TABLE_END = TABLE + NSECTIONS * 40


def headers_error(data: bytes, size: int) -> str:
    with pytest.raises(pe.PeError) as e:
        pe.parse_headers(data, size)
    assert e.value.code == "E021"
    return e.value.message


def with_lfanew(value: int) -> bytes:
    return DLL[:0x3C] + struct.pack("<I", value) + DLL[0x40:]


def test_the_first_64_bytes_and_the_pe_header_offset():
    assert headers_error(DLL[:63], len(DLL)) == "not a PE image (no MZ header)"
    assert headers_error(b"MZ" + DLL[2:64].replace(b"MZ", b"XX"), 64).startswith("PE header offset")
    assert headers_error(with_lfanew(3), len(DLL)) == "PE header offset 0x3 lies outside the file's headers"
    assert headers_error(with_lfanew(4), len(DLL)).startswith("no PE signature")  # inside, but no signature there
    last = len(DLL) - 24  # the COFF header ends at the file's end: inside
    assert headers_error(with_lfanew(last), len(DLL)).startswith("no PE signature")
    assert "lies outside" in headers_error(with_lfanew(last + 1), len(DLL))


def test_headers_cut_short():
    assert headers_error(DLL[:LFANEW + 23], len(DLL)) == "PE header is truncated"
    assert headers_error(DLL[:TABLE_END - 1], len(DLL)) == "section table is truncated"
    assert pe.parse_headers(DLL[:TABLE_END], len(DLL)).sections  # exactly the headers: enough


def test_a_section_table_past_the_end_of_the_file():
    assert headers_error(DLL[:TABLE_END], TABLE_END - 1) == "section table lies outside the file's headers"
    assert "section table" not in headers_error(DLL[:TABLE_END], TABLE_END)  # inside; its sections are not


@pytest.mark.parametrize("opt_size, words", [(1, "no optional header: an object file, not an image"),
                                             (0, "no optional header: an object file, not an image"),
                                             (2, "optional header of 2 bytes is too short for its magic"),
                                             (111, "optional header of 111 bytes is too short for its magic")])
def test_optional_headers_too_short(opt_size, words):
    data = DLL[:LFANEW + 20] + struct.pack("<H", opt_size) + DLL[LFANEW + 22:]
    assert headers_error(data, len(data)) == words


def test_directories_past_the_declared_count_are_not_read():
    """The loader reads only NumberOfRvaAndSizes directories: declared 13, the delay-import
    directory (index 13) of sm80_msvc.dll is not there, so nvcuda.dll is not a dependency."""
    data = bytearray((PE / "sm80_msvc.dll").read_bytes())
    lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    count_at = lfanew + 24 + 108
    assert struct.unpack_from("<I", data, count_at)[0] == 16
    for declared, needed in ((14, ("cudart64_13.dll", "nvcuda.dll")), (13, ("cudart64_13.dll",))):
        struct.pack_into("<I", data, count_at, declared)
        assert library_from_bytes("x.dll", bytes(data)).needed == needed
