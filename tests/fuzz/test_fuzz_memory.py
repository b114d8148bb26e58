"""No allocation sized by an untrusted field: size and count fields set to huge values
(2^31 .. 2^64-1, 4 GiB payloads, zip members declaring 16 EiB) must not make archaudit
allocate them. Measured with tracemalloc on the scanner and on the zip reader: the peak stays
within a fixed bound plus a small multiple of the real input size."""

import tracemalloc

from hypothesis import given, settings, strategies as st

import fuzzlib as fz
from archaudit.model import Library
from archaudit.read import library

HUGE = st.sampled_from([2**31, 2**32 - 1, 2**32, 4 << 30, 2**63, 2**64 - 1, 1 << 40])
BOUND = 48 << 20  # bytes beyond 8 x the input


def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


SIZE_FIELDS = (
    "fat_size",
    "payload_size",
    "uncompressed_size",
    "compressed_size",
    "header_size",
    "sh_size",
    "sh_offset",
    "p_filesz",
    "e_shnum",
    "e_phnum",
    "e_shoff",
    "e_phoff",
    ".count",
    ".size",
    ".offset",
    ".id_length",
    ".total",
    ".usize",
)
FIXTURES = [
    "tests/fixtures/cuda/bin/lib_cmp_size_all.so",
    "tests/fixtures/cuda/bin/lib_cmp_speed_all.so",
    "tests/fixtures/cuda/bin/lib_multi.so",
    "tests/fixtures/cuda/bin/kern.fatbin",
    "tests/fixtures/amd/bin/hip_two_ccob.so",
    "tests/fixtures/amd/bin/hip_multi.so",
    "tests/fixtures/cuda/bin/kern_sm90.cubin",
]


@settings(max_examples=min(settings().max_examples, 200))
@given(rel=st.sampled_from(FIXTURES), value=HUGE, decode=st.booleans(), data=st.data())
def test_huge_size_fields_do_not_allocate(rel, value, decode, data):
    fz.tally("memory")
    lay = fz.layout(rel)
    f = data.draw(st.sampled_from([x for x in lay.fields if x.name.endswith(SIZE_FIELDS)]))
    mutant = fz.put(fz.load(rel), f, value)
    lib: Library | None = None

    def go():
        nonlocal lib
        lib = library.library_from_bytes(rel, mutant, decode=decode, max_payload=256 << 20)

    peak = _peak(go)
    assert peak < BOUND + 8 * len(mutant), f"{f.name} = {value:#x}: peak {peak} bytes"
    assert lib is not None
    assert not any(p.code == "E099" or "out of memory" in p.message for p in lib.problems), lib.problems


@settings(max_examples=min(settings().max_examples, 100))
@given(data=st.data())
def test_payload_declaring_4gib(data):
    """A compressed entry that declares 4 GiB uncompressed (and a frame that really expands to
    64 MiB): decoded with --decode, bounded by --max-payload, never allocated."""
    fz.tally("memory")
    rel = data.draw(
        st.sampled_from(["tests/fixtures/cuda/bin/lib_cmp_size_all.so", "tests/fixtures/cuda/bin/lib_cmp_speed_all.so"])
    )
    entry, eh = data.draw(st.sampled_from([(o, h) for o, h in fz.layout(rel).payloads if h.compression != "none"]))
    mutant = data.draw(fz.payload_lie(fz.load(rel), entry, eh))[0]
    mutant = fz.put(mutant, fz.Field("usize", entry + 56, 8), data.draw(HUGE | st.just(64 << 20)))
    max_payload = data.draw(st.sampled_from([1 << 20, 16 << 20, 256 << 20]))
    lib: Library | None = None

    def go():
        nonlocal lib
        lib = library.library_from_bytes(rel, mutant, decode=True, max_payload=max_payload)

    peak = _peak(go)
    assert peak < BOUND + 2 * max_payload, f"peak {peak} bytes"
    assert lib is not None
    assert not any(p.code == "E099" for p in lib.problems), lib.problems
