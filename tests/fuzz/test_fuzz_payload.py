"""Entry payloads: zstd and LZ4 streams replaced by garbage or by frames expanding past (or
short of) their declared size, compressed/uncompressed size lies, and the raw cubin ELF inside
uncompressed entries. Payloads are only read with --decode; without it the same mutants must
still exit cleanly (the headers are unchanged, so the verdict may stand)."""

from hypothesis import given, strategies as st

import fuzzlib as fz

COMPRESSED = [
    r
    for r in fz.LIBRARY_FIXTURES + fz.OBJECT_FIXTURES + fz.FATBIN_FIXTURES
    if any(eh.compression in ("zstd", "lz4") for _, eh in fz.layout(r).payloads)
]
RAW_CUBIN = [
    r for r in fz.LIBRARY_FIXTURES + fz.FATBIN_FIXTURES if any(x.name.startswith("cubin@") for x in fz.layout(r).fields)
]


@given(rel=st.sampled_from(COMPRESSED), decode=st.booleans(), data=st.data())
def test_compressed_payload_lies(rel, decode, data):
    lay = fz.layout(rel)
    entry, eh = data.draw(st.sampled_from([(o, h) for o, h in lay.payloads if h.compression in ("zstd", "lz4")]))
    mutant, note = data.draw(fz.payload_lie(fz.load(rel), entry, eh), label="payload")
    fz.check_mutant(rel, mutant, note, decode, "payload-compressed")


@given(rel=st.sampled_from(COMPRESSED), data=st.data())
def test_compressed_payload_bytes(rel, data):
    lay = fz.layout(rel)
    regions = [r for r in lay.regions if r.name.startswith("compressed@")]
    mutant, note = data.draw(fz.mutated(fz.load(rel), [], regions, max_steps=2), label="mutation")
    fz.check_mutant(rel, mutant, note, True, "payload-compressed-bytes")


@given(rel=st.sampled_from(RAW_CUBIN), data=st.data())
def test_embedded_cubin(rel, data):
    """The cubin ELF inside an uncompressed SASS entry (read with --decode)."""
    lay = fz.layout(rel)
    fields = [f for f in lay.fields if f.name.startswith("cubin@")]
    regions = [r for r in lay.regions if r.name.startswith(("cubin@", "payload@"))]
    mutant, note = data.draw(fz.mutated(fz.load(rel), fields, regions), label="mutation")
    fz.check_mutant(rel, mutant, note, True, "payload-cubin")
