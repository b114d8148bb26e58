"""No finding code fires on a clean input, in every reader's format, in header and --decode mode.

Each code's positive side (an input that must produce it) is in the tests of its layer:
tests/judge/rules/ for the rule codes, test_hazards.py / test_zip_layouts.py / test_payloads.py /
test_hip.py / test_pe.py / tests/fuzz/test_regressions.py for the reader codes (docs/mutation.md
lists which test pins which code). The negative side of the rule codes is in tests/judge/rules/
on hand-built libraries; this file gives every code its negative side on real nvcc-, clang- and
MSVC-built fixtures read end to end: a reader or rule that starts producing an error or warning
for well-formed device code that matches its claim fails here.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from archaudit.cli import main
from archaudit.core import example_wheel
from archaudit.findings import CODES, ERROR, WARNING, Code

FIX = Path(__file__).resolve().parent / "fixtures"
CUDA, AMD, PE, READERS = FIX / "cuda" / "bin", FIX / "amd" / "bin", FIX / "pe" / "bin", FIX / "readers" / "bin"

# (input, claim arguments): each input carries exactly what its claim asks for (see the fixtures'
# build.sh), so the only findings allowed are the informational ones below.
CLEAN = {
    "example wheel": (None, ["--arch", "80"]),
    "ELF, many targets": (CUDA / "lib_multi.so", ["--arch", "75,80,86,89,90,100,120"]),
    "ELF, one cubin": (CUDA / "lib_sm80.so", ["--arch", "80"]),
    "ELF, host only": (CUDA / "lib_host.so", []),
    "bare cubin": (CUDA / "kern_sm80.cubin", ["--arch", "80"]),
    "bare PTX": (CUDA / "kern_80.ptx", ["--arch", "8.0+PTX"]),
    "bare fatbin": (READERS / "kern_sm80.fatbin", ["--arch", "80"]),
    "HIP bundle": (AMD / "hip_multi.so", ["--amd-arch", "gfx90a:xnack-,gfx942:sramecc+:xnack-,gfx1100"]),
    "PE DLL": (PE / "sm80.dll", ["--arch", "80"]),
}
# Informational codes a clean input may carry: the driver floor, JIT-only coverage of a +PTX claim.
ALLOWED = {"D002", "G002", "G010"}


def run(target: str, claim: list[str], decode: bool, tmp_path: Path) -> tuple[int, list[str]]:
    out = tmp_path / "report.json"
    argv = ["check", "--no-config", "-q", "--format", "json", "-o", str(out), target, *claim]
    rc = main(argv)  # payloads are always decoded (--fast is the header-only mode, with its E015)
    report = json.loads(out.read_text(encoding="utf-8"))
    return rc, [f["code"] for t in report["targets"] for f in t["findings"]]


@pytest.mark.parametrize("decode", [False, True], ids=["headers", "decode"])
@pytest.mark.parametrize("name", list(CLEAN))
def test_clean_input_gives_no_error_or_warning(name, decode, tmp_path):
    path, claim = CLEAN[name]
    target = str(path) if path is not None else example_wheel()
    rc, codes = run(target, claim, decode, tmp_path)
    assert rc == 0 and set(codes) <= ALLOWED, (name, codes)


def test_clean_wheel_of_every_format_gives_no_error_or_warning(tmp_path):
    """The same kind of fixtures inside one wheel: the zip reader and member selection on the path."""
    whl = tmp_path / "clean-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        for f in ("lib_sm80.so", "lib_host.so", "lib_cmp_speed_all.so"):
            z.write(CUDA / f, f"clean/{f}")
        z.write(PE / "sm80.dll", "clean/sm80.dll")
    for decode in (False, True):
        rc, codes = run(str(whl), ["--arch", "80"], decode, tmp_path)
        assert rc == 0 and set(codes) <= ALLOWED, codes


def test_every_error_and_warning_code_is_one_the_clean_inputs_could_produce():
    """ALLOWED holds no error or warning code: the clean runs above would let none through."""
    assert not [c for c in ALLOWED if CODES[Code(c)].severity in (ERROR, WARNING)]
