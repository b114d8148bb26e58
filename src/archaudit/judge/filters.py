"""--select, --ignore and [tool.archaudit] ignore-library: which findings a report shows.

A filter only ever hides what the user chose to hide. Findings that say the input could not be
verified (E0xx), that no claim reached the check (C001) or that a GPU wheel carries no device
code (G006) are never hidden: those fail closed whatever the filters say. Every hidden finding
is kept with the rule that hid it, so every rendering can say what was suppressed and why.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import UsageError
from ..findings import CODES, Code, Finding, make_finding


@dataclass(frozen=True, slots=True)
class IgnoreRule:
    """One [[tool.archaudit.ignore-library]] entry."""

    code: str  # a code or prefix
    library: str = "*"  # a glob over library paths (or their file names)
    reason: str = ""

    def describe(self) -> str:
        return f"ignore-library {self.code} for {self.library}" + (f" ({self.reason})" if self.reason else "")


@dataclass(frozen=True, slots=True)
class Suppression:
    """A finding a filter hid, the rule that hid it ("ignore G001", "select D", "ignore-library ..."),
    and the target it was found in."""

    finding: Finding
    rule: str
    target: str = ""


def never_hidden(code: str) -> bool:
    """Codes no filter may hide: unreadable input (E0xx), no claim (C001), no device code (G006)."""
    return code.startswith("E") or code in (Code.C001, Code.G006)


def parse_patterns(values: Iterable[str], what: str) -> tuple[str, ...]:
    """Code patterns from flags or config: each value may hold several, split on commas
    ("G001,K001"). An empty pattern, or one that matches no finding code, is a usage error:
    it would otherwise match everything or nothing, silently."""
    out: list[str] = []
    for value in values:
        for part in value.split(","):
            pattern = part.strip().upper()
            if not pattern:
                raise UsageError(f"{what}: empty code pattern in {value!r}")
            if not any(code.startswith(pattern) for code in CODES):
                raise UsageError(f"{what}: {part.strip()!r} matches no finding code ('archaudit explain' lists them)")
            if what.endswith("ignore") and all(never_hidden(c) for c in CODES if c.startswith(pattern)):
                raise UsageError(
                    f"{what}: {part.strip()!r} cannot be ignored: unreadable input (E0xx), no claim "
                    f"(C001) and no device code (G006) always fail closed"
                )
            out.append(pattern)
    return tuple(out)


def _matches(code: str, patterns: Iterable[str]) -> bool:
    return any(code.startswith(p) for p in patterns)


def recorded_for(code: str, subject: str, rules: Iterable[IgnoreRule]) -> IgnoreRule | None:
    """The first ignore-library entry for this code (or a prefix of it) whose glob matches the
    subject (a library's path or its file name), if any."""
    base = subject.rsplit("/", 1)[-1]
    return next(
        (
            r
            for r in rules
            if code.startswith(r.code) and (fnmatch.fnmatch(subject, r.library) or fnmatch.fnmatch(base, r.library))
        ),
        None,
    )


def _rule_for(f: Finding, rules: Iterable[IgnoreRule]) -> IgnoreRule | None:
    return recorded_for(f.code, f.subject, rules)


@dataclass(frozen=True, slots=True)
class Filtered:
    kept: tuple[Finding, ...]
    suppressed: tuple[Suppression, ...]
    used: frozenset[IgnoreRule]


def apply(
    findings: Iterable[Finding],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    rules: tuple[IgnoreRule, ...],
    target: str = "",
) -> Filtered:
    """Split findings into those shown and those suppressed (with the rule that did it)."""
    kept: list[Finding] = []
    suppressed: list[Suppression] = []
    used: set[IgnoreRule] = set()
    for f in findings:
        if never_hidden(f.code):
            kept.append(f)
            continue
        if select and not _matches(f.code, select):
            suppressed.append(Suppression(f, f"select {','.join(select)}", target))
            continue
        hit = next((p for p in ignore if f.code.startswith(p)), None)
        if hit is not None:
            suppressed.append(Suppression(f, f"ignore {hit}", target))
            continue
        rule = _rule_for(f, rules)
        if rule is not None:
            used.add(rule)
            suppressed.append(Suppression(f, rule.describe(), target))
            continue
        kept.append(f)
    return Filtered(tuple(kept), tuple(suppressed), frozenset(used))


def stale_rules(rules: tuple[IgnoreRule, ...], used: frozenset[IgnoreRule], subject: str) -> tuple[Finding, ...]:
    """X001 for each ignore-library entry that matched nothing."""
    return tuple(
        make_finding(
            Code.X001,
            subject,
            f"ignore entry {r.code} for {r.library} matches nothing. Fix: "
            f"delete the [[tool.archaudit.ignore-library]] entry"
            + (f". Its reason was: {r.reason}" if r.reason else ""),
        )
        for r in rules
        if r not in used
    )


__all__ = [
    "IgnoreRule",
    "Suppression",
    "Filtered",
    "apply",
    "parse_patterns",
    "never_hidden",
    "recorded_for",
    "stale_rules",
]
