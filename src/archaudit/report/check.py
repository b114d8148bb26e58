"""The renderings of a check Report, one renderer per output format (config.FORMATS) in
RENDERERS: text and JSON (render.py), Markdown, GitHub annotations and JUnit (formats.py, with
xml.etree, imported only when one of them is asked for), SARIF (sarif.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config import Format
from .view import DEFAULTS, RenderOptions

if TYPE_CHECKING:
    from ..judge.audit import Report


def _text(report: Report, o: RenderOptions) -> str:
    from .render import render_text

    return render_text(
        report,
        detail=o.detail,
        verbose=o.verbose,
        ascii_only=not o.unicode,
        costs=o.costs,
        timings=o.timings,
        width=o.width,
    )


def _json(report: Report, o: RenderOptions) -> str:
    from .render import render_json

    return render_json(report, detail=o.detail, timings=o.timings)


def _markdown(report: Report, o: RenderOptions) -> str:
    from . import formats

    return formats.render_markdown(report, detail=o.detail, costs=o.costs, verbose=o.verbose)


def _github(report: Report, o: RenderOptions) -> str:
    from . import formats

    return formats.render_github(report)


def _junit(report: Report, o: RenderOptions) -> str:
    from . import formats

    return formats.render_junit(report)


def _sarif(report: Report, o: RenderOptions) -> str:
    from . import sarif

    return sarif.render_check(report, docs_url=o.docs_url)


RENDERERS: dict[Format, Callable[[Report, RenderOptions], str]] = {
    "text": _text,
    "json": _json,
    "markdown": _markdown,
    "github": _github,
    "junit": _junit,
    "sarif": _sarif,
}
"""The check report's renderer per output format."""


def render(report: Report, fmt: Format, options: RenderOptions = DEFAULTS) -> str:
    """The report in the chosen format."""
    return RENDERERS[fmt](report, options)


__all__ = ["RENDERERS", "render"]
