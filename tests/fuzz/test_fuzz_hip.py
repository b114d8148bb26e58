"""HIP: clang offload bundles (entry count, offsets, sizes, id lengths), compressed bundles
(CCOB v2/v3 total and uncompressed sizes, hash, method, payload bytes) and AMDGPU code
objects, inside host libraries and as standalone .hsaco files."""

from hypothesis import given, strategies as st

import fuzzlib as fz


@given(rel=st.sampled_from(fz.HIP_FIXTURES), decode=st.booleans(), data=st.data())
def test_hip_bundles(rel, decode, data):
    lay = fz.layout(rel)
    fields = [
        f for f in lay.fields if f.name.startswith(("bundle@", "ccob@", "codeobject@")) or ".hip_fatbin]." in f.name
    ]
    regions = [r for r in lay.regions if r.name.startswith("bundle@") or r.name == "elf.section:.hip_fatbin"]
    mutant, note = data.draw(fz.mutated(fz.load(rel), fields, regions), label="mutation")
    fz.check_mutant(rel, mutant, note, decode, "hip")


@given(rel=st.sampled_from(fz.HSACO_FIXTURES), decode=st.booleans(), data=st.data())
def test_code_object_file(rel, decode, data):
    lay = fz.layout(rel)
    original = fz.load(rel)
    mutant, note = data.draw(
        fz.mutated(original, lay.fields, lay.regions + [fz.Region("file", 0, len(original))]), label="mutation"
    )
    fz.check_mutant(rel, mutant, note, decode, "hsaco")
