"""Probes: each checks one thing about the installed distribution, in child interpreters.

A probe is any class with a `name` and a `run(ctx) -> Iterable[Row]`, found through the
entry-point group `archaudit.probes`; the built-in ones below are also found without it.
A probe does its risky work through ctx.run_task (child.py), never in this process.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..artifacts import is_audited_file
from ..model import LOADABLE_ROLES
from . import child
from .report import FAIL, PASS, SKIP, Row

LIBRARY_NAME = re.compile(r"\.so(\.[0-9A-Za-z_]+)*$")
DEVICE_FILE_SUFFIXES = (".cubin", ".fatbin", ".ptx")


@dataclass
class ProbeContext:
    """What every probe gets: the environment, the distribution, the GPUs, the limits."""

    python: str  # interpreter of the environment under test
    distribution: str
    version: str
    requires: tuple[str, ...]
    location: str  # site-packages directory the distribution's paths are relative to
    files: tuple[str, ...]  # absolute paths of the distribution's files
    gpus: tuple[dict, ...]  # {"ordinal", "name", "cc", "sm"} per visible device
    gpu_error: str | None  # why there is no GPU, where there is none
    require_gpu: bool
    timeout: float
    workdir: str  # scratch directory, removed after the run
    child_env: dict  # environment for child interpreters
    selected: tuple[str, ...] = ()  # probes named on the command line (--probe)
    _scans: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- the distribution --------------------------------------------------------------
    def display(self, path: str) -> str:
        try:
            rel = os.path.relpath(path, self.location)
        except ValueError:
            return path
        return path if rel.startswith("..") else rel

    def shared_libraries(self) -> list[str]:
        seen, out = set(), []
        for f in self.files:
            if LIBRARY_NAME.search(os.path.basename(f)) and os.path.isfile(f) and f not in seen:
                seen.add(f)
                out.append(f)
        return sorted(out, key=self.display)

    def device_code_files(self) -> list[str]:
        extra = [f for f in self.files if is_audited_file(f)]  # check's rule: by content, or by name
        return self.shared_libraries() + sorted(set(extra) - set(self.shared_libraries()))

    def depends_on(self, name: str) -> bool:
        """True when the target is `name` or declares it (unconditionally or under any marker)."""
        norm = _normalise(name)
        if _normalise(self.distribution) == norm:
            return True
        return any(_normalise(re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0]) == norm for r in self.requires)

    def wanted(self, probe: str, framework: str) -> bool:
        """A framework probe runs for a target that is or needs the framework, or on request."""
        return probe in self.selected or self.depends_on(framework)

    def not_wanted(self, probe: str, framework: str) -> Row:
        return Row(probe, self.distribution, SKIP,
                   f"{self.distribution} neither is nor depends on {framework} "
                   f"(--probe {probe} runs it anyway)")

    def scan(self, path: str):
        """The inventory of one file (payloads decoded, so kernels are named), computed once."""
        with self._lock:
            if path not in self._scans:
                from archaudit.scan import scan_file

                self._scans[path] = scan_file(path, decode=True)
            return self._scans[path]

    # -- children ----------------------------------------------------------------------
    def run_task(self, task: str, items: list, params: dict | None = None, *, resume: bool = True,
                 extra_env: dict | None = None) -> child.TaskRun:
        env = dict(self.child_env)
        env.update(extra_env or {})
        return child.run_task(self.python, task, items, params, env=env, cwd=self.workdir,
                              timeout=self.timeout, resume=resume)

    def row(self, probe: str, subject: str, outcome: child.Outcome | None, **details) -> Row:
        """A report row from an item's outcome; a GPU skip is a FAIL under --require-gpu."""
        if outcome is None:
            return Row(probe, subject, FAIL, "the child never reported this item", 0.0)
        status, reason = outcome.status, outcome.reason
        if status == SKIP and outcome.gpu and self.require_gpu:
            status, reason = FAIL, f"--require-gpu: this must run on a GPU, but {reason}"
        merged = {k: v for k, v in {**outcome.details, **details}.items() if k != "traceback"}
        return Row(probe, subject, status, reason, outcome.duration, outcome.signal,
                   outcome.stderr_tail or str(outcome.details.get("traceback", "")),
                   tuple(sorted(merged.items())))

    def gpu_skip(self, probe: str, subject: str, reason: str) -> Row:
        return self.row(probe, subject, child.Outcome(SKIP, reason, 0.0, gpu=True))

    def death_rows(self, probe: str, run: child.TaskRun, subject: str) -> list[Row]:
        return [Row(probe, subject, FAIL, d.reason, d.duration, d.signal, d.stderr_tail)
                for d in run.deaths]


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().strip()


class Probe:
    """Base class for probes (plugins need not inherit from it)."""

    name = "probe"
    description = ""

    def run(self, ctx: ProbeContext) -> Iterable[Row]:  # pragma: no cover - interface
        raise NotImplementedError


# ---------------------------------------------------------------------------------------
class LoadProbe(Probe):
    """dlopen every shared library of the distribution with RTLD_NOW, each in a fresh child."""

    name = "load"
    description = "dlopen every shared library with RTLD_NOW in a fresh child interpreter"

    def run(self, ctx: ProbeContext) -> list[Row]:
        libs = ctx.shared_libraries()
        if not libs:
            return [Row(self.name, ctx.distribution, SKIP, "the distribution ships no shared library")]
        # A fresh interpreter per library: one library loaded earlier cannot satisfy another's
        # missing dependency by its SONAME, and a crash or hang costs only that library.
        workers = max(1, min(4, os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            runs = list(pool.map(lambda p: ctx.run_task("load", [p]), libs))
        rows = []
        for path, run in zip(libs, runs):
            rows.append(ctx.row(self.name, ctx.display(path), run.outcomes[0]))
            rows += ctx.death_rows(self.name, run, ctx.display(path))
        return rows


# ---------------------------------------------------------------------------------------
def _targets(container) -> str:
    parts = []
    for e in container.entries:
        parts.append(f"{e.target} {'SASS' if e.kind == 'sass' else e.kind.upper()}")
    return ", ".join(parts) or "no entries"


def _kernels(container) -> list[str]:
    names: list[str] = []
    for e in container.entries:
        for k in e.kernels or ():
            if k not in names:
                names.append(k)
    return names


class DeviceLoadProbe(Probe):
    """Hand every fatbin container to the CUDA driver, with and without the PTX JIT."""

    name = "device-load"
    description = ("cuModuleLoadData on every fatbin container of every library, on each visible "
                   "GPU, once normally and once with CUDA_DISABLE_PTX_JIT=1")

    def run(self, ctx: ProbeContext) -> list[Row]:
        rows: list[Row] = []
        plan: list[tuple[str, list]] = []  # (library, [(index, container)])
        for path in ctx.device_code_files():
            try:
                lib = ctx.scan(path)
            except Exception as exc:  # the inventory could not read it: fail closed
                rows.append(Row(self.name, ctx.display(path), FAIL,
                                f"could not read its device code: {type(exc).__name__}: {exc}"))
                continue
            # An empty container (no entries: nvcc's device-link container for a PTX-only
            # build) has nothing to load; the driver would refuse it for that alone.
            loadable = [(k, c) for k, c in enumerate(lib.containers)
                        if c.vendor == "nvidia" and c.role in LOADABLE_ROLES and c.entries]
            if loadable:
                plan.append((path, loadable))
        if not plan:
            if not rows:
                rows.append(Row(self.name, ctx.distribution, SKIP,
                                "no file of the distribution carries loadable CUDA device code"))
            return rows
        if not ctx.gpus:
            reason = ctx.gpu_error or "no CUDA device is visible"
            for path, loadable in plan:
                rows.append(ctx.gpu_skip(self.name, ctx.display(path),
                                         f"{len(loadable)} fatbin container(s) not loaded: {reason}"))
            return rows
        items = []
        for path, loadable in plan:
            for _k, c in loadable:
                items.append({"file": path, "offset": c.offset, "size": c.size,
                              "text": c.role == "standalone" and path.endswith(".ptx")})
        base = {"CUDA_CACHE_DISABLE": "1", "CUDA_MODULE_LOADING": "EAGER"}
        normal = ctx.run_task("device-load", items, extra_env={**base, "CUDA_DISABLE_PTX_JIT": "0"})
        nojit = ctx.run_task("device-load", items, extra_env={**base, "CUDA_DISABLE_PTX_JIT": "1"})
        setup_error = next((i.get("error") for i in normal.infos if i.get("error")), None)
        if setup_error:  # the driver loaded for gpu-info but not here: report, do not guess
            for path, _ in plan:
                rows.append(ctx.gpu_skip(self.name, ctx.display(path), setup_error))
            return rows
        rows += ctx.death_rows(self.name, normal, "device-load child")
        rows += [Row(r.probe, r.subject + " (CUDA_DISABLE_PTX_JIT=1)", r.status, r.reason, r.duration,
                     r.signal, r.stderr_tail) for r in ctx.death_rows(self.name, nojit, "device-load child")]
        n = 0
        for path, loadable in plan:
            outs = []
            for k, c in loadable:
                outs.append((k, c, normal.outcomes[n], nojit.outcomes[n]))
                n += 1
            rows.append(self._library_row(ctx, path, outs))
        return rows

    def _library_row(self, ctx: ProbeContext, path: str, outs: list) -> Row:
        failures, jit, native, jit_seconds, jit_max, total = [], [], 0, 0.0, 0.0, 0.0
        crash = None
        for k, c, normal, nojit in outs:
            label = f"container {k} ({c.section or c.role} @0x{c.offset:x}, {_targets(c)})"
            if normal is None or normal.died:
                crash = normal
                failures.append(f"{label}: the driver crashed or hung loading it "
                                f"({normal.reason if normal else 'no outcome'})")
                continue
            if normal.status != PASS:
                for d in normal.details.get("per_device", []):
                    if d["code"] == 0:
                        continue
                    msg = f"{label} on GPU{d['gpu']} ({d['sm']}): {d['error']} ({d['code']})"
                    if d["code"] == 209:
                        kernels = _kernels(c)
                        shown = ", ".join(kernels[:8]) + (f" and {len(kernels) - 8} more" if len(kernels) > 8 else "")
                        read = all(e.kernels is not None for e in c.entries)
                        msg += (f": no code this GPU can run; kernels that would fail with "
                                f"'no kernel image is available': "
                                f"{shown or ('none (a kernel-less device-link stub)' if read else 'names not read')}")
                    else:
                        msg += f": {d['text']}"
                    failures.append(msg)
                continue
            seconds = max((d["seconds"] for d in normal.details.get("per_device", [])), default=0.0)
            total += seconds
            if nojit is not None and nojit.status == PASS:
                native += 1
            else:
                why = "died" if nojit is None or nojit.died else ", ".join(
                    d["error"] or "ok" for d in nojit.details.get("per_device", []))
                jit.append(f"{label}: {seconds:.3f} s with the JIT, without it {why}")
                jit_seconds += seconds
                jit_max = max(jit_max, seconds)
        gpus = ", ".join(f"GPU{g['ordinal']} {g['name']} ({g['sm']})" for g in ctx.gpus)
        details = {"containers": len(outs), "native": native, "jit": len(jit),
                   "jit_seconds": round(jit_seconds, 4), "load_seconds": round(total, 4)}
        if jit:
            details["jit_containers"] = jit[:50]
        if failures:
            details["failures"] = failures[:50]
            more = f" (and {len(failures) - 3} more)" if len(failures) > 3 else ""
            return Row(self.name, ctx.display(path), FAIL,
                       f"{len(failures)} of {len(outs)} container(s) do not load on {gpus}: "
                       + "; ".join(failures[:3]) + more,
                       total, crash.signal if crash else None, crash.stderr_tail if crash else "",
                       tuple(sorted(details.items())))
        how = f"{native} native SASS"
        if jit:
            how += (f", {len(jit)} only through the PTX JIT (JIT took {jit_seconds:.3f} s in all, "
                    f"longest {jit_max:.3f} s; with CUDA_DISABLE_PTX_JIT=1 they do not load)")
        else:
            how += ", none needs the PTX JIT"
        return Row(self.name, ctx.display(path), PASS,
                   f"all {len(outs)} container(s) load on {gpus}: {how}", total,
                   details=tuple(sorted(details.items())))


# ---------------------------------------------------------------------------------------
class TorchModelProbe(Probe):
    """nn.Linear and nn.Conv2d with weights saved to and loaded from a file, GPU vs CPU."""

    name = "model-torch"
    description = "PyTorch nn.Linear and nn.Conv2d with weights from a file, on the GPU against CPU"
    steps = (("linear", "torch nn.Linear(64, 32), weights from a file"),
             ("conv", "torch nn.Conv2d(3, 8, 3), weights from a file"))
    groups = (("linear", "conv"),)

    def run(self, ctx: ProbeContext) -> list[Row]:
        if not ctx.wanted(self.name, "torch"):
            return [ctx.not_wanted(self.name, "torch")]
        subjects = dict(self.steps)
        rows: list[Row] = []
        work = tempfile.mkdtemp(prefix="torch-", dir=ctx.workdir)
        for group in self.groups:
            run = ctx.run_task("torch", list(group), {"workdir": work}, resume=False)
            for step, out in zip(group, run.outcomes):
                row = ctx.row(self.name, subjects[step], out)
                if out is not None and out.details.get("importable") is False and ctx.depends_on("torch"):
                    row = Row(row.probe, row.subject, FAIL,
                              f"{row.reason} ({ctx.distribution} is or needs torch)", row.duration)
                rows.append(row)
            rows += ctx.death_rows(self.name, run, "torch child")
        return rows


class TorchAotiProbe(TorchModelProbe):
    """AOTInductor: compile a model with weights, then load the package in a fresh process."""

    name = "model-torch-aoti"
    description = ("AOTInductor: compile nn.Linear into a package, then aoti_load_package and run "
                   "it in a fresh process")
    steps = (("aoti-compile", "torch AOTInductor compile of nn.Linear(64, 32)"),
             ("aoti-load", "torch aoti_load_package in a fresh process"))
    groups = (("aoti-compile",), ("aoti-load",))


# ---------------------------------------------------------------------------------------
class ExecuTorchCudaProbe(Probe):
    """The CUDA delegate with and without weights, as pytorch/executorch#22089 checks it."""

    name = "model-executorch"
    description = ("ExecuTorch CUDA delegate: export a weightless and a weighted model through "
                   "CudaPartitioner, check aoti_cuda_blob.ptd, run both against eager, and load "
                   "the weighted one without its data file (must fail)")
    steps = (
        ("import", "executorch import and registered backends"),
        ("export-add", "executorch export x + y through CudaPartitioner"),
        ("export-linear", "executorch export nn.Linear(8, 4) through CudaPartitioner"),
        ("blob", "executorch aoti_cuda_blob.ptd carries the weights"),
        ("run-add", "executorch run x + y on the CUDA delegate vs eager"),
        ("run-linear", "executorch run nn.Linear with aoti_cuda_blob.ptd vs eager"),
        ("no-data", "executorch negative control: nn.Linear without its data file"),
    )

    def run(self, ctx: ProbeContext) -> list[Row]:
        if not ctx.wanted(self.name, "executorch"):
            return [ctx.not_wanted(self.name, "executorch")]
        subjects = dict(self.steps)
        target = ctx.depends_on("executorch")
        work = tempfile.mkdtemp(prefix="executorch-", dir=ctx.workdir)
        first = [s for s, _ in self.steps if s != "no-data"]
        run1 = ctx.run_task("executorch", first, {"workdir": work}, resume=False)
        rows: list[Row] = []
        for step, out in zip(first, run1.outcomes):
            row = ctx.row(self.name, subjects[step], out)
            if step == "import" and row.status == SKIP and target:
                row = Row(row.probe, row.subject, FAIL,
                          row.reason + f" (the target {ctx.distribution} is or needs executorch)", row.duration)
            rows.append(row)
        rows += ctx.death_rows(self.name, run1, "executorch child")
        blocked = None
        by_step = dict(zip(first, run1.outcomes))
        for step in ("import", "export-add", "export-linear"):
            out = by_step[step]
            if out is None or out.status != PASS:
                blocked = [f"{step} did not pass" + (f" ({out.reason})" if out else ""),
                           bool(out and out.gpu)]
                break
        if rows and rows[0].status == SKIP and not target:
            # executorch is absent and nothing asked for it: one row says so, not seven.
            return rows[:1]
        run2 = ctx.run_task("executorch", ["no-data"], {"workdir": work, "blocked": blocked})
        out = run2.outcomes[0]
        if out is not None and out.died and out.signal and out.signal != "SIGKILL":
            # Killed by a signal (say, an abort after an illegal memory access): the weighted
            # program did not run without its data file, which is what the control asks.
            rows.append(Row(self.name, subjects["no-data"], PASS,
                            f"without aoti_cuda_blob.ptd the weighted program did not run: {out.reason}",
                            out.duration, out.signal, out.stderr_tail))
        else:
            rows.append(ctx.row(self.name, subjects["no-data"], out))
        rows += ctx.death_rows(self.name, run2, "executorch child")
        return rows


BUILTIN: tuple[type, ...] = (LoadProbe, DeviceLoadProbe, TorchModelProbe, TorchAotiProbe,
                             ExecuTorchCudaProbe)


def discover() -> dict[str, object]:
    """name -> probe instance: the built-ins in their order, then the entry-point group's."""
    found: dict[str, object] = {cls.name: cls() for cls in BUILTIN}
    try:
        from importlib.metadata import entry_points

        eps = entry_points(group="archaudit.probes")
    except Exception:
        eps = ()
    for ep in sorted(eps, key=lambda e: e.name):
        if ep.name in found:
            continue  # a built-in, declared for other tools to see
        obj = ep.load()
        probe = obj() if isinstance(obj, type) else obj
        if not getattr(probe, "name", None):
            probe.name = ep.name
        found[ep.name] = probe
    return found
