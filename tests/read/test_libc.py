"""The C library loaded once for the scanner's memmem and the decoders' malloc_trim: each
caller gets its own function pointer, and the search through it finds what bytes.find finds
in a real library."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from archaudit.read import decode, fatbin, libc, search

LIB = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin" / "lib_multi.so"
GLIBC = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memmem and malloc_trim are glibc's")


@GLIBC
def test_both_callers_take_their_function_from_the_one_loader():
    assert search._MEMMEM is not None and decode._TRIM is not None
    assert decode._TRIM(0) in (0, 1)  # malloc_trim returns whether it released memory


@GLIBC
def test_each_caller_gets_a_pointer_of_its_own():
    mine = libc.function("memmem")
    assert mine is not None and mine is not search._MEMMEM
    assert mine.argtypes is None  # the scanner's argtypes are on its own pointer only


def test_a_function_the_library_lacks_is_none():
    assert libc.function("archaudit_no_such_function") is None


@GLIBC
@pytest.mark.parametrize("kind", [bytes, bytearray])
def test_memmem_search_finds_every_container_bytes_find_finds(kind: type[bytes] | type[bytearray]):
    data = kind(LIB.read_bytes())
    assert len(data) > search.MEMMEM_MIN
    expected, at = [], data.find(fatbin.MAGIC)
    while at >= 0:
        expected.append(at)
        at = data.find(fatbin.MAGIC, at + 1)
    found, at = [], search.find_bytes(data, fatbin.MAGIC, 0, len(data))
    while at >= 0:
        found.append(at)
        at = search.find_bytes(data, fatbin.MAGIC, at + 1, len(data))
    assert len(expected) >= 2 and found == expected
    # a range that stops one byte short of a hit does not find it
    assert search.find_bytes(data, fatbin.MAGIC, 0, expected[0] + len(fatbin.MAGIC) - 1) == -1
