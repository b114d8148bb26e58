"""The renderings of a DiffReport (archaudit.judge.diff.compare): text, JSON, Markdown, GitHub
annotations, JUnit XML and SARIF, one renderer per format in RENDERERS. Presentation only."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..judge.diff import NOW_WORDS, DiffReport, LibraryDiff, Lost, Side, Worse
from . import formats, junit
from .formats import code_span as _code, md_text as _md
from .view import DEFAULTS, RenderOptions, size_text


def _name(s: Side) -> str:
    return f"{s.distribution or s.target} ({s.kind})"


def _bytes(n: int) -> str:
    return "0" if n == 0 else size_text(n)


def _lost_list(d: LibraryDiff, sep: str) -> str:
    """Lost targets; with the GPUs they served and how those run now while the library remains."""
    if d.change == "removed":
        return " ".join(x.target for x in d.lost)
    return sep.join(_lost_words(x) for x in d.lost)


def _lost_words(x: Lost) -> str:
    if not x.now:
        return x.target
    gpus = f"; e.g. {', '.join(x.gpus)}" if x.gpus else ""
    return f"{x.target} ({NOW_WORDS[x.now]}{gpus})"


def _verdict(r: DiffReport) -> str:
    if r.old.unusable or r.new.unusable:
        return "✗ unusable input"
    if r.problems:
        return f"✗ {len(r.problems)} librar{'y' if len(r.problems) == 1 else 'ies'} could not be verified"
    n = len(r.losses)
    if n:
        what = f"{n} librar{'y' if n == 1 else 'ies'} run worse on GPUs the old release ran on"
        return f"! {what} (allowed)" if r.allow_loss else f"✗ {what} (--allow-loss to accept)"
    free = len(r.free_losses)
    if free:
        return (
            f"✓ no GPU runs worse ({free} librar{'y' if free == 1 else 'ies'} lost targets whose GPUs "
            f"still run as well)"
        )
    return "✓ no GPU architecture lost"


def driver_change(r: DiffReport) -> str:
    """ "driver floor: >= A on Linux (CUDA x) -> >= B ..." when the floor moved, else ""."""
    if r.old.driver == r.new.driver or not (r.old.driver or r.new.driver):
        return ""
    return f"driver floor: {r.old.driver_words or 'none'} -> {r.new.driver_words or 'none'}"


KERNELS_SHOWN = 3


def _worse_words(d: LibraryDiff) -> str:
    return ", ".join(
        f"{w.cc} ({', '.join(w.gpus) or 'no catalog GPU'}) {w.was} -> {w.now}{_kernel_words(w)}" for w in d.worse
    )


def _kernel_words(w: Worse) -> str:
    """The kernels a GPU no longer runs from their own container (the library's union may not change)."""
    if not w.kernels:
        return ""
    n, shown = len(w.kernels), ", ".join(w.kernels[:KERNELS_SHOWN])
    more = f" and {n - KERNELS_SHOWN} more" if n > KERNELS_SHOWN else ""
    return f" but {n} kernel{'s' * (n != 1)} no longer run{'s' * (n == 1)} there ({shown}{more})"


def render_text(r: DiffReport, *, verbose: bool = False) -> str:
    out = [f"archaudit diff: {_name(r.old)} -> {_name(r.new)}"]
    for p in r.old.problems:
        out.append(f"✗ old: {p}")
    for p in r.new.problems:
        out.append(f"✗ new: {p}")
    if not (r.old.unusable or r.new.unusable):
        out.append(f"  wheel-wide: gained {' '.join(r.gained) or 'nothing'}; lost {' '.join(r.lost) or 'nothing'}")
        if driver_change(r):
            out.append(f"  {driver_change(r)}")
    mark = {"added": "+", "removed": "-", "changed": "~", "unchanged": "="}
    unchanged = 0
    for d in r.libraries:
        if d.change == "unchanged" and not verbose and not d.problems:
            unchanged += 1
            continue
        where = d.path if d.matched_by != "name" else f"{d.old_path} -> {d.new_path}"
        out.append(f"  {mark[d.change]} {where}: {'; '.join(_change_parts(d))}")
        if d.worse:
            out.append(f"    ✗ runs worse on {_worse_words(d)}")
        for p in d.problems:
            out.append(f"    ✗ {p}")
    if unchanged:
        out.append(f"  = {unchanged} librar{'y' if unchanged == 1 else 'ies'} unchanged (-v lists them)")
    out.append(_verdict(r))
    return "\n".join(out) + "\n"


def _change_parts(d: LibraryDiff) -> list[str]:
    """What changed in one library, in words: added or removed, lost, gained, bytes."""
    parts = []
    if d.change == "added":
        parts.append("new library")
    elif d.change == "removed":
        parts.append("library removed" if d.new_path is None else "no device code any more")
    if d.lost:
        parts.append("lost " + _lost_list(d, ", "))
    if d.gained:
        parts.append("gained " + " ".join(d.gained))
    if d.change == "unchanged":
        parts.append("unchanged: " + " ".join(d.new))
    if d.old_bytes != d.new_bytes:
        parts.append(f"device code {_bytes(d.old_bytes)} -> {_bytes(d.new_bytes)}")
    return parts


def to_dict(r: DiffReport) -> dict[str, Any]:
    def side(s: Side) -> dict[str, Any]:
        return {
            "target": s.target,
            "kind": s.kind,
            "distribution": s.distribution,
            "carries": list(s.carries),
            "unusable": s.unusable,
            "problems": list(s.problems),
            "driver_floor": s.driver or None,
        }

    return {
        "schema": "archaudit-diff",
        "schema_version": r.schema_version,
        "tool_version": r.tool_version,
        "exit_code": r.exit_code,
        "passed": r.exit_code == 0,
        "allow_loss": r.allow_loss,
        "old": side(r.old),
        "new": side(r.new),
        "gained": list(r.gained),
        "lost": list(r.lost),
        "libraries": [
            {
                "path": d.path,
                "old_path": d.old_path,
                "new_path": d.new_path,
                "matched_by": d.matched_by,
                "change": d.change,
                "old": list(d.old),
                "new": list(d.new),
                "gained": list(d.gained),
                "lost": [{"target": x.target, "now": x.now or None, "gpus": list(x.gpus)} for x in d.lost],
                "old_bytes": d.old_bytes,
                "new_bytes": d.new_bytes,
                "problems": list(d.problems),
                "worse": [
                    {"gpu": w.cc, "was": w.was, "now": w.now, "gpus": list(w.gpus), "kernels": list(w.kernels)}
                    for w in d.worse
                ],
                "fails": d.costly,
            }
            for d in r.libraries
        ],
    }


def render_json(r: DiffReport) -> str:
    return json.dumps(to_dict(r), indent=2) + "\n"


def _library_row_md(d: LibraryDiff) -> str:
    """One library's row of the Markdown table: where, how it changed, what it lost (problems too), gained."""
    where = _code(d.path) if d.matched_by != "name" else f"{_code(d.old_path or '')} → {_code(d.new_path or '')}"
    lost = "<br>".join(_md(part) for part in _lost_list(d, "\n").split("\n") if part)
    if d.problems:
        lost += ("<br>" if lost else "") + "<br>".join(f"❌ {_md(p)}" for p in d.problems)
    return (
        f"| {where} | {d.change} | {lost} | {_md(' '.join(d.gained))} | {_bytes(d.old_bytes)} → {_bytes(d.new_bytes)} |"
    )


def render_markdown(r: DiffReport, *, verbose: bool = False) -> str:
    icon = "❌" if r.exit_code else "✅"
    out = [f"## {icon} archaudit diff: {_md(_name(r.old))} → {_md(_name(r.new))}", ""]
    out.append(
        f"**Wheel-wide:** gained {_md(' '.join(r.gained) or 'nothing')}; lost {_md(' '.join(r.lost) or 'nothing')}"
    )
    out.append("")
    for p in r.old.problems + r.new.problems:
        out.append(f"- ❌ {_md(p)}")
    rows = [d for d in r.libraries if d.change != "unchanged" or verbose or d.problems]
    if rows:
        out += ["| Library | Change | Lost | Gained | Device code |", "|---|---|---|---|---:|"]
        out += [_library_row_md(d) for d in rows]
        out.append("")
    same = sum(1 for d in r.libraries if d.change == "unchanged" and not verbose and not d.problems)
    if same:
        out.append(f"{same} librar{'y' if same == 1 else 'ies'} with device code unchanged.")
        out.append("")
    out.append(f"**Result:** {_md(_verdict(r).lstrip('✓✗! '))}")
    return "\n".join(out) + "\n"


def render_github(r: DiffReport) -> str:
    """GitHub Actions annotations: an error (or, when allowed, a warning) per library that lost
    architectures, an error per problem, then a one-line summary for the log."""
    out = []
    level = "warning" if r.allow_loss else "error"
    for p in r.problems:
        out.append(formats.annotation("error", p, title="archaudit diff: could not be verified"))
    for d in r.losses:
        out.append(
            formats.annotation(
                level, f"{d.path}: lost {_lost_list(d, ', ')}", title="archaudit diff: GPU architectures lost"
            )
        )
    out.append(f"archaudit diff: {_verdict(r).lstrip('✓✗! ')}")
    return "\n".join(out) + "\n"


def render_junit(r: DiffReport, options: RenderOptions = DEFAULTS) -> str:
    """JUnit XML: one testcase per library with device code; a loss (unless allowed) or a
    problem is its failure."""
    side_problems = r.old.problems + r.new.problems
    rows: list[tuple[str, tuple[str, ...], str]] = [("(release)", side_problems, "")]
    rows += [(d.path, d.problems, _lost_list(d, ", ") if d.lost and not r.allow_loss else "") for d in r.libraries]
    cases = []
    for name, problems, lost in rows:
        failure = None
        if problems or lost:
            failure = junit.Failure(
                problems[0] if problems else f"lost {lost}",
                "\n".join(problems + ((f"lost {lost}",) if lost else ())) + "\n",
                "unverified" if problems else "lost",
            )
        cases.append(junit.Case("archaudit-diff", name, failure))
    return junit.write("archaudit-diff", [junit.Suite(f"{_name(r.old)} -> {_name(r.new)}", tuple(cases))])


def _sarif(r: DiffReport, options: RenderOptions) -> str:
    from . import sarif  # only when asked for

    return sarif.render_diff(r, docs_url=options.docs_url)


RENDERERS: dict[str, Callable[[DiffReport, RenderOptions], str]] = {
    "text": lambda r, o: render_text(r, verbose=o.verbose),
    "json": lambda r, o: render_json(r),
    "markdown": lambda r, o: render_markdown(r, verbose=o.verbose),
    "github": lambda r, o: render_github(r),
    "junit": render_junit,
    "sarif": _sarif,
}
"""The diff's renderer per output format (config.FORMATS)."""


def render(r: DiffReport, fmt: str, options: RenderOptions = DEFAULTS) -> str:
    """The diff in one of the shared output formats."""
    return RENDERERS[fmt](r, options)


__all__ = [
    "RENDERERS",
    "render",
    "render_github",
    "render_json",
    "render_junit",
    "render_markdown",
    "render_text",
    "to_dict",
]
