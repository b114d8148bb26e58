"""One library's forward pass (scan.py): the patterns each reader asks for, and LibraryScan run
over a real library's bytes, whole or from a stream that ends early. Libraries are the nvcc-built
fixtures (tests/fixtures/cuda/bin); the containers the pass finds are checked against the
container headers read here with struct, not with the reader under test."""

from __future__ import annotations

import struct

import pytest

import oracle
from archaudit.read import fatbin, hip, records
from archaudit.read.records import ScanSettings
from archaudit.read.scan import LibraryScan
from archaudit.read.search import Zone
from archaudit.read.stream import Source

BIN = oracle.FIXTURES
CONTAINER = struct.Struct("<IHHQ")  # magic, version, header size, bytes after the header
STRINGS = {*records.MARKERS, records.LINKER_MARKER, *records.STATEMENTS, *records.VERSION_MARKERS}


def magics(**options: object) -> set[bytes]:
    return {p.magic for p in LibraryScan.patterns(**options)}  # type: ignore[arg-type]


def test_containers_are_searched_for_whatever_else_is_asked():
    for options in ({}, {"code": False, "strings": False}, {"data": True}, {"machine": True, "isa": 62}):
        assert fatbin.MAGIC in magics(**options), options


def test_each_option_adds_its_own_records():
    everything = magics(data=True, machine=True)
    assert magics() == {fatbin.MAGIC, *hip.MAGICS, records.CUBIN_MAGIC, records.ZSTD_MAGIC, *STRINGS}
    assert magics(code=False, strings=False) == {fatbin.MAGIC}
    assert magics(cubins=False) == magics() - {records.CUBIN_MAGIC, records.ZSTD_MAGIC}
    assert magics(code=False) == magics() - {*hip.MAGICS, records.CUBIN_MAGIC, records.ZSTD_MAGIC}  # cubins need code
    assert magics(data=True) - magics() == {fatbin.WRAPPER_MAGIC, records.HIP_WRAPPER_MAGIC}
    assert magics(strings=False) == magics() - STRINGS
    assert everything - magics(data=True) == set(records.RUNTIME_MARKERS)


@pytest.mark.parametrize("isa, markers", [(62, (records.RUNTIME_MARKER,)), (183, (records.RUNTIME_MARKER_A64,))])
def test_the_static_runtime_is_looked_for_in_the_code_of_the_machine_given(isa, markers):
    """x86-64 (62) and aarch64 (183) ELF libraries: their own machine's getter only; a machine of
    neither, or none given, both."""
    assert magics(machine=True, isa=isa) - magics() == set(markers)
    assert magics(machine=True, isa=40) - magics() == set(records.RUNTIME_MARKERS)  # ARM, 32-bit
    assert magics(machine=True) - magics() == set(records.RUNTIME_MARKERS)


def containers_in(data: bytes) -> list[tuple[int, int]]:
    """(offset, size) of every fatbin container whose header reads, by bytes.find and struct."""
    out = []
    at = data.find(fatbin.MAGIC)
    while at >= 0:
        magic, version, header, size = CONTAINER.unpack_from(data, at)
        if version == 1 and header == 16 and at + header + size <= len(data):
            out.append((at, header + size))
        at = data.find(fatbin.MAGIC, at + 1)
    return out


def scan(image: bytes, size: int, chunk: int = 4096, **options: object):
    lib = LibraryScan("lib.so", size, ScanSettings())
    src = Source((image[i : i + chunk] for i in range(0, len(image), chunk)), size)
    return lib.run(src, [Zone(0, size, lib.patterns(**options))])  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["lib_sm80.so", "lib_multi.so", "lib_many.so", "kern.fatbin"])
def test_one_pass_finds_every_container_and_decodes_its_entries(name):
    data = (BIN / name).read_bytes()
    found = scan(data, len(data), data=True)
    assert [(c.offset, c.size) for c in found.containers] == containers_in(data) != []
    assert all(e.decoded for c in found.containers for e in c.entries) and not found.problems
    if name.endswith(".so"):  # the runtime registers each container through a wrapper record in .nvFatBinSegment
        assert found.wrappers


def test_a_stream_that_ends_before_the_size_given_is_e002():
    data = (BIN / "lib_sm80.so").read_bytes()
    cut = len(data) - 1000
    found = scan(data[:cut], len(data))
    assert [(p.code, p.message) for p in found.problems if p.code == "E002"] == [
        ("E002", f"stream ended after {cut} of {len(data)} bytes")
    ]
