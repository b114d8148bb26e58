"""Host ELF: header, program headers and section table of real nvcc/hipcc libraries and
objects, mutated field by field (sizes and counts set to 0, 2^31, 2^32, 2^63, 2^64-1, to
other fields' values and offsets), truncated, bit-flipped and spliced."""

from hypothesis import given, strategies as st

import fuzzlib as fz

FIXTURES = fz.LIBRARY_FIXTURES + fz.OBJECT_FIXTURES


def _elf_parts(rel):
    lay = fz.layout(rel)
    fields = [f for f in lay.fields if f.name.startswith("elf.")]
    regions = [
        r
        for r in lay.regions
        if r.name in ("elf.header", "elf.program_headers", "elf.section_table")
        or r.name in ("elf.section:.shstrtab", "elf.section:.dynamic", "elf.section:.dynstr")
    ]
    return fields, regions


@given(rel=st.sampled_from(FIXTURES), decode=st.booleans(), data=st.data())
def test_elf_tables(rel, decode, data):
    fields, regions = _elf_parts(rel)
    mutant, note = data.draw(fz.mutated(fz.load(rel), fields, regions), label="mutation")
    fz.check_mutant(rel, mutant, note, decode, "elf")


@given(rel=st.sampled_from(FIXTURES), data=st.data())
def test_elf_truncation_anywhere(rel, data):
    """Truncation at every region of the file, including the last byte."""
    original = fz.load(rel)
    lay = fz.layout(rel)
    mutant, note = data.draw(fz.truncate_in(original, lay.regions + [fz.Region("file", 0, len(original))]))
    fz.check_mutant(rel, mutant, note, data.draw(st.booleans()), "elf-truncation")
