"""CI renderings of a Report: Markdown (PR comments, $GITHUB_STEP_SUMMARY), GitHub workflow
annotations and JUnit XML. Like archaudit.report.render, no judgement here: only presentation.

Every function is deterministic for a given report: no clock, no machine paths beyond the
targets as they were given (timings are shown only in text and JSON, and only on request).
"""

from __future__ import annotations

import os

from ..findings import CODES, ERROR, INFO, WARNING, Code, Finding
from ..gpus.cuda import label
from ..gpus.drivers import driver_key, floor_words
from ..judge.audit import LibraryVerdict, Report, TargetReport
from ..judge.filters import Suppression
from ..printable import markdown
from . import junit
from .junit import xml_text
from .view import (
    QUIET_INFO,
    code_counts,
    cost_table,
    finding_text,
    size_text,
    suppressed_errors,
    suppressed_in,
    suppression_groups,
    verdict_text,
)

ICON = {ERROR: "❌", WARNING: "⚠️", INFO: "ℹ️"}
STATUS_ICON = {"pass": "✅", "fail": "❌", "specialised": "🎯", "unverified": "❓", "host": "➖"}


def _failed(t: TargetReport) -> bool:
    return t.unusable or any(f.severity == ERROR for f in t.findings)


def _claim_words(t: TargetReport) -> str:
    if t.claim is None:
        return "no claim"
    return f"{', '.join(label(c) for c in t.claim.gpus)} (from {t.claim.source})"


def _driver_floor(t: TargetReport) -> Finding | None:
    floors = [f for f in t.findings if f.code == Code.D002]
    return max(floors, key=lambda f: driver_key(str(f.get("driver")))) if floors else None


# ---- Markdown ----


def md_text(text: object) -> str:
    """Text safe inside a Markdown table cell (printable.markdown)."""
    return markdown(str(text))


def code_span(text: str) -> str:
    """A code span inside a table cell: GitHub needs its '|' escaped too."""
    return "`" + text.replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"


def render_markdown(report: Report, *, detail: str = "libraries", costs: bool = False, verbose: bool = False) -> str:
    """A report for a pull-request comment or $GITHUB_STEP_SUMMARY (GitHub-flavoured Markdown)."""
    bad = sum(1 for t in report.targets if _failed(t))
    n = len(report.targets)
    if bad:
        head = f"## ❌ archaudit: {bad} of {n} target{'s' * (n != 1)} fail{'s' * (bad == 1)}"
    else:
        head = f"## ✅ archaudit: {n} target{'s' * (n != 1)} pass{'' if n != 1 else 'es'}"
    out = [head, ""]
    for t in report.targets:
        out.extend(_target_md(t, costs, verbose, suppressed_in(report, t)))
    if report.suppressed:
        groups = suppression_groups(report.suppressed)
        out.append(
            "<sub>Suppressed: " + "; ".join(f"{code} ×{n} by {md_text(rule)}" for rule, code, n, _ in groups) + "</sub>"
        )
        out.append("")
    if report.policy.config is not None:
        out.append(f"<sub>Configuration: {code_span(report.policy.config)} [tool.archaudit]</sub>")
        out.append("")
    out.append(
        f"<sub>archaudit {report.tool_version} · `archaudit explain CODE` gives the cause and fix of each finding</sub>"
    )
    return "\n".join(out).rstrip() + "\n"


def _target_md(t: TargetReport, costs: bool, verbose: bool, hidden: tuple[Suppression, ...] = ()) -> list[str]:
    name = t.distribution or t.target
    icon = "❌" if _failed(t) else "✅"
    device = [v for v in t.libraries if v.carried or v.relocatable or v.status == "unverified"]
    out = [f"### {icon} {md_text(name)} ({t.kind})", ""]
    out.append(
        f"**Claim:** {md_text(_claim_words(t))} · **Libraries:** {len(t.libraries)}, "
        f"{sum(1 for v in t.libraries if v.carried)} with device code · **Read:** {size_text(t.bytes_read)}"
    )
    out.append("")
    if device:
        out.extend(_libraries_md(device, hidden))
    shown = [f for f in t.findings if f.code not in QUIET_INFO or verbose]
    if shown:
        out.extend(_findings_md(shown))
    floor = _driver_floor(t)
    if floor is not None and not verbose:
        out.append(_floor_md(floor))
        out.append("")
    if costs:
        out.extend(_costs_md(t))
    out.append(f"**Result:** {md_text(_summary_md(t, hidden))}")
    out.append("")
    return out


def _libraries_md(device: list[LibraryVerdict], hidden: tuple[Suppression, ...]) -> list[str]:
    """The table of the libraries with device code (or none read where some was expected), and a blank line."""
    out = ["| Library | Carries | Verdict |", "|---|---|---|"]
    for v in device:
        carried = " ".join(v.carried) or ("(relocatable only)" if v.relocatable else "(none read)")
        verdict = verdict_text(v, hidden)
        icon = "❓" if verdict.startswith("?") else STATUS_ICON.get(v.status, "")
        out.append(
            f"| {code_span(v.path)} | {md_text(carried)} | {icon} {md_text(verdict.lstrip('✓✗? ') or v.status)} |"
        )
    out.append("")
    return out


def _findings_md(shown: list[Finding]) -> list[str]:
    """The table of the findings shown, and a blank line."""
    out = ["| | Code | Finding |", "|---|---|---|"]
    for f in shown:
        title = CODES[f.code].title if f.code in CODES else ""
        out.append(f"| {ICON[f.severity]} | **{f.code}** {md_text(title)} | {md_text(finding_text(f))} |")
    out.append("")
    return out


def _floor_md(floor: Finding) -> str:
    if floor.get("driver") == "unknown":
        return f"Driver floor: **unknown** (archaudit cannot name it, from {code_span(floor.subject)})."
    return (
        f"Driver floor: NVIDIA driver >= **{md_text(floor.get('driver'))}** "
        f"(CUDA {md_text(floor.get('cuda'))}, from {code_span(floor.subject)})."
    )


def _summary_md(t: TargetReport, hidden: tuple[Suppression, ...] = ()) -> str:
    errors = [f for f in t.findings if f.severity == ERROR]
    if t.unusable:
        return "unusable input"
    if not errors and suppressed_errors(hidden):
        return f"passes only because error findings are suppressed ({suppressed_errors(hidden)})"
    if errors:
        by = code_counts(errors)
        n = sum(by.values())
        return f"{n} error{'s' * (n != 1)} ({', '.join(f'{c} ×{n}' for c, n in sorted(by.items()))})"
    if not t.gpu_wheel:
        return "CPU wheel: no device code to verify"
    if t.claim is not None:
        return f"device code covers every claimed GPU architecture ({', '.join(label(c) for c in t.claim.gpus)})"
    return "device code verified"


def _costs_md(t: TargetReport) -> list[str]:
    c = cost_table(t)
    if not c.rows:
        return []
    out = [
        "<details><summary>Device code by target (what dropping each one saves)</summary>",
        "",
        "| Target | Stored | Decoded | Share | Libraries |",
        "|---|---:|---:|---:|---:|",
    ]
    out += [f"| {r.target} | {r.stored} | {r.decoded} | {r.share} | {r.libraries} |" for r in c.rows]
    out.append(f"| **total** | {c.stored} | {c.decoded} | | |")
    if c.per_library:
        out += ["", "| Library | Bytes per target (stored) |", "|---|---|"]
        for path, by_target in c.per_library:
            parts = ", ".join(f"{k} {size_text(s)}" for k, s, _ in by_target)
            out.append(f"| {code_span(path)} | {md_text(parts)} |")
    out.extend(["", "</details>", ""])
    return out


# ---- GitHub workflow commands ----


def escape_data(text: str) -> str:
    """A workflow-command message: %, CR and LF are percent-encoded (actions/toolkit escapeData)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow-command property value: as a message, plus ':' and ',' (escapeProperty)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


COMMAND = {ERROR: "error", WARNING: "warning", INFO: "notice"}


def _annotation_file(t: TargetReport) -> str | None:
    if t.kind == "distribution":
        return None
    path = t.target
    if os.path.isabs(path):
        try:
            rel = os.path.relpath(path)
        except ValueError:  # another drive on Windows
            return path.replace(os.sep, "/")
        if not rel.startswith(".."):
            path = rel
    return path.replace(os.sep, "/")


def annotation(level: str, message: str, *, file: str | None = None, title: str | None = None) -> str:
    props = []
    if file:
        props.append(f"file={escape_property(file)}")
    if title:
        props.append(f"title={escape_property(title)}")
    return f"::{level}{' ' + ','.join(props) if props else ''}::{escape_data(message)}"


def render_github(report: Report, **_: object) -> str:
    """GitHub Actions annotations, one per finding (errors, warnings; information as notices),
    then a one-line summary for the log."""
    out = []
    for t in report.targets:
        file = _annotation_file(t)
        for f in t.findings:
            if f.code in QUIET_INFO:
                continue
            title = f"archaudit {f.code}: {CODES[f.code].title}" if f.code in CODES else f"archaudit {f.code}"
            out.append(annotation(COMMAND[f.severity], finding_text(f), file=file, title=title))
        floor = _driver_floor(t)
        if floor is not None:
            out.append(
                annotation(
                    "notice",
                    f"{t.distribution or t.target} needs NVIDIA driver {floor_words(floor)}, from {floor.subject})",
                    file=file,
                    title="archaudit D002: driver floor",
                )
            )
    bad = sum(1 for t in report.targets if _failed(t))
    errors = sum(f.count for f in report.findings if f.severity == ERROR)
    config = f"; config {report.policy.config}" if report.policy.config is not None else ""
    out.append(
        f"archaudit: {len(report.targets) - bad} of {len(report.targets)} target"
        f"{'s' * (len(report.targets) != 1)} pass; {errors} error{'s' * (errors != 1)}{config}"
    )
    return "\n".join(out) + "\n"


# ---- JUnit XML ----


def _line(f: Finding) -> str:
    return xml_text(f"{f.severity} {f.code} {finding_text(f)}")


def _junit_rows(t: TargetReport) -> list[tuple[str, list[Finding], str]]:
    """(testcase name, its findings, its note): the target as a whole first, then each library."""
    by_subject: dict[str, list[Finding]] = {}
    for f in t.findings:
        by_subject.setdefault(f.subject, []).append(f)
    paths = {v.path for v in t.libraries}
    rows: list[tuple[str, list[Finding], str]] = [
        (
            f"({t.kind})",
            [f for s, fs in by_subject.items() if s not in paths for f in fs],
            "unusable input" if t.unusable else "",
        )
    ]
    for v in t.libraries:
        carried = " ".join(v.carried)
        rows.append((v.path, by_subject.get(v.path, []), f"{v.status}: {carried}" if carried else v.status))
    return rows


def _junit_case(t: TargetReport, suite_name: str, name: str, findings: list[Finding], note: str) -> junit.Case:
    """One testcase: a <failure> where it has error findings (or is the unusable target as a whole)."""
    whole = f"({t.kind})"
    errors = [f for f in findings if f.severity == ERROR]
    failure = None
    if errors or (t.unusable and name == whole):
        first = errors[0] if errors else None
        failure = junit.Failure(
            finding_text(first) if first else f"{t.target}: unusable input",
            "\n".join(_line(f) for f in errors) + "\n" if errors else note + "\n",
            ",".join(sorted({f.code for f in errors})) or Code.E001,
        )
    others = [f for f in findings if f.severity != ERROR]
    text = "\n".join(([note] if note and name != whole else []) + [_line(f) for f in others])
    return junit.Case(suite_name, name, failure, out=text + "\n" if text else None)


def render_junit(report: Report, **_: object) -> str:
    """JUnit XML: one <testsuite> per target, one <testcase> per library (plus one for the
    target as a whole), a <failure> per testcase that has error findings. No timings."""
    suites = []
    for t in report.targets:
        suite_name = t.distribution or t.target
        props = [("target", t.target), ("kind", t.kind), ("claim", _claim_words(t))]
        if report.policy.config is not None:
            props.append(("config", report.policy.config))
        cases = [_junit_case(t, suite_name, name, findings, note) for name, findings, note in _junit_rows(t)]
        suites.append(junit.Suite(suite_name, tuple(cases), tuple(props)))
    return junit.write("archaudit", suites)


__all__ = [
    "render_markdown",
    "render_github",
    "render_junit",
    "annotation",
    "escape_data",
    "escape_property",
    "md_text",
    "code_span",
    "xml_text",
]
