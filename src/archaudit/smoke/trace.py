"""trace: which kernels a real workload launched on this GPU, from which container, against check.

A child runs a workload (the torch sweep, the torch and JAX model steps, or the user's own
command, `--run`) under CUPTI's launch tracer (cupti.py). What it writes is raw: per kernel and
result, how many launches; per module the driver loaded, the sha256 and size of the image.
Everything but the child runs in archaudit's process and judges those records against check's
inventory of the files the traced processes mapped:

- a loaded image is the cubin entry whose decoded bytes have its sha256 (read here, from the
  library file): the container the launch came from, identified by its bytes; an image no
  entry has (the JIT's output) is tied to the containers whose code defines the kernel's name;
- each launched kernel must be predicted runnable on this GPU (gpus.predict) from that
  container, and from the entry the driver chose;
- a failed launch whose result is a code-selection error (209, 98, 500, 218, 222, ...) agrees
  with check only where check predicted that container cannot run here; otherwise it is a
  false pass of check, named with kernel and container. Any other failed launch is a FAIL too:
  a failed launch is never passed;
- per library, which containers served this GPU, and that none without code for it did.

What a trace cannot prove: other GPUs, other shapes and dtypes, code paths the workload did not
take (docs/smoke.md).

This module is the probe; the records are read in trace_records.py, the inventory is
trace_inventory.py and the judging trace_judge.py (their public names are re-exported here).
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any

from ..model import Library
from . import child
from .report import FAIL, PASS, SKIP, Row
from .trace_inventory import Inventory
from .trace_judge import NAME, SELECTION_ERRORS, judge_trace
from .trace_records import AsyncError, Launch, Module, Trace, parse_records, read_trace

SWEEP = (
    "matmul-fp32",
    "matmul-tf32",
    "matmul-fp16",
    "matmul-bf16",
    "matmul-fp8",
    "conv",
    "sdpa",
    "fft",
    "sparse",
    "sparse-24",
)


def _cuda(driver: str | None) -> tuple[int, int] | None:
    try:
        major, minor = str(driver).split(".")[:2]
        return int(major), int(minor)
    except (ValueError, AttributeError):
        return None


def inventory(ctx: Any, trace: Trace) -> tuple[Inventory, list[Row]]:
    """check's inventory of every file the traced processes mapped that holds NVIDIA device code (a
    launch's code comes from a mapped file or from none); its cubins hashed where a loaded image
    has their size."""
    from ..read.artifacts import is_audited_file

    rows: list[Row] = []
    paths: list[str] = []
    libs: list[tuple[str, Library]] = []
    seen: set[str] = set()
    for path in trace.mapped:
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real) or not is_audited_file(real):
            continue
        seen.add(real)
        try:
            lib = ctx.scan(real)
        except Exception as exc:  # fail closed: a mapped file check cannot read
            rows.append(
                Row(NAME, ctx.display(real), FAIL, f"could not read its device code: {type(exc).__name__}: {exc}")
            )
            continue
        if any(c.vendor == "nvidia" for c in lib.containers):
            paths.append(real)
            libs.append((ctx.display(real), lib))
    inv = Inventory(libs)
    inv.index_kernels()
    for p in inv.index_hashes(paths, {m.size for m in trace.modules}):
        rows.append(Row(NAME, "inventory", FAIL, p))
    for p in inv.index_loose(paths, trace.modules):
        rows.append(Row(NAME, "inventory", FAIL, p))
    return inv, rows


def _step_row(ctx: Any, subject: str, out: child.Outcome | None) -> Row:
    """A workload step, from its child's observation: ran, did not apply here, or failed."""
    if out is None or out.status != child.OBS:
        return ctx.row(NAME, subject, out)  # type: ignore[no-any-return]
    d = out.details
    if d.get("importable") is False:
        return ctx.verdict(NAME, subject, out, FAIL, f"not importable here: {d.get('error')}")  # type: ignore[no-any-return]
    if d.get("cuda_available") is False or d.get("backend") == "cpu":
        return ctx.verdict(NAME, subject, out, SKIP, "the framework sees no GPU here", gpu=True)  # type: ignore[no-any-return]
    if "error" in d:
        return ctx.verdict(NAME, subject, out, FAIL, f"the workload raised {d['error']}")  # type: ignore[no-any-return]
    if d.get("not_run"):
        return ctx.verdict(NAME, subject, out, SKIP, str(d["not_run"]))  # type: ignore[no-any-return]
    return ctx.verdict(NAME, subject, out, PASS, "ran under the launch tracer")  # type: ignore[no-any-return]


def visible_first(env: dict[str, str]) -> str:
    """CUDA_VISIBLE_DEVICES for the traced processes: the first GPU of those visible, which the
    judge compares against (GPU0)."""
    current = env.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return current or "0"


class TraceProbe:
    """Workloads under CUPTI's launch tracer; each launch judged against check in this process."""

    name = NAME
    description = (
        "CUPTI launch tracing of a workload (a torch sweep of the vendor libraries, the model "
        "steps, or --run COMMAND): each kernel launched must come from a container check "
        "predicts runs on this GPU, each failed launch must be one check predicted"
    )

    def run(self, ctx: Any) -> list[Row]:
        command = getattr(ctx, "run_command", None)
        if not command and NAME not in ctx.selected and not ctx.depends_on("torch") and not ctx.depends_on("jax"):
            return [
                Row(
                    NAME,
                    ctx.distribution,
                    SKIP,
                    f"{ctx.distribution} neither is nor depends on torch or "
                    f"jax, and no --run COMMAND was given: no workload to trace (--probe trace runs the torch "
                    f"sweep anyway)",
                )
            ]
        if not ctx.gpus:
            return [
                ctx.gpu_skip(
                    NAME, ctx.distribution, f"no launch to trace: {ctx.gpu_error or 'no CUDA device is visible'}"
                )
            ]
        cuda = _cuda(ctx.driver)
        if cuda is None:
            return [
                Row(NAME, ctx.distribution, FAIL, "the driver's CUDA version is unknown, so nothing can be predicted")
            ]
        out = tempfile.mkdtemp(prefix="trace-", dir=ctx.workdir)
        rows = self.run_command(ctx, command, out) if command else self.run_workloads(ctx, out)
        trace = read_trace(out)
        if not trace.processes and not trace.problems:
            rows.append(Row(NAME, ctx.distribution, FAIL, "no traced process wrote its records"))
            return rows
        inv, inv_rows = inventory(ctx, trace)
        rows += inv_rows
        if not trace.launches and not trace.problems:
            if rows and all(r.status == SKIP for r in rows):
                rows.append(
                    ctx.verdict(
                        NAME,
                        ctx.distribution,
                        None,
                        SKIP,
                        "no workload ran on the GPU, so the tracer saw no launch",
                        gpu=True,
                    )
                )
            else:
                rows.append(
                    Row(
                        NAME,
                        ctx.distribution,
                        FAIL,
                        f"the tracer ({trace.cupti}) saw no kernel launch in {trace.processes} process(es)",
                    )
                )
        rows += judge_trace(trace, inv, ctx.gpus[0], cuda, os.environ.get("CUDA_DISABLE_PTX_JIT") != "1")
        return rows

    def kit(self) -> tuple[Any, Any, dict[str, Any]]:
        """(the traced context class, the JAX distributions' pattern, the model probe classes by
        framework): the probes module's, which registers this probe (probes.TraceProbe) and which
        this module does not import."""
        raise NotImplementedError("the trace probe's workloads come from probes.TraceProbe")

    def run_workloads(self, ctx: Any, out: str) -> list[Row]:
        """The torch sweep, then the model probes the target wants, each of their framework children
        traced (probes.TracedContext); their rows are this probe's, named after the model probe."""
        import dataclasses

        from .context import _normalise

        traced_context, jax_family, model = self.kit()
        env = {"CUDA_VISIBLE_DEVICES": visible_first(ctx.child_env)}
        jax = bool(
            jax_family.match(_normalise(ctx.distribution))
            or any(jax_family.match(_normalise(re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0])) for r in ctx.requires)
        )
        if jax:
            # XLA replays kernels inside CUDA graphs (command buffers), which launch no kernel one by one:
            # off here, so that each kernel's launch reaches the tracer.
            env["XLA_FLAGS"] = " ".join(
                f for f in (ctx.child_env.get("XLA_FLAGS", ""), "--xla_gpu_enable_command_buffer=") if f
            )
        traced = traced_context(
            **{f.name: getattr(ctx, f.name) for f in dataclasses.fields(ctx)}, trace_out=out, trace_env=env
        )
        rows: list[Row] = []
        models: list[Any] = []
        if ctx.depends_on("torch") or NAME in ctx.selected:
            run = traced.run_task("trace-sweep", list(SWEEP), {"size": 512})
            rows += [_step_row(ctx, f"torch {s}", o) for s, o in zip(SWEEP, run.outcomes)]
            rows += ctx.death_rows(NAME, run, "trace child")
            models.append(model["torch"]())
            if "model-torch-aoti" in ctx.selected:  # an AOTInductor compile: only when asked for by name
                models.append(model["torch-aoti"]())
        if ctx.depends_on("executorch"):
            models.append(model["executorch"]())
        if jax:
            models.append(model["jax"]())
        for m in models:
            rows += [dataclasses.replace(r, probe=NAME, subject=f"{r.probe}: {r.subject}") for r in m.run(traced)]
        return rows

    def run_command(self, ctx: Any, command: str, out: str) -> list[Row]:
        """The user's command, every Python process of it traced through a sitecustomize bootstrap."""
        from . import cupti

        boot = cupti.write_bootstrap(tempfile.mkdtemp(prefix="trace-boot-", dir=ctx.workdir))
        env = dict(ctx.child_env)
        env.update(
            {
                cupti.ENV_OUT: out,
                cupti.ENV_MODULE: os.path.abspath(cupti.__file__),
                "PYTHONPATH": os.pathsep.join(p for p in (boot, env.get("PYTHONPATH", "")) if p),
                "PATH": os.pathsep.join((os.path.dirname(ctx.python), env.get("PATH", ""))),
                "CUDA_VISIBLE_DEVICES": visible_first(ctx.child_env),
            }
        )
        try:
            rc, tail = child.run_command(
                ["sh", "-c", command], f"the traced command {command!r}", env=env, timeout=ctx.timeout, cwd=os.getcwd()
            )
        except TimeoutError as exc:
            return [Row(NAME, command, FAIL, str(exc))]
        if rc != 0:
            return [Row(NAME, command, FAIL, f"the traced command exited with status {rc}", stderr_tail=tail)]
        return [Row(NAME, command, PASS, "the traced command exited with status 0")]


__all__ = [
    "AsyncError",
    "Inventory",
    "judge_trace",
    "Launch",
    "Module",
    "parse_records",
    "read_trace",
    "SELECTION_ERRORS",
    "SWEEP",
    "Trace",
    "TraceProbe",
]
