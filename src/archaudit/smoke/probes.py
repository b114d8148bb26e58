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
from typing import Any, Protocol

from ..model import Library
from ..read.artifacts import is_audited_file
from . import child
from .report import FAIL, PASS, SKIP, Row

ET_DYN = 3


def _elf_type(path: str) -> int | None:
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return None
    if head[:4] != b"\x7fELF" or len(head) < 18:
        return None
    return int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")


@dataclass
class ProbeContext:
    """What every probe gets: the environment, the distribution, the GPUs, the limits."""

    python: str  # interpreter of the environment under test
    distribution: str
    version: str
    requires: tuple[str, ...]
    location: str  # site-packages directory the distribution's paths are relative to
    files: tuple[str, ...]  # absolute paths of the distribution's files
    gpus: tuple[dict[str, Any], ...]  # {"ordinal", "name", "cc", "sm"} per visible device
    gpu_error: str | None  # why there is no GPU, where there is none
    require_gpu: bool
    timeout: float
    workdir: str  # scratch directory, removed after the run
    child_env: dict[str, str]  # environment for child interpreters
    selected: tuple[str, ...] = ()  # probes named on the command line (--probe)
    driver: str | None = None  # the CUDA version the driver reports ("13.0")
    sys_path: tuple[str, ...] = ()  # the environment's import path, for children run with -I -S
    _scans: dict[str, Library] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- the distribution --------------------------------------------------------------
    def display(self, path: str) -> str:
        try:
            rel = os.path.relpath(path, self.location)
        except ValueError:
            return path
        return path if rel.startswith("..") else rel

    def shared_libraries(self) -> list[str]:
        """The distribution's ELF shared objects, chosen by content (as check chooses), not by name."""
        return [f for f in self.device_code_files() if _elf_type(f) == ET_DYN]

    def device_code_files(self) -> list[str]:
        """Every file check would read: chosen by its magic (ELF, fatbin, ...) or a library name."""
        seen: set[str] = set()
        out = []
        for f in self.files:
            if f not in seen and os.path.isfile(f) and is_audited_file(f):
                seen.add(f)
                out.append(f)
        return sorted(out, key=self.display)

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

    def scan(self, path: str) -> Library:
        """The inventory of one file (payloads decoded, so kernels are named), computed once."""
        with self._lock:
            if path not in self._scans:
                from archaudit.read.library import scan_file

                self._scans[path] = scan_file(path, decode=True)
            return self._scans[path]

    # -- children ----------------------------------------------------------------------
    def run_task(self, task: str, items: list[Any], params: dict[str, Any] | None = None, *, resume: bool = True,
                 extra_env: dict[str, str] | None = None) -> child.TaskRun:
        env = dict(self.child_env)
        env.update(extra_env or {})
        return child.run_task(self.python, task, items, params, env=env, cwd=self.workdir,
                              timeout=self.timeout, resume=resume, sys_path=self.sys_path)

    def row(self, probe: str, subject: str, outcome: child.Outcome | None, **details: object) -> Row:
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


class ProbeLike(Protocol):
    """What the runner asks of a probe: a name, a description, and rows for a context."""

    name: str
    description: str

    def run(self, ctx: ProbeContext) -> Iterable[Row]: ...


class Probe:
    """Base class for probes (plugins need not inherit from it)."""

    name = "probe"
    description = ""

    def run(self, ctx: ProbeContext) -> Iterable[Row]:  # pragma: no cover - interface
        raise NotImplementedError


# ---------------------------------------------------------------------------------------
MACHINES = {3: "x86", 62: "x86_64", 183: "aarch64", 40: "arm", 21: "ppc64", 22: "s390x", 243: "riscv"}


def load_item(path: str) -> dict[str, Any]:
    """What the load worker needs about one library, read here by archaudit.read.elf (the child only
    dlopens): its ELF type, machine, NEEDED, RUNPATH, RPATH and SONAME."""
    from ..read import elf

    try:
        with open(path, "rb") as f:
            if not elf.is_elf(f.read(4)):
                return {"path": path, "elf": {"elf": False}}
            d = elf.read_dynamic(f, os.fstat(f.fileno()).st_size)
    except OSError as exc:
        return {"path": path, "elf": {"unreadable": f"{type(exc).__name__}: {exc}"}}
    except elf.ElfError:  # another class or byte order, or headers the loader will reject itself
        return {"path": path, "elf": {"elf": True, "inspected": False, "type": None, "machine": None}}
    return {"path": path, "elf": {"elf": True, "inspected": True, "type": d.type,
                                  "machine": MACHINES.get(d.machine, str(d.machine)), "needed": list(d.needed),
                                  "runpath": list(d.runpath), "rpath": list(d.rpath), "soname": d.soname}}


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
            runs = list(pool.map(lambda p: ctx.run_task("load", [load_item(p)]), libs))
        rows = []
        for path, run in zip(libs, runs):
            rows.append(ctx.row(self.name, ctx.display(path), run.outcomes[0]))
            rows += ctx.death_rows(self.name, run, ctx.display(path))
        return rows


# ---------------------------------------------------------------------------------------
class TorchModelProbe(Probe):
    """nn.Linear and nn.Conv2d with weights saved to and loaded from a file, GPU vs CPU."""

    name = "model-torch"
    description = "PyTorch nn.Linear and nn.Conv2d with weights from a file, on the GPU against CPU"
    steps = (("linear", "torch nn.Linear(64, 32), weights from a file"),
             ("conv", "torch nn.Conv2d(3, 8, 3), weights from a file"))
    groups: tuple[tuple[str, ...], ...] = (("linear", "conv"),)

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


from .device_load import DeviceLoadProbe  # noqa: E402

BUILTIN: tuple[type[ProbeLike], ...] = (LoadProbe, DeviceLoadProbe, TorchModelProbe, TorchAotiProbe,
                             ExecuTorchCudaProbe)


BUILTIN_MODULES = ("archaudit.smoke.probes:", "archaudit.smoke.device_load:")


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
        run = child.run_task(sys.executable, "plugin", [self.name], params, env=child.child_env(),
                             cwd=workdir, timeout=timeout,
                             sys_path=tuple(p for p in sys.path if p and os.path.isdir(p)))
        out = run.outcomes[0]
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
            return [Row(self.name, ctx.distribution, FAIL,
                        f"probe plugin {self.value} (from {self.distribution}) did not run: {why}",
                        out.duration if out else 0.0, out.signal if out else None,
                        out.stderr_tail if out else "")]
        rows = []
        for r in out.details.get("rows", []):
            try:
                rows.append(Row(str(r["probe"]), str(r["subject"]), r["status"] if r["status"] in (PASS, FAIL, SKIP)
                                else FAIL, str(r["reason"]), float(r.get("duration") or 0.0), r.get("signal"),
                                str(r.get("stderr_tail") or ""), tuple((str(k), v) for k, v in r.get("details") or ())))
            except (KeyError, TypeError, ValueError) as exc:
                rows.append(Row(self.name, ctx.distribution, FAIL, f"probe plugin {self.value} returned a row "
                                f"archaudit cannot read: {type(exc).__name__}: {exc}"))
        return rows or [Row(self.name, ctx.distribution, FAIL, f"probe plugin {self.value} returned no row")]


def discover() -> dict[str, ProbeLike]:
    """name -> probe: the built-ins in their order, then the entry-point group's plugins.

    Entry points are read as metadata only; no plugin code runs in this process."""
    found: dict[str, ProbeLike] = {cls.name: cls() for cls in BUILTIN}
    try:
        from importlib.metadata import distributions

        eps = [(ep, d.metadata["Name"] or "?") for d in distributions() for ep in d.entry_points
               if ep.group == "archaudit.probes"]
    except Exception:  # unreadable metadata: no plugins, and the built-ins still run
        eps = []
    for ep, dist in sorted(eps, key=lambda e: e[0].name):
        if ep.name in found or ep.value.startswith(BUILTIN_MODULES):
            continue  # a built-in, declared for other tools to see
        found[ep.name] = PluginProbe(ep.name, ep.value, dist)
    return found
