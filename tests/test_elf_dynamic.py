"""elf.read_dynamic, which smoke's load probe reads libraries with, agrees with binutils' readelf."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from archaudit import elf
from archaudit.scan import scan_stream

BIN = Path(__file__).resolve().parent / "fixtures" / "cuda" / "bin"
READELF = shutil.which("readelf")


def _readelf(path: Path) -> dict[str, list[str]]:
    out = subprocess.run([READELF, "-d", "-W", str(path)], capture_output=True, text=True, check=True).stdout
    found: dict[str, list[str]] = {"NEEDED": [], "RUNPATH": [], "RPATH": [], "SONAME": []}
    for tag, value in re.findall(r"\((NEEDED|RUNPATH|RPATH|SONAME)\)\s+[^[]*\[(.*)\]", out):
        found[tag] += value.split(":") if tag in ("RUNPATH", "RPATH") else [value]
    return found


@pytest.mark.skipif(READELF is None, reason="binutils' readelf is not installed")
@pytest.mark.parametrize("name", sorted(p.name for p in BIN.glob("lib*.so")))
def test_read_dynamic_agrees_with_readelf(name):
    path = BIN / name
    with open(path, "rb") as f:
        d = elf.read_dynamic(f, path.stat().st_size)
    want = _readelf(path)
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



@pytest.mark.skipif(READELF is None, reason="binutils' readelf is not installed")
def test_scanner_reads_needed_and_runpath_in_any_chunking():
    """The one-pass reader captures the dynamic strings as they pass, whatever the stream's
    chunks: also when the rest of them lies in the chunk that completes the dynamic segment
    (reading 1 MiB chunks lost the NEEDED names of torch 2.14.1's libc10.so that way)."""
    path = BIN.parent.parent / "readers" / "bin" / "lib_patchelf_runpath.so"
    data = path.read_bytes()
    expected = _readelf(path)
    assert expected["RUNPATH"]
    for chunk in range(64, 20000, 61):
        def chunks(step: int = chunk) -> Iterator[bytes]:
            for i in range(0, len(data), step):
                yield data[i:i + step]
        lib = scan_stream(path.name, len(data), chunks, decode=False)
        assert (list(lib.needed), list(lib.runpath)) == (expected["NEEDED"], expected["RUNPATH"]), chunk
