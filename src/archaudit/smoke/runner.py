"""archaudit smoke: install a wheel in isolation and run the probes against it.

    run_smoke(target, installed=None, require_gpu=False, timeout=300.0,
              system_site_packages=False, probes=None) -> SmokeReport

raises SmokeInputError for unusable input (a wheel that does not install, a distribution
that is not installed, an unknown probe); the CLI maps that to exit status 2.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time

from ..errors import ArchauditError
from . import child, probes as probes_mod, venv
from .report import FAIL, Row, SmokeReport

DEFAULT_TIMEOUT = 300.0
INFO_TIMEOUT = 120.0


class SmokeInputError(ArchauditError):
    """The target cannot be smoke-tested: exit status 2."""


def _first_info(run: child.TaskRun) -> dict:
    return run.infos[0] if run.infos else {}


def run_smoke(target: str | None, *, installed: str | None = None, require_gpu: bool = False,
              timeout: float = DEFAULT_TIMEOUT, system_site_packages: bool = False,
              probes: list[str] | None = None) -> SmokeReport:
    if (target is None) == (installed is None):
        raise SmokeInputError("give either a wheel or --installed NAME")
    available = probes_mod.discover()
    if probes:
        unknown = [p for p in probes if p not in available]
        if unknown:
            raise SmokeInputError(f"unknown probe(s) {', '.join(unknown)}; known: {', '.join(available)}")
        selected = [available[p] for p in available if p in probes]
    else:
        selected = list(available.values())
    if timeout <= 0:
        raise SmokeInputError("--timeout must be positive")

    workdir = tempfile.mkdtemp(prefix="archaudit-smoke-")
    env = None
    try:
        if installed is not None:
            env = venv.current()
            name = installed
            child_env = child.child_env()
        else:
            name, _ = venv.wheel_distribution(target)
            try:
                env = venv.create(target, system_site_packages=system_site_packages)
            except venv.InstallError as exc:
                raise SmokeInputError(str(exc)) from None
            child_env = child.child_env()
            child_env.pop("PYTHONPATH", None)  # the fresh environment, not this process's path
        info_timeout = max(timeout, INFO_TIMEOUT)
        inspect = child.run_task(env.python, "inspect", [], {"distribution": name}, env=child_env,
                                 cwd=workdir, timeout=info_timeout)
        info = _first_info(inspect)
        if not info:
            d = inspect.deaths[0] if inspect.deaths else None
            raise SmokeInputError(f"the interpreter {env.python} could not describe its packages: "
                                  f"{d.reason if d else 'no answer'}\n{d.stderr_tail if d else ''}")
        if not info.get("found"):
            raise SmokeInputError(f"{name} is not installed in {env.description} ({info.get('executable')})")
        gpu = _first_info(child.run_task(env.python, "gpu-info", [], env=child_env, cwd=workdir,
                                         timeout=info_timeout))
        devices = tuple(gpu.get("devices") or ())
        gpu_error = gpu.get("error") if gpu else "the GPU query child died (see the device-load rows)"
        if not devices and not gpu_error:
            gpu_error = "the CUDA driver reports no device"
        ctx = probes_mod.ProbeContext(
            python=env.python, distribution=info["name"], version=info["version"],
            requires=tuple(info.get("requires") or ()), location=info["location"],
            files=tuple(info.get("files") or ()), gpus=devices, gpu_error=gpu_error,
            require_gpu=require_gpu, timeout=timeout, workdir=workdir, child_env=child_env,
            selected=tuple(probes or ()))
        rows: list[Row] = []
        for probe in selected:
            name_ = getattr(probe, "name", type(probe).__name__)
            t0 = time.monotonic()
            try:
                rows += list(probe.run(ctx))
            except Exception as exc:  # a bug in a probe is a failed row, not a crashed run
                rows.append(Row(name_, info["name"], FAIL,
                                f"the probe itself raised {type(exc).__name__}: {exc}",
                                time.monotonic() - t0))
        return SmokeReport(
            target=target if target is not None else installed, distribution=info["name"],
            version=info["version"], environment=env.description, python=info.get("python", "?"),
            gpus=tuple(f"GPU{d['ordinal']} {d['name']} ({d['sm']})" for d in devices),
            gpu_error=None if devices else gpu_error, driver=gpu.get("driver"),
            require_gpu=require_gpu, timeout=timeout, rows=tuple(rows))
    finally:
        if env is not None:
            venv.close(env)
        shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------

def add_smoke_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", help="a wheel (.whl) to install into a fresh environment")
    parser.add_argument("--installed", metavar="NAME",
                        help="smoke-test distribution NAME as installed in this environment")
    parser.add_argument("--require-gpu", action="store_true",
                        help="a check that could not run for want of a GPU (or of code for it) fails")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"seconds a child may go without progress before it is killed "
                             f"(default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--system-site-packages", action="store_true",
                        help="let the fresh environment see this interpreter's site-packages")
    parser.add_argument("--probe", dest="probes", action="append", metavar="NAME",
                        help="run only this probe (repeatable); --list-probes names them")
    parser.add_argument("--list-probes", action="store_true", help="list the probes and exit")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def main_smoke(args: argparse.Namespace) -> int:
    from .render import render_text, to_json

    if args.list_probes:
        for name, probe in probes_mod.discover().items():
            print(f"{name:18} {getattr(probe, 'description', '')}")
        return 0

    def on_signal(signum, frame):
        child.stop_all()  # children run in sessions of their own: end them first
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)  # unwinds through run_smoke's cleanup

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    child.reset()
    as_json = args.json or getattr(args, "format", None) == "json"  # --format/-o: the shared output options
    try:
        report = run_smoke(args.target, installed=args.installed, require_gpu=args.require_gpu,
                           timeout=args.timeout, system_site_packages=args.system_site_packages,
                           probes=args.probes)
    except SmokeInputError as exc:
        if as_json:
            import json

            print(json.dumps({"error": str(exc), "exit_code": 2}, indent=2))
        else:
            print(f"archaudit smoke: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("archaudit smoke: interrupted", file=sys.stderr)
        return 130
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    text = (to_json(report) if as_json else render_text(report)) + "\n"
    if getattr(args, "output", None):
        from ..cli.common import write

        write(text, args.output)
    else:
        sys.stdout.write(text)
    return report.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="archaudit smoke", description=(
        "Install a GPU wheel in isolation and prove it loads, its device code loads on this "
        "machine's GPUs, and a model with weights runs."))
    add_smoke_arguments(parser)
    args = parser.parse_args(argv)
    if args.target is None and args.installed is None and not args.list_probes:
        parser.error("give a wheel or --installed NAME")
    return main_smoke(args)

