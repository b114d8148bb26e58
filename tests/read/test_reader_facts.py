"""Per-payload facts the readers take from real compiler output, through the scan: `a` targets of
CUDA 12.x cubins in a fatbin, PTX targets, kernels through the fatbin decode path, and device code
that no fatbin section announces (fixtures: tests/fixtures/readers, built by its build.sh). What a
cubin or a PTX text says on its own is test_codefacts.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from archaudit.model import EMBEDDED, PTX, SASS
from archaudit.read import elf
from archaudit.read.library import scan_file

# Every test here runs with each cubin reader (conftest.each_cubin_reader).
pytestmark = pytest.mark.usefixtures("each_cubin_reader")

BIN = Path(__file__).parents[1] / "fixtures" / "readers" / "bin"
AXPY = ("_Z4axpyfPKfPfi",)


def test_cuda12_a_cubins_in_a_fatbin_agree_with_their_headers():
    lib = scan_file(str(BIN / "cuda12_a.fatbin"), decode=True)
    assert lib.problems == ()
    assert [(e.target, e.decoded) for e in lib.entries] == [("sm_90a", True), ("sm_100a", True)]


def test_ptx_target_records_what_the_text_says():
    lib = scan_file(str(BIN / "ptx90_says_90a.fatbin"), decode=True)
    assert lib.problems == ()
    (e,) = lib.entries
    assert (e.kind, e.target, e.ptx_target) == (PTX, "sm_90", "sm_90a")


def test_hidden_kernels_through_the_fatbin_decode_path():
    lib = scan_file(str(BIN / "hidden_kernels.fatbin"), decode=True)
    assert lib.problems == ()
    assert [(e.kind, e.kernels) for e in lib.entries] == [(SASS, AXPY), (PTX, AXPY)]


# --- device code that no fatbin section announces (issue: every byte is searched) ---

HIDDEN = ["lib_incbin_text.so", "lib_noshdr_rx.so", "lib_appended.so"]


@pytest.mark.parametrize("name", HIDDEN)
def test_device_code_outside_fatbin_sections_is_found(name):
    lib = scan_file(str(BIN / name))
    carrying = [c for c in lib.containers if c.entries and c.entries[0].kernels]
    assert [(c.role, [(e.target, e.kernels) for e in c.entries]) for c in carrying] == [(EMBEDDED, [("sm_80", AXPY)])]


def test_where_the_hidden_fatbins_lie():
    text = scan_file(str(BIN / "lib_incbin_text.so"))
    assert [c.section for c in text.containers] == [".text"]  # an executable section
    stripped = (BIN / "lib_noshdr_rx.so").read_bytes()
    h = elf.parse_header(stripped, len(stripped))
    assert h.shnum == 0 and h.shoff == 0  # no section headers at all
    appended = (BIN / "lib_appended.so").read_bytes()
    (c,) = scan_file(str(BIN / "lib_appended.so")).containers
    assert c.offset + c.size == len(appended)  # after the ELF's last byte


@pytest.mark.parametrize("name", HIDDEN)
def test_hidden_device_code_is_judged(name, capsys):
    """A claim the hidden sm_80-only code does not meet fails; none of these passes it."""
    from archaudit.cli import main

    assert main(["check", "-q", "--no-config", str(BIN / name), "--arch", "80,90"]) == 1
    out = capsys.readouterr().out
    assert "G001" in out or "E011" in out


def test_padding_between_containers_is_zeros_up_to_the_section_alignment():
    """aarch64 libraries (nvidia-curand 10.4.0.35) align each container to .nv_fatbin's 256
    bytes: zero padding up to the alignment passes, anything else in it fails closed."""
    from archaudit.read.attribution import ALIGN_SLACK, _accounted
    from archaudit.read.records import FoundContainer

    sec = elf.Section(0, 1, 2, 0x10000, 0x10000, 0x300, 0, ".nv_fatbin", addralign=256)

    def found(trailing: bytes, second_at: int = 0x10100) -> list[FoundContainer]:
        return [FoundContainer(0x10000, 0x90, (), trailing), FoundContainer(second_at, 0x200, (), b"")]

    assert _accounted(sec, found(bytes(0x70)), ALIGN_SLACK)
    assert not _accounted(sec, found(bytes(0x6F) + b"\1"), ALIGN_SLACK)  # not padding
    assert not _accounted(sec, found(bytes(0x68), 0x100F8), ALIGN_SLACK)  # not aligned
    assert not _accounted(sec, found(b"", 0x10100), ALIGN_SLACK)  # padding bytes never seen
    small = elf.Section(0, 1, 2, 0x10000, 0x10000, 0x300, 0, ".nv_fatbin", addralign=8)
    assert not _accounted(small, found(bytes(0x70)), ALIGN_SLACK)  # more than its alignment


@pytest.mark.parametrize("method", ["zstd", "zlib"])
def test_version1_compressed_bundles_over_4k_in_a_library(method):
    """A CCOB v1 bundle states no size: its whole stream is walked, however long."""
    data = (BIN / f"lib_hip_ccob_v1_{method}.so").read_bytes()
    lib = scan_file(str(BIN / f"lib_hip_ccob_v1_{method}.so"))
    assert lib.problems == ()
    (c,) = lib.containers
    assert c.section == ".hip_fatbin" and c.size > 4096 and data[c.offset : c.offset + 6] == b"CCOB\x01\x00"
    assert sorted(e.target for e in c.entries) == ["gfx1100", "gfx90a:xnack-", "gfx942:sramecc+:xnack-"]
    assert all(e.compression == method and e.kernels for e in c.entries)
