"""elf.read_dynamic, which smoke's load probe reads libraries with, agrees with binutils' readelf."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from archaudit.read import elf
from archaudit.read.library import scan_stream
from helpers import READELF, readelf_dynamic
from reference_tools import needs_tool

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"


@needs_tool("binutils readelf (apt-get install binutils)", READELF)
@pytest.mark.parametrize("name", sorted(p.name for p in BIN.glob("lib*.so")))
def test_read_dynamic_agrees_with_readelf(name):
    path = BIN / name
    with open(path, "rb") as f:
        d = elf.read_dynamic(f, path.stat().st_size)
    want = readelf_dynamic(path)
    assert d.type == elf.ET_DYN
    assert list(d.needed) == want["NEEDED"]
    assert list(d.runpath) == want["RUNPATH"] and list(d.rpath) == want["RPATH"]
    assert d.soname == (want["SONAME"][0] if want["SONAME"] else None)


def test_read_dynamic_rejects_what_is_not_a_64_bit_elf(tmp_path):
    script = tmp_path / "libx.so"
    script.write_bytes(b"INPUT(-lfoo)\n")
    with open(script, "rb") as f, pytest.raises(elf.ElfError):
        elf.read_dynamic(f, 13)
    head = bytearray((BIN / "lib_host.so").read_bytes()[:64])
    head[4] = 1  # ELFCLASS32
    small = tmp_path / "lib32.so"
    small.write_bytes(bytes(head))
    with open(small, "rb") as f, pytest.raises(elf.ElfError) as err:
        elf.read_dynamic(f, 64)
    assert err.value.code == "E020"


@needs_tool("binutils readelf (apt-get install binutils)", READELF)
def test_scanner_reads_needed_and_runpath_in_any_chunking():
    """The one-pass reader captures the dynamic strings as they pass, whatever the stream's
    chunks: also when the rest of them lies in the chunk that completes the dynamic segment
    (reading 1 MiB chunks lost the NEEDED names of torch 2.14.1's libc10.so that way)."""
    path = BIN.parent.parent / "readers" / "bin" / "lib_patchelf_runpath.so"
    data = path.read_bytes()
    expected = readelf_dynamic(path)
    assert expected["RUNPATH"]
    for chunk in range(64, 20000, 61):

        def chunks(step: int = chunk) -> Iterator[bytes]:
            for i in range(0, len(data), step):
                yield data[i : i + step]

        lib = scan_stream(path.name, len(data), chunks, decode=False)
        assert (list(lib.needed), list(lib.runpath)) == (expected["NEEDED"], expected["RUNPATH"]), chunk
