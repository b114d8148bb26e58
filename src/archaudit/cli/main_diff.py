"""`archaudit diff OLD NEW`: GPU architectures gained or lost per library between two releases."""

from __future__ import annotations

import argparse

from ..config import FORMATS  # every report format; diff offers them all
from . import common


def configure_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "diff",
        help="GPU architectures gained or lost per library between two releases",
        description="Name every GPU architecture gained or lost per library between two "
        "releases; fail on a loss unless allowed.",
    )
    p.add_argument("old", metavar="OLD", help="the previous release: a .whl, a directory, or an installed distribution")
    p.add_argument("new", metavar="NEW", help="the new release: a .whl, a directory, or an installed distribution")
    p.add_argument(
        "--allow-loss",
        action="store_true",
        default=None,
        help="report lost architectures without failing (config: allow-loss = true)",
    )
    common.add_output_options(p, FORMATS)
    common.add_colour_option(p)
    common.add_config_options(p)
    p.add_argument(
        "-j",
        "--jobs",
        type=common.positive_int,
        default=None,
        metavar="N",
        help="libraries read in parallel (default: cores)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="accepted for symmetry with check (no progress display)")
    p.add_argument("-v", "--verbose", action="store_true", help="also list unchanged libraries")
    p.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    from ..judge import diff  # the readers and the diff, only when `diff` runs
    from ..read.artifacts import inventory
    from ..report import diff as diff_report
    from ..report.view import RenderOptions
    from .settings import diff_settings

    s = diff_settings(args, common.load_config(args), FORMATS)
    report = diff.compare(inventory(s.old, jobs=s.jobs), inventory(s.new, jobs=s.jobs), allow_loss=s.allow_loss)
    text = diff_report.render(report, s.output.format, RenderOptions(verbose=s.verbose, docs_url=s.output.docs_url))
    if s.output.format == "text" and not common.unicode_ok(s.output.path):
        text = text.replace("✓", "OK").replace("✗", "X")
    text = common.terminal_safe(text, s.output.format)
    if common.colour_on(args.color, s.output.format, s.output.path):
        text = common.paint(text)
    common.write(text, s.output.path)
    return report.exit_code


__all__ = ["configure_parser", "execute", "FORMATS"]
