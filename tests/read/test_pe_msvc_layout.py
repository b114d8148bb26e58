"""What MSVC's toolchain writes for CUDA device code in a DLL or .pyd (catboost 1.2.10's
_catboost.pyd, win_amd64): each fatbin container in .nv_fatb sits in a host array of 6/5 of its
size rounded up to 16 bytes, the rest zeros (pe.msvc_slack), and .nvFatBi holds one 24-byte
wrapper record per container, each padded to 32 bytes, then zeros. Before, 45 MB of .nv_fatb were
E011 and .nvFatBi was E011 too. Each relaxation holds only for zeros: a byte set just outside it
is E011 again."""

from __future__ import annotations

import struct

import pytest

from archaudit.read import pe
from archaudit.read.library import library_from_bytes
from wheels import fetch

# (container size, bytes to the next container) as catboost 1.2.10's _catboost.pyd has them
MEASURED = [(1744864, 2093840), (6837272, 8204736), (150128, 180160), (2518880, 3022656)]


@pytest.mark.parametrize("size, slot", MEASURED)
def test_the_slack_is_what_the_real_layout_leaves(size, slot):
    assert size + pe.msvc_slack(size) == slot


def _records(n: int, stride: int, tail: int) -> bytes:
    rec = struct.pack("<IIQQ", 0x466243B1, 1, 0x180000000, 0)
    return b"".join(rec + bytes(stride - len(rec)) for _ in range(n)) + bytes(tail)


@pytest.mark.parametrize(
    "stride, tail, read, ok",
    [
        (24, 8, False, True),  # MSVC, lld-link: 24-byte records (MinGW pads under 32 bytes)
        (24, 40, False, False),  # 40 bytes unread after them could hide a record
        (24, 40, True, True),  # read and all zeros
        (32, 372, True, True),  # catboost: 76 records of 32 bytes, 372 zeros
        (32, 372, False, False),  # not read: nothing shows the padding is zeros
    ],
)
def test_wrapper_records_and_their_padding(stride, tail, read, ok):
    blob = _records(76, stride, tail)
    mapped = list(range(0x1000, 0x1000 + stride * 76, stride))
    assert pe._records_and_padding(0x1000, mapped, len(blob), blob if read else None) is ok


@pytest.mark.parametrize("where", [5 * 32 + 24, 76 * 32 + 100])  # a record's padding; the tail
def test_a_byte_in_the_padding_is_not_padding(where):
    blob = bytearray(_records(76, 32, 372))
    blob[where] = 1
    mapped = list(range(0, 32 * 76, 32))
    assert not pe._records_and_padding(0, mapped, len(blob), bytes(blob))


@pytest.fixture(scope="module")
def catboost_pyd() -> bytes:
    import zipfile

    with zipfile.ZipFile(fetch("catboost", "1.2.10", "win_amd64")) as z:
        return z.read("catboost/_catboost.pyd")


def _section(data: bytes, name: str) -> pe.Section:
    h = pe.parse_headers(data[: 1 << 16], len(data))
    return next(s for s in h.sections if s.name == name)


@pytest.mark.slow
def test_catboost_pyd_reads_whole(catboost_pyd):
    lib = library_from_bytes("catboost/_catboost.pyd", catboost_pyd, decode=False)
    assert not lib.problems
    fb = _section(catboost_pyd, ".nv_fatb")
    cs = [c for c in lib.containers if c.section == ".nv_fatb"]
    assert len(cs) == 76 and {c.role for c in cs} == {"executable"}
    ends = [c.offset for c in cs[1:]] + [fb.raw_offset + fb.virtual_size]
    assert all(c.offset + c.size + pe.msvc_slack(c.size) == end for c, end in zip(cs, ends))


@pytest.mark.slow
@pytest.mark.parametrize("what", ["gap", "wrapper padding"])
def test_a_byte_set_just_outside_the_msvc_layout_is_e011(catboost_pyd, what):
    data = bytearray(catboost_pyd)
    if what == "gap":
        lib = library_from_bytes("x.pyd", catboost_pyd, decode=False)
        first = next(c for c in lib.containers if c.section == ".nv_fatb")
        data[first.offset + first.size + pe.msvc_slack(first.size) - 1] = 1  # the slot's last byte
    else:
        seg = _section(catboost_pyd, ".nvFatBi")
        data[seg.raw_offset + 24] = 1  # the first record's padding
    lib = library_from_bytes("x.pyd", bytes(data), decode=False)
    assert "E011" in {p.code for p in lib.problems}
