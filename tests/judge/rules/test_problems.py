"""archaudit.judge.rules.problems: what a reader could not verify fails the audit closed, as a
finding of the problem's own code on its library or its target.
"""

from __future__ import annotations

import pytest

from archaudit.claims import parse_claim
from archaudit.findings import ERROR, Code
from archaudit.judge.audit import Report, judge
from archaudit.judge.policy import Policy
from archaudit.model import Problem, TargetInventory
from helpers import CLEAN, box, found, lib, report, sass


@pytest.mark.parametrize("code", ["E010", "E011", "E012", "E013", "E014", "E099"])
def test_reader_problems_fail_closed(code):
    rep = report(lib(box(sass("sm_80"), sass("sm_90")), problems=(Problem(code, "bad", 0x40),)))
    (f,) = found(rep, code)
    assert f.severity == ERROR and "0x40" in f.message and rep.exit_code == 1
    assert rep.targets[0].libraries[0].status == "fail"


def test_a_problem_of_the_archive_is_a_finding_of_its_code_on_the_target():
    """A wheel whose zip is damaged (E002 from the reader, for the archive as a whole): the finding
    keeps the reader's code, names the wheel, and fails the run whatever its libraries say."""
    inv = TargetInventory("t.whl", "wheel", (CLEAN,), problems=(Problem(Code.E002, "CRC mismatch in demo/libk.so"),))
    pol = Policy()
    rep = Report((judge(inv, parse_claim("80;90", "--arch"), pol),), pol)
    (f,) = found(rep, "E002")
    assert (f.subject, f.message) == (
        "t.whl",
        "t.whl: CRC mismatch in demo/libk.so. Fix: rebuild or re-download the wheel",
    ) and rep.exit_code == 1
