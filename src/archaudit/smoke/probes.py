"""Probes: each checks one thing about the installed distribution, in child interpreters.

A probe is any class with a `name` and a `run(ctx) -> Iterable[Row]`, found through the
entry-point group `archaudit.probes`; the built-in ones (load.py, device_load.py, model_torch.py,
model_executorch.py, model_jax.py, trace.py) are also found without it, in the order of BUILTIN.
A probe does its risky work through ctx.run_task (child.py), never in this process. This module
is the registry: the built-ins, the traced context the trace probe runs the model probes in, and
the plugins, each run in a child of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from . import child
from .base import Probe, ProbeLike
from .context import ProbeContext
from .device_load import DeviceLoadProbe
from .load import LoadProbe, judge_load, load_item
from .model_executorch import MISSING_WEIGHTS, WEIGHTS_FOUND, ExecuTorchCudaProbe, executorch_data, find_cuda_backend
from .model_jax import JAX_FAMILY, JaxModelProbe
from .model_torch import TorchAotiProbe, TorchModelProbe
from .report import FAIL, PASS, SKIP, Row
from .trace import TraceProbe as _Trace

TRACED_TASKS = frozenset({"torch", "jax", "executorch", "trace-sweep"})


@dataclass
class TracedContext(ProbeContext):
    """A context whose framework children run under the launch tracer (the trace probe runs the
    model probes through it): each such task writes its launch records into trace_out."""

    trace_out: str = ""
    trace_env: dict[str, str] = field(default_factory=dict)

    def run_task(
        self,
        task: str,
        items: list[Any],
        params: dict[str, Any] | None = None,
        *,
        resume: bool = True,
        extra_env: dict[str, str] | None = None,
        watch: tuple[str, ...] = (),
    ) -> child.TaskRun:
        if task in TRACED_TASKS:
            params = {**(params or {}), "trace_out": self.trace_out}
            extra_env = {**self.trace_env, **(extra_env or {})}
        return super().run_task(task, items, params, resume=resume, extra_env=extra_env, watch=watch)


class TraceProbe(_Trace):
    """The trace probe, with the model probes it traces (trace.py does not import them)."""

    def kit(self) -> tuple[Any, Any, dict[str, Any]]:
        return (
            TracedContext,
            JAX_FAMILY,
            {
                "torch": TorchModelProbe,
                "torch-aoti": TorchAotiProbe,
                "executorch": ExecuTorchCudaProbe,
                "jax": JaxModelProbe,
            },
        )


BUILTIN: tuple[type[ProbeLike], ...] = (
    LoadProbe,
    DeviceLoadProbe,
    TorchModelProbe,
    TorchAotiProbe,
    ExecuTorchCudaProbe,
    JaxModelProbe,
    TraceProbe,
)


BUILTIN_MODULES = (
    "archaudit.smoke.probes:",
    "archaudit.smoke.load:",
    "archaudit.smoke.device_load:",
    "archaudit.smoke.model_torch:",
    "archaudit.smoke.model_executorch:",
    "archaudit.smoke.model_jax:",
    "archaudit.smoke.trace:",
)


class PluginProbe:
    """A probe from the `archaudit.probes` entry-point group, run in a child of its own.

    Its code is never imported into archaudit's process: a distribution under test can
    register one, and a broken or hostile plugin must cost one FAIL row, not the run."""

    def __init__(self, name: str, value: str, distribution: str):
        self.name, self.value, self.distribution = name, value, distribution
        self.description = f"plugin {value} (from {distribution}), run in a child process"

    def _host(self, ctx: ProbeContext | None, timeout: float, workdir: str) -> child.Outcome | None:
        import sys

        params: dict[str, Any] = {"name": self.name, "value": self.value}
        if ctx is not None:
            params["ctx"] = {k: v for k, v in vars(ctx).items() if not k.startswith("_")}
        run = child.run_task(
            sys.executable,
            "plugin",
            [self.name],
            params,
            env=child.child_env(),
            cwd=workdir,
            timeout=timeout,
            sys_path=tuple(p for p in sys.path if p and os.path.isdir(p)),
        )
        out = run.outcomes[0]
        if out is not None and out.status == child.OBS:
            if out.details.get("ok") is True:
                out = child.Outcome(PASS, str(out.details.get("description", "")), out.duration, details=out.details)
            else:
                out = child.Outcome(
                    FAIL,
                    str(out.details.get("error", "the plugin reported no result")),
                    out.duration,
                    stderr_tail=str(out.details.get("traceback", "")),
                )
        if run.deaths and (out is None or out.status == PASS):
            d = run.deaths[0]
            return child.Outcome(FAIL, d.reason, d.duration, signal=d.signal, stderr_tail=d.stderr_tail)
        return out

    def describe(self, workdir: str, timeout: float = 60.0) -> tuple[bool, str]:
        """(loads, its description or why it does not load), learnt in a child."""
        out = self._host(None, timeout, workdir)
        if out is None or out.status != PASS:
            return False, out.reason if out else "the plugin's child never answered"
        return True, out.reason

    def run(self, ctx: ProbeContext) -> list[Row]:
        out = self._host(ctx, ctx.timeout, ctx.workdir)
        if out is None or out.status != PASS:
            why = out.reason if out else "the plugin's child never answered"
            return [
                Row(
                    self.name,
                    ctx.distribution,
                    FAIL,
                    f"probe plugin {self.value} (from {self.distribution}) did not run: {why}",
                    out.duration if out else 0.0,
                    out.signal if out else None,
                    out.stderr_tail if out else "",
                )
            ]
        rows = []
        for r in out.details.get("rows", []):
            try:
                rows.append(
                    Row(
                        str(r["probe"]),
                        str(r["subject"]),
                        r["status"] if r["status"] in (PASS, FAIL, SKIP) else FAIL,
                        str(r["reason"]),
                        float(r.get("duration") or 0.0),
                        r.get("signal"),
                        str(r.get("stderr_tail") or ""),
                        tuple((str(k), v) for k, v in r.get("details") or ()),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                rows.append(
                    Row(
                        self.name,
                        ctx.distribution,
                        FAIL,
                        f"probe plugin {self.value} returned a row archaudit cannot read: {type(exc).__name__}: {exc}",
                    )
                )
        return rows or [Row(self.name, ctx.distribution, FAIL, f"probe plugin {self.value} returned no row")]


def discover() -> dict[str, ProbeLike]:
    """name -> probe: the built-ins in their order, then the entry-point group's plugins.

    Entry points are read as metadata only; no plugin code runs in this process."""
    found: dict[str, ProbeLike] = {cls.name: cls() for cls in BUILTIN}
    try:
        from importlib.metadata import distributions

        eps = [
            (ep, d.metadata["Name"] or "?")
            for d in distributions()
            for ep in d.entry_points
            if ep.group == "archaudit.probes"
        ]
    except Exception:  # unreadable metadata: no plugins, and the built-ins still run
        eps = []
    for ep, dist in sorted(eps, key=lambda e: e[0].name):
        if ep.name in found or ep.value.startswith(BUILTIN_MODULES):
            continue  # a built-in, declared for other tools to see
        found[ep.name] = PluginProbe(ep.name, ep.value, dist)
    return found


__all__ = [
    "BUILTIN",
    "DeviceLoadProbe",
    "discover",
    "executorch_data",
    "ExecuTorchCudaProbe",
    "find_cuda_backend",
    "JAX_FAMILY",
    "JaxModelProbe",
    "judge_load",
    "load_item",
    "LoadProbe",
    "MISSING_WEIGHTS",
    "PluginProbe",
    "Probe",
    "ProbeContext",
    "ProbeLike",
    "TorchAotiProbe",
    "TorchModelProbe",
    "TraceProbe",
    "TracedContext",
    "TRACED_TASKS",
    "WEIGHTS_FOUND",
]
