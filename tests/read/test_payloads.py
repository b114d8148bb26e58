"""Compressed device-code payloads: decoded with bounded memory, lies are findings."""

from __future__ import annotations

import struct
import tracemalloc
from collections.abc import Iterator

import lz4.block
import pytest
import zstandard

import oracle
from archaudit.findings import Code
from archaudit.model import Library
from archaudit.read import fatbin
from archaudit.read.decode import DecodePool
from archaudit.read.library import library_from_bytes, scan_file, scan_stream

BIN = oracle.FIXTURES


def _first_entry(data: bytes, compression: str) -> int:
    """Offset of the first entry with this compression, found by archaudit's own scan."""
    lib = library_from_bytes("x.so", data)
    return next(e.offset for e in lib.entries if e.compression == compression)


def _patch(data: bytearray, entry: int, field: int, fmt: str, value: int) -> None:
    struct.pack_into(fmt, data, entry + field, value)


def _pooled(data: bytes) -> Library:
    """The library as check reads it: payloads decoded by the pool's workers, into their
    reused buffers."""

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(data), 1 << 20):
            yield data[i : i + (1 << 20)]

    with DecodePool(2) as pool:
        return scan_stream("x.so", len(data), chunks, pool=pool)


def _codes(data: bytes | bytearray) -> list[str]:
    """The findings of a decoding audit, the same whether payloads are decoded in the reading
    thread or by the pool."""
    inline = library_from_bytes("x.so", bytes(data), decode=True)
    pooled = _pooled(bytes(data))
    assert [(p.code, p.offset) for p in pooled.problems] == [(p.code, p.offset) for p in inline.problems]
    assert pooled.entries == inline.entries
    return [p.code for p in inline.problems]


def _codes_and_peak(data: bytes | bytearray) -> tuple[list[Code], int]:
    """The findings of a decoding audit, and the most memory Python held during it."""
    tracemalloc.start()
    try:
        codes = [p.code for p in library_from_bytes("x.so", bytes(data), decode=True).problems]
        return codes, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fixture", ["lib_cmp_size_all.so", "lib_cmp_speed_all.so", "lib_cmp_none.so"])
def test_pool_decodes_as_the_reading_thread_does(fixture):
    """Every entry's facts are the same whether it is decoded in place or into a worker's
    reused buffer."""
    data = (BIN / fixture).read_bytes()
    inline = library_from_bytes("x.so", data)
    assert inline.problems == () and inline.entries
    assert _pooled(data).entries == inline.entries


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_a_reused_buffer_holds_exactly_each_payload(compression):
    """A buffer grown by a large payload gives a smaller one exactly its own bytes, and a
    stream that decodes short or long of its declared size fails, as without the buffer."""
    out = fatbin.DecodeBuffer()
    flag = fatbin.FLAG_ZSTD if compression == "zstd" else fatbin.FLAG_LZ4

    def encode(payload: bytes) -> bytes:
        if compression == "zstd":
            return zstandard.ZstdCompressor().compress(payload)
        return lz4.block.compress(payload, store_size=False)

    def header(raw: bytes, declared: int) -> fatbin.EntryHeader:
        return fatbin.EntryHeader(2, 64, len(raw), len(raw), 0, (1, 8), 80, 0, 0, flag, declared)

    big, small = bytes(range(256)) * (12 << 12), b"small payload" * 100
    for payload in (big, small):
        raw = encode(payload)
        assert bytes(fatbin.decode_payload_into(header(raw, len(payload)), raw, 0, 1 << 30, out)) == payload
    raw = encode(small)
    for declared in (len(small) - 1, len(small) + 1):
        with pytest.raises(fatbin.FatbinError) as err:
            fatbin.decode_payload_into(header(raw, declared), raw, 0, 1 << 30, out)
        assert err.value.code == "E012"
    with pytest.raises(fatbin.FatbinError) as err:
        fatbin.decode_payload_into(header(raw[: len(raw) // 2], len(small)), raw[: len(raw) // 2], 0, 1 << 30, out)
    assert err.value.code == "E012"


@pytest.mark.parametrize("fixture,compression", [("lib_cmp_size_all.so", "zstd"), ("lib_cmp_speed_all.so", "lz4")])
def test_wrong_declared_size_is_a_finding(fixture, compression):
    data = bytearray((BIN / fixture).read_bytes())
    at = _first_entry(bytes(data), compression)
    usize = struct.unpack_from("<Q", data, at + 0x38)[0]
    _patch(data, at, 0x38, "<Q", usize + 8)
    assert _codes(data) == ["E012"]
    _patch(data, at, 0x38, "<Q", usize - 8)
    assert _codes(data) == ["E012"]


@pytest.mark.parametrize("fixture,compression", [("lib_cmp_size_all.so", "zstd"), ("lib_cmp_speed_all.so", "lz4")])
def test_truncated_payload_is_a_finding(fixture, compression):
    data = bytearray((BIN / fixture).read_bytes())
    at = _first_entry(bytes(data), compression)
    csize = struct.unpack_from("<I", data, at + 0x10)[0]
    _patch(data, at, 0x10, "<I", csize // 2)  # the stored stream ends early
    assert _codes(data) == ["E012"]


def test_zstd_frame_expanding_past_the_declared_size_is_a_finding():
    """A frame of unknown content size that inflates to 8 MiB, declared as 1 KiB."""
    data = bytearray((BIN / "lib_cmp_size_all.so").read_bytes())
    at = _first_entry(bytes(data), "zstd")
    hsize, psize = struct.unpack_from("<IQ", data, at + 4)
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    bomb = cctx.compress(b"\0" * (8 << 20))
    assert len(bomb) <= psize, "the bomb must fit the payload area it replaces"
    data[at + hsize : at + hsize + len(bomb)] = bomb
    _patch(data, at, 0x10, "<I", len(bomb))
    _patch(data, at, 0x38, "<Q", 1024)
    codes, peak = _codes_and_peak(data)
    assert codes == ["E012"]
    assert peak < 2 << 20, f"decoding held {peak} bytes"


@pytest.mark.parametrize("fixture,compression", [("lib_cmp_size_all.so", "zstd"), ("lib_cmp_speed_all.so", "lz4")])
def test_payload_declaring_4_gib_is_refused_before_any_allocation(fixture, compression):
    data = bytearray((BIN / fixture).read_bytes())
    at = _first_entry(bytes(data), compression)
    _patch(data, at, 0x38, "<Q", 4 << 30)
    codes, peak = _codes_and_peak(data)
    assert codes == ["E012"]
    assert peak < 4 << 20, f"peak {peak} bytes for a payload declaring 4 GiB"


def test_garbage_payload_is_a_finding():
    data = bytearray((BIN / "lib_cmp_size_all.so").read_bytes())
    at = _first_entry(bytes(data), "zstd")
    hsize = struct.unpack_from("<I", data, at + 4)[0]
    csize = struct.unpack_from("<I", data, at + 0x10)[0]
    data[at + hsize : at + hsize + csize] = bytes((i * 37) & 0xFF for i in range(csize))
    assert _codes(data) == ["E012"]


def test_cubin_architecture_must_agree_with_the_entry_header():
    """An sm_80 cubin under a header that says sm_90 would be listed as sm_90 coverage."""
    data = bytearray((BIN / "lib_cmp_none.so").read_bytes())
    lib = library_from_bytes("x.so", bytes(data))
    at = next(e.offset for e in lib.entries if e.kind == "sass")
    _patch(data, at, 0x1C, "<I", 90)
    assert _codes(data) == ["E014"]
    # without decoding, the raw cubin's first bytes are still checked
    assert [p.code for p in library_from_bytes("x.so", bytes(data)).problems] == ["E014"]


def test_headers_only_audit_checks_the_zstd_frame_header():
    data = bytearray((BIN / "lib_cmp_size_all.so").read_bytes())
    at = _first_entry(bytes(data), "zstd")
    usize = struct.unpack_from("<Q", data, at + 0x38)[0]
    _patch(data, at, 0x38, "<Q", usize + 8)  # the frame records the true size
    assert [p.code for p in library_from_bytes("x.so", bytes(data)).problems] == ["E012"]


def test_lz4_and_zstd_decode_to_the_same_cubin():
    """The same kernel compressed two ways decodes to byte-identical payloads."""
    a = scan_file(str(BIN / "lib_cmp_speed_all.so"), decode=True)
    b = scan_file(str(BIN / "lib_cmp_size_all.so"), decode=True)
    assert [(e.kind, e.target, e.size, e.kernels) for e in a.entries] == [
        (e.kind, e.target, e.size, e.kernels) for e in b.entries
    ]


def test_decode_payload_checks_the_zstd_frame_size_before_decoding():
    frame = zstandard.ZstdCompressor().compress(b"x" * 5000)
    h = fatbin.EntryHeader(2, 64, len(frame), len(frame), 0, (1, 8), 80, 0, 0, fatbin.FLAG_ZSTD, 4000)
    with pytest.raises(fatbin.FatbinError) as err:
        fatbin.decode_payload(h, frame, 0)
    assert err.value.code == "E012"
    raw = lz4.block.compress(b"y" * 5000, store_size=False)
    h = fatbin.EntryHeader(2, 64, len(raw), len(raw), 0, (1, 8), 80, 0, 0, fatbin.FLAG_LZ4, 5000)
    assert fatbin.decode_payload(h, raw, 0) == b"y" * 5000
