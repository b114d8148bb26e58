"""An HTML page for one project of an index: its coverage by release (architecture x version heat
map) and its driver floor over time, drawn by matplotlib (the optional `archaudit[html]`
dependency) as inline SVG, with the report tables under them. One self-contained file.
"""

from __future__ import annotations

import datetime
import html
import io
from typing import Any

from ..errors import UsageError
from ..gpus.drivers import UNKNOWN
from .index import Cell, Table

_CELL = {"N": 2.0, "J": 1.0, "-": 0.0}


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("query html needs matplotlib: install archaudit with its 'html' extra") from None
    return plt


def _svg(fig: Any) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight")
    text = out.getvalue()
    return text[text.index("<svg") :]


def heat_map(table: Table) -> str:
    """Coverage as an SVG heat map: a row per architecture, a column per wheel."""
    plt = _pyplot()
    from matplotlib.colors import ListedColormap

    archs = list(table.columns[2:])
    versions = [f"{r[0]}" for r in table.rows]
    grid = [[_CELL.get(str(r[2 + i]), float("nan")) for r in table.rows] for i in range(len(archs))]
    fig, ax = plt.subplots(figsize=(min(12.0, max(4.0, 0.35 * len(versions) + 2)), max(2.5, 0.3 * len(archs) + 1)))
    cmap = ListedColormap(["#d73027", "#fee08b", "#1a9850"]).with_extremes(bad="#dddddd")
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=2, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(versions)), versions, rotation=60, ha="right")
    ax.set_yticks(range(len(archs)), archs)
    ax.set_xlabel("release")
    ax.set_ylabel("architecture")
    ax.set_title("native (green), PTX JIT only (yellow), not at all (red), unverified (grey)", fontsize=9)
    svg = _svg(fig)
    plt.close(fig)
    return svg


def _when(row: tuple[Cell, ...]) -> datetime.datetime | None:
    text = str(row[2] or "")
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def floor_plot(table: Table) -> str:
    """The driver floor by release, over upload time when the index said it, else release order;
    a release whose floor archaudit cannot name is in the table, not on the plot (as in the atlas)."""
    plt = _pyplot()
    pts = [(r, _when(r)) for r in table.rows if r[4] and r[4] != UNKNOWN]
    fig, ax = plt.subplots(figsize=(6.5, 3.0))
    if pts:
        dated = all(w is not None for _, w in pts)
        xs = [w if dated else i for i, (_, w) in enumerate(pts)]
        ys = [float(".".join(str(r[4]).split(".")[:2])) for r, _ in pts]
        ax.step(xs, ys, where="post", marker="o")
        for i, (x, y, (r, _)) in enumerate(zip(xs, ys, pts)):
            if i == 0 or y != ys[i - 1]:  # name the release where the floor moves
                ax.annotate(str(r[0]), (x, y), textcoords="offset points", xytext=(0, 6), fontsize=7, ha="center")
        if not dated:
            ax.set_xticks(range(len(pts)), [str(r[0]) for r, _ in pts], rotation=60, ha="right")
        ax.set_xlabel("upload time" if dated else "release")
    ax.set_ylabel("minimum NVIDIA driver")
    ax.set_title("driver floor by release (Linux)", fontsize=9)
    svg = _svg(fig)
    plt.close(fig)
    return svg


def _table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in t.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape('' if c is None else str(c))}</td>" for c in r) + "</tr>" for r in t.rows
    )
    notes = "".join(f"<p class=note>{html.escape(n)}</p>" for n in t.notes)
    return (
        f"<h2>{html.escape(t.title)}</h2><table id={html.escape(t.name)}><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>{notes}"
    )


def page(project: str, cov: Table, floor: Table, lost: Table) -> str:
    """The whole page for a project, from its coverage, driver-floor and lost tables (index.reports)."""
    if not cov.rows:
        raise UsageError(f"query html: no wheels of {project!r} in the database")
    parts = [
        "<!doctype html><html><head><meta charset=utf-8>",
        f"<title>archaudit: {html.escape(project)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px}.note{color:#555;font-size:12px}</style>",
        "</head><body>",
        f"<h1>{html.escape(project)}: GPU coverage and driver floor by release</h1>",
        f"<p>{len(cov.rows)} wheel(s).</p>",
        "<figure id=heatmap>",
        heat_map(cov),
        "<figcaption>coverage: architecture x release</figcaption></figure>",
        "<figure id=driver-floor>",
        floor_plot(floor),
        "<figcaption>driver floor over time</figcaption></figure>",
        _table(lost),
        _table(floor),
        _table(cov),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


__all__ = ["floor_plot", "heat_map", "page"]
