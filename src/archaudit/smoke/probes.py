"""Probes: each checks one thing about the installed distribution, in child interpreters.

A probe is any class with a `name` and a `run(ctx) -> Iterable[Row]`, found through the
entry-point group `archaudit.probes`; the built-in ones below are also found without it.
A probe does its risky work through ctx.run_task (child.py), never in this process.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from . import child, reference
from .context import ET_DYN, ProbeContext, _normalise
from .report import FAIL, PASS, SKIP, Row


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


# ---------------------------------------------------------------------------------------
# judging observations: every verdict below is decided here, in archaudit's process
# ---------------------------------------------------------------------------------------
def holds_gpu(outcome: child.Outcome) -> bool:
    """archaudit saw the child hold a GPU device file open as its report arrived."""
    return any(d.startswith(child.GPU_DEVICE_PREFIXES) for d in outcome.devices_open)


def gpu_name(ctx: ProbeContext) -> str:
    g = ctx.gpus[0]
    return f"{g['name']} ({g['sm']})"


def write_data(ctx: ProbeContext, name: str, data: dict[str, Any]) -> str:
    """The inputs and weights archaudit drew, for the child to read (JSON numbers)."""
    import json

    def plain(v: Any) -> Any:
        if isinstance(v, reference.Tensor):
            return v.as_json()
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    fd, path = tempfile.mkstemp(prefix=f"{name}-", suffix=".json", dir=ctx.workdir)
    with os.fdopen(fd, "w") as f:
        json.dump(plain(data), f)
    return path


def _sm_number(sm: str) -> int:
    digits = "".join(ch for ch in sm if ch.isdigit())
    return int(digits) if digits else 0


def judge_load(ctx: ProbeContext, probe: str, item: dict[str, Any], outcome: child.Outcome | None) -> Row:
    from . import worker

    path, info = item["path"], item["elf"]
    subject = ctx.display(path)
    if outcome is None or outcome.status != child.OBS:
        return ctx.row(probe, subject, outcome)
    obs = outcome.details
    needed = list(info.get("needed", []))
    dangling = worker.dangling_search_paths(path, info) if info.get("inspected") else []
    if obs.get("loaded") is True:
        reason = f"dlopen(RTLD_NOW) loaded it with every symbol bound ({len(needed)} NEEDED)"
        if dangling:
            reason += "; warning: " + "; ".join(dangling)
        return Row(probe, subject, PASS, reason, outcome.duration, details=(("dangling", dangling), ("needed", needed)))
    if obs.get("loaded") is False:
        message = str(obs.get("message", ""))
        missing = [str(m) for m in obs.get("missing") or ()]
        parts = [f"dlopen(RTLD_NOW) failed: {message}"]
        if missing:
            parts.append("missing dependencies: " + ", ".join(missing))
        if "undefined symbol:" in message:
            parts.append(f"undefined symbol: {message.split('undefined symbol:', 1)[1].strip().split()[0]}")
        if dangling:
            parts.append("search paths that resolve to nothing: " + "; ".join(dangling))
        return Row(probe, subject, FAIL, "; ".join(parts), outcome.duration,
                   details=(("dangling", dangling), ("missing", missing), ("needed", needed)))
    return Row(probe, subject, FAIL, "the load child's report says neither that dlopen returned nor that it "
               "failed", outcome.duration)


def load_precheck(item: dict[str, Any]) -> tuple[str, str] | None:
    """(status, reason) for a file no dlopen is needed to judge; None to dlopen it."""
    import platform

    info = item["elf"]
    here = platform.machine()
    here = {"amd64": "x86_64", "arm64": "aarch64"}.get(here.lower(), here)
    if "unreadable" in info:
        return FAIL, f"cannot read: {info['unreadable']}"
    if not info.get("elf"):
        return SKIP, "not an ELF file (a linker script or data named like a library)"
    if info.get("inspected") and info["type"] != ET_DYN:
        return SKIP, f"ELF type {info['type']} is not a shared object; nothing to dlopen"
    if info.get("inspected") and info["machine"] != here:
        return SKIP, f"built for {info['machine']}, this machine is {here}"
    return None


class LoadProbe(Probe):
    """dlopen every shared library of the distribution with RTLD_NOW, each in a fresh child."""

    name = "load"
    description = "dlopen every shared library with RTLD_NOW in a fresh child interpreter"

    def run(self, ctx: ProbeContext) -> list[Row]:
        libs = ctx.shared_libraries()
        if not libs:
            return [Row(self.name, ctx.distribution, SKIP, "the distribution ships no shared library")]
        items = [load_item(p) for p in libs]
        pre = [load_precheck(it) for it in items]
        # A fresh interpreter per library: one library loaded earlier cannot satisfy another's
        # missing dependency by its SONAME, and a crash or hang costs only that library.
        workers = max(1, min(4, os.cpu_count() or 1))
        todo = [k for k, p in enumerate(pre) if p is None]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            runs = dict(zip(todo, pool.map(lambda k: ctx.run_task("load", [items[k]]), todo)))
        rows = []
        for k, path in enumerate(libs):
            if pre[k] is not None:
                status, reason = pre[k]  # type: ignore[misc]  # not None, checked
                rows.append(Row(self.name, ctx.display(path), status, reason))
                continue
            run = runs[k]
            rows.append(judge_load(ctx, self.name, items[k], run.outcomes[0]))
            rows += ctx.death_rows(self.name, run, ctx.display(path))
        return rows


# ---------------------------------------------------------------------------------------
TORCH_RTOL, TORCH_ATOL = 1e-4, 1e-4  # float32 on the GPU with TF32 off, against float64


def torch_data(rng: Any) -> dict[str, Any]:
    d = reference.draw
    return {"linear": {"weights": {"weight": d(rng, 32, 64), "bias": d(rng, 32)}, "x": d(rng, 16, 64)},
            "conv": {"weights": {"weight": d(rng, 8, 3, 3, 3), "bias": d(rng, 8)}, "x": d(rng, 2, 3, 16, 16)},
            "aoti": {"weights": {"weight": d(rng, 32, 64), "bias": d(rng, 32)}, "x": d(rng, 16, 64)}}


def torch_reference(data: dict[str, Any], step: str) -> reference.Tensor:
    if step == "conv":
        c = data["conv"]
        return reference.conv2d(c["x"], c["weights"]["weight"], c["weights"]["bias"], 1)
    m = data["aoti" if step.startswith("aoti") else "linear"]
    return reference.linear(m["x"], m["weights"]["weight"], m["weights"]["bias"])


class TorchModelProbe(Probe):
    """nn.Linear and nn.Conv2d with weights saved to and loaded from a file, on the GPU, against
    archaudit's own float64 reference over weights and inputs it drew."""

    name = "model-torch"
    description = ("PyTorch nn.Linear and nn.Conv2d with weights from a file, on the GPU, against "
                   "archaudit's own reference")
    steps = (("linear", "torch nn.Linear(64, 32), weights from a file"),
             ("conv", "torch nn.Conv2d(3, 8, 3), weights from a file"))
    groups: tuple[tuple[str, ...], ...] = (("linear", "conv"),)
    what = {"linear": "nn.Linear(64, 32)", "conv": "nn.Conv2d(3, 8, 3)", "aoti-load": "the AOTInductor package"}

    def run(self, ctx: ProbeContext) -> list[Row]:
        if not ctx.wanted(self.name, "torch"):
            return [ctx.not_wanted(self.name, "torch")]
        subjects = dict(self.steps)
        rows: list[Row] = []
        work = tempfile.mkdtemp(prefix="torch-", dir=ctx.workdir)
        data = torch_data(reference.fresh_rng())
        path = write_data(ctx, "torch", data)
        for group in self.groups:
            if group == ("aoti-load",) and not (rows and rows[-1].status == PASS):
                rows.append(Row(self.name, subjects["aoti-load"], SKIP,
                                "not run: there is no compiled package (aoti-compile did not pass)"))
                continue
            run = ctx.run_task("torch", list(group), {"workdir": work, "data": path}, resume=False)
            for step, out in zip(group, run.outcomes):
                rows.append(self.judge(ctx, step, subjects[step], out, data, work))
            rows += ctx.death_rows(self.name, run, "torch child")
        return rows

    def judge(self, ctx: ProbeContext, step: str, subject: str, out: child.Outcome | None,
              data: dict[str, Any], work: str) -> Row:
        if out is None or out.status != child.OBS:
            return ctx.row(self.name, subject, out)
        d = out.details
        if not d.get("importable"):
            row = ctx.verdict(self.name, subject, out, SKIP, f"torch is not importable here: {d.get('error')}")
            if ctx.depends_on("torch"):
                row = Row(row.probe, row.subject, FAIL, f"{row.reason} ({ctx.distribution} is or needs torch)",
                          row.duration)
            return row
        if not ctx.gpus:
            return ctx.verdict(self.name, subject, out, SKIP, no_gpu_here(ctx), gpu=True)
        if not d.get("cuda_available"):
            return ctx.verdict(self.name, subject, out, SKIP, f"torch {d.get('torch')} sees no CUDA device "
                               f"(torch.version.cuda={d.get('torch_cuda')}), so nothing can run on a GPU here",
                               gpu=True)
        sm = ctx.gpus[0]["sm"]
        archs = [str(a) for a in d.get("arch_list") or ()]
        ptx = [a for a in archs if a.startswith("compute_") and _sm_number(a) <= _sm_number(sm)]
        if sm not in archs and not ptx:
            return ctx.verdict(self.name, subject, out, SKIP, f"torch {d.get('torch')} carries no code for {sm} "
                               f"({ctx.gpus[0]['name']}); its arch list is {archs}", gpu=True)
        if "error" in d:
            return ctx.verdict(self.name, subject, out, FAIL, str(d["error"]))
        where = gpu_name(ctx)
        if step == "aoti-compile":
            pkg = str(d.get("package", ""))
            inside = os.path.realpath(pkg).startswith(os.path.realpath(work) + os.sep)
            if not (inside and os.path.isfile(pkg)):
                return ctx.verdict(self.name, subject, out, FAIL, f"no package where the child said it wrote "
                                   f"one ({pkg!r})")
            return ctx.verdict(self.name, subject, out, PASS, f"AOTInductor compiled nn.Linear(64, 32) for {where} "
                               f"into a {os.path.getsize(pkg)}-byte package in {float(d.get('seconds') or 0):.1f} s")
        match = reference.compare(d.get("shape"), d.get("output"), torch_reference(data, step),
                                  TORCH_RTOL, TORCH_ATOL)
        what = self.what.get(step, step)
        if not match.ok:
            return ctx.verdict(self.name, subject, out, FAIL, f"{what} ran, but {match.why}")
        ran = ran_on_gpu(out, d)
        if ran:
            return ctx.verdict(self.name, subject, out, FAIL, f"{what} matched archaudit's reference, but {ran}")
        if step == "aoti-load":
            return ctx.verdict(self.name, subject, out, PASS, f"a fresh process loaded the AOTInductor package "
                               f"with aoti_load_package and ran it on {where}: matched archaudit's own float64 "
                               f"reference, {match.why}")
        return ctx.verdict(self.name, subject, out, PASS, f"{what} with weights loaded from a "
                           f"{d.get('file_bytes')}-byte file ran on {where} and matched archaudit's own float64 "
                           f"reference: {match.why}", torch=d.get("torch"), max_abs=match.max_abs)


def no_gpu_here(ctx: ProbeContext) -> str:
    return (f"archaudit's own driver query found no GPU ({ctx.gpu_error or 'none'}), so nothing can have run on "
            f"one here")


def ran_on_gpu(out: child.Outcome, d: dict[str, Any]) -> str:
    """'' when archaudit saw the child hold a GPU open and the output lived on one; else why not."""
    if not holds_gpu(out):
        return ("the child held no GPU device file open when it reported (archaudit read its /proc/PID/fd): "
                "it did not run on a GPU")
    device = str(d.get("device", ""))
    if not device.startswith(("cuda", "gpu", "rocm")):
        return f"its output lived on {device or 'no device'}, not on the GPU"
    return ""


class TorchAotiProbe(TorchModelProbe):
    """AOTInductor: compile a model with weights, then load the package in a fresh process."""

    name = "model-torch-aoti"
    description = ("AOTInductor: compile nn.Linear into a package, then aoti_load_package and run "
                   "it in a fresh process, against archaudit's own reference")
    steps = (("aoti-compile", "torch AOTInductor compile of nn.Linear(64, 32)"),
             ("aoti-load", "torch aoti_load_package in a fresh process"))
    groups = (("aoti-compile",), ("aoti-load",))


# ---------------------------------------------------------------------------------------
ET_RTOL, ET_ATOL = 1e-4, 1e-4
# What missing weights make the CUDA delegate do, each with its source. A negative control
# passes only on one of these, in a run whose positive twin passed just before.
WEIGHTS_FOUND = r"Found \w*weights_blob in named data map"  # 1.2.0 cuda_backend.cpp, Info log
MISSING_WEIGHTS = (
    # pytorch/executorch#22089 (the delegate after 1.2.0): the blob is looked up and named.
    ("named", r"weights_blob '[^'\n]*' not found[^\n]*"),
    # v1.2.0 backends/cuda/runtime/cuda_backend.cpp init(): no message when the blob is absent,
    # the constants stay unset, and the first run reads them: CUDA's illegal memory access.
    ("unset", r"an illegal memory access was encountered"),
)
ET_WATCH = (WEIGHTS_FOUND, *(p for _, p in MISSING_WEIGHTS))


def executorch_data(rng: Any) -> dict[str, Any]:
    d = reference.draw
    return {"add": {"inputs": [d(rng, 3, 4), d(rng, 3, 4)]},
            "linear": {"weights": {"weight": d(rng, 4, 8), "bias": d(rng, 4)}, "inputs": [d(rng, 2, 8)]},
            "linear_b": {"weights": {"weight": d(rng, 4, 8), "bias": d(rng, 4)}, "inputs": [d(rng, 2, 8)]}}


def find_cuda_backend(ctx: ProbeContext) -> str | None:
    """lib/libexecutorch_backend_cuda.so of the installed executorch (beside lib/libexecutorch.so
    in the 1.4+ CUDA wheels), by the distribution's files or its package directory."""
    rel = os.path.join("executorch", "lib", "libexecutorch_backend_cuda.so")
    for f in ctx.files:
        if f.endswith(os.sep + rel) and os.path.isfile(f):
            return f
    candidate = os.path.join(ctx.location, rel)
    return candidate if os.path.isfile(candidate) else None


class ExecuTorchCudaProbe(Probe):
    """The CUDA delegate with and without weights, as pytorch/executorch#22089 checks it."""

    name = "model-executorch"
    description = ("ExecuTorch CUDA delegate: export a weightless and a weighted model through "
                   "CudaPartitioner, check aoti_cuda_blob.ptd, run each against archaudit's own reference in "
                   "a fresh child, swap in another model's .ptd, and load the weighted one without its data "
                   "file (must fail as missing weights fail)")
    steps = (
        ("import", "executorch import and registered backends"),
        ("export-add", "executorch export x + y through CudaPartitioner"),
        ("export-linear", "executorch export nn.Linear(8, 4) through CudaPartitioner"),
        ("export-linear-b", "executorch export a second nn.Linear(8, 4), other weights"),
        ("blob", "executorch aoti_cuda_blob.ptd carries the weights"),
        ("run-add", "executorch run x + y on the CUDA delegate vs eager"),
        ("run-linear", "executorch run nn.Linear with aoti_cuda_blob.ptd vs eager"),
        ("run-swapped", "executorch run nn.Linear with the other model's aoti_cuda_blob.ptd"),
        ("run-twin", "executorch positive twin: nn.Linear with its data file, just before the negative"),
        ("no-data", "executorch negative control: nn.Linear without its data file"),
    )

    def run(self, ctx: ProbeContext) -> list[Row]:
        if not ctx.wanted(self.name, "executorch"):
            return [ctx.not_wanted(self.name, "executorch")]
        sub = dict(self.steps)
        target = ctx.depends_on("executorch")
        work = tempfile.mkdtemp(prefix="executorch-", dir=ctx.workdir)
        data = executorch_data(reference.fresh_rng())
        dpath = write_data(ctx, "executorch", data)
        library = find_cuda_backend(ctx)
        params = {"workdir": work, "data": dpath, "backend_library": library}
        dirs = {m: os.path.join(work, m) for m in ("add", "linear", "linear_b")}
        first = [{"step": "import"}] + [{"step": "export", "model": m, "dir": dirs[m]} for m in dirs]
        run1 = ctx.run_task("executorch", first, params, resume=False)
        rows: list[Row] = []
        imp = run1.outcomes[0]
        rows.append(self.judge_import(ctx, imp, library, target))
        if rows[0].status != PASS:
            if rows[0].status == SKIP and not target:
                return rows[:1]  # executorch is absent and nothing asked for it: one row, not ten
            return rows + ctx.death_rows(self.name, run1, "executorch child") + [
                Row(self.name, sub[s], SKIP, "not run: executorch did not import") for s, _ in self.steps[1:]]
        facts = imp.details if imp is not None else {}
        exported = {}
        for key, m, out in zip(("export-add", "export-linear", "export-linear-b"), dirs, run1.outcomes[1:]):
            row = self.judge_export(ctx, sub[key], out, dirs[m])
            exported[m] = row.status == PASS
            rows.append(row)
        rows += ctx.death_rows(self.name, run1, "executorch child")
        rows.append(self.judge_blob(sub["blob"], dirs, exported))
        blocked = None
        if not all(exported.values()):
            blocked = SKIP, "not run: an export did not pass", any(r.details and dict(r.details).get("gpu")
                                                                   for r in rows)
        elif "CudaBackend" not in (facts.get("backends") or ()):
            blocked = SKIP, self.no_backend(facts, library), True
        elif not ctx.gpus:
            blocked = SKIP, no_gpu_here(ctx), True
        if blocked:
            status, why, gpu = blocked
            for s in ("run-add", "run-linear", "run-swapped", "run-twin", "no-data"):
                rows.append(ctx.verdict(self.name, sub[s], None, status, why, gpu=bool(gpu)))
            return rows
        runs = {
            "run-add": ({"step": "run", "pte": f"{dirs['add']}/model.pte", "ptd": f"{dirs['add']}/aoti_cuda_blob.ptd",
                         "inputs": "add"}, reference.add(*data["add"]["inputs"])),
            "run-linear": (self._run_item(dirs["linear"], dirs["linear"]), self._linear(data, "linear", "linear")),
            "run-swapped": (self._run_item(dirs["linear"], dirs["linear_b"]), None),
            "run-twin": (self._run_item(dirs["linear"], dirs["linear"]), self._linear(data, "linear", "linear")),
        }
        twin: tuple[Row, child.TaskRun] | None = None
        for step, (item, want) in runs.items():
            run = ctx.run_task("executorch", [item], params, watch=ET_WATCH)
            if step == "run-swapped":
                row = self.judge_swapped(ctx, sub[step], run.outcomes[0], data)
            else:
                assert want is not None
                row = self.judge_run(ctx, sub[step], run.outcomes[0], want, step)
            rows.append(row)
            rows += ctx.death_rows(self.name, run, "executorch child")
            if step == "run-twin":
                twin = row, run
        neg = ctx.run_task("executorch", [{"step": "run", "pte": f"{dirs['linear']}/model.pte", "ptd": None,
                                          "inputs": "linear"}], params, watch=ET_WATCH)
        assert twin is not None
        rows.append(self.judge_negative(sub["no-data"], neg, twin))
        rows += ctx.death_rows(self.name, neg, "executorch child")
        return rows

    @staticmethod
    def _run_item(pte_dir: str, ptd_dir: str) -> dict[str, Any]:
        return {"step": "run", "pte": f"{pte_dir}/model.pte", "ptd": f"{ptd_dir}/aoti_cuda_blob.ptd",
                "inputs": "linear"}

    @staticmethod
    def _linear(data: dict[str, Any], weight_of: str, bias_of: str) -> reference.Tensor:
        return reference.linear(data["linear"]["inputs"][0], data[weight_of]["weights"]["weight"],
                                data[bias_of]["weights"]["bias"])

    def no_backend(self, facts: dict[str, Any], library: str | None) -> str:
        have = ", ".join(facts.get("backends") or ()) or "none"
        if library:
            return (f"executorch {facts.get('version')} registers no CudaBackend (registered: {have}), even after "
                    f"loading {library}: {facts.get('backend_library_error') or 'it registered nothing'}")
        return (f"executorch {facts.get('version')} registers no CudaBackend (registered: {have}) and ships no "
                f"lib/libexecutorch_backend_cuda.so: a CPU build, so the delegate cannot run here")

    def judge_import(self, ctx: ProbeContext, out: child.Outcome | None, library: str | None, target: bool) -> Row:
        subject = dict(self.steps)["import"]
        if out is None or out.status != child.OBS:
            return ctx.row(self.name, subject, out)
        d = out.details
        if not d.get("importable"):
            reason = f"executorch is not importable here: {d.get('error')}"
            if target:
                return ctx.verdict(self.name, subject, out, FAIL,
                                   reason + f" (the target {ctx.distribution} is or needs executorch)")
            return ctx.verdict(self.name, subject, out, SKIP, reason)
        if d.get("pybindings_error"):
            return ctx.verdict(self.name, subject, out, PASS, f"executorch {d.get('version')} imported "
                               f"CudaPartitioner and to_edge_transform_and_lower (export can run); its pybindings "
                               f"did not import, so nothing can run: {d['pybindings_error']}", backends=[])
        backends = list(d.get("backends") or ())
        before = list(d.get("backends_before") or ())
        if "CudaBackend" in before:
            how = "CudaBackend is linked into the pybindings"
        elif "CudaBackend" in backends:
            how = f"CudaBackend registered by loading {ctx.display(library or '?')}"
        elif library:
            how = f"loading {ctx.display(library)} registered no CudaBackend ({d.get('backend_library_error')})"
        else:
            how = "no CudaBackend: not linked in, no lib/libexecutorch_backend_cuda.so"
        return ctx.verdict(self.name, subject, out, PASS, f"executorch {d.get('version')} imported CudaPartitioner, "
                           f"to_edge_transform_and_lower and the pybindings; registered backends: "
                           f"{', '.join(backends) or 'none'}; {how}", backends=backends,
                           backend_library=ctx.display(library) if library else None)

    def judge_export(self, ctx: ProbeContext, subject: str, out: child.Outcome | None, d: str) -> Row:
        if out is None or out.status != child.OBS:
            return ctx.row(self.name, subject, out)
        if "error" in out.details:
            if not ctx.gpus or not out.details.get("cuda_available"):
                return ctx.verdict(self.name, subject, out, SKIP, f"export through CudaPartitioner needs a CUDA "
                                   f"device here and failed: {out.details['error']}", gpu=True)
            return ctx.verdict(self.name, subject, out, FAIL, str(out.details["error"]))
        pte, blob = os.path.join(d, "model.pte"), os.path.join(d, "aoti_cuda_blob.ptd")
        if not os.path.isfile(pte):
            return ctx.verdict(self.name, subject, out, FAIL, "export wrote no model.pte")
        with open(pte, "rb") as f:
            delegated = b"CudaBackend" in f.read()
        if not delegated:
            return ctx.verdict(self.name, subject, out, FAIL, "the exported program carries no CudaBackend "
                               "delegate: the partitioner declined the model, so it would run on the portable kernels")
        if not os.path.isfile(blob):
            return ctx.verdict(self.name, subject, out, FAIL, f"export wrote no aoti_cuda_blob.ptd (files: "
                               f"{sorted(os.listdir(d))})")
        sm = ctx.gpus[0]["sm"] if ctx.gpus else "this machine"
        return ctx.verdict(self.name, subject, out, PASS, f"exported through CudaPartitioner on {sm}: model.pte is "
                           f"{os.path.getsize(pte)} bytes and carries the CudaBackend delegate; aoti_cuda_blob.ptd is "
                           f"{os.path.getsize(blob)} bytes", pte_bytes=os.path.getsize(pte),
                           blob_bytes=os.path.getsize(blob))

    def judge_blob(self, subject: str, dirs: dict[str, str], exported: dict[str, bool]) -> Row:
        if not (exported["add"] and exported["linear"]):
            return Row(self.name, subject, SKIP, "not run: an export did not pass")
        weight_bytes = 8 * 4 * 4  # nn.Linear(8, 4)'s float32 weight matrix
        blob = os.path.getsize(os.path.join(dirs["linear"], "aoti_cuda_blob.ptd"))
        empty = os.path.getsize(os.path.join(dirs["add"], "aoti_cuda_blob.ptd"))
        details = (("blob_bytes", blob), ("weight_bytes", weight_bytes), ("weightless_blob_bytes", empty))
        if blob - empty >= weight_bytes:
            return Row(self.name, subject, PASS, f"aoti_cuda_blob.ptd is {blob} bytes, {blob - empty} more than the "
                       f"weightless model's {empty}: at least the {weight_bytes} bytes of the weight matrix",
                       details=details)
        return Row(self.name, subject, FAIL, f"aoti_cuda_blob.ptd is {blob} bytes, only {blob - empty} more than the "
                   f"weightless model's {empty}, less than the {weight_bytes}-byte weight matrix", details=details)

    def _ran(self, ctx: ProbeContext, subject: str, out: child.Outcome | None) -> Row | None:
        """A row when the run did not get as far as an output on the GPU."""
        if out is None or out.status != child.OBS:
            return ctx.row(self.name, subject, out)
        if "error" in out.details:
            return ctx.verdict(self.name, subject, out, FAIL, str(out.details["error"]))
        return None

    def judge_run(self, ctx: ProbeContext, subject: str, out: child.Outcome | None, want: reference.Tensor,
                  step: str) -> Row:
        early = self._ran(ctx, subject, out)
        if early is not None:
            return early
        assert out is not None
        d = out.details
        match = reference.compare(d.get("shape"), d.get("output"), want, ET_RTOL, ET_ATOL)
        if not match.ok:
            return ctx.verdict(self.name, subject, out, FAIL, f"the delegate ran, but {match.why}")
        if not holds_gpu(out):
            return ctx.verdict(self.name, subject, out, FAIL, "the output matched, but " + ran_on_gpu(out, {}))
        what = "x + y" if step == "run-add" else "nn.Linear(8, 4) with its aoti_cuda_blob.ptd"
        return ctx.verdict(self.name, subject, out, PASS, f"{what} ran through the CUDA delegate on {gpu_name(ctx)} "
                           f"in a fresh process and matched archaudit's own float64 reference: {match.why}",
                           max_abs=match.max_abs)

    def judge_swapped(self, ctx: ProbeContext, subject: str, out: child.Outcome | None, data: dict[str, Any]) -> Row:
        early = self._ran(ctx, subject, out)
        if early is not None:
            return early
        assert out is not None
        d = out.details
        own = reference.compare(d.get("shape"), d.get("output"), self._linear(data, "linear", "linear"),
                                ET_RTOL, ET_ATOL)
        if own.ok:
            return ctx.verdict(self.name, subject, out, FAIL, "with another model's aoti_cuda_blob.ptd the output "
                               "is still the program's own: its weights do not come from the data file")
        for bias, where in (("linear", "the bias stays in the .pte"), ("linear_b", "the bias comes from it too")):
            other = reference.compare(d.get("shape"), d.get("output"), self._linear(data, "linear_b", bias),
                                      ET_RTOL, ET_ATOL)
            if other.ok and holds_gpu(out):
                return ctx.verdict(self.name, subject, out, PASS, f"with the other model's aoti_cuda_blob.ptd "
                                   f"the output follows that file's weights ({where}): {other.why}")
        gpu = "" if holds_gpu(out) else "; " + ran_on_gpu(out, {})
        return ctx.verdict(self.name, subject, out, FAIL, f"with another model's aoti_cuda_blob.ptd the output "
                           f"matches neither model ({own.why}){gpu}")

    def judge_negative(self, subject: str, neg: child.TaskRun, twin: tuple[Row, child.TaskRun]) -> Row:
        out = neg.outcomes[0]
        twin_row, twin_run = twin
        if twin_row.status != PASS:
            return Row(self.name, subject, FAIL, f"the positive twin did not pass ({twin_row.reason}), so a failure "
                       f"without the data file proves nothing")
        if out is None:
            return Row(self.name, subject, FAIL, "the child never reported the run without its data file")
        d = out.details
        if out.status == child.OBS and "error" not in d:
            return Row(self.name, subject, FAIL, f"the weighted program ran without its data file and returned "
                       f"{d.get('shape')}: its weights do not come from aoti_cuda_blob.ptd", out.duration)
        if out.status == child.OBS:
            how = f"the run raised {d.get('error')}"
        else:
            how = out.reason  # archaudit's own account of the death: the signal, the exit, the timeout
        text = "\n".join([str(d.get("error", "")), out.stderr_tail, *neg.log_hits.values()])
        seen_weights = WEIGHTS_FOUND in twin_run.log_hits
        for kind, pattern in MISSING_WEIGHTS:
            m = re.search(pattern, text)
            if not m or out.signal == "SIGKILL":
                continue
            if kind == "named":
                return Row(self.name, subject, PASS, f"without aoti_cuda_blob.ptd the runtime named the missing "
                           f"weights ({m.group(0)!r}); {how}", out.duration, out.signal, out.stderr_tail)
            if seen_weights and WEIGHTS_FOUND not in neg.log_hits:
                return Row(self.name, subject, PASS, f"without aoti_cuda_blob.ptd the delegate loaded no weights "
                           f"blob (no {neg_found_text(twin_run)!r}, which its twin logged) and then read the unset "
                           f"constants: {m.group(0)!r}; {how}", out.duration, out.signal, out.stderr_tail)
        return Row(self.name, subject, FAIL, f"without aoti_cuda_blob.ptd the run failed, but not as missing weights "
                   f"make it fail: {how}", out.duration, out.signal, out.stderr_tail)


def neg_found_text(twin_run: child.TaskRun) -> str:
    return twin_run.log_hits.get(WEIGHTS_FOUND, "Found forward_weights_blob in named data map")


# ---------------------------------------------------------------------------------------
JAX_RTOL, JAX_ATOL = 1e-5, 1e-5  # float32 at "highest" matmul precision against float64
JAX_FAMILY = re.compile(r"^jax-(cuda|rocm)\d*(-plugin|-pjrt)?$")


def jax_data(rng: Any) -> dict[str, Any]:
    d = reference.draw
    return {"mlp": {"w1": d(rng, 8, 16), "b1": d(rng, 16), "w2": d(rng, 16, 4), "b2": d(rng, 4), "x": d(rng, 5, 8)}}


class JaxModelProbe(Probe):
    """A small MLP with real weights, jitted on the GPU, and a jax.export artifact through bytes."""

    name = "model-jax"
    description = ("JAX: a small MLP with weights jitted on the GPU and a jax.export artifact round-tripped "
                   "through bytes, against archaudit's own reference; wrong-shaped weights must be refused")
    steps = (("jit", "jax MLP 8-16-4 with weights, jitted on the GPU"),
             ("export", "jax.export of the MLP, serialized"),
             ("roundtrip", "jax.export artifact deserialized from bytes and run in a fresh process"),
             ("wrong-shape", "jax negative control: the artifact called with wrong-shaped weights"))

    def run(self, ctx: ProbeContext) -> list[Row]:
        sub = dict(self.steps)
        family = JAX_FAMILY.match(_normalise(ctx.distribution)) or any(
            JAX_FAMILY.match(_normalise(re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0])) for r in ctx.requires)
        if not family:
            return [Row(self.name, ctx.distribution, SKIP, f"{ctx.distribution} is not of the jax-cuda*/jax-rocm* "
                        f"families (JAX's GPU plugins) and needs none of them: model-jax runs for those")]
        work = tempfile.mkdtemp(prefix="jax-", dir=ctx.workdir)
        data = jax_data(reference.fresh_rng())
        params = {"workdir": work, "data": write_data(ctx, "jax", data)}
        m = data["mlp"]
        want = reference.mlp(m["x"], m["w1"], m["b1"], m["w2"], m["b2"])
        rows: list[Row] = []
        first = ctx.run_task("jax", ["jit", "export"], params, resume=False)
        rows.append(self.judge_output(ctx, sub["jit"], first.outcomes[0], want, "the MLP jitted"))
        rows.append(self.judge_export(ctx, sub["export"], first.outcomes[1], work))
        rows += ctx.death_rows(self.name, first, "jax child")
        if rows[-1].status != PASS:
            gpu = rows[-1].status == SKIP
            for s in ("roundtrip", "wrong-shape"):
                rows.append(ctx.verdict(self.name, sub[s], None, SKIP, f"not run: the export did not pass "
                                        f"({rows[1].reason})", gpu=gpu))
            return rows
        trip = ctx.run_task("jax", ["roundtrip"], params)
        rows.append(self.judge_output(ctx, sub["roundtrip"], trip.outcomes[0], want,
                                      "the deserialized artifact, weights as inputs,"))
        rows += ctx.death_rows(self.name, trip, "jax child")
        neg = ctx.run_task("jax", ["wrong-shape"], params)
        rows.append(self.judge_wrong_shape(ctx, sub["wrong-shape"], neg.outcomes[0], rows[-1]))
        rows += ctx.death_rows(self.name, neg, "jax child")
        return rows

    def _gate(self, ctx: ProbeContext, subject: str, out: child.Outcome | None) -> Row | None:
        if out is None or out.status != child.OBS:
            return ctx.row(self.name, subject, out)
        d = out.details
        if not d.get("importable"):
            return ctx.verdict(self.name, subject, out, FAIL, f"jax is not importable here: {d.get('error')} "
                               f"({ctx.distribution} is a JAX GPU plugin)")
        if not ctx.gpus:
            return ctx.verdict(self.name, subject, out, SKIP, no_gpu_here(ctx), gpu=True)
        if d.get("backend") not in ("gpu", "cuda", "rocm"):
            return ctx.verdict(self.name, subject, out, SKIP, f"jax {d.get('jax')} runs on {d.get('backend')} "
                               f"here (devices {d.get('devices')}), not on a GPU", gpu=True)
        if "error" in d and "refused" not in d:
            return ctx.verdict(self.name, subject, out, FAIL, str(d["error"]))
        return None

    def judge_output(self, ctx: ProbeContext, subject: str, out: child.Outcome | None, want: reference.Tensor,
                     what: str) -> Row:
        early = self._gate(ctx, subject, out)
        if early is not None:
            return early
        assert out is not None
        d = out.details
        match = reference.compare(d.get("shape"), d.get("output"), want, JAX_RTOL, JAX_ATOL)
        if not match.ok:
            return ctx.verdict(self.name, subject, out, FAIL, f"{what} ran, but {match.why}")
        ran = ran_on_gpu(out, d)
        if ran:
            return ctx.verdict(self.name, subject, out, FAIL, f"{what} matched archaudit's reference, but {ran}")
        return ctx.verdict(self.name, subject, out, PASS, f"{what} ran on {gpu_name(ctx)} (jax {d.get('jax')}, "
                           f"{d.get('device')}) and matched archaudit's own float64 reference at matmul precision "
                           f"'highest': {match.why}", max_abs=match.max_abs)

    def judge_export(self, ctx: ProbeContext, subject: str, out: child.Outcome | None, work: str) -> Row:
        early = self._gate(ctx, subject, out)
        if early is not None:
            return early
        assert out is not None
        path = os.path.join(work, "mlp.jax_export")
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            return ctx.verdict(self.name, subject, out, FAIL, "no serialized artifact was written")
        return ctx.verdict(self.name, subject, out, PASS, f"jax.export serialized the MLP for "
                           f"{out.details.get('platforms')} into {os.path.getsize(path)} bytes, weights as inputs",
                           artifact_bytes=os.path.getsize(path))

    def judge_wrong_shape(self, ctx: ProbeContext, subject: str, out: child.Outcome | None, twin: Row) -> Row:
        early = self._gate(ctx, subject, out)
        if early is not None:
            return early
        assert out is not None
        d = out.details
        if twin.status != PASS:
            return ctx.verdict(self.name, subject, out, FAIL, f"the round trip did not pass ({twin.reason}), so a "
                               f"refusal here proves nothing")
        if not d.get("refused"):
            return ctx.verdict(self.name, subject, out, FAIL, f"the artifact ran with weights of shape "
                               f"{d.get('wrong_shape')} instead of (8, 16): JAX did not check them")
        message = str(d.get("error", ""))
        if d.get("error_type") == "ValueError" and "Shape mismatch" in message and "(8, 16)" in message \
                and "(4, 16)" in message:
            return ctx.verdict(self.name, subject, out, PASS, f"weights of shape (4, 16) for (8, 16) were refused "
                               f"by JAX itself: {message[:300]}")
        return ctx.verdict(self.name, subject, out, FAIL, f"the wrong-shaped weights failed, but not with JAX's "
                           f"shape check (a ValueError naming both shapes): {message[:300]}")


from .device_load import DeviceLoadProbe  # noqa: E402

BUILTIN: tuple[type[ProbeLike], ...] = (LoadProbe, DeviceLoadProbe, TorchModelProbe, TorchAotiProbe,
                                        ExecuTorchCudaProbe, JaxModelProbe)


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
        if out is not None and out.status == child.OBS:
            if out.details.get("ok") is True:
                out = child.Outcome(PASS, str(out.details.get("description", "")), out.duration,
                                    details=out.details)
            else:
                out = child.Outcome(FAIL, str(out.details.get("error", "the plugin reported no result")),
                                    out.duration, stderr_tail=str(out.details.get("traceback", "")))
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


__all__ = ["discover", "executorch_data", "ExecuTorchCudaProbe", "find_cuda_backend", "JAX_FAMILY", "JaxModelProbe",
           "judge_load", "load_item", "MISSING_WEIGHTS", "PluginProbe", "Probe", "ProbeContext", "TorchModelProbe",
           "WEIGHTS_FOUND"]
