"""The GPU atlas: one self-contained HTML page over a whole index database ("which GPU wheels run
where"). For every project, a grid with a row per GPU of the catalog (each compute capability
of data/gpus.json with its architecture and GPUs, each AMD processor of data/amd.json) and a
column per wheel, oldest release first; each cell says how that wheel's device code runs on that
GPU (native, PTX JIT only, or not at all: the rules' own --gpu answers, G008/G009, judged again
by this archaudit) and links to the wheel's findings. Under it, the driver floor over time.
Filters by project and GPU are a few lines of inline script; without script the page is whole.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..errors import UsageError
from ..gpus import amd as gfx, cuda as arch
from ..gpus.drivers import driver_key

NATIVE, JIT, NO, UNVERIFIED, HOST = "native", "jit", "no", "unverified", "host"
CELL_TEXT = {NATIVE: "native", JIT: "PTX only", NO: "no", UNVERIFIED: "?", HOST: "·"}
CELL_TITLE = {
    NATIVE: "runs natively (SASS or a code object for it)",
    JIT: "runs only by JIT-compiling PTX",
    NO: "some library with device code does not run there",
    UNVERIFIED: "could not be verified",
    HOST: "no device code",
}


@dataclass(frozen=True, slots=True)
class GpuRow:
    key: str  # "sm_75", "gfx942", "gfx90a:xnack+": the row's name on the page
    vendor: str
    generation: str  # "Turing" (NVIDIA); the setting its GPUs ship in, or the processor (AMD)
    gpus: tuple[str, ...]  # catalog names; an AMD row is asked about its first, as it ships


@dataclass(frozen=True, slots=True)
class WheelColumn:
    wheel_id: int
    project: str
    release: str
    tags: str
    file: str
    verdict: str
    uploaded: str
    cells: dict[str, str]  # GpuRow.key -> NATIVE | JIT | NO | UNVERIFIED | HOST
    floor: tuple[str, str] | None  # (CUDA release, driver)
    findings: tuple[tuple[str, str, str, str], ...]  # (code, severity, subject, message), as indexed
    line: tuple[str, str, str]  # (python tag, OS, CPU), from the wheel's tags


def gpu_rows() -> tuple[GpuRow, ...]:
    """One row per compute capability the NVIDIA catalog holds (so no row for a number no GPU
    reports, such as sm_88), newest first, then one per AMD processor of the AMD catalog."""
    names: dict[tuple[int, int], list[str]] = {}
    for g in arch.gpu_catalog():
        names.setdefault(g.cc, []).append(g.name)
    gens = arch.generations()
    rows = [
        GpuRow(f"sm_{cc[0]}{cc[1]}", "nvidia", gens.get(cc, ""), tuple(names[cc])) for cc in sorted(names, reverse=True)
    ]
    # AMD: one row per processor and the xnack/sramecc settings its GPUs ship with (what decides
    # which code object loads), asked about by the first GPU's catalog name
    amd: dict[tuple[str, str], list[str]] = {}
    for a in gfx.gpus():
        amd.setdefault((a.target, a.shipped or ""), []).append(a.name)
    targets = [t for t, _ in amd]
    for (target, ships), gpus in sorted(amd.items(), key=lambda kv: (kv[0][0], kv[0][1]), reverse=True):
        rows.append(
            GpuRow(ships if ships and targets.count(target) > 1 else target, "amd", ships or target, tuple(gpus))
        )
    return tuple(rows)


# ---- the page ----

_STYLE = """
:root{--native:#1a9850;--jit:#fee08b;--no:#d73027;--unverified:#bdbdbd;--host:#f3f3f3;--ink:#1b1b1b}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);margin:0;background:#fafafa}
header{background:#14213d;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#cfd8ea}main{padding:16px 28px}
.filters{display:flex;gap:16px;align-items:center;margin:8px 0 16px;flex-wrap:wrap}
.filters label{font-weight:600}.filters select{font:inherit;padding:3px 6px}
.legend span{display:inline-block;padding:1px 8px;margin-right:6px;border-radius:3px;font-size:12px}
section.project{background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:12px 16px;margin:0 0 18px}
section.project h2{margin:0 0 8px;font-size:18px}.scroll{overflow-x:auto}
table.grid{border-collapse:separate;border-spacing:2px}
table.grid th{font-size:12px;font-weight:600;text-align:left;white-space:nowrap;padding:2px 6px}
table.grid thead th{vertical-align:bottom;text-align:center}
table.grid thead th.project{background:#e8ecf4;border-radius:3px}table.grid thead th.project a{color:inherit}
table.grid thead th small{display:block;font-weight:400;color:#666}
table.grid th.gpu small{color:#666;font-weight:400}
td.cell{width:68px;height:22px;text-align:center;font-size:11px;border-radius:3px;padding:0}
td.cell a{display:block;color:inherit;text-decoration:none;line-height:22px}
.native{background:var(--native);color:#fff}.jit{background:var(--jit)}.no{background:var(--no);color:#fff}
.unverified{background:var(--unverified)}.host{background:var(--host);color:#999}
.floor svg{max-width:100%}details{margin:4px 0}details summary{cursor:pointer;font-weight:600}
table.findings{border-collapse:collapse;font-size:12px;margin:4px 0 10px}
table.findings td,table.findings th{border:1px solid #e3e3e3;padding:2px 6px;text-align:left;vertical-align:top}
.sev-error{color:#b2182b;font-weight:600}.sev-warning{color:#a6611a}.sev-info{color:#555}
footer{color:#666;font-size:12px;padding:0 28px 24px}
"""

_SCRIPT = """
const project = document.getElementById('project'), gpu = document.getElementById('gpu');
function apply() {
  document.querySelectorAll('section.project, #atlas [data-project]').forEach(s => {
    s.hidden = project.value !== '' && s.dataset.project !== project.value;
  });
  document.querySelectorAll('tr[data-gpu]').forEach(r => {
    r.hidden = gpu.value !== '' && r.dataset.gpu !== gpu.value;
  });
}
project.addEventListener('change', apply); gpu.addEventListener('change', apply);
const asked = new URLSearchParams(location.search);  // atlas.html?project=torch&gpu=sm_75 links a view
if (asked.has('project')) project.value = asked.get('project');
if (asked.has('gpu')) gpu.value = asked.get('gpu');
apply();
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _header_cell(c: WheelColumn) -> str:
    py, os_name, cpu = c.line
    return (
        f'<th data-project="{_e(c.project)}" title="{_e(c.file)}">{_e(c.release)}'
        f"<small>{_e(py)} {_e(os_name)} {_e(cpu)}</small></th>"
    )


def _grid(by_project: Mapping[str, Sequence[WheelColumn]], rows: Sequence[GpuRow]) -> str:
    """One grid for the whole database: a row per GPU, a column per wheel, grouped by project
    (each header and cell carries its project, which the project filter hides by)."""
    cols = [c for cs in by_project.values() for c in cs]
    out = ["<div class=scroll><table class=grid id=atlas><thead><tr><th rowspan=2>GPU</th>"]
    out += [
        f'<th colspan={len(cs)} class=project data-project="{_e(p)}"><a href="#p-{_e(p)}">{_e(p)}</a></th>'
        for p, cs in by_project.items()
    ]
    out.append("</tr><tr>")
    out += [_header_cell(c) for c in cols]
    out.append("</tr></thead><tbody>")
    for r in rows:
        if all(c.cells[r.key] == HOST for c in cols):
            continue  # no wheel carries code of this vendor: nothing to say
        names = ", ".join(r.gpus[:3]) + (" ..." if len(r.gpus) > 3 else "")
        label = r.generation if r.vendor == "nvidia" else ""
        out.append(
            f'<tr data-gpu="{_e(r.key)}"><th class=gpu title="{_e(", ".join(r.gpus))}">{_e(r.key)} '
            f"{_e(label)}<br><small>{_e(names)}</small></th>"
        )
        for c in cols:
            state = c.cells[r.key]
            out.append(
                f'<td class="cell {state}" data-project="{_e(c.project)}" title="{_e(c.project)} '
                f'{_e(c.release)} on {_e(r.gpus[0])}: {CELL_TITLE[state]}">'
                f'<a href="#w{c.wheel_id}">{CELL_TEXT[state]}</a></td>'
            )
        out.append("</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def floor_svg(cols: Sequence[WheelColumn]) -> str:
    """The driver floor of each release as a step line, in release order (upload time in the
    title where the index knew it)."""
    points = [(i, c) for i, c in enumerate(cols) if c.floor is not None and c.floor[1] != "unknown"]
    if not points:
        return "<p class=note>No driver floor: no wheel of this project carries NVIDIA device code.</p>"
    width, height, left, bottom = max(320, 70 * len(cols)), 170, 60, 40
    values = [driver_key(c.floor[1])[0] + driver_key(c.floor[1])[1] / 100 for _, c in points if c.floor]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0

    def x(i: int) -> float:
        return left + (i + 0.5) * (width - left - 10) / max(1, len(cols))

    def y(v: float) -> float:
        if hi == lo:  # one floor throughout: a level line mid-height
            return 12 + (height - bottom - 12) / 2
        return 12 + (height - bottom - 12) * (1 - (v - lo) / span)

    d = f"M{x(points[0][0]):.1f} {y(values[0]):.1f}" + "".join(
        f" H{x(i):.1f} V{y(v):.1f}" for (i, _), v in zip(points[1:], values[1:])
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role=img '
        f'aria-label="driver floor by release">',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#999"/>',
        f'<path d="{d}" fill="none" stroke="#14213d" stroke-width="2"/>',
    ]
    for (i, c), v in zip(points, values):
        assert c.floor is not None
        when = f", uploaded {c.uploaded}" if c.uploaded else ""
        parts.append(
            f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="4" fill="#14213d"><title>{_e(c.release)}: '
            f"driver &gt;= {_e(c.floor[1])} (CUDA {_e(c.floor[0])}{_e(when)})</title></circle>"
        )
        parts.append(
            f'<text x="{x(i):.1f}" y="{y(v) - 8:.1f}" font-size="10" text-anchor="middle">{_e(c.floor[1])}</text>'
        )
    for i, c in enumerate(cols):
        parts.append(
            f'<text x="{x(i):.1f}" y="{height - bottom + 14}" font-size="10" text-anchor="middle">'
            f"{_e(c.release)}</text>"
        )
    parts.append('<text x="4" y="14" font-size="10">driver</text></svg>')
    return "".join(parts)


def _findings(c: WheelColumn) -> str:
    shown = [f for f in c.findings if f[1] != "info"] or list(c.findings)
    body = "".join(
        f"<tr><td>{_e(code)}</td><td class=sev-{_e(sev)}>{_e(sev)}</td><td>{_e(subject)}</td>"
        f"<td>{_e(message)}</td></tr>"
        for code, sev, subject, message in shown
    )
    rows = (
        f"<table class=findings><tr><th>code</th><th>severity</th><th>subject</th><th>message</th></tr>{body}</table>"
        if shown
        else "<p>No findings.</p>"
    )
    return (
        f'<details id="w{c.wheel_id}"><summary>{_e(c.file)}: {_e(c.verdict)}, {len(c.findings)} finding'
        f"{'s' * (len(c.findings) != 1)}</summary>{rows}</details>"
    )


def page(by_project: Mapping[str, Sequence[WheelColumn]], rows: Sequence[GpuRow], title: str = "GPU atlas") -> str:
    """The whole atlas of a database: every project, every wheel (the columns index/ judged)."""
    if not by_project:
        raise UsageError("query html: the database holds no wheels")
    wheels = sum(len(v) for v in by_project.values())
    options = "".join(f'<option value="{_e(p)}">{_e(p)}</option>' for p in by_project)
    gpu_options = "".join(
        f'<option value="{_e(r.key)}">{_e(r.key)} {_e(r.generation if r.vendor == "nvidia" else "")}'
        f" ({_e(', '.join(r.gpus[:2]))})</option>"
        for r in rows
    )
    legend = "".join(
        f"<span class={state}>{CELL_TEXT[state]}</span>{_e(CELL_TITLE[state])} "
        for state in (NATIVE, JIT, NO, UNVERIFIED, HOST)
    )
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        '<meta name=viewport content="width=device-width, initial-scale=1">',
        f"<title>archaudit: {_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<header><h1>{_e(title)}: which GPU wheels run where</h1><p>{len(by_project)} project"
        f"{'s' * (len(by_project) != 1)}, {wheels} wheel{'s' * (wheels != 1)}, judged by archaudit's rules "
        f"against every GPU of its catalog.</p></header><main>",
        f'<div class=filters><label for=project>Project</label><select id=project><option value="">all</option>'
        f'{options}</select><label for=gpu>GPU</label><select id=gpu><option value="">all</option>{gpu_options}'
        f"</select></div><p class=legend>{legend}</p>",
        _grid(by_project, rows),
        "<h2>By project: the driver floor over time, and each wheel's findings</h2>",
    ]
    for project, cols in by_project.items():
        parts.append(
            f'<section class=project data-project="{_e(project)}" id="p-{_e(project)}">'
            f"<h2>{_e(project)}</h2>"
            f"<h3>Driver floor over time</h3><div class=floor>{floor_svg(cols)}</div>"
            f"<h3>Findings by wheel</h3>{''.join(_findings(c) for c in cols)}</section>"
        )
    parts.append(
        f"</main><footer>Rows: each compute capability of archaudit's NVIDIA catalog with its "
        f"architecture and GPUs, each AMD processor of its AMD catalog; a row is shown where some wheel "
        f"of the database carries code of that vendor. Generated by archaudit.</footer>"
        f"<script>{_SCRIPT}</script></body></html>"
    )
    return "\n".join(parts) + "\n"


def data(by_project: Mapping[str, Sequence[WheelColumn]]) -> str:
    """The atlas's cells as JSON, for a test or a script (what the page draws)."""
    return json.dumps(
        {p: [{"release": c.release, "tags": c.tags, "cells": c.cells} for c in cols] for p, cols in by_project.items()},
        indent=2,
    )


__all__ = [
    "CELL_TEXT",
    "CELL_TITLE",
    "HOST",
    "JIT",
    "NATIVE",
    "NO",
    "UNVERIFIED",
    "GpuRow",
    "WheelColumn",
    "data",
    "floor_svg",
    "gpu_rows",
    "page",
]
