"""SARIF 2.1.0 for check, diff and smoke: what GitHub code scanning, GitLab and CI dashboards read.

One run per report. Each finding code is a rule (ruleId = the code, so an alert keeps its
identity across releases) whose help is `archaudit explain`'s text; diff and smoke results
have rules of their own (`diff-lost`, `smoke-<probe>`). Locations are wheel member paths:
the wheel (or directory, or file) is an artifact and each member an artifact whose
`parentIndex` is the wheel, as SARIF nests a file inside an archive (SARIF 2.1.0 §3.24.3).

A rule's `helpUri` points at docs/codes.md, which holds explain's text for every rule, where
the docs are published: `--docs-url URL` (the Action passes its own repository's); without it
the rules carry the same text in `help` and no `helpUri`, since no URL is invented.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from .. import __version__
from ..findings import CODES, ERROR, INFO, WARNING, Code
from .view import finding_text

if TYPE_CHECKING:
    from ..judge.audit import Report
    from ..judge.diff import DiffReport
    from ..smoke.report import SmokeReport

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
Level = Literal["error", "warning", "note", "none"]
LEVEL: dict[str, Level] = {ERROR: "error", WARNING: "warning", INFO: "note"}


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    title: str
    cause: str
    fix: str
    severity: str  # error | warning | info, as the code table says
    example: str = ""

    @property
    def level(self) -> Level:
        return LEVEL[self.severity]

    @property
    def help_text(self) -> str:
        """What `archaudit explain` prints for a finding code (and docs/codes.md holds)."""
        return (
            f"{self.id} ({self.severity}): {self.title}\n\nCause: {self.cause}\n\nExample: {self.example}"
            f"\n\nFix: {self.fix}"
        )


def _code_rule(code: Code) -> Rule:
    c = CODES[code]
    return Rule(c.code, c.title, c.cause, c.fix, c.severity, c.example)


# The rules of the reports that have no finding codes.
DIFF_LOST = Rule(
    "diff-lost",
    "GPU architectures lost",
    "A library carries code for fewer GPU architectures than it did in the previous release, and "
    "some GPU the old release ran on now runs it worse: through PTX JIT, or not at all (a lost "
    "target whose GPUs still run natively is reported by the text, not failed).",
    "Restore the architectures in the build's arch list, or pass --allow-loss (allow-loss = true) "
    "when the loss is intended.",
    ERROR,
    "libtorch_cuda.so: lost sm_61 (no longer runs)",
)
DIFF_DROPPED = Rule(
    "diff-dropped",
    "GPU architectures dropped at no cost",
    "A library no longer carries a target it carried in the previous release, yet every GPU the "
    "old release ran on runs the new one as well (its GPUs run other code of the library "
    "natively): reported, never failed.",
    "Nothing, if the drop was meant (it makes the wheel smaller); else restore the target.",
    INFO,
    "libcurand.so: lost sm_86 (still runs natively on A10, A40)",
)
DIFF_UNVERIFIED = Rule(
    "diff-unverified",
    "could not be verified",
    "A release or a library could not be read, so what it gained or lost is unknown.",
    "Run `archaudit check` on the release: its finding says what could not be read.",
    ERROR,
    "new/x.whl: cannot read: no such file",
)
SMOKE_PROBES = ("load", "device-load", "model-torch", "model-torch-aoti", "model-executorch")
LIBRARY_PROBES = ("load", "device-load")  # their rows' subjects are libraries, as installed from the wheel


def smoke_rule(probe: str) -> Rule:
    return Rule(
        f"smoke-{probe}",
        f"smoke probe {probe} failed",
        f"The {probe} probe of `archaudit smoke` failed (or was skipped) on this machine's GPU: "
        f"its reason says what the child process saw.",
        "Reproduce with `archaudit smoke WHEEL --probe " + probe + "`; `docs/smoke.md` explains "
        "each probe and its reasons.",
        ERROR,
        f"{probe}: FAIL (see the row's reason)",
    )


def rules_markdown() -> str:
    """docs/codes.md: explain's text for every rule a SARIF log can name, one anchor per rule."""
    out = [
        "# Finding codes and SARIF rules",
        "",
        "What `archaudit explain CODE` prints for every finding code, and the rules of `diff` and",
        "`smoke` results. A SARIF rule's `helpUri` points here (`--docs-url`). Generated from the",
        "code table in `src/archaudit/findings.py` by `python tools/gen_docs.py`; do not edit.",
        "",
    ]
    rules = [_code_rule(c) for c in CODES] + [DIFF_LOST, DIFF_DROPPED, DIFF_UNVERIFIED]
    rules += [smoke_rule(p) for p in SMOKE_PROBES]
    for r in rules:
        out += [f"## {r.id}", "", f"**{r.title}** ({r.level})", "", f"Cause: {r.cause}", ""]
        out += [f"Example: `{r.example}`", "", f"Fix: {r.fix}", ""]
    return "\n".join(out)


# ---- the log ----


@dataclass(frozen=True, slots=True)
class Result:
    rule: Rule
    level: Level
    message: str
    container: str | None  # the wheel, directory or file the member is in; None: an installed distribution
    member: str | None  # the path inside it, "!"-separated when nested (a wheel in a directory); None: the target
    count: int = 1  # a folded finding: how many it stands for (SARIF's occurrenceCount)
    examples: tuple[str, ...] = ()  # and its first messages (the result's property bag)


class _Artifacts:
    """run.artifacts, each path once: containers first as met, then members under them."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self._index: dict[tuple[int | None, str], int] = {}

    def add(self, uri: str, parent: int | None) -> int:
        key = (parent, uri)
        if key not in self._index:
            row: dict[str, Any] = {"location": {"uri": _uri(uri)}}
            if parent is not None:
                row["parentIndex"] = parent
            self._index[key] = len(self.rows)
            self.rows.append(row)
        return self._index[key]

    def location(self, container: str | None, member: str | None) -> dict[str, Any]:
        index: int | None = None
        uri = ""
        for part in ([container] if container is not None else []) + (member.split("!") if member else []):
            index, uri = self.add(part, index), part
        where: dict[str, Any] = {"uri": _uri(uri)}
        if index is not None:
            where["index"] = index
        return {"physicalLocation": {"artifactLocation": where}}


def _uri(path: str) -> str:
    """SARIF's artifactLocation.uri for a path: a relative reference as given, an absolute path
    as a file: URI."""
    if os.path.isabs(path):
        return Path(path).as_uri()
    return quote(path.replace("\\", "/"), safe="/@-._~!$&'()*+,;=")


def render_failure(message: str, exit_code: int = 2) -> str:
    """A log for a run that judged nothing (an install that failed, a usage error): no results,
    an unsuccessful invocation and its reason, so a dashboard never reads it as clean."""
    return _log((), exit_code=exit_code, docs_url=None, notification=message)


def _log(
    results: Iterable[Result],
    *,
    exit_code: int,
    docs_url: str | None,
    notification: str | None = None,
    config: str | None = None,
) -> str:
    results = list(results)
    rules: list[Rule] = []
    seen: dict[str, int] = {}
    for r in results:
        if r.rule.id not in seen:
            seen[r.rule.id] = len(rules)
            rules.append(r.rule)
    artifacts = _Artifacts()
    rows = []
    for r in results:
        row: dict[str, Any] = {
            "ruleId": r.rule.id,
            "ruleIndex": seen[r.rule.id],
            "level": r.level,
            "message": {"text": r.message},
            "locations": [artifacts.location(r.container, r.member)],
        }
        if r.count > 1:
            row["occurrenceCount"] = r.count
            row["properties"] = {"examples": list(r.examples)}
        rows.append(row)
    driver: dict[str, Any] = {
        "name": "archaudit",
        "version": __version__,
        "semanticVersion": __version__,
        "rules": [_rule_json(rule, docs_url) for rule in rules],
    }
    if docs_url:
        driver["informationUri"] = docs_url.rstrip("/") + "/codes.md"
    invocation: dict[str, Any] = {"executionSuccessful": exit_code != 2 and notification is None, "exitCode": exit_code}
    if notification is not None:
        invocation["toolExecutionNotifications"] = [{"level": "error", "message": {"text": notification}}]
    if config is not None:  # the pyproject.toml whose [tool.archaudit] the check read
        invocation["properties"] = {"config": config}
    run: dict[str, Any] = {
        "tool": {"driver": driver},
        "invocations": [invocation],
        "artifacts": artifacts.rows,
        "results": rows,
        "columnKind": "unicodeCodePoints",
    }
    return json.dumps({"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}, indent=2, ensure_ascii=False) + "\n"


def _rule_json(rule: Rule, docs_url: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": rule.id,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.cause},
        "help": {"text": rule.help_text},
        "defaultConfiguration": {"level": rule.level},
    }
    if docs_url:
        out["helpUri"] = f"{docs_url.rstrip('/')}/codes.md#{rule.id.lower()}"
    return out


# ---- the three reports ----


def render_check(report: Report, *, docs_url: str | None = None) -> str:
    """One result per finding, suppressed ones left out (as every other format leaves them)."""
    results = []
    for t in report.targets:
        for f in t.findings:
            rule = _code_rule(f.code) if f.code in CODES else Rule(f.code, f.code, "", "", f.severity)
            results.append(
                Result(
                    rule, LEVEL[f.severity], finding_text(f), *_where(t.target, t.kind, f.subject), f.count, f.examples
                )
            )
    return _log(results, exit_code=report.exit_code, docs_url=docs_url, config=report.policy.config)


def _where(target: str, kind: str, subject: str) -> tuple[str | None, str | None]:
    """(container, member) of a finding's subject: the target itself, a member of it, or, in
    a directory, the file under it (a wheel there, then its member)."""
    if subject == target:
        return (None, target) if kind == "distribution" else (target, None)
    if kind == "distribution":
        return None, subject
    if kind == "directory":
        first, _, rest = subject.partition("!")
        return posixpath.join(target.replace("\\", "/"), first), rest or None
    return target, subject


def render_diff(r: DiffReport, *, docs_url: str | None = None) -> str:
    """A result per library that lost architectures: an error where some GPU runs it worse (a
    warning under --allow-loss), a note where none does; and an error per problem."""
    from ..judge.diff import NOW_WORDS

    results = [Result(DIFF_UNVERIFIED, "error", p, r.new.target, None) for p in r.problems]
    costly = set(r.losses)
    for d in r.libraries:
        if not d.lost:
            continue
        side = r.new if d.new_path is not None else r.old
        lost = ", ".join(
            f"{x.target} ({NOW_WORDS.get(x.now, x.now)} on {', '.join(x.gpus) or 'its GPUs'})" if x.now else x.target
            for x in d.lost
        )
        level: Level = ("warning" if r.allow_loss else "error") if d in costly else "note"
        rule = DIFF_LOST if d in costly else DIFF_DROPPED
        results.append(Result(rule, level, f"{d.path}: lost {lost}", *_where(side.target, side.kind, d.path)))
    return _log(results, exit_code=r.exit_code, docs_url=docs_url)


def render_smoke(report: SmokeReport, *, docs_url: str | None = None) -> str:
    """A result per failed probe step (error) and per skipped one (note); passes are not results,
    but for the trace's dispatch rows (which containers served the GPU), which are notes."""
    from ..smoke.report import FAIL, SKIP, is_dispatch

    container = report.target if report.target.endswith(".whl") else None
    results = [
        Result(
            smoke_rule(row.probe),
            "error" if row.status == FAIL else "note",
            f"{row.subject}: {row.reason}",
            container,
            row.subject if row.probe in LIBRARY_PROBES else None,
        )
        for row in report.rows
        if row.status in (FAIL, SKIP) or is_dispatch(row)
    ]
    return _log(results, exit_code=report.exit_code, docs_url=docs_url)


__all__ = ["render_check", "render_diff", "render_smoke", "render_failure", "rules_markdown", "SCHEMA_URI", "Rule"]
