"""`archaudit smoke`: install a wheel in isolation and prove it runs on this machine's GPU.

This module owns the command line of smoke (its options, the defaults, the exit codes, how the
report is rendered and written); the probes and their runner live in archaudit.smoke and are
imported only when smoke runs, so parsing the command line (and `archaudit --help`) loads none
of them."""

from __future__ import annotations

import argparse
import signal
import sys

from ..config import FORMATS  # every report format; smoke offers them all
from ..smoke.defaults import DEFAULT_TIMEOUT  # imports nothing: parsing loads no probe
from . import common

EXIT_CODES = (
    (0, "every row passed (a SKIP passes, except one for want of a GPU under --require-gpu)"),
    (
        1,
        "a row failed: a library does not load, device code the driver refuses or answers otherwise "
        "than predicted, a model that does not run or match, a probe or plugin that broke, a forged result",
    ),
    (
        2,
        "unusable input: no such wheel, a wheel that does not install, a distribution not installed, "
        "an unknown probe, a platform other than Linux, bad arguments, an unwritable -o",
    ),
    (130, "interrupted (Ctrl-C); SIGTERM ends every child first and exits 128+15"),
)


def add_smoke_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", help="a wheel (.whl) to install into a fresh environment")
    parser.add_argument(
        "--installed", metavar="NAME", help="smoke-test distribution NAME as installed in this environment"
    )
    parser.add_argument(
        "--example", action="store_true", help="smoke-test the small wheel bundled with archaudit (check --example's)"
    )
    parser.add_argument(
        "--require-gpu",
        action="store_true",
        help="a check that could not run for want of a GPU (or of code for it) fails",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"seconds a child (an install step, a probe) may go without progress before it "
        f"is killed with everything it started (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--system-site-packages",
        action="store_true",
        help="let the fresh environment see this interpreter's site-packages",
    )
    parser.add_argument(
        "--allow-source-dependencies",
        action="store_true",
        help="let the wheel's dependencies install from sdists (their build backends run); "
        "by default only binary wheels are installed, and the report says which",
    )
    parser.add_argument(
        "--probe",
        dest="probes",
        action="append",
        metavar="NAME",
        help="run only this probe (repeatable); --list-probes names them",
    )
    parser.add_argument("--list-probes", action="store_true", help="list the probes and exit")
    parser.add_argument(
        "--run",
        dest="run_command",
        metavar="COMMAND",
        help="trace probe: run this shell command (python -m pytest tests/gpu, a script) with "
        "every Python process it starts under the launch tracer, instead of the built-in "
        "workloads (--probe trace is added; --timeout bounds the whole command)",
    )
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # old spelling of --format json


def configure_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "smoke", help="install a wheel in isolation and prove it runs on this machine's GPU (Linux only)"
    )
    add_smoke_arguments(p)
    common.add_output_options(p, FORMATS)
    p.set_defaults(execute=execute)


def _target(args: argparse.Namespace) -> str | None:
    if getattr(args, "example", False):
        from ..core import example_wheel

        return example_wheel()
    target: str | None = args.target
    return target


def _probes(args: argparse.Namespace) -> list[str] | None:
    """The probes asked for; --run COMMAND is the trace probe's workload, so it adds that probe."""
    probes: list[str] | None = args.probes
    if getattr(args, "run_command", None) and "trace" not in (probes or ()):
        probes = [*(probes or ()), "trace"]
    return probes


def execute(args: argparse.Namespace) -> int:
    """Run the smoke test the arguments ask for, render the report, write it."""
    from ..report.smoke import render
    from ..report.view import RenderOptions
    from ..smoke import child
    from ..smoke.runner import SmokeInputError, list_probes, run_smoke

    fmt = getattr(args, "format", None) or ("json" if getattr(args, "json", False) else "text")
    output = getattr(args, "output", None)
    if args.list_probes:
        text, rc = list_probes()
        return _emit(text, output) or rc
    target = _target(args)
    for given, what in ((target, "wheel"), (args.installed, "--installed NAME")):
        if given is not None and not given.strip():
            return _emit_error(f"an empty {what} ({given!r}): is the variable that should name it unset?", fmt, output)
    if target is None and args.installed is None:
        return _emit_error("give a wheel, --example or --installed NAME", fmt, output)

    def on_signal(signum: int, frame: object) -> None:
        child.stop_all()  # children run in sessions of their own: end them first
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)  # unwinds through run_smoke's cleanup

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    child.reset()
    try:
        report = run_smoke(
            target,
            installed=args.installed,
            require_gpu=args.require_gpu,
            timeout=args.timeout,
            system_site_packages=args.system_site_packages,
            probes=_probes(args),
            allow_source_dependencies=getattr(args, "allow_source_dependencies", False),
            run_command=getattr(args, "run_command", None),
        )
    except SmokeInputError as exc:
        return _emit_error(str(exc), fmt, output)
    except KeyboardInterrupt:
        print("archaudit smoke: interrupted", file=sys.stderr)
        return 130
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    options = RenderOptions(docs_url=getattr(args, "docs_url", None))
    return _emit(common.terminal_safe(render(report, fmt, options), fmt), output) or report.exit_code


def _emit(text: str, output: str | None) -> int:
    """Write the report; an unwritable -o is one line and exit 2."""
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        print(f"archaudit smoke: error: -o {output}: cannot write the report: {e.strerror or e}", file=sys.stderr)
        return 2
    return 0


def _emit_error(message: str, fmt: str, output: str | None) -> int:
    if fmt == "json":
        import json

        _emit(json.dumps({"error": message, "exit_code": 2}, indent=2) + "\n", output)
    elif fmt == "sarif":
        from ..report.sarif import render_failure

        _emit(render_failure(message), output)
    print(f"archaudit smoke: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """`python -m archaudit.smoke`: the smoke command without the rest of the CLI."""
    parser = argparse.ArgumentParser(
        prog="archaudit smoke",
        description=(
            "Install a GPU wheel in isolation and prove it loads, its device code loads on this "
            "machine's GPUs as archaudit predicts, and a model with weights runs. Linux only."
        ),
    )
    add_smoke_arguments(parser)
    g = parser.add_argument_group("output")
    g.add_argument("--format", choices=FORMATS, default=None, help="report format (default text)")
    g.add_argument("-o", "--output", metavar="FILE", help="write the report here instead of standard output")
    args = parser.parse_args(argv)
    return execute(args)


__all__ = ["add_smoke_arguments", "configure_parser", "execute", "EXIT_CODES", "FORMATS", "main"]
