"""32-bit x86 host libraries (Compute Sanitizer ships some, for 32-bit programs): their headers
are not read, but every byte is searched for device code. One that holds none is host code; one
that holds some is E020, fail closed (CUDA 12 and newer build no 32-bit programs), while
cuobjdump lists its cubins: the difference is that archaudit does not judge what it cannot
place. gcc -m32 and GNU ld built both (tests/fixtures/cuda/build_elf32.sh)."""

from __future__ import annotations

import json

import pytest

import oracle
from archaudit.cli import main

ELF32 = oracle.FIXTURES / "elf32"


def check(capsys: pytest.CaptureFixture[str], path: str) -> tuple[int, dict]:
    rc = main(["check", "-q", "--format", "json", "--no-config", "--arch", "80;90", path])
    return rc, json.loads(capsys.readouterr().out)


def test_a_32_bit_library_without_device_code_is_host_code(capsys: pytest.CaptureFixture[str]) -> None:
    _, rep = check(capsys, str(ELF32 / "libhost32.so"))
    (t,) = rep["targets"]
    assert [f["code"] for f in t["findings"]] == ["G006"]  # no device code: not E020
    assert oracle.list_entries(ELF32 / "libhost32.so") == []  # cuobjdump: "does not contain device code"


def test_a_32_bit_library_with_device_code_is_unsupported_and_fails_closed(capsys: pytest.CaptureFixture[str]) -> None:
    rc, rep = check(capsys, str(ELF32 / "libfatbin32.so"))
    (t,) = rep["targets"]
    (e,) = [f for f in t["findings"] if f["code"] == "E020"]
    assert rc != 0 and "32-bit ELF carrying device code (1 container(s))" in e["message"]
    # cuobjdump reads the same fatbin's two cubins; archaudit found its container and refused it
    assert sorted(arch for _, arch in oracle.list_entries(ELF32 / "libfatbin32.so")) == ["sm_80", "sm_90"]


def test_a_wheel_of_32_bit_helpers_beside_its_libraries_is_judged_by_its_libraries(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The 32-bit helper next to a library that covers the claim: the verdict is the library's."""
    d = tmp_path / "pkg"
    (d / "x86").mkdir(parents=True)
    (d / "x86" / "libhost32.so").write_bytes((ELF32 / "libhost32.so").read_bytes())
    (d / "lib_all.so").write_bytes((oracle.FIXTURES / "lib_all.so").read_bytes())
    rc, rep = check(capsys, str(d))
    assert rc == 0 and not [f for f in rep["targets"][0]["findings"] if f["code"] == "E020"]
