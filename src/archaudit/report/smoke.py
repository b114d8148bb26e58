"""The renderings of a SmokeReport: text, JSON, Markdown, GitHub workflow commands, JUnit XML."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict

from ..printable import markdown
from ..smoke.report import FAIL, PASS, SKIP, SmokeReport, is_dispatch
from . import junit
from .formats import escape_data, escape_property
from .view import DEFAULTS, RenderOptions

SCHEMA = "archaudit-smoke/1"


def render_text(report: SmokeReport) -> str:
    lines = [
        f"archaudit smoke: {report.distribution} {report.version}  ({report.target})",
        f"  environment: {report.environment}, Python {report.python}",
    ]
    if report.gpus:
        lines.append(f"  GPUs: {', '.join(report.gpus)}; driver {report.driver}")
    else:
        lines.append(f"  GPUs: none ({report.gpu_error})")
    lines.append(
        f"  require-gpu: {'yes' if report.require_gpu else 'no'}; "
        f"timeout {report.timeout:g} s without progress per child"
    )
    if report.install_policy:
        lines.append(f"  installed {len(report.installed)} distribution(s), {report.install_policy}:")
        lines += [f"    {name} {version} from {source}" for name, version, source in report.installed]
    lines.append("")
    width = max((len(r.probe) for r in report.rows), default=4)
    for r in report.rows:
        lines.append(f"{r.status}  {r.probe:<{width}}  {r.subject}: {r.reason} [{r.duration:.2f} s]")
        if r.status == FAIL:
            if r.signal:
                lines.append(f"      signal: {r.signal}")
            if r.stderr_tail:
                tail = r.stderr_tail.splitlines()[-12:]
                lines.append("      stderr tail:")
                lines += [f"      | {t}" for t in tail]
    lines.append("")
    lines.append(f"{report.count(PASS)} passed, {report.count(FAIL)} failed, {report.count(SKIP)} skipped")
    res = dict(report.resources)
    if res:
        lines.append(
            f"{res.get('seconds')} s; peak memory: archaudit {res.get('archaudit_max_rss_mb')} MB, "
            f"its largest child {res.get('children_max_rss_mb')} MB"
        )
    return "\n".join(lines)


def to_dict(report: SmokeReport) -> dict[str, object]:
    d = asdict(report)
    d["resources"] = dict(report.resources)
    d["rows"] = []
    for r in report.rows:
        row = asdict(r)
        row["details"] = {k: v for k, v in r.details}
        d["rows"].append(row)
    return {
        "schema": SCHEMA,
        **d,
        "summary": {"passed": report.count(PASS), "failed": report.count(FAIL), "skipped": report.count(SKIP)},
        "exit_code": report.exit_code,
    }


def to_json(report: SmokeReport) -> str:
    return json.dumps(to_dict(report), indent=2, default=str)


def render_markdown(report: SmokeReport) -> str:
    cell = markdown
    gpus = ", ".join(report.gpus) if report.gpus else f"none ({report.gpu_error})"
    lines = [
        f"### archaudit smoke: {cell(report.distribution)} {cell(report.version)}",
        "",
        f"{cell(report.environment)}, Python {cell(report.python)}; GPUs: {cell(gpus)}; "
        f"driver {cell(str(report.driver))}",
        "",
        "| status | probe | subject | result |",
        "|---|---|---|---|",
    ]
    mark = {PASS: "✓ PASS", FAIL: "✗ FAIL", SKIP: "· SKIP"}
    for r in report.rows:
        lines.append(f"| {mark[r.status]} | {cell(r.probe)} | {cell(r.subject)} | {cell(r.reason)} |")
    lines += ["", f"{report.count(PASS)} passed, {report.count(FAIL)} failed, {report.count(SKIP)} skipped"]
    return "\n".join(lines)


def render_github(report: SmokeReport) -> str:
    """Workflow commands: one ::error per FAIL row, a ::notice per SKIP and per trace dispatch row
    (which containers served the GPU), then the summary."""
    lines = []
    for r in report.rows:
        title = escape_property(f"archaudit smoke {r.probe}: {r.subject}")
        if r.status == FAIL:
            lines.append(f"::error title={title}::{escape_data(r.reason)}")
        elif r.status == SKIP or is_dispatch(r):
            lines.append(f"::notice title={title}::{escape_data(r.reason)}")
    # a fixed start: a line of the log that begins with a name could be read as a workflow command
    lines.append(
        f"archaudit smoke: {report.distribution} {report.version}: {report.count(PASS)} passed, "
        f"{report.count(FAIL)} failed, {report.count(SKIP)} skipped"
    )
    return "\n".join(lines)


def render_junit(report: SmokeReport) -> str:
    """JUnit XML: one testcase per row (its probe the class name), timed; FAIL a failure, SKIP
    skipped, PASS its reason on system-out."""
    name = f"archaudit smoke {report.distribution} {report.version}"
    cases = []
    for r in report.rows:
        failure = skipped = out = None
        if r.status == PASS:
            out = r.reason
        elif r.status == SKIP:
            skipped = r.reason
        else:
            failure = junit.Failure(r.reason, "\n".join(x for x in (r.reason, r.signal or "", r.stderr_tail) if x))
        cases.append(junit.Case("smoke." + r.probe, r.subject, failure, skipped, out, r.duration))
    return junit.write(name, [junit.Suite(name, tuple(cases))]).rstrip("\n")


def _sarif(report: SmokeReport, options: RenderOptions) -> str:
    from . import sarif  # only when asked for

    return sarif.render_smoke(report, docs_url=options.docs_url)


RENDERERS: dict[str, Callable[[SmokeReport, RenderOptions], str]] = {
    "text": lambda r, o: render_text(r) + "\n",
    "json": lambda r, o: to_json(r) + "\n",
    "markdown": lambda r, o: render_markdown(r) + "\n",
    "github": lambda r, o: render_github(r) + "\n",
    "junit": lambda r, o: render_junit(r) + "\n",
    "sarif": _sarif,
}
"""The smoke report's renderer per output format (cli.main_smoke.FORMATS), each ending in a newline."""


def render(report: SmokeReport, fmt: str, options: RenderOptions = DEFAULTS) -> str:
    """The report in one of cli.main_smoke.FORMATS, ending in a newline."""
    return RENDERERS[fmt](report, options)


__all__ = ["render", "render_text", "RENDERERS", "to_json"]
