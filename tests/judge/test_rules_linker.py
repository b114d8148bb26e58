"""G013 on nvcc's relocatable cubins: code the driver cannot load alone covers a GPU only where
its library shows it links device code at run time.

rdc_ext.fatbin (an sm_90 cubin calling a function it does not carry) is refused alone by the
H200's driver with CUDA_ERROR_NOT_FOUND (500) and rdc_self.fatbin (relocatable, self-contained)
loads (records/smoke-h200/jit-modes.txt, the `edge` lines). librdc_linked.so and
librdc_unlinked.so keep rdc_ext.fatbin in .rodata, as cuSPARSE keeps the kernels it links with
user operators; the first names nvJitLink as cuSPARSE 12.9 does (tests/fixtures/smoke/build.sh).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archaudit.cli import main
from archaudit.read.library import scan_file

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "smoke" / "bin"


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, list[str]]]:
    rc = main(["check", "-q", "--format", "json", "--no-config", *args])
    report = json.loads(capsys.readouterr().out)
    codes: dict[str, list[str]] = {}
    for t in report["targets"]:
        for f in t["findings"]:
            codes.setdefault(f["code"], []).append(f["message"])
    return rc, codes


@pytest.mark.parametrize(
    "name, rc, codes",
    [
        ("rdc_ext.fatbin", 1, ["G013"]),  # a bare fatbin has no linker: 500 on the H200
        ("rdc_self.fatbin", 0, ["D002"]),  # relocatable, but carries what it calls: 0 on the H200
        ("librdc_unlinked.so", 1, ["G013"]),  # rdc_ext.fatbin in a library that names no linker
        ("librdc_linked.so", 0, ["D002"]),  # the same in a library that names nvJitLink
    ],
)
def test_code_not_loadable_alone_covers_its_gpu_only_where_it_is_linked(capsys, name, rc, codes):
    got, found = check(capsys, "--arch", "sm_90", str(BIN / name))
    assert (got, sorted(found)) == (rc, codes), found


def test_g013_says_what_the_cubin_calls_and_why_nothing_links_it(capsys):
    _, found = check(capsys, "--arch", "sm_90", str(BIN / "rdc_ext.fatbin"))
    (message,) = found["G013"]
    assert "on 9.0 (claimed)" in message and "call _Z10rdc_helperf without carrying it" in message
    assert "no nvJitLink" in message and "CUDA_ERROR_NOT_FOUND" in message
    assert "G001" not in found  # one cause, one code


def test_on_another_claimed_gpu_the_verdict_is_the_usual_one(capsys):
    """On 8.0 the driver has no cubin of rdc_ext.fatbin to pick: plain G001, no G013."""
    _, found = check(capsys, "--arch", "80", str(BIN / "rdc_ext.fatbin"))
    assert sorted(found) == ["G001"]


def test_the_reader_finds_the_names_of_nvjitlink_a_library_carries():
    """nvJitLinkCreate, looked up in the libnvJitLink.so.13 it dlopens: neither NEEDED nor imported."""
    linked = scan_file(str(BIN / "librdc_linked.so"))
    assert linked.linkers == ("nvJitLinkCreate",) and linked.needed == ("libc.so.6",)
    assert linked.device_linker == "names nvJitLinkCreate"
    unlinked = scan_file(str(BIN / "librdc_unlinked.so"))
    assert unlinked.linkers == () and unlinked.device_linker is None
