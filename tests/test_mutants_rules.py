"""Rule-layer branches that mutation testing showed no test pinned (docs/mutation.md).

Hand-built libraries as in test_rules_units.py (the rule layer reads model.Library, not bytes);
each case names the real situation it stands for.
"""

from __future__ import annotations

from archaudit.artifacts import TargetInventory
from archaudit.audit import Report, judge
from archaudit.claims import parse_claim
from archaudit.model import Problem
from archaudit.policy import Policy
from archaudit.rules import on_gpu
from test_rules_units import CLEAN, box, codes, found, lib, ptx, report, sass

KEPLER_RUNTIME = ("libcudart.so.11.0",)  # Kepler (3.5): its last driver, R470, supports CUDA 11.4


def test_g012_ptx_newer_than_every_known_release_runs_on_no_retired_gpu():
    """PTX of an ISA no CUDA release in the tables has produced cannot be JIT-compiled by
    Kepler's last driver: unknown is dead (fail closed), never alive."""
    rep = report(lib(box(ptx("compute_35", isa=(99, 0))), needed=KEPLER_RUNTIME), arch="35")
    (g,) = found(rep, "G012")
    assert g.get("gpu") == "35" and g.get("dead") == ["compute_35"] and rep.exit_code == 1


def test_g012_sass_built_by_the_generations_last_toolkit_still_runs():
    """A cubin built by CUDA 11.4 (the last toolkit for Kepler) loads on Kepler's last driver; one
    built by CUDA 12 does not."""
    rep = report(lib(box(sass("sm_35", toolkit=(11, 4))), needed=KEPLER_RUNTIME), arch="35")
    assert found(rep, "G012") == [] and rep.exit_code == 0, codes(rep)
    rep = report(lib(box(sass("sm_35", toolkit=(12, 0))), needed=KEPLER_RUNTIME), arch="35")
    assert found(rep, "G012")[0].get("gpu") == "35" and rep.exit_code == 1


def test_on_gpu_judges_with_the_policy_it_is_given():
    """smoke asks on_gpu with the run's policy: under --strict-kernels a kernel that carries only
    sm_90a code cannot run on an A100, and the answer must say so (G009), not the default's G008."""
    hopper = lib(box(sass("sm_80", "_Z1kv"), sass("sm_90", "_Z1kv")), box(sass("sm_90a", "_Z6hopperv")))
    assert on_gpu(hopper, "A100", (8, 0)).code == "G008"
    strict = on_gpu(hopper, "A100", (8, 0), Policy(strict_kernels=True))
    assert strict is not None and strict.code == "G009" and "sm_90a" in strict.message


def test_a_problem_of_the_archive_is_a_finding_of_its_code_on_the_target():
    """A wheel whose zip is damaged (E002 from the reader, for the archive as a whole): the finding
    keeps the reader's code, names the wheel, and fails the run whatever its libraries say."""
    inv = TargetInventory("t.whl", "wheel", (CLEAN,), problems=(Problem("E002", "CRC mismatch in demo/libk.so"),))
    pol = Policy()
    rep = Report((judge(inv, parse_claim("80;90", "--arch"), pol),), pol)
    (f,) = found(rep, "E002")
    assert (f.subject, f.message) == ("t.whl", "t.whl: CRC mismatch in demo/libk.so") and rep.exit_code == 1


def test_g012_is_reported_for_every_claimed_gpu_after_one_that_only_misses_code():
    """Claim 3.0 and 3.5 for a cubin for sm_35 built by CUDA 12: 3.0 has no code at all (G001),
    3.5 has only code Kepler's last driver cannot run (G012). Both are reported."""
    rep = report(lib(box(sass("sm_35", toolkit=(12, 0))), needed=KEPLER_RUNTIME), arch="30;35")
    assert codes(rep) == ["G001", "G012"] and found(rep, "G012")[0].get("gpu") == "35" and rep.exit_code == 1
