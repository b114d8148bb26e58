"""The view of a Report every format shares: what a verdict, a driver floor, a size, a cost
table and the suppressed findings look like, computed one way for text, JSON, Markdown,
GitHub annotations, JUnit and the diff and index reports. Presentation only, no judgement."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ..findings import ERROR, Code, Finding
from ..gpus.cuda import target_order

if TYPE_CHECKING:  # annotations only: the smoke report renders without the judge loaded
    from ..judge.audit import LibraryVerdict, Report, TargetReport
    from ..judge.filters import Suppression

QUIET_INFO = {Code.D002}  # summarised once per target instead of per library


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """How much a rendering shows, from the command line: the same for every format, each
    renderer reading what it uses."""

    detail: str = "libraries"
    verbose: bool = False
    costs: bool = False
    timings: bool = True
    unicode: bool = True  # the destination takes ✓ and ✗
    docs_url: str | None = None  # SARIF rules' helpUri
    width: int = 240  # the text's longest line: the terminal's width on a terminal, else 240


DEFAULTS = RenderOptions()


def size_text(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} KB"


def suppressed_in(report: Report, t: TargetReport) -> tuple[Suppression, ...]:
    """The findings of target `t` that a filter hid."""
    return tuple(s for s in report.suppressed if s.target == t.target)


class SuppressionGroup(NamedTuple):
    """The findings of one code one rule hid."""

    rule: str
    code: str
    hits: int
    subjects: list[str]  # sorted, unique


def finding_text(f: Finding) -> str:
    """A finding's message, and for a folded one (findings.Fold) first how many it stands for ("x7:",
    short, so a line cut to the terminal's width still holds the verdict and the fix) and last
    where the rest are listed: every format but JSON shows one line for them all."""
    if f.count == 1:
        return f.message
    return f"x{f.count}: {f.message} (folded: -v and --format json list the first {len(f.examples)})"


def code_counts(findings: Iterable[Finding]) -> Counter[Code]:
    """How many findings of each code, a folded one counting as many as it stands for."""
    out: Counter[Code] = Counter()
    for f in findings:
        out[f.code] += f.count
    return out


def suppression_groups(hidden: tuple[Suppression, ...]) -> list[SuppressionGroup]:
    """Per rule and code, in order of first appearance; a folded finding counts as many."""
    groups: dict[tuple[str, str], list[str]] = {}
    hits: Counter[tuple[str, str]] = Counter()
    for s in hidden:
        groups.setdefault((s.rule, s.finding.code), []).append(s.finding.subject)
        hits[(s.rule, s.finding.code)] += s.finding.count
    return [
        SuppressionGroup(rule, code, hits[(rule, code)], sorted(set(subjects)))
        for (rule, code), subjects in groups.items()
    ]


def suppressed_errors(hidden: tuple[Suppression, ...]) -> str:
    """ "G001 x1 by ignore G001" for the error findings a filter hid; "" when none."""
    errors: Counter[tuple[str, str]] = Counter()
    for s in hidden:
        if s.finding.severity == ERROR:
            errors[(s.finding.code, s.rule)] += s.finding.count
    return ", ".join(f"{code} x{n} by {rule}" for (code, rule), n in sorted(errors.items()))


# ---- device-code bytes per target (--costs) ----


def device_code_bytes(t: TargetReport) -> list[dict[str, Any]]:
    """The target's loadable device-code bytes per code target (sm_90, compute_90, gfx90a),
    summed over its libraries: what dropping that target from every library saves."""
    acc: dict[str, list[int]] = {}
    for v in t.libraries:
        for target, stored, decoded in v.bytes_by_target:
            row = acc.setdefault(target, [0, 0, 0])
            row[0] += stored
            row[1] += decoded
            row[2] += 1
    return [
        {"target": k, "stored": v[0], "decoded": v[1], "libraries": v[2]}
        for k, v in sorted(acc.items(), key=lambda kv: target_order(kv[0]))
    ]


@dataclass(frozen=True, slots=True)
class CostRow:
    """One line of the --costs table, its sizes already written for people."""

    target: str
    stored: str
    decoded: str
    share: str  # of all stored device code
    libraries: int


class LibraryCosts(NamedTuple):
    path: str
    by_target: tuple[tuple[str, int, int], ...]  # (target, stored, decoded) in target order


@dataclass(frozen=True, slots=True)
class Costs:
    """The --costs table of a target, shared by the text and Markdown renderings."""

    rows: tuple[CostRow, ...]
    stored: str  # totals
    decoded: str
    per_library: tuple[LibraryCosts, ...]  # when more than one library


def cost_table(t: TargetReport) -> Costs:
    rows = device_code_bytes(t)
    total_s = sum(r["stored"] for r in rows)
    total_d = sum(r["decoded"] for r in rows)
    libs = [v for v in t.libraries if v.bytes_by_target]
    return Costs(
        tuple(
            CostRow(
                r["target"],
                size_text(r["stored"]),
                size_text(r["decoded"]),
                f"{100 * r['stored'] / total_s:.0f}%" if total_s else "-",
                r["libraries"],
            )
            for r in rows
        ),
        size_text(total_s),
        size_text(total_d),
        tuple(LibraryCosts(v.path, tuple(sorted(v.bytes_by_target, key=lambda r: target_order(r[0])))) for v in libs)
        if len(libs) > 1
        else (),
    )


def verdict_text(v: LibraryVerdict, hidden: tuple[Suppression, ...] = ()) -> str:
    if v.status == "fail" and hidden:
        errors = {(f.code, f.message) for f in v.findings if f.severity == ERROR}
        if errors <= {(s.finding.code, s.finding.message) for s in hidden}:
            return verdict_words(v) + " (suppressed)"
    return verdict_words(v)


def verdict_words(v: LibraryVerdict) -> str:
    if v.status == "pass" and not v.coverage and not any(f.code == Code.G008 for f in v.findings):
        return "? no claim to judge by"  # nothing was judged: not a pass (C001 says why)
    if v.status == "pass":
        cov = [lbl for lbl, how in v.coverage]
        jit = [lbl for lbl, how in v.coverage if how == "jit"]
        s = f"✓ {' '.join(cov)}" if cov else "✓"
        return s + (f" (JIT: {' '.join(jit)})" if jit else "")
    if v.status == "specialised":
        return "specialised"
    if v.status == "fail":
        miss = [lbl for lbl, how in v.coverage if how == "none"]
        if miss:
            return f"✗ misses {' '.join(miss)}"
        codes = sorted({f.code for f in v.findings if f.severity == ERROR})
        return f"✗ {' '.join(codes)}" if codes else "✗"  # which rule failed it, when no claim is missed
    return v.status


__all__ = [
    "code_counts",
    "cost_table",
    "DEFAULTS",
    "device_code_bytes",
    "finding_text",
    "QUIET_INFO",
    "RenderOptions",
    "size_text",
    "suppressed_errors",
    "suppressed_in",
    "suppression_groups",
    "verdict_text",
]
