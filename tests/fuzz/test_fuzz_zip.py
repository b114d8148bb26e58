"""Wheels: end of central directory, central directory entries, local headers and member
data of the example wheel, mutated and then audited through the CLI (zip members are read in
place, so every corruption must surface as E002/E003 or leave the inventory unchanged)."""

import zlib

from hypothesis import given, strategies as st

import fuzzlib as fz

WHEEL = str(fz.EXAMPLE_WHEEL.relative_to(fz.ROOT))


@given(decode=st.booleans(), data=st.data())
def test_wheel_structure(decode, data):
    lay = fz.zip_layout(WHEEL)
    mutant, note = data.draw(fz.mutated(fz.load(WHEEL), lay.fields, lay.regions), label="mutation")
    fz.check_mutant(WHEEL, mutant, note, decode, "zip")


@given(decode=st.booleans(), data=st.data())
def test_wheel_member_streams(decode, data):
    """A library member's deflate stream replaced: garbage, or a stream inflating past (or
    short of) its declared size, with the CRC and sizes patched to match or not."""
    original = fz.load(WHEEL)
    m, start = data.draw(st.sampled_from(fz.library_members(WHEEL)))
    raw = fz.load("tests/fixtures/cuda/bin/lib_example_kernels.so")
    how = data.draw(st.sampled_from(["garbage", "longer", "shorter", "bomb", "stored-lie"]))
    if how == "garbage":
        stream, crc, size = data.draw(st.binary(max_size=512)), None, None
    elif how == "longer":
        body = raw + b"\0" * data.draw(st.integers(1, 1 << 16))
        stream, crc, size = fz.deflate(body), zlib.crc32(body), data.draw(st.sampled_from([len(raw), m.size]))
    elif how == "shorter":
        body = raw[: data.draw(st.integers(0, len(raw) - 1))]
        stream, crc, size = fz.deflate(body), zlib.crc32(body), m.size
    elif how == "bomb":
        n = data.draw(st.sampled_from([1 << 20, 16 << 20, 64 << 20]))
        body = b"\0" * n
        stream, crc, size = fz.deflate(body), zlib.crc32(body), data.draw(st.sampled_from([m.size, n, 2**32 - 1]))
    else:
        stream, crc, size = raw[: m.compressed_size], None, None
    mutant = fz.rezip_member(original, m, start, stream, crc, size)
    fz.check_mutant(WHEEL, mutant, f"{how} stream for {m.name}", decode, "zip-streams")
