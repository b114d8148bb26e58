"""The ExecuTorch probe: the CUDA delegate with and without weights, as pytorch/executorch#22089
checks it. The child exports and runs (worker.py); every verdict is decided here, against
archaudit's own float64 reference and what archaudit saw of the child.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any

from . import child, reference
from .base import Probe, gpu_name, holds_gpu, no_gpu_here, ran_on_gpu, write_data
from .context import ProbeContext
from .report import FAIL, PASS, SKIP, Row

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
    return {
        "add": {"inputs": [d(rng, 3, 4), d(rng, 3, 4)]},
        "linear": {"weights": {"weight": d(rng, 4, 8), "bias": d(rng, 4)}, "inputs": [d(rng, 2, 8)]},
        "linear_b": {"weights": {"weight": d(rng, 4, 8), "bias": d(rng, 4)}, "inputs": [d(rng, 2, 8)]},
    }


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
    description = (
        "ExecuTorch CUDA delegate: export a weightless and a weighted model through "
        "CudaPartitioner, check aoti_cuda_blob.ptd, run each against archaudit's own reference in "
        "a fresh child, swap in another model's .ptd, and load the weighted one without its data "
        "file (must fail as missing weights fail)"
    )
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
            return (
                rows
                + ctx.death_rows(self.name, run1, "executorch child")
                + [Row(self.name, sub[s], SKIP, "not run: executorch did not import") for s, _ in self.steps[1:]]
            )
        facts = imp.details if imp is not None else {}
        exported = {}
        for key, m, out in zip(("export-add", "export-linear", "export-linear-b"), dirs, run1.outcomes[1:]):
            row = self.judge_export(ctx, sub[key], out, dirs[m])
            exported[m] = row.status == PASS
            rows.append(row)
        rows += ctx.death_rows(self.name, run1, "executorch child")
        rows.append(self.judge_blob(sub["blob"], dirs, exported))
        blocked = self._blocked(ctx, rows, exported, facts, library)
        if blocked:
            status, why, gpu = blocked
            for s in ("run-add", "run-linear", "run-swapped", "run-twin", "no-data"):
                rows.append(ctx.verdict(self.name, sub[s], None, status, why, gpu=bool(gpu)))
            return rows
        return rows + self._runs(ctx, params, dirs, data)

    def _blocked(
        self, ctx: ProbeContext, rows: list[Row], exported: dict[str, bool], facts: dict[str, Any], library: str | None
    ) -> tuple[str, str, bool] | None:
        """(status, why, whether for want of a GPU) when the runs cannot start; None when they can."""
        if not all(exported.values()):
            return SKIP, "not run: an export did not pass", any(r.details and dict(r.details).get("gpu") for r in rows)
        if "CudaBackend" not in (facts.get("backends") or ()):
            return SKIP, self.no_backend(facts, library), True
        if not ctx.gpus:
            return SKIP, no_gpu_here(ctx), True
        return None

    def _runs(self, ctx: ProbeContext, params: dict[str, Any], dirs: dict[str, str], data: dict[str, Any]) -> list[Row]:
        """The runs, each in a fresh child: x + y, nn.Linear with its data file, with the other
        model's, the positive twin, then the negative control without a data file."""
        sub = dict(self.steps)
        rows: list[Row] = []
        runs = {
            "run-add": (
                {
                    "step": "run",
                    "pte": f"{dirs['add']}/model.pte",
                    "ptd": f"{dirs['add']}/aoti_cuda_blob.ptd",
                    "inputs": "add",
                },
                reference.add(*data["add"]["inputs"]),
            ),
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
        neg = ctx.run_task(
            "executorch",
            [{"step": "run", "pte": f"{dirs['linear']}/model.pte", "ptd": None, "inputs": "linear"}],
            params,
            watch=ET_WATCH,
        )
        assert twin is not None
        rows.append(self.judge_negative(sub["no-data"], neg, twin))
        rows += ctx.death_rows(self.name, neg, "executorch child")
        return rows

    @staticmethod
    def _run_item(pte_dir: str, ptd_dir: str) -> dict[str, Any]:
        return {
            "step": "run",
            "pte": f"{pte_dir}/model.pte",
            "ptd": f"{ptd_dir}/aoti_cuda_blob.ptd",
            "inputs": "linear",
        }

    @staticmethod
    def _linear(data: dict[str, Any], weight_of: str, bias_of: str) -> reference.Tensor:
        return reference.linear(
            data["linear"]["inputs"][0], data[weight_of]["weights"]["weight"], data[bias_of]["weights"]["bias"]
        )

    def no_backend(self, facts: dict[str, Any], library: str | None) -> str:
        have = ", ".join(facts.get("backends") or ()) or "none"
        if library:
            return (
                f"executorch {facts.get('version')} registers no CudaBackend (registered: {have}), even after "
                f"loading {library}: {facts.get('backend_library_error') or 'it registered nothing'}"
            )
        return (
            f"executorch {facts.get('version')} registers no CudaBackend (registered: {have}) and ships no "
            f"lib/libexecutorch_backend_cuda.so: a CPU build, so the delegate cannot run here"
        )

    def judge_import(self, ctx: ProbeContext, out: child.Outcome | None, library: str | None, target: bool) -> Row:
        subject = dict(self.steps)["import"]
        if out is None or out.status != child.OBS:
            return ctx.row(self.name, subject, out)
        d = out.details
        if not d.get("importable"):
            reason = f"executorch is not importable here: {d.get('error')}"
            if target:
                return ctx.verdict(
                    self.name, subject, out, FAIL, reason + f" (the target {ctx.distribution} is or needs executorch)"
                )
            return ctx.verdict(self.name, subject, out, SKIP, reason)
        if d.get("pybindings_error"):
            return ctx.verdict(
                self.name,
                subject,
                out,
                PASS,
                f"executorch {d.get('version')} imported "
                f"CudaPartitioner and to_edge_transform_and_lower (export can run); its pybindings "
                f"did not import, so nothing can run: {d['pybindings_error']}",
                backends=[],
            )
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
        return ctx.verdict(
            self.name,
            subject,
            out,
            PASS,
            f"executorch {d.get('version')} imported CudaPartitioner, "
            f"to_edge_transform_and_lower and the pybindings; registered backends: "
            f"{', '.join(backends) or 'none'}; {how}",
            backends=backends,
            backend_library=ctx.display(library) if library else None,
        )

    def judge_export(self, ctx: ProbeContext, subject: str, out: child.Outcome | None, d: str) -> Row:
        if out is None or out.status != child.OBS:
            return ctx.row(self.name, subject, out)
        if "error" in out.details:
            if not ctx.gpus or not out.details.get("cuda_available"):
                return ctx.verdict(
                    self.name,
                    subject,
                    out,
                    SKIP,
                    f"export through CudaPartitioner needs a CUDA device here and failed: {out.details['error']}",
                    gpu=True,
                )
            return ctx.verdict(self.name, subject, out, FAIL, str(out.details["error"]))
        pte, blob = os.path.join(d, "model.pte"), os.path.join(d, "aoti_cuda_blob.ptd")
        if not os.path.isfile(pte):
            return ctx.verdict(self.name, subject, out, FAIL, "export wrote no model.pte")
        with open(pte, "rb") as f:
            delegated = b"CudaBackend" in f.read()
        if not delegated:
            return ctx.verdict(
                self.name,
                subject,
                out,
                FAIL,
                "the exported program carries no CudaBackend "
                "delegate: the partitioner declined the model, so it would run on the portable kernels",
            )
        if not os.path.isfile(blob):
            return ctx.verdict(
                self.name, subject, out, FAIL, f"export wrote no aoti_cuda_blob.ptd (files: {sorted(os.listdir(d))})"
            )
        sm = ctx.gpus[0]["sm"] if ctx.gpus else "this machine"
        return ctx.verdict(
            self.name,
            subject,
            out,
            PASS,
            f"exported through CudaPartitioner on {sm}: model.pte is "
            f"{os.path.getsize(pte)} bytes and carries the CudaBackend delegate; aoti_cuda_blob.ptd is "
            f"{os.path.getsize(blob)} bytes",
            pte_bytes=os.path.getsize(pte),
            blob_bytes=os.path.getsize(blob),
        )

    def judge_blob(self, subject: str, dirs: dict[str, str], exported: dict[str, bool]) -> Row:
        if not (exported["add"] and exported["linear"]):
            return Row(self.name, subject, SKIP, "not run: an export did not pass")
        weight_bytes = 8 * 4 * 4  # nn.Linear(8, 4)'s float32 weight matrix
        blob = os.path.getsize(os.path.join(dirs["linear"], "aoti_cuda_blob.ptd"))
        empty = os.path.getsize(os.path.join(dirs["add"], "aoti_cuda_blob.ptd"))
        details = (("blob_bytes", blob), ("weight_bytes", weight_bytes), ("weightless_blob_bytes", empty))
        if blob - empty >= weight_bytes:
            return Row(
                self.name,
                subject,
                PASS,
                f"aoti_cuda_blob.ptd is {blob} bytes, {blob - empty} more than the "
                f"weightless model's {empty}: at least the {weight_bytes} bytes of the weight matrix",
                details=details,
            )
        return Row(
            self.name,
            subject,
            FAIL,
            f"aoti_cuda_blob.ptd is {blob} bytes, only {blob - empty} more than the "
            f"weightless model's {empty}, less than the {weight_bytes}-byte weight matrix",
            details=details,
        )

    def _ran(self, ctx: ProbeContext, subject: str, out: child.Outcome | None) -> Row | None:
        """A row when the run did not get as far as an output on the GPU."""
        if out is None or out.status != child.OBS:
            return ctx.row(self.name, subject, out)
        if "error" in out.details:
            return ctx.verdict(self.name, subject, out, FAIL, str(out.details["error"]))
        return None

    def judge_run(
        self, ctx: ProbeContext, subject: str, out: child.Outcome | None, want: reference.Tensor, step: str
    ) -> Row:
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
        return ctx.verdict(
            self.name,
            subject,
            out,
            PASS,
            f"{what} ran through the CUDA delegate on {gpu_name(ctx)} "
            f"in a fresh process and matched archaudit's own float64 reference: {match.why}",
            max_abs=match.max_abs,
        )

    def judge_swapped(self, ctx: ProbeContext, subject: str, out: child.Outcome | None, data: dict[str, Any]) -> Row:
        early = self._ran(ctx, subject, out)
        if early is not None:
            return early
        assert out is not None
        d = out.details
        own = reference.compare(
            d.get("shape"), d.get("output"), self._linear(data, "linear", "linear"), ET_RTOL, ET_ATOL
        )
        if own.ok:
            return ctx.verdict(
                self.name,
                subject,
                out,
                FAIL,
                "with another model's aoti_cuda_blob.ptd the output "
                "is still the program's own: its weights do not come from the data file",
            )
        for bias, where in (("linear", "the bias stays in the .pte"), ("linear_b", "the bias comes from it too")):
            other = reference.compare(
                d.get("shape"), d.get("output"), self._linear(data, "linear_b", bias), ET_RTOL, ET_ATOL
            )
            if other.ok and holds_gpu(out):
                return ctx.verdict(
                    self.name,
                    subject,
                    out,
                    PASS,
                    f"with the other model's aoti_cuda_blob.ptd "
                    f"the output follows that file's weights ({where}): {other.why}",
                )
        gpu = "" if holds_gpu(out) else "; " + ran_on_gpu(out, {})
        return ctx.verdict(
            self.name,
            subject,
            out,
            FAIL,
            f"with another model's aoti_cuda_blob.ptd the output matches neither model ({own.why}){gpu}",
        )

    def judge_negative(self, subject: str, neg: child.TaskRun, twin: tuple[Row, child.TaskRun]) -> Row:
        out = neg.outcomes[0]
        twin_row, twin_run = twin
        if twin_row.status != PASS:
            return Row(
                self.name,
                subject,
                FAIL,
                f"the positive twin did not pass ({twin_row.reason}), so a failure "
                f"without the data file proves nothing",
            )
        if out is None:
            return Row(self.name, subject, FAIL, "the child never reported the run without its data file")
        d = out.details
        if out.status == child.OBS and "error" not in d:
            return Row(
                self.name,
                subject,
                FAIL,
                f"the weighted program ran without its data file and returned "
                f"{d.get('shape')}: its weights do not come from aoti_cuda_blob.ptd",
                out.duration,
            )
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
                return Row(
                    self.name,
                    subject,
                    PASS,
                    f"without aoti_cuda_blob.ptd the runtime named the missing weights ({m.group(0)!r}); {how}",
                    out.duration,
                    out.signal,
                    out.stderr_tail,
                )
            if seen_weights and WEIGHTS_FOUND not in neg.log_hits:
                return Row(
                    self.name,
                    subject,
                    PASS,
                    f"without aoti_cuda_blob.ptd the delegate loaded no weights "
                    f"blob (no {neg_found_text(twin_run)!r}, which its twin logged) and then read the unset "
                    f"constants: {m.group(0)!r}; {how}",
                    out.duration,
                    out.signal,
                    out.stderr_tail,
                )
        return Row(
            self.name,
            subject,
            FAIL,
            f"without aoti_cuda_blob.ptd the run failed, but not as missing weights make it fail: {how}",
            out.duration,
            out.signal,
            out.stderr_tail,
        )


def neg_found_text(twin_run: child.TaskRun) -> str:
    return twin_run.log_hits.get(WEIGHTS_FOUND, "Found forward_weights_blob in named data map")


__all__ = [
    "ET_ATOL",
    "ET_RTOL",
    "ET_WATCH",
    "executorch_data",
    "ExecuTorchCudaProbe",
    "find_cuda_backend",
    "MISSING_WEIGHTS",
    "neg_found_text",
    "WEIGHTS_FOUND",
]
