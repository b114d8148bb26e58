"""What a file is (filekinds.py): its content kind by its first bytes, a library by its name, and
the one rule that picks a wheel's members and a directory's files to read. Heads are the
nvcc-built fixtures' (tests/fixtures/cuda/bin) and the MSVC-built DLLs' (tests/fixtures/pe/bin)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from archaudit.read.filekinds import (
    HEAD,
    content_kind,
    file_content_kind,
    is_audited_file,
    is_library_name,
    select_member,
)
from helpers import inner_zip

ROOT = Path(__file__).resolve().parents[2]
CUDA = ROOT / "tests" / "fixtures" / "cuda" / "bin"
GOOD = (CUDA / "lib_sm80.so").read_bytes()
BAD = (CUDA / "lib_ptx90.so").read_bytes()  # PTX for compute_90 only
FATBIN = (CUDA / "kern.fatbin").read_bytes()
PE = next((ROOT / "tests" / "fixtures" / "pe" / "bin").glob("*.dll"))


@pytest.mark.parametrize(
    "head, kind",
    [
        (GOOD[:64], "elf"),
        (FATBIN[:64], "fatbin"),
        (b"__CLANG_OFFLOAD_BUNDLE__" + bytes(40), "offload-bundle"),
        (b"CCOB\x02\x00\x01\x00" + bytes(56), "offload-bundle"),
        (b"PK\x03\x04" + bytes(60), "zip"),
        (b"\xfe\xed\xfa\xce" + bytes(60), "mach-o"),
        (b"\xce\xfa\xed\xfe" + bytes(60), "mach-o"),
        (b"\xfe\xed\xfa\xcf" + bytes(60), "mach-o"),
        (b"\xcf\xfa\xed\xfe" + bytes(60), "mach-o"),
        (b"MZ" + bytes(0x3A) + (0x40).to_bytes(4, "little") + b"PE\0\0", "pe"),
        (b"MZ" + bytes(0x3A) + (0x40).to_bytes(4, "little") + b"PX\0\0", None),  # a stub pointing at no PE header
        (b"MZ" + bytes(0x3A), None),  # too short to hold e_lfanew
        (b"\x7fELG" + bytes(60), None),
        (b"PK\x05\x06" + bytes(60), None),  # an empty zip's end record is not a member to read
        (b"CCO", None),
        (b"", None),
        (b"import torch\n", None),
    ],
)
def test_content_kind_is_decided_by_the_magic(head, kind):
    assert content_kind(head) == kind


def test_a_real_pe_dll_is_pe_by_content():
    assert content_kind(PE.read_bytes()[:HEAD]) == "pe"


@pytest.mark.parametrize(
    "name, expected",
    [
        ("pkg/lib/libk.so", True),
        ("pkg/LIBK.SO", True),
        ("libk.so.12", True),
        ("libk.so.12.4.1", True),
        ("k.cubin", True),
        ("k.fatbin", True),
        ("k.ptx", True),
        ("k.hsaco", True),
        ("k.pyd", True),
        ("k.dll", True),
        ("k.dylib", True),
        ("libk.so.1rc1", False),
        ("libk.so.", False),
        ("libk.so.x1", False),
        ("pkg.so/readme", False),
        ("libk.sox", False),
        ("k.py", False),
    ],
)
def test_library_names(name, expected):
    assert is_library_name(name) is expected


def test_select_member_prefers_content_then_name():
    assert select_member("demo/data.bin", GOOD[:64]) == "elf"
    assert select_member("demo/libk.so", b"INPUT(-lk)\n") == "name"
    assert select_member("demo/readme.txt", b"hello") is None


def test_one_rule_for_files_on_disk(tmp_path):
    """`is_audited_file` is the rule smoke uses for installed files: the same as for members."""
    cases = {
        "libk.so.bak": BAD,
        "kernels.bin": FATBIN,
        "libtext.so": b"INPUT(-lfoo)\n",
        "notes.txt": b"hi\n",
        "bundle.zip": inner_zip([("a.so", BAD)]),
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    os.mkfifo(tmp_path / "libfifo.so")  # never opened: opening it would block
    os.symlink("missing.so", tmp_path / "libbroken.so")
    chosen = {n for n in [*cases, "libfifo.so", "libbroken.so"] if is_audited_file(str(tmp_path / n))}
    assert chosen == {"libk.so.bak", "kernels.bin", "libtext.so", "bundle.zip"}


def test_a_file_on_disk_is_kinded_by_its_first_bytes_and_special_files_never_opened(tmp_path):
    """file_content_kind reads a regular file's first HEAD bytes (a link followed to one); a FIFO
    (opening it would block), a directory, a missing file and a broken link are no kind at all."""
    (tmp_path / "kernels.dat").write_bytes(GOOD)
    (tmp_path / "blob.bin").write_bytes(FATBIN)
    (tmp_path / "libtext.so").write_bytes(b"INPUT(-lfoo)\n")
    (tmp_path / "app.dll").write_bytes(PE.read_bytes())
    os.symlink("kernels.dat", tmp_path / "link.dat")
    os.symlink("missing.so", tmp_path / "libbroken.so")
    os.mkfifo(tmp_path / "fifo.so")
    (tmp_path / "dir.so").mkdir()
    kinds = {p.name: file_content_kind(str(p)) for p in sorted(tmp_path.iterdir())}
    assert kinds == {
        "app.dll": "pe",
        "blob.bin": "fatbin",
        "dir.so": None,
        "fifo.so": None,
        "kernels.dat": "elf",
        "libbroken.so": None,
        "libtext.so": None,
        "link.dat": "elf",
    }
    assert file_content_kind(str(tmp_path / "nothere" / "x.so")) is None


def test_only_a_files_first_head_bytes_decide(tmp_path):
    """On disk, as in a wheel, the first HEAD bytes say what a file is: a PE header that starts
    past them is not seen (the whole bytes would say PE), one that ends within them is."""
    for name, at, kind in (("far.bin", HEAD, None), ("near.bin", HEAD - 4, "pe")):
        stub = b"MZ" + bytes(0x3A) + at.to_bytes(4, "little")
        data = stub + bytes(at - len(stub)) + b"PE\0\0" + bytes(100)
        assert content_kind(data) == "pe"
        (tmp_path / name).write_bytes(data)
        assert file_content_kind(str(tmp_path / name)) == kind, name
        assert is_audited_file(str(tmp_path / name)) is (kind is not None), name
