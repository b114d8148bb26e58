"""Text and JSON renderings of a SmokeReport."""

from __future__ import annotations

import json
from dataclasses import asdict

from .report import FAIL, PASS, SKIP, SmokeReport

SCHEMA = "archaudit-smoke/1"


def render_text(report: SmokeReport) -> str:
    lines = [f"archaudit smoke: {report.distribution} {report.version}  ({report.target})",
             f"  environment: {report.environment}, Python {report.python}"]
    if report.gpus:
        lines.append(f"  GPUs: {', '.join(report.gpus)}; driver {report.driver}")
    else:
        lines.append(f"  GPUs: none ({report.gpu_error})")
    lines.append(f"  require-gpu: {'yes' if report.require_gpu else 'no'}; "
                 f"timeout {report.timeout:g} s without progress per child")
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
    return "\n".join(lines)


def to_dict(report: SmokeReport) -> dict[str, object]:
    d = asdict(report)
    d["rows"] = []
    for r in report.rows:
        row = asdict(r)
        row["details"] = {k: v for k, v in r.details}
        d["rows"].append(row)
    return {"schema": SCHEMA, **d,
            "summary": {"passed": report.count(PASS), "failed": report.count(FAIL),
                        "skipped": report.count(SKIP)},
            "exit_code": report.exit_code}


def to_json(report: SmokeReport) -> str:
    return json.dumps(to_dict(report), indent=2, default=str)
