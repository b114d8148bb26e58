"""read/stream.py: the forward-only window over a stream of chunks; where the chunks are cut never
changes what is found.

Inputs are the nvcc- and clang-built fixtures (tests/fixtures/cuda/bin, tests/fixtures/amd/bin)
or their bytes with one fact changed. Facts expected come from the build (build.sh's -arch, the
kernels in the sources, NVCC_VERSION, llvm-readelf's REFERENCE.txt), never from the reader.
"""

from __future__ import annotations

import pytest

from archaudit.read import library, stream as window
from helpers import FATBIN_AT, KERN_FATBIN, LIB_SM80, TWO_PLAIN, cut_at, patched, read

# ---- containers at the edges of the stream's chunks and of the file -----------------------------


def test_a_container_whose_header_straddles_a_chunk_boundary_is_found():
    """The search matches the magic and the version and header size after it (8 bytes); the
    rest of the 16-byte header arrives with the next 1 MiB chunk."""
    at = (1 << 20) - 8
    data = KERN_FATBIN + bytes(at - len(KERN_FATBIN)) + KERN_FATBIN
    lib = read("k.fatbin", data)
    assert [(c.offset, c.size, len(c.entries)) for c in lib.containers] == [
        (0, len(KERN_FATBIN), 2),
        (at, len(KERN_FATBIN), 2),
    ]
    assert not lib.problems


def test_a_container_header_cut_by_the_end_of_the_file_ends_the_search():
    lib = read("k.fatbin", KERN_FATBIN + KERN_FATBIN[:12])
    assert [c.offset for c in lib.containers] == [0] and not lib.problems


# ---- the stream's chunking never changes what is found ------------------------------------------


DAMAGED_SM80 = patched(LIB_SM80, FATBIN_AT + 1536, "<B", lambda b: b ^ 0xFF)  # the second container's magic
DAMAGED_HIP = patched(TWO_PLAIN, 0x8000, "<B", lambda b: b ^ 0xFF)  # the second bundle's magic
RECORDS = {  # where each library's records start: containers, wrappers, bundles
    "lib_sm80": (LIB_SM80, [FATBIN_AT, FATBIN_AT + 1536, 0x4088, 0x40A0]),
    "damaged_sm80": (DAMAGED_SM80, [FATBIN_AT, 0x4088, 0x40A0]),
    "damaged_hip": (DAMAGED_HIP, [0x3000, 0xC038, 0xC050]),
    "kern.fatbin": (KERN_FATBIN, [0, 16, 3448]),
}


@pytest.mark.parametrize("name", sorted(RECORDS))
@pytest.mark.parametrize("shift", [1, 4, 8, 17, 30])
def test_a_record_cut_by_a_chunk_boundary_reads_as_a_whole_one(name, shift):
    """Each record (container header, .nvFatBinSegment / .hipFatBinSegment wrapper) cut `shift`
    bytes after its start: the rest arrives with the next chunk, and what is found is the same."""
    data, starts = RECORDS[name]
    want = read(name, data)
    for at in starts:
        assert library.scan_stream(name, len(data), cut_at(data, at + shift)) == want, hex(at)


@pytest.mark.parametrize("name", sorted(RECORDS))
@pytest.mark.parametrize("size", [61, 509, 4093])
def test_any_chunk_size_reads_the_same_library(name, size):
    data, _ = RECORDS[name]
    assert library.scan_stream(name, len(data), cut_at(data, *range(size, len(data), size))) == read(name, data)


def test_the_reference_reads_of_the_chunking_tests():
    """What the chunkings above are compared with, against the build's facts."""
    assert [(c.offset, c.role) for c in read("x", LIB_SM80).containers] == [
        (FATBIN_AT, "device-link"),
        (FATBIN_AT + 1536, "executable"),
    ]
    assert [p.code for p in read("x", DAMAGED_SM80).problems] == ["E011", "E011"]
    assert [p.code for p in read("x", DAMAGED_HIP).problems] == ["E030", "E030"]


def test_the_window_knows_the_last_byte_it_let_go():
    """Source.before is the byte at base - 1 however the window moved past it: released, pulled
    past whole (a skip of more than a chunk's worth), or skimmed down to its last SEAM bytes."""
    src = window.Source([b"ab\0cd"], 5)
    assert (src.base, src.before) == (0, -1)
    src.ensure(5)
    src.release(3)
    assert (src.base, src.before) == (3, 0)
    src.release(4)  # one byte
    assert (src.base, src.before) == (4, ord("c"))
    src.release(2)  # already let go: nothing moves
    assert (src.base, src.before) == (4, ord("c"))
    big = bytes(window.CHUNK_GUESS + 99) + b"x"
    src = window.Source([big, b"\0" * 10], len(big) + 10)
    assert src.skip_to(len(big)) and (src.base, src.before, len(src.buf)) == (len(big), ord("x"), 0)
    chunk = bytes(range(200))
    src = window.Source([chunk], 200)
    assert src.skim(lambda _: False, 1000)
    assert (src.base, src.before, bytes(src.buf)) == (200 - window.SEAM, chunk[-window.SEAM - 1], chunk[-window.SEAM :])
