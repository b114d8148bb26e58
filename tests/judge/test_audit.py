"""How audit.judge assembles a target's report and apply_filters hides findings, pinned where
mutation testing found them loose (docs/mutation.md). Hand-built libraries as in
tests/judge/rules/; each case names the situation it stands for."""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from archaudit.claims import parse_claim
from archaudit.core import example_wheel
from archaudit.findings import Code
from archaudit.judge.audit import audit
from archaudit.judge.filters import IgnoreRule
from archaudit.judge.policy import Policy
from archaudit.model import DEVICE_LINK, HIP, RELOCATABLE, SASS, Entry, Problem, TargetInventory
from helpers import CLEAN, amd, box, lib, ptx, sass
from oracle import fixture, kernel_names, list_entries


def test_a_target_that_cannot_be_read_exits_2():
    """An unreadable wheel (E001) is unusable: exit 2, not the 1 of a failed check."""
    inv = TargetInventory("bad.whl", "wheel", (), problems=(Problem(Code.E001, "cannot read"),), unusable=True)
    rep = audit([inv], None, Policy())
    assert [(f.code, f.subject) for f in rep.findings] == [("E001", "bad.whl")] and rep.exit_code == 2
    assert rep.targets[0].unusable


def test_a_problem_of_the_archive_comes_first_and_keeps_every_later_finding():
    """A wheel with a CRC mismatch in one member and no claim: the archive's E002 first, then the
    library's findings, then C001. None is lost after the E002."""
    inv = TargetInventory("t.whl", "wheel", (lib(box(sass("sm_80"))),), problems=(Problem(Code.E002, "CRC mismatch"),))
    rep = audit([inv], None, Policy())
    assert [(f.code, f.subject) for f in rep.findings] == [("E002", "t.whl"), ("D002", "libx.so"), ("C001", "t.whl")]
    assert rep.exit_code == 1


def test_a_finding_of_the_target_about_one_library_is_that_librarys():
    """AMD code without an AMD claim is C001 for its library: the library's verdict fails with it."""
    inv = TargetInventory("t.whl", "wheel", (lib(box(amd("gfx90a"), role=HIP), needed=(), path="libamd.so"), CLEAN))
    rep = audit([inv], parse_claim("80;90", "--arch"), Policy())
    assert [(v.path, v.status, [f.code for f in v.findings]) for v in rep.targets[0].libraries] == [
        ("libamd.so", "fail", ["C001"]),
        ("libx.so", "pass", ["D002"]),
    ]
    assert rep.exit_code == 1


def test_a_windows_wheel_is_judged_against_windows_drivers():
    """A win_amd64 wheel's driver floor comes from the Windows column: NVIDIA lists no Windows
    toolkit driver for CUDA 13, only the family's branch (>= 580), so a cubin's floor there is
    580; the same code in a Linux wheel needs 13.0's own driver, 580.65.06."""
    code = lib(box(sass("sm_80")))
    win = audit(
        [TargetInventory("pkg-1.0-cp312-cp312-win_amd64.whl", "wheel", (code,))],
        parse_claim("80", "--arch"),
        Policy(driver="999.99"),
    )
    assert [(f.code, f.get("driver")) for f in win.findings] == [("D002", "580")]
    assert win.exit_code == 0
    linux = audit(
        [TargetInventory("pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "wheel", (code,))],
        parse_claim("80", "--arch"),
        Policy(driver="999.99"),
    )
    assert [(f.code, f.get("driver")) for f in linux.findings] == [("D002", "580.65.06")] and linux.exit_code == 0


def test_a_target_report_names_what_it_judged():
    inv = TargetInventory("a.whl", "wheel", (CLEAN,), distribution="a-1.0")
    claim = parse_claim("80;90", "--arch")
    (t,) = audit([inv], claim, Policy()).targets
    assert (t.target, t.kind, t.distribution, t.claim, t.gpu_wheel, t.unusable) == (
        "a.whl",
        "wheel",
        "a-1.0",
        claim,
        True,
        False,
    )


def test_ignore_rules_over_several_targets():
    """Two wheels, each an Ampere-only build claimed 80;90 with its G001 ignored by a rule of its
    own; a third rule matches nothing. Both suppressions are listed with their target, a rule used
    by either wheel is not stale, and the stale one is X001 on the first target."""
    a = TargetInventory("a.whl", "wheel", (lib(box(sass("sm_80")), path="liba.so"),))
    b = TargetInventory("b.whl", "wheel", (lib(box(sass("sm_80")), path="libb.so"),))
    pol = Policy(
        ignore_rules=(
            IgnoreRule("G001", "liba.so", "a is Ampere only"),
            IgnoreRule("G001", "libb.so"),
            IgnoreRule("K001", "libnone.so"),
        )
    )
    rep = audit([a, b], parse_claim("80;90", "--arch"), pol)
    assert [(s.finding.code, s.finding.subject, s.rule, s.target) for s in rep.suppressed] == [
        ("G001", "liba.so", "ignore-library G001 for liba.so (a is Ampere only)", "a.whl"),
        ("G001", "libb.so", "ignore-library G001 for libb.so", "b.whl"),
    ]
    assert [(t.target, [(f.code, f.subject) for f in t.findings]) for t in rep.targets] == [
        ("a.whl", [("D002", "liba.so"), ("X001", "a.whl")]),
        ("b.whl", [("D002", "libb.so")]),
    ]
    assert rep.targets[0].findings[-1].message.startswith("ignore entry K001 for libnone.so matches nothing. Fix: ")
    assert rep.exit_code == 0


def test_each_librarys_verdict_as_the_json_report_gives_it():
    """The per-library fields of the report (its status, code, coverage per claimed GPU, containers,
    kernels, driver floor, findings and bytes per target), for a library of each kind in one wheel
    claimed 80;90 and gfx90a;gfx942. Readers of the JSON take the library's status from here."""

    def sized(e: Entry, stored: int, decoded: int) -> Entry:
        return replace(e, stored_size=stored, size=decoded)

    stub = Entry("nvidia", SASS, "sm_75", (1, 8), kernels=(), decoded=True)
    libs = (
        lib(
            box(
                sized(sass("sm_80", "_Z1av"), 100, 300),
                sized(sass("sm_90", "_Z1av"), 200, 400),
                sized(ptx("compute_90", "_Z1av"), 50, 500),
            ),
            box(sized(sass("sm_80", "_Z1bv"), 10, 30), sized(sass("sm_90", "_Z1bv"), 20, 40)),
            path="pass.so",
        ),
        lib(box(sized(sass("sm_80"), 7, 9), role=RELOCATABLE), box(sass("sm_80")), path="fail.so"),
        lib(box(sass("sm_90a")), path="spec.so"),
        lib(needed=(), path="host.so"),
        lib(needed=(), path="bad.so", problems=(Problem(Code.E013, "bad"),)),
        lib(box(stub, role=DEVICE_LINK), path="stub.so"),
        lib(box(sass("sm_80", toolkit=None), sass("sm_90", toolkit=None)), needed=(), path="bare.so"),
        lib(box(amd("gfx90a:xnack+"), amd("gfx942"), role=HIP), needed=(), path="amd.so"),
    )
    rep = audit(
        [TargetInventory("t.whl", "wheel", libs)],
        parse_claim("80;90", "--arch"),
        Policy(amd_claim=("gfx90a", "gfx942")),
    )
    *nvidia, rocm = rep.targets[0].libraries
    assert [
        (
            v.path,
            v.status,
            v.carried,
            v.relocatable,
            v.coverage,
            v.containers,
            v.kernels,
            v.driver_floor,
            [f.code for f in v.findings],
            v.bytes_by_target,
        )
        for v in nvidia
    ] == [
        (
            "pass.so",
            "pass",
            ("sm_80", "sm_90", "compute_90"),
            (),
            (("80", "native"), ("90", "native")),
            2,
            2,
            ("13.0", "580.65.06"),
            ["D002"],
            (("compute_90", 50, 500), ("sm_80", 110, 330), ("sm_90", 220, 440)),
        ),
        (
            "fail.so",
            "fail",
            ("sm_80",),
            ("sass:sm_80",),
            (("80", "native"), ("90", "none")),
            1,
            1,
            ("13.0", "580.65.06"),
            ["G007", "G001", "D002"],
            (("sm_80", 0, 0),),
        ),  # relocatable entries are not counted
        (
            "spec.so",
            "fail",
            ("sm_90a",),
            (),
            (("80", "none"), ("90", "native")),
            1,
            1,
            ("13.0", "580.65.06"),
            ["G001", "G005", "D002"],
            (("sm_90a", 0, 0),),
        ),  # specialised: said (G005), and judged like any other
        ("host.so", "host", (), (), (), 0, None, None, [], ()),
        ("bad.so", "unverified", (), (), (), 0, None, None, ["E013"], ()),
        ("stub.so", "host", (), (), (), 0, 0, None, ["G010"], ()),
        (
            "bare.so",
            "pass",
            ("sm_80", "sm_90"),
            (),
            (("80", "native"), ("90", "native")),
            1,
            1,
            ("unknown", "unknown"),
            ["D002"],
            (("sm_80", 0, 0), ("sm_90", 0, 0)),
        ),
    ]
    assert (
        rocm.path,
        rocm.status,
        rocm.carried,
        rocm.coverage,
        [f.code for f in rocm.findings],
        rocm.driver_floor,
        rocm.bytes_by_target,
    ) == (
        "amd.so",
        "fail",
        ("gfx90a:xnack+", "gfx942"),
        (("gfx90a", "none"), ("gfx942", "native")),
        ["G001"],
        None,
        (("gfx90a:xnack+", 0, 0), ("gfx942", 0, 0)),
    )


def test_a_library_with_code_for_both_vendors_lists_coverage_for_both_claims():
    both = lib(box(sass("sm_80"), sass("sm_90")), box(amd("gfx942"), role=HIP), path="both.so")
    rep = audit(
        [TargetInventory("t.whl", "wheel", (both,))], parse_claim("80;90", "--arch"), Policy(amd_claim=("gfx942",))
    )
    (v,) = rep.targets[0].libraries
    assert v.coverage == (("80", "native"), ("90", "native"), ("gfx942", "native")) and rep.exit_code == 0


def test_containers_count_every_unit_but_kernel_less_device_link_stubs():
    """A container whose kernels lost their entry flag (issue 14) still counts; nvlink's stub does not."""
    hidden = Entry("nvidia", SASS, "sm_80", (1, 8), kernels=(), decoded=True, toolkit=(13, 0))
    stub = Entry("nvidia", SASS, "sm_80", (1, 8), kernels=(), decoded=True)
    code = lib(box(sass("sm_80", "_Z1av")), box(hidden), box(stub, role=DEVICE_LINK))
    rep = audit([TargetInventory("t.whl", "wheel", (code,))], parse_claim("80", "--arch"), Policy())
    (v,) = rep.targets[0].libraries
    assert v.containers == 2


def test_select_keeps_only_the_codes_it_names():
    """--select G001 on an Ampere-only build claimed 80;90: G001 stays, D002 (info) is dropped."""
    rep = audit(
        [TargetInventory("t.whl", "wheel", (lib(box(sass("sm_80"))),))],
        parse_claim("80;90", "--arch"),
        Policy(select=("G001",)),
    )
    assert [f.code for f in rep.findings] == ["G001"] and [s.finding.code for s in rep.suppressed] == ["D002"]


def test_an_audit_of_no_targets_is_empty():
    rep = audit([], None, Policy(ignore_rules=(IgnoreRule("G001"),)))
    assert rep.targets == () and rep.exit_code == 0


# ---- the golden files' verdicts, recomputed from cuobjdump ----------------------------------------
# The verdicts in tests/golden/check_*.json, checked against cuobjdump instead of against themselves.
#
# The golden files are written by the code under test (ARCHAUDIT_REGEN_GOLDEN=1), so they pin the
# rendering but cannot prove a verdict. Here every library's carried targets are compared with what
# cuobjdump lists for the same file, and every coverage verdict, library status, per-GPU answer
# (G008/G009) and the exit code are recomputed from cuobjdump's listing and kernel symbols with
# NVIDIA's documented compatibility rules (CUDA C Programming Guide, "Binary compatibility" and
# "Application compatibility"): a cubin for sm_XY runs on X.Z for Z >= Y, an arch-specific
# sm_XYa only on X.Y; PTX for compute_XY is JIT-compiled on any CC >= X.Y (compute_XYa only on X.Y).

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
# Compute capabilities as NVIDIA publishes them (developer.nvidia.com/cuda-gpus).
NAMED_GPUS = {"H100": (9, 0), "sm_80": (8, 0)}


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
    served = (
        set().union(*(names for t, names in kernels.items() if ways.get(t, "none") != "none")) if kernels else set()
    )
    if best != "none" and every_kernel - served:
        return "part"
    return best


def golden_libraries(scenario: str, tmp_path: Path) -> tuple[dict, list[tuple[dict, Path]]]:
    report = json.loads((GOLDEN / f"check_{scenario}.json").read_text(encoding="utf-8"))
    (target,) = report["targets"]
    libs = []
    if target["kind"] == "wheel":
        with zipfile.ZipFile(example_wheel()) as z:
            for library in target["libraries"]:
                libs.append((library, Path(z.extract(library["path"], tmp_path))))
    else:
        libs = [(library, fixture(library["path"])) for library in target["libraries"]]
    return report, libs


SCENARIOS = ["example_fail", "example_pass_costs", "libs_gpu"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_carried_targets_are_what_cuobjdump_lists(scenario, tmp_path):
    _, libs = golden_libraries(scenario, tmp_path)
    assert libs
    for library, path in libs:
        carried, _ = reference(path)
        assert set(library["carries"]) == carried, library["path"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_coverage_and_status_follow_the_compatibility_rules(scenario, tmp_path):
    report, libs = golden_libraries(scenario, tmp_path)
    (target,) = report["targets"]
    claimed = [cc(a["target"])[:2] for a in target["claim"]["archs"]]
    any_fail = False
    for library, path in libs:
        carried, kernels = reference(path)
        if not carried:
            assert library["status"] == "host" and library["coverage"] == {}, library["path"]
            continue
        for gpu_name, verdict in library["coverage"].items():
            assert verdict == gpu_answer(carried, {}, cc(gpu_name)[:2]), (library["path"], gpu_name)
        fails = any(gpu_answer(carried, kernels, gpu) in ("none", "part") for gpu in claimed)
        assert library["status"] == ("fail" if fails else "pass"), library["path"]
        any_fail |= fails
    assert report["exit_code"] == (1 if any_fail else 0)
    assert report["passed"] is not any_fail


def test_golden_named_gpu_answers_follow_the_compatibility_rules(tmp_path):
    """G008 (runs) / G009 (does not run, or only partly) for each --gpu of check_libs_gpu."""
    report, libs = golden_libraries("libs_gpu", tmp_path)
    words = {
        "native": "native",
        "jit": "only through PTX JIT",
        "none": "not at all",
        "part": "N kernels cannot run there (native for the rest)",
    }
    messages = [(f["code"], f["message"]) for f in report["targets"][0]["findings"] if f["code"] in ("G008", "G009")]
    checked = 0
    for library, path in libs:
        carried, kernels = reference(path)
        if not carried:
            continue
        for name, gpu in NAMED_GPUS.items():
            answer = gpu_answer(carried, kernels, gpu)
            code = "G008" if answer in ("native", "jit") else "G009"
            prefix = f"{library['path']} on {name} ({gpu[0]}.{gpu[1]}): "
            (got,) = [(c, m) for c, m in messages if m.startswith(prefix)]
            said = got[1][len(prefix) :]
            # a partial answer leads with what fails, then the fix (its first 240 characters)
            assert got[0] == code and (
                re.match(r"\d+ kernels? cannot run there \(native for the rest\)", said)
                if answer == "part"
                else said.startswith(words[answer])
            ), got
            checked += 1
    assert checked == len(messages) == 8
