"""Every input the fuzzer ever broke archaudit with, replayed through the CLI.

Files in regressions/ are run by their extension: libraries and device-code files (.so, .o,
.dll, .cubin, .fatbin, .ptx, .hsaco, .whl) are audited in header and --decode mode; .toml files are
given as --config; .amdclaim files as --amd-arch; .claim files as --arch; .gpu files as --gpu.
Each must satisfy the properties of every fuzz run (exit 0, 1 or 2; no traceback; no E099;
time bound), and give the outcome its fix produces: the exit code and the finding code (or,
for usage errors, the message) listed in EXPECTED, in both modes. So re-introducing the
fail-open or crash a file once found fails this test. regressions/README.md says what each
file broke and which commit fixed it.
"""

from pathlib import Path

import pytest

import fuzzlib as fz

FILES = sorted(p for p in fz.REGRESSIONS.iterdir() if p.suffix != ".md")
LIBRARY = str(fz.CUDA / "lib_sm80.so")

# file: (exit code, finding code that must be reported, or text the error message must hold)
EXPECTED: dict[str, tuple[int, str]] = {
    "amd-claim-generic.amdclaim": (1, "G001"),  # judged over the generic family, not a crash
    "config-cuda-archs-bool.toml": (2, "cuda-archs must be"),
    "config-driver-int.toml": (2, "driver must be a string"),
    "config-not-utf8.toml": (2, "not valid TOML"),
    "config-tool-not-table.toml": (2, "[tool.archaudit] must be"),
    "cubin-eflags-sm5.cubin": (1, "E014"),
    "cubin-shstrndx0.cubin": (1, "E014"),
    "cubin-shstrtab-offset0.cubin": (1, "E014"),
    "fatbin-section-size0-lib_all.so": (1, "E011"),
    "fatbin-section-size0-lto_b.o": (1, "E011"),
    "gpu-generic-gfx.gpu": (2, "is a generic code target, not a GPU"),
    "gpu-unknown-gfx.gpu": (2, "unknown AMD processor"),
    "hip-bundle-count-lowered.so": (1, "E030"),
    "hip-bundle-magic-flipped.so": (1, "E030"),
    "hsaco-xnack-on-gfx1100.hsaco": (1, "E014"),
    "lto-relfatbin-size1-magic0.o": (1, "E011"),
    "pe-embedded-container-size0.dll": (1, "E011"),
    "pe-embedded-container-size0-entry-damaged.dll": (1, "E011"),
    "pe-fatbin-magic-over-mz-rdc.dll": (1, "E011"),
    "pe-import-table-shifted-host.dll": (1, "E021"),
    # judged by its text's .target (compute_100f serves 10.x only), not the header's 'a'
    "pe-ptx-header-a-text-f.dll": (1, "G001"),
    "pe-wrapper-section-zero-fill-embedded.dll": (1, "E011"),
    "ptx-malformed-first-target.ptx": (1, "E014"),
    "ptx-target-no-number.ptx": (1, "E014"),
    "ptx-version-5000-digits.ptx": (0, "G010"),  # read (bounded digits): no .entry, so it defines no kernel
    "relfatbin-unnamed.so": (1, "E010"),
    "sass-a-flag-cleared.so": (1, "E014"),
    "wheel-cd-name-differs.whl": (1, "E002"),
    "wheel-eocd-count-lowered.whl": (2, "E002"),
    "wheel-two-central-directories.whl": (2, "E002"),
    "wheel-two-zip64-records.whl": (2, "E002"),
    "wheel-zip64-locator-plain-end-record.whl": (2, "E002"),
}
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
    return base + [str(path), "--arch", "80"] + []  # payloads are always decoded


@pytest.mark.parametrize("decode", [False, True], ids=["headers", "decode"])
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_regression(path, decode):
    run = fz.run_cli(_argv(path, decode))
    fz.check_run(run, path.stat().st_size, path.name)
    code, what = EXPECTED[path.name]
    assert run.code == code, (path.name, run.code, run.finding_codes, run.stderr[-500:])
    if what[:1] in "CDEGKX" and what[1:].isdigit():
        assert what in run.finding_codes, (path.name, run.finding_codes)
    elif code == 2:
        assert what in run.stderr, (path.name, run.stderr[-500:])
    else:
        assert run.report is not None, run.stderr
        carried = [c for t in run.report["targets"] for lib in t["libraries"] for c in lib["carries"]]
        assert what in carried, (path.name, carried)


def test_every_regression_has_its_expected_outcome():
    assert sorted(EXPECTED) == [p.name for p in FILES]


def test_every_regression_is_documented():
    readme = (fz.REGRESSIONS / "README.md").read_text()
    missing = [p.name for p in FILES if p.name not in readme]
    assert not missing, missing
