"""CUDA fatbin containers, entries, .nvFatBinSegment wrappers and the section-table entries of
the fatbin sections, located with archaudit's own scan of the unmutated fixture."""

from hypothesis import given, strategies as st

import fuzzlib as fz

FIXTURES = [
    r
    for r in fz.LIBRARY_FIXTURES + fz.OBJECT_FIXTURES
    if any(x.name.startswith("container@") for x in fz.layout(r).regions)
]
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin", ".nvFatBinSegment")


def _fatbin_parts(rel):
    lay = fz.layout(rel)
    fields = [
        f
        for f in lay.fields
        if f.name.startswith(("container@", "entry@", "wrapper@")) or any(f"{s}]." in f.name for s in FATBIN_SECTIONS)
    ]
    regions = [
        r
        for r in lay.regions
        if r.name.startswith(("container@", "entry_header@")) or r.name in {f"elf.section:{s}" for s in FATBIN_SECTIONS}
    ]
    return fields, regions


@given(rel=st.sampled_from(FIXTURES), decode=st.booleans(), data=st.data())
def test_fatbin_containers_and_entries(rel, decode, data):
    fields, regions = _fatbin_parts(rel)
    mutant, note = data.draw(fz.mutated(fz.load(rel), fields, regions), label="mutation")
    fz.check_mutant(rel, mutant, note, decode, "fatbin")


@given(rel=st.sampled_from(fz.FATBIN_FIXTURES), decode=st.booleans(), data=st.data())
def test_standalone_fatbin(rel, decode, data):
    lay = fz.layout(rel)
    fields = [f for f in lay.fields if f.name.startswith(("container@", "entry@"))]
    regions = lay.regions + [fz.Region("file", 0, len(fz.load(rel)))]
    mutant, note = data.draw(fz.mutated(fz.load(rel), fields, regions), label="mutation")
    fz.check_mutant(rel, mutant, note, decode, "fatbin-file")
