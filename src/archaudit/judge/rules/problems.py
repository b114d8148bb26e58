"""The E codes: what a reader could not verify, of a library or of the target itself, passed
on as the reader said it (always an error)."""

from __future__ import annotations

from ...findings import Code, Finding
from ...model import Problem
from ..facts import LibraryFacts
from .common import READERS, TargetFacts, as_folded, finding, library_rule, target_rule
from .kernels import container_name


@library_rule(READERS)
def rule_reader_problems(f: LibraryFacts) -> list[Finding]:
    """E0xx: what a reader could not verify, as the reader said it (always an error)."""
    out = []
    for p in f.library.problems:
        where = f" (at 0x{p.offset:x})" if p.offset is not None and "0x" not in p.message else ""
        where += _problem_container(f, p)
        out.append(
            as_folded(finding(p.code, f.path, f"{f.path}: {p.message}{where}. Fix: {problem_fix(p.code)}"), p, f.path)
        )
    return out


PROBLEM_FIX = {  # what a reader's finding asks, in a few words (findings.CODES has the whole fix)
    Code.E001: "check the path and its permissions",
    Code.E002: "rebuild or re-download the wheel",
    Code.E003: "rebuild the wheel with a standard tool (pip wheel, build)",
    Code.E004: "check the built wheel (python -m build --wheel) or the library itself",
    Code.E015: "run without --fast",
    Code.E020: "audit a 64-bit little-endian build of the library",
    Code.E032: "raise --max-payload if the size is genuine",
    Code.E099: "report it to archaudit with the file",
}


def problem_fix(code: Code) -> str:
    """The fix a reader's finding ends its verdict with: a vendor library is its vendor's to rebuild."""
    return PROBLEM_FIX.get(code, "rebuild it if it is the project's own, else report it to its vendor")


def _problem_container(f: LibraryFacts, p: Problem) -> str:
    """The container a problem's offset starts, named as a person finds it (.nv_fatbin[2]), where
    the library's reader placed a container there in a section."""
    units = [
        i
        for i, u in enumerate(f.units)
        if p.offset is not None and u.container.offset == p.offset and u.container.section
    ]
    return f" ({container_name(f, units[0])})" if units else ""


@target_rule(READERS)
def rule_target_problems(t: TargetFacts) -> list[Finding]:
    """E0xx of the target itself (an unreadable wheel, a malformed archive)."""
    return [
        as_folded(finding(p.code, t.target, f"{t.target}: {p.message}. Fix: {problem_fix(p.code)}"), p, t.target)
        for p in t.inventory.problems
    ]


__all__ = ["rule_reader_problems", "rule_target_problems"]
