"""The options of `archaudit smoke`, apart from the runner: parsing the command line (and
`archaudit --help`) imports this alone, not the probes and the child machinery."""

from __future__ import annotations

import argparse

DEFAULT_TIMEOUT = 300.0

FORMATS = ("text", "json", "markdown", "github", "junit", "sarif")
EXIT_CODES = (
    (0, "every row passed (a SKIP passes, except one for want of a GPU under --require-gpu)"),
    (1, "a row failed: a library does not load, device code the driver refuses or answers otherwise "
        "than predicted, a model that does not run or match, a probe or plugin that broke, a forged result"),
    (2, "unusable input: no such wheel, a wheel that does not install, a distribution not installed, "
        "an unknown probe, a platform other than Linux, bad arguments, an unwritable -o"),
    (130, "interrupted (Ctrl-C); SIGTERM ends every child first and exits 128+15"),
)


def add_smoke_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", help="a wheel (.whl) to install into a fresh environment")
    parser.add_argument("--installed", metavar="NAME",
                        help="smoke-test distribution NAME as installed in this environment")
    parser.add_argument("--example", action="store_true",
                        help="smoke-test the small wheel bundled with archaudit (check --example's)")
    parser.add_argument("--require-gpu", action="store_true",
                        help="a check that could not run for want of a GPU (or of code for it) fails")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"seconds a child (an install step, a probe) may go without progress before it "
                             f"is killed with everything it started (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--system-site-packages", action="store_true",
                        help="let the fresh environment see this interpreter's site-packages")
    parser.add_argument("--allow-source-dependencies", action="store_true",
                        help="let the wheel's dependencies install from sdists (their build backends run); "
                             "by default only binary wheels are installed, and the report says which")
    parser.add_argument("--probe", dest="probes", action="append", metavar="NAME",
                        help="run only this probe (repeatable); --list-probes names them")
    parser.add_argument("--list-probes", action="store_true", help="list the probes and exit")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # old spelling of --format json
