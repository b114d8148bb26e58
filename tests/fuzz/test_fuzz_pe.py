"""Windows PE libraries: DOS and COFF headers, optional header, data directories, section
table, import and delay-import directories and the device code inside real MinGW and
lld-link DLLs (tests/fixtures/pe), mutated field by field, truncated, bit-flipped and
spliced, then audited through the CLI with every property of fuzzlib.check_mutant.

What a PE states only once is taken on trust, as ELF section names are: a section's
name (the 8 bytes in its header, or the string-table bytes a "/N" name points at), from
which a container's role follows; and what a DLL imports: the name of an imported DLL (a
GPU runtime import makes a library without device code a GPU library; "budart64_13.dll" is
just another DLL) and the pointer to it, the import directories' entries and the count of
data directories. A mutant touching those bytes must still exit cleanly (no traceback, no
internal error, in time) but may change the verdict.
"""

from __future__ import annotations

import struct
from functools import cache

from hypothesis import given, strategies as st

import fuzzlib as fz
from archaudit.read import pe

PE_BIN = fz.ROOT / "tests" / "fixtures" / "pe" / "bin"
FIXTURES = sorted(str(p.relative_to(fz.ROOT)) for p in PE_BIN.iterdir() if p.suffix in (".dll", ".pyd"))

_COFF = [
    ("machine", 0, 2),
    ("number_of_sections", 2, 2),
    ("pointer_to_symbol_table", 8, 4),
    ("number_of_symbols", 12, 4),
    ("size_of_optional_header", 16, 2),
    ("characteristics", 18, 2),
]
_OPTIONAL = [
    ("magic", 0, 2),
    ("image_base", 24, 8),
    ("section_alignment", 32, 4),
    ("file_alignment", 36, 4),
    ("size_of_image", 56, 4),
    ("size_of_headers", 60, 4),
    ("number_of_rva_and_sizes", 108, 4),
]
_SECTION = [
    ("virtual_size", 8, 4),
    ("virtual_address", 12, 4),
    ("size_of_raw_data", 16, 4),
    ("pointer_to_raw_data", 20, 4),
    ("characteristics", 36, 4),
]
_DIRECTORIES = {1: "import", 4: "security", 13: "delay_import"}


@cache
def pe_layout(rel: str) -> tuple[list[fz.Field], list[fz.Region], list[tuple[int, int]]]:
    """Fields and regions of the PE structures of a fixture, and the bytes taken on trust."""
    data = fz.load(rel)
    h = pe.parse_headers(data[: pe.headers_extent(data[: pe.headers_extent(data[:64])])], len(data))
    lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    coff, opt = lfanew + 4, lfanew + 24
    nsections, opt_size = struct.unpack_from("<HH", data, coff + 2)[0], struct.unpack_from("<H", data, coff + 16)[0]
    table = opt + opt_size
    fields = [fz.Field("dos.e_magic", 0, 2), fz.Field("dos.e_lfanew", 0x3C, 4), fz.Field("pe.signature", lfanew, 4)]
    fields += [fz.Field(f"coff.{n}", coff + o, w) for n, o, w in _COFF]
    fields += [fz.Field(f"optional.{n}", opt + o, w) for n, o, w in _OPTIONAL]
    for i, name in _DIRECTORIES.items():
        fields += [
            fz.Field(f"directory.{name}.rva", opt + 112 + 8 * i, 4),
            fz.Field(f"directory.{name}.size", opt + 116 + 8 * i, 4),
        ]
    regions = [fz.Region("headers", 0, table), fz.Region("section_table", table, table + 40 * nsections)]
    trusted: list[tuple[int, int]] = []
    strings = {at: data[h.string_table + at : h.string_table + at + pe.LONG_NAME] for at in pe.long_name_offsets(h)}
    named = pe.name_sections(h, strings)
    for i, s in enumerate(named.sections):
        at = table + 40 * i
        fields += [fz.Field(f"section[{i}:{s.name}].{n}", at + o, w) for n, o, w in _SECTION]
        trusted += [(at + k, 0xFF) for k in range(8)]
        if h.sections[i].name.startswith("/"):
            start = h.string_table + int(h.sections[i].name[1:])
            trusted += [(start + k, 0xFF) for k in range(len(s.name) + 1)]
        if s.loaded_size:
            regions.append(fz.Region(f"section:{s.name}", s.raw_offset, s.raw_offset + s.loaded_size))
    # Bytes no section maps are searched too: the header slack and the overlay after the last
    # section (MinGW's symbol and string tables; the container of overlay.dll, slack.dll).
    if h.size_of_headers > table + 40 * nsections:
        regions.append(fz.Region("header_slack", table + 40 * nsections, h.size_of_headers))
    last = max((s.raw_offset + s.raw_size for s in h.sections), default=len(data))
    if last < len(data):
        regions.append(fz.Region("overlay", last, len(data)))
    # Whether the image imports at all is stated once too: the number of data directories and
    # the import directories' entries (zeroed, the loader sees a DLL that imports nothing).
    trusted += [(opt + 108 + k, 0xFF) for k in range(4)]
    for index in (pe.DIR_IMPORT, pe.DIR_DELAY_IMPORT):
        trusted += [(opt + 112 + 8 * index + k, 0xFF) for k in range(8)]
    for index, delay in ((pe.DIR_IMPORT, False), (pe.DIR_DELAY_IMPORT, True)):
        rva, size = h.directory(index)
        at = h.rva_to_offset(rva) if rva else None
        if at is None:
            continue
        regions.append(fz.Region(f"directory:{index}", at, at + size))
        record, name_at = (32, 4) if delay else (20, 12)
        for k, name_rva in enumerate(pe.import_name_rvas(data[at : at + size + 4096], delay, h.image_base, size)):
            fields.append(fz.Field(f"import[{index}][{k}].name", at + record * k + name_at, 4))
            trusted += [(at + record * k + name_at + b, 0xFF) for b in range(4)]  # which string names it
            off = h.rva_to_offset(name_rva)
            if off is not None:
                regions.append(fz.Region(f"import[{index}][{k}].dll_name", off, off + 32))
                end = data.index(b"\0", off)
                trusted += [(i, 0xFF) for i in range(off, end + 1)]
    return fields, regions, trusted


# Fixtures whose container (bundle) lies in no section: the original fails on that alone (E011,
# E033), so a mutant that maps it (a section grown over it) may pass, with the original's coverage.
OUTSIDE_SECTIONS = {"overlay.dll", "slack.dll", "hip_overlay.dll"}


def _check(rel: str, mutant: bytes, note: str, decode: bool, test: str) -> None:
    trusted = pe_layout(rel)[2]
    faithful = not fz.touches(fz.load(rel), mutant, trusted)
    outside = rel.rsplit("/", 1)[-1] in OUTSIDE_SECTIONS
    run = fz.check_mutant(rel, mutant, note, decode, test, fail_closed=faithful and not outside)
    if outside and faithful and run.code == 0:
        original = fz.original(rel, decode)[1]
        assert run.report is not None, run.stderr
        assert fz.projection(run.report) == original, f"{rel}: {note}: passes with different coverage"


@given(rel=st.sampled_from(FIXTURES), decode=st.booleans(), data=st.data())
def test_pe_tables(rel, decode, data):
    fields, regions, _ = pe_layout(rel)
    mutant, note = data.draw(fz.mutated(fz.load(rel), fields, regions), label="mutation")
    _check(rel, mutant, note, decode, "pe")


@given(rel=st.sampled_from(FIXTURES), decode=st.booleans(), data=st.data())
def test_pe_device_code(rel, decode, data):
    """Containers, entries and wrapper records inside the DLLs, with the PE fields beside them."""
    lay = fz.layout(rel)
    fields, regions, _ = pe_layout(rel)
    mutant, note = data.draw(fz.mutated(fz.load(rel), lay.fields + fields, lay.regions or regions), label="mutation")
    _check(rel, mutant, note, decode, "pe-device-code")


@given(rel=st.sampled_from(FIXTURES), data=st.data())
def test_pe_truncation_anywhere(rel, data):
    original = fz.load(rel)
    _, regions, _ = pe_layout(rel)
    mutant, note = data.draw(fz.truncate_in(original, regions + [fz.Region("file", 0, len(original))]))
    _check(rel, mutant, note, data.draw(st.booleans()), "pe-truncation")
