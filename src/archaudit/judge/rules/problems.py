"""The E codes: what a reader could not verify, of a library or of the target itself, passed
on as the reader said it (always an error)."""

from __future__ import annotations

from ...findings import Finding
from ..facts import LibraryFacts
from .common import READERS, TargetFacts, as_folded, finding, library_rule, target_rule


@library_rule(READERS)
def rule_reader_problems(f: LibraryFacts) -> list[Finding]:
    """E0xx: what a reader could not verify, as the reader said it (always an error)."""
    out = []
    for p in f.library.problems:
        where = f" (at 0x{p.offset:x})" if p.offset is not None and "0x" not in p.message else ""
        out.append(as_folded(finding(p.code, f.path, f"{f.path}: {p.message}{where}"), p, f.path))
    return out



@target_rule(READERS)
def rule_target_problems(t: TargetFacts) -> list[Finding]:
    """E0xx of the target itself (an unreadable wheel, a malformed archive)."""
    return [as_folded(finding(p.code, t.target, f"{t.target}: {p.message}"), p, t.target)
            for p in t.inventory.problems]


__all__ = [
    "rule_reader_problems",
    "rule_target_problems",
]
