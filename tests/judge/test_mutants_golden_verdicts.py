"""The verdicts in tests/golden/check_*.json, checked against cuobjdump instead of against themselves.

The golden files are written by the code under test (ARCHAUDIT_REGEN_GOLDEN=1), so they pin the
rendering but cannot prove a verdict. Here every library's carried targets are compared with what
cuobjdump lists for the same file, and every coverage verdict, library status, per-GPU answer
(G008/G009) and the exit code are recomputed from cuobjdump's listing and kernel symbols with
NVIDIA's documented compatibility rules (CUDA C Programming Guide, "Binary compatibility" and
"Application compatibility"): a cubin for sm_XY runs on X.Z for Z >= Y, an arch-specific
sm_XYa only on X.Y; PTX for compute_XY is JIT-compiled on any CC >= X.Y (compute_XYa only on X.Y).
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from archaudit.cli import example_wheel
from oracle import find_cuobjdump, fixture, kernel_names, list_entries
from reference_tools import needs_tool

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
# Compute capabilities as NVIDIA publishes them (developer.nvidia.com/cuda-gpus).
NAMED_GPUS = {"H100": (9, 0), "sm_80": (8, 0)}

pytestmark = needs_tool("cuobjdump", find_cuobjdump())


def cc(target: str) -> tuple[int, int, str]:
    """``sm_90a`` / ``compute_90`` / ``90`` -> (9, 0, "a")."""
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)(\d)([af]?)", target)
    assert m, target
    return int(m.group(1)), int(m.group(2)), m.group(3)


def serves(target: str, gpu: tuple[int, int]) -> str:
    """How the driver runs code for ``target`` on a GPU of compute capability ``gpu``."""
    major, minor, suffix = cc(target)
    if target.startswith("sm_"):
        if suffix == "a":
            return "native" if (major, minor) == gpu else "none"
        return "native" if major == gpu[0] and minor <= gpu[1] else "none"
    if suffix == "a":
        return "jit" if (major, minor) == gpu else "none"
    return "jit" if (major, minor) <= gpu else "none"


def reference(path: Path) -> tuple[set[str], dict[str, set[str]]]:
    """cuobjdump's carried targets (archaudit's spelling: PTX as compute_XX) and kernels per target.

    A target whose entries hold no kernel (the device-link stub every nvcc link adds, e.g. the sm_75
    of lib_multiobj.so) carries nothing that runs, so it is left out, as the report leaves it out."""
    kernels = kernel_names(path)
    listed = {t if kind == "ELF" else t.replace("sm_", "compute_") for kind, t in list_entries(path)}
    return {t for t in listed if kernels.get(t)}, kernels


def gpu_answer(carried: set[str], kernels: dict[str, set[str]], gpu: tuple[int, int]) -> str:
    """native / jit / none for the library as a whole, or "part" when some kernel has no code for ``gpu``."""
    ways = {t: serves(t, gpu) for t in carried}
    best = "native" if "native" in ways.values() else "jit" if "jit" in ways.values() else "none"
    every_kernel = set().union(*kernels.values()) if kernels else set()
    served = set().union(*(names for t, names in kernels.items() if ways.get(t, "none") != "none")) \
        if kernels else set()
    if best != "none" and every_kernel - served:
        return "part"
    return best


def golden_libraries(scenario: str, tmp_path: Path) -> tuple[dict, list[tuple[dict, Path]]]:
    report = json.loads((GOLDEN / f"check_{scenario}.json").read_text(encoding="utf-8"))
    (target,) = report["targets"]
    libs = []
    if target["kind"] == "wheel":
        with zipfile.ZipFile(example_wheel()) as z:
            for lib in target["libraries"]:
                libs.append((lib, Path(z.extract(lib["path"], tmp_path))))
    else:
        libs = [(lib, fixture(lib["path"])) for lib in target["libraries"]]
    return report, libs


SCENARIOS = ["example_fail", "example_pass_costs", "libs_gpu"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_carried_targets_are_what_cuobjdump_lists(scenario, tmp_path):
    _, libs = golden_libraries(scenario, tmp_path)
    assert libs
    for lib, path in libs:
        carried, _ = reference(path)
        assert set(lib["carries"]) == carried, lib["path"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_coverage_and_status_follow_the_compatibility_rules(scenario, tmp_path):
    report, libs = golden_libraries(scenario, tmp_path)
    (target,) = report["targets"]
    claimed = [cc(a["target"])[:2] for a in target["claim"]["archs"]]
    any_fail = False
    for lib, path in libs:
        carried, kernels = reference(path)
        if not carried:
            assert lib["status"] == "host" and lib["coverage"] == {}, lib["path"]
            continue
        for gpu_name, verdict in lib["coverage"].items():
            assert verdict == gpu_answer(carried, {}, cc(gpu_name)[:2]), (lib["path"], gpu_name)
        fails = any(gpu_answer(carried, kernels, gpu) in ("none", "part") for gpu in claimed)
        assert lib["status"] == ("fail" if fails else "pass"), lib["path"]
        any_fail |= fails
    assert report["exit_code"] == (1 if any_fail else 0)
    assert report["passed"] is not any_fail


def test_golden_named_gpu_answers_follow_the_compatibility_rules(tmp_path):
    """G008 (runs) / G009 (does not run, or only partly) for each --gpu of check_libs_gpu."""
    report, libs = golden_libraries("libs_gpu", tmp_path)
    words = {"native": "native", "jit": "only through PTX JIT", "none": "not at all",
             "part": "N kernels cannot run there (native for the rest)"}
    messages = [(f["code"], f["message"]) for f in report["targets"][0]["findings"] if f["code"] in ("G008", "G009")]
    checked = 0
    for lib, path in libs:
        carried, kernels = reference(path)
        if not carried:
            continue
        for name, gpu in NAMED_GPUS.items():
            answer = gpu_answer(carried, kernels, gpu)
            code = "G008" if answer in ("native", "jit") else "G009"
            prefix = f"{lib['path']} on {name} ({gpu[0]}.{gpu[1]}): "
            (got,) = [(c, m) for c, m in messages if m.startswith(prefix)]
            said = got[1][len(prefix):]
            # a partial answer leads with what fails, then the fix (its first 240 characters)
            assert got[0] == code and (re.match(r"\d+ kernels? cannot run there \(native for the rest\)", said)
                                       if answer == "part" else said.startswith(words[answer])), got
            checked += 1
    assert checked == len(messages) == 8
