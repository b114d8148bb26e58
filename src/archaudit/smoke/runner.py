"""archaudit smoke: install a wheel in isolation and run the probes against it.

    run_smoke(target, installed=None, require_gpu=False, timeout=300.0,
              system_site_packages=False, probes=None, run_command=None) -> SmokeReport

raises SmokeInputError for unusable input (a wheel that does not install, a distribution
that is not installed, an unknown probe, a platform other than Linux); the CLI maps that to
exit status 2.

smoke runs on Linux only: its probes dlopen ELF shared objects and talk to the CUDA driver
through libcuda.so.1, and they install Linux wheels. A Windows or macOS wheel is audited by
`archaudit check`, which reads every platform's binaries on any platform.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import replace
from typing import Any

from ..errors import ArchauditError
from . import child, integrity, probes as probes_mod, venv
from .defaults import DEFAULT_TIMEOUT
from .report import FAIL, Row, SmokeReport

INFO_TIMEOUT = 120.0


class SmokeInputError(ArchauditError):
    """The target cannot be smoke-tested: exit status 2."""


def linux_only(platform: str | None = None) -> None:
    """smoke's probes run on Linux only (dlopen of ELF libraries, libcuda.so.1)."""
    platform = platform or sys.platform
    if not platform.startswith("linux"):
        raise SmokeInputError(
            f"archaudit smoke runs on Linux only: its probes dlopen ELF libraries and load "
            f"device code through libcuda.so.1, and this is {platform}; `archaudit check` "
            f"audits wheels of every platform from any platform"
        )


def exists(path: str) -> None:
    """A wheel that is not there is said so, before anything is read of its name."""
    import os

    if not os.path.exists(path):
        raise SmokeInputError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise SmokeInputError(f"{path}: not a regular file")


def wheel_platform(path: str) -> None:
    """A wheel whose platform tags are not Linux (or any) cannot be installed here."""
    import os

    tags = os.path.basename(path)[:-4].split("-")[-1].split(".") if path.endswith(".whl") else []
    if tags and not any(t == "any" or t.startswith(("linux", "manylinux", "musllinux")) for t in tags):
        raise SmokeInputError(
            f"{os.path.basename(path)} is a wheel for {'.'.join(tags)}: archaudit smoke runs "
            f"Linux wheels on Linux only (`archaudit check` audits it statically)"
        )


def _resources(started: float) -> tuple[tuple[str, object], ...]:
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    return (
        ("seconds", round(time.monotonic() - started, 2)),
        ("archaudit_max_rss_mb", own),
        ("children_max_rss_mb", kids),
    )


def _first_info(run: child.TaskRun) -> dict[str, Any]:
    return run.infos[0] if run.infos else {}


def run_smoke(
    target: str | None,
    *,
    installed: str | None = None,
    require_gpu: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    system_site_packages: bool = False,
    probes: list[str] | None = None,
    allow_source_dependencies: bool = False,
    run_command: str | None = None,
) -> SmokeReport:
    if (target is None) == (installed is None):
        raise SmokeInputError("give either a wheel or --installed NAME")
    linux_only()
    if target is not None:
        exists(target)
        wheel_platform(target)
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

    started = time.monotonic()
    # Everything the verdict is written with is in memory, and archaudit's files are held, before
    # any code of the wheel runs (the install runs it too): see integrity.py.
    integrity.preload()
    held = integrity.snapshot()
    report: SmokeReport | None = None
    try:
        report = _run(
            target,
            installed,
            name_probes=(probes, selected),
            require_gpu=require_gpu,
            timeout=timeout,
            system_site_packages=system_site_packages,
            allow_source_dependencies=allow_source_dependencies,
            started=started,
            run_command=run_command,
        )
    finally:
        changes = integrity.verify(held)
        if changes and report is None:  # the run ended in an error: the change is said all the same
            raise SmokeInputError(_changed_text(changes)) from None
    if changes:
        report = replace(report, rows=report.rows + (Row("integrity", "archaudit", FAIL, _changed_text(changes)),))
    return report


def _changed_text(changes: tuple[integrity.Change, ...]) -> str:
    return (
        "archaudit's own installation changed while the wheel's code ran, so no verdict of this run stands: "
        + integrity.describe(changes)
    )


def _environment(
    target: str | None,
    installed: str | None,
    workdir: str,
    *,
    system_site_packages: bool,
    timeout: float,
    allow_source_dependencies: bool,
) -> tuple[venv.Environment, str, dict[str, str]]:
    """The environment to smoke (this one, or a fresh one with the wheel installed), the
    distribution's name, and the environment its children run with."""
    if installed is not None:
        return venv.current(), installed, child.child_env(child.private_dirs(workdir))
    assert target is not None  # exactly one of target and installed, checked above
    name, _ = venv.wheel_distribution(target)
    child_env = child.child_env(child.private_dirs(workdir))
    child_env.pop("PYTHONPATH", None)  # the fresh environment, not this process's path
    try:  # the last step: an environment made is returned, so that the caller closes it
        env = venv.create(
            target,
            system_site_packages=system_site_packages,
            timeout=timeout,
            allow_source_dependencies=allow_source_dependencies,
        )
    except venv.InstallError as exc:
        raise SmokeInputError(str(exc)) from None
    return env, name, child_env


def _describe(
    env: venv.Environment, name: str, child_env: dict[str, str], workdir: str, info_timeout: float
) -> tuple[dict[str, Any], child.TaskRun]:
    """The installed distribution's metadata and files, as the environment's interpreter reads them."""
    inspect = child.run_task(
        env.python,
        "inspect",
        [],
        {"distribution": name},
        env=child_env,
        cwd=workdir,
        timeout=info_timeout,
        sys_path=env.sys_path,
    )
    info = _first_info(inspect)
    if not info:
        d = inspect.deaths[0] if inspect.deaths else None
        raise SmokeInputError(
            f"the interpreter {env.python} could not describe its packages: "
            f"{d.reason if d else 'no answer'}\n{d.stderr_tail if d else ''}"
        )
    if not info.get("found"):
        raise SmokeInputError(
            f"{name} is not installed in {env.description} (the interpreter {info.get('executable') or env.python})"
        )
    return info, inspect


def _gpu_error(gpu: dict[str, Any], devices: tuple[Any, ...]) -> str | None:
    """Why there is no GPU to run on (None where the driver named devices)."""
    gpu_error = gpu.get("error") if gpu else "the GPU query child died (see the device-load rows)"
    if not devices and not gpu_error:
        gpu_error = "the CUDA driver reports no device"
    return gpu_error


def _probe_rows(selected: list[Any], ctx: Any, subject: str) -> list[Row]:
    """Every selected probe's rows, in order; a probe that raises is a failed row, not a crashed run."""
    rows: list[Row] = []
    for probe in selected:
        name_ = getattr(probe, "name", type(probe).__name__)
        t0 = time.monotonic()
        try:
            rows += list(probe.run(ctx))
        except Exception as exc:  # a bug in a probe is a failed row, not a crashed run
            rows.append(
                Row(name_, subject, FAIL, f"the probe itself raised {type(exc).__name__}: {exc}", time.monotonic() - t0)
            )
    return rows


def _run(
    target: str | None,
    installed: str | None,
    *,
    name_probes: tuple[list[str] | None, list[Any]],
    require_gpu: bool,
    timeout: float,
    system_site_packages: bool,
    allow_source_dependencies: bool,
    started: float,
    run_command: str | None = None,
) -> SmokeReport:
    probes, selected = name_probes
    child.become_subreaper()  # what a child detaches (double fork, setsid) is ours to end
    workdir = tempfile.mkdtemp(prefix="archaudit-smoke-")
    env = None
    try:
        env, name, child_env = _environment(
            target,
            installed,
            workdir,
            system_site_packages=system_site_packages,
            timeout=timeout,
            allow_source_dependencies=allow_source_dependencies,
        )
        info_timeout = max(timeout, INFO_TIMEOUT)
        info, inspect = _describe(env, name, child_env, workdir, info_timeout)
        gpu_run = child.run_task(
            env.python, "gpu-info", [], env=child_env, cwd=workdir, timeout=info_timeout, sys_path=env.sys_path
        )
        gpu = _first_info(gpu_run)
        devices = tuple(gpu.get("devices") or ())
        gpu_error = _gpu_error(gpu, devices)
        ctx = probes_mod.ProbeContext(
            python=env.python,
            distribution=info["name"],
            version=info["version"],
            requires=tuple(info.get("requires") or ()),
            location=info["location"],
            files=tuple(info.get("files") or ()),
            gpus=devices,
            gpu_error=gpu_error,
            require_gpu=require_gpu,
            timeout=timeout,
            workdir=workdir,
            child_env=child_env,
            selected=tuple(probes or ()),
            driver=gpu.get("driver"),
            sys_path=env.sys_path,
            run_command=run_command,
        )
        # A death or a forged line in the setup children is reported, never silently dropped.
        rows: list[Row] = [
            Row("setup", info["name"], FAIL, d.reason, d.duration, d.signal, d.stderr_tail)
            for d in inspect.deaths + gpu_run.deaths
        ]
        rows += _probe_rows(selected, ctx, info["name"])
        return SmokeReport(
            target=target or installed or "",
            distribution=info["name"],
            version=info["version"],
            environment=env.description,
            python=info.get("python", "?"),
            gpus=tuple(f"GPU{d['ordinal']} {d['name']} ({d['sm']})" for d in devices),
            gpu_error=None if devices else gpu_error,
            driver=gpu.get("driver"),
            require_gpu=require_gpu,
            timeout=timeout,
            rows=tuple(rows),
            resources=_resources(started),
            installed=tuple((d.name, d.version, d.source) for d in env.installed),
            install_policy=env.install_policy,
        )
    finally:
        child.sweep()
        if env is not None:
            venv.close(env)
        shutil.rmtree(workdir, ignore_errors=True)


def list_probes() -> tuple[str, int]:
    """The probes, one a line; a plugin is asked for its description in a child (exit 1 if one is broken)."""
    lines, rc = [], 0
    work = tempfile.mkdtemp(prefix="archaudit-smoke-")
    try:
        for name, probe in probes_mod.discover().items():
            if isinstance(probe, probes_mod.PluginProbe):
                ok, text = probe.describe(work)
                if not ok:
                    rc = 1
                    text = f"BROKEN: plugin {probe.value} (from {probe.distribution}) does not load: {text}"
                lines.append(f"{name:18} {text}")
            else:
                lines.append(f"{name:18} {getattr(probe, 'description', '')}")
    finally:
        child.sweep()
        shutil.rmtree(work, ignore_errors=True)
    return "\n".join(lines) + "\n", rc


__all__ = ["exists", "linux_only", "list_probes", "run_smoke", "SmokeInputError"]
