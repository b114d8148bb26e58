"""archaudit.read.macho's branches that mutation testing showed no test pinned (docs/mutation.md).

The Mach-O fixtures are ld64-linked (tests/fixtures/pe/build.sh): macos_host.dylib carries no
device code, macos_sm80.dylib one nvcc-built sm_80 container. A Mach-O file is searched whole,
so device code added to its bytes is found wherever it lies; the HIP bundle is clang's
(tests/fixtures/amd/bin/hip_multi.so).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from archaudit.cli import main
from archaudit.model import Container, Library
from archaudit.read import macho
from archaudit.read.fatbin import MAGIC
from archaudit.read.library import library_from_bytes, scan_file

HERE = Path(__file__).parents[1]
PE = HERE / "fixtures" / "pe" / "bin"
HOST = (PE / "macos_host.dylib").read_bytes()
SM80 = (PE / "macos_sm80.dylib").read_bytes()


def _container(data: bytes) -> tuple[int, bytes]:
    """The one fatbin container of `data`: where it starts, and its bytes (header and entries)."""
    at = data.index(MAGIC)
    size = 16 + struct.unpack_from("<Q", data, at + 8)[0]
    return at, data[at : at + size]


def _bundle() -> bytes:
    path = HERE / "fixtures" / "amd" / "bin" / "hip_multi.so"
    (c,) = scan_file(str(path)).containers
    return path.read_bytes()[c.offset : c.offset + c.size]


def test_a_macos_library_with_device_code_is_inventoried_exactly():
    at, raw = _container(SM80)
    lib = library_from_bytes("pkg/libk.dylib", SM80, decode=True)
    (c,) = lib.containers
    assert lib == Library(
        "pkg/libk.dylib", len(SM80), "macho", (Container("nvidia", "embedded", "", at, len(raw), c.entries),)
    )
    assert [e.target for e in c.entries] == ["sm_80"] and c.entries[0].kernels


def test_device_code_of_both_vendors_is_found_and_listed_in_file_order():
    """A HIP bundle ahead of a fatbin container: both are read, in the order they lie."""
    bundle = _bundle()
    _, raw = _container(SM80)
    data = HOST + bundle + raw
    lib = library_from_bytes("pkg/libboth.dylib", data, decode=True)
    got = [(c.vendor, c.role, c.offset, c.size) for c in lib.containers]
    assert got == [("amd", "hip", len(HOST), len(bundle)), ("nvidia", "embedded", len(HOST) + len(bundle), len(raw))]
    assert not lib.problems and lib.notes == ()


def test_two_fatbin_containers_are_both_read():
    _, raw = _container(SM80)
    lib = library_from_bytes("pkg/libtwo.dylib", SM80 + raw, decode=True)
    assert [(c.vendor, c.offset) for c in lib.containers] == [("nvidia", SM80.index(MAGIC)), ("nvidia", len(SM80))]


def test_a_container_cut_short_fails_closed(tmp_path, capsys):
    """A Mach-O file whose fatbin container declares more bytes than the file holds: its sections
    are not read, so it is not known to be a coincidence. Before, the container vanished and
    the file read as a host library (a CPU wheel, exit 0)."""
    at, _ = _container(SM80)
    cut = SM80[: at + 200]
    lib = library_from_bytes("pkg/libcut.dylib", cut, decode=True)
    # the container's first cubin, cut short too, is no whole cubin either (E014)
    assert lib.containers == () and [p.code for p in lib.problems] == ["E014", "E011"]
    assert lib.problems[1].offset == at and "past the end of the file" in lib.problems[1].message
    assert "outside any fatbin container" in lib.problems[0].message and "outside the file" in lib.problems[0].message
    assert lib.notes == ()
    path = tmp_path / "libcut.dylib"
    path.write_bytes(cut)
    assert main(["check", "--no-config", "-q", str(path)]) == 1
    assert "E011" in capsys.readouterr().out


def test_a_host_library_stays_a_host_library():
    lib = library_from_bytes("pkg/libh.dylib", HOST, decode=True)
    assert lib == Library("pkg/libh.dylib", len(HOST), "macho", notes=(macho.NO_CUDA,))


@pytest.mark.parametrize("magic", macho.MAGICS)
def test_each_mach_o_magic_is_a_mach_o_file(magic):
    assert macho.is_macho(magic + HOST[4:64])
    assert library_from_bytes("pkg/libm.dylib", magic + SM80[4:], decode=True).format == "macho"


@pytest.mark.parametrize("head", [b"\x7fELF", b"MZ\x90\x00", b"\xfe\xed\xfa\xcf", b"\xca\xfe\xba"])
def test_other_heads_are_not(head):
    assert not macho.is_macho(head + b"\0" * 60)
