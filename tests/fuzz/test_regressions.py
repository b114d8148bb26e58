"""Every input the fuzzer ever broke archaudit with, replayed through the CLI.

Files in regressions/ are run by their extension: libraries and device-code files (.so, .o,
.cubin, .fatbin, .ptx, .hsaco, .whl) are audited in header and --decode mode; .toml files are
given as --config; .amdclaim files as --amd-arch; .claim files as --arch; .gpu files as --gpu.
Each must satisfy the properties of every fuzz run (exit 0, 1 or 2; no traceback; no E099;
time bound). regressions/README.md says what each file broke and which commit fixed it.
"""

from pathlib import Path

import pytest

import fuzzlib as fz

FILES = sorted(p for p in fz.REGRESSIONS.iterdir() if p.suffix != ".md")
LIBRARY = str(fz.CUDA / "lib_sm80.so")
HIP = str(fz.AMD / "hip_multi.so")


def _argv(path: Path, decode: bool) -> list[str]:
    base = ["check", "--no-config", "-q", "-j", "1", "--format", "json", "--detail", "containers"]
    text = path.read_bytes().decode("utf-8", "replace")
    if path.suffix == ".toml":
        return ["check", "-q", "--format", "json", "--config", str(path), LIBRARY]
    if path.suffix == ".amdclaim":
        return base + [HIP, "--amd-arch", text]
    if path.suffix == ".claim":
        return base + [LIBRARY, "--arch", text]
    if path.suffix == ".gpu":
        return base + [HIP, "--amd-arch", "gfx90a", "--gpu", text]
    return base + [str(path), "--arch", "80"] + (["--decode"] if decode else [])


@pytest.mark.parametrize("decode", [False, True], ids=["headers", "decode"])
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_regression(path, decode):
    run = fz.run_cli(_argv(path, decode))
    fz.check_run(run, path.stat().st_size, path.name)


def test_every_regression_is_documented():
    readme = (fz.REGRESSIONS / "README.md").read_text()
    missing = [p.name for p in FILES if p.name not in readme]
    assert not missing, missing
