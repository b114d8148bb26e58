"""The renderings of an index query's Table (what archaudit.index.reports queried): text, JSON and
Markdown, one renderer per format in RENDERERS; the HTML page is index_html.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from ..printable import markdown

Cell = str | int | float | None


@dataclass(frozen=True, slots=True)
class Table:
    """One index report as plain rows: what index/ queried and judged, for a renderer."""

    name: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    notes: tuple[str, ...] = ()


def render_text(t: Table) -> str:
    cols = [str(c) for c in t.columns]
    body = [["" if c is None else str(c) for c in r] for r in t.rows]
    widths = [max([len(c)] + [len(r[i]) for r in body]) for i, c in enumerate(cols)]
    lines = [t.title, ""]
    lines.append("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    for r in body:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if not body:
        lines.append("(no rows)")
    lines.append("")
    lines += list(t.notes)
    return "\n".join(lines) + "\n"


def render_markdown(t: Table) -> str:
    def esc(c: Cell) -> str:
        return "" if c is None else markdown(str(c))

    lines = [
        f"### {markdown(t.title)}",
        "",
        "| " + " | ".join(esc(c) for c in t.columns) + " |",
        "|" + "---|" * len(t.columns),
    ]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in t.rows]
    lines.append("")
    lines += [f"_{markdown(n)}_" for n in t.notes]
    return "\n".join(lines) + "\n"


def render_json(t: Table) -> str:
    return (
        json.dumps(
            {
                "report": t.name,
                "title": t.title,
                "columns": list(t.columns),
                "rows": [dict(zip(t.columns, r)) for r in t.rows],
                "notes": list(t.notes),
            },
            indent=2,
        )
        + "\n"
    )


RENDERERS: dict[str, Callable[[Table], str]] = {"text": render_text, "json": render_json, "markdown": render_markdown}
"""An index query's renderer per output format (`archaudit query --format`)."""


def render(t: Table, fmt: str) -> str:
    """The table in `fmt`; text for any other."""
    return RENDERERS.get(fmt, render_text)(t)


__all__ = ["RENDERERS", "Cell", "Table", "render", "render_json", "render_markdown", "render_text"]
