"""The torch model probes: nn.Linear and nn.Conv2d with weights from a file (model-torch), and an
AOTInductor package compiled, then loaded in a fresh process (model-torch-aoti), each against
archaudit's own float64 reference (reference.py). The child computes (worker.py); the verdicts are
decided here.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from . import child, reference
from .base import Probe, gpu_name, no_gpu_here, ran_on_gpu, sm_number, write_data
from .context import ProbeContext
from .report import FAIL, PASS, SKIP, Row

TORCH_RTOL, TORCH_ATOL = 1e-4, 1e-4  # float32 on the GPU with TF32 off, against float64


def torch_data(rng: Any) -> dict[str, Any]:
    d = reference.draw
    return {
        "linear": {"weights": {"weight": d(rng, 32, 64), "bias": d(rng, 32)}, "x": d(rng, 16, 64)},
        "conv": {"weights": {"weight": d(rng, 8, 3, 3, 3), "bias": d(rng, 8)}, "x": d(rng, 2, 3, 16, 16)},
        "aoti": {"weights": {"weight": d(rng, 32, 64), "bias": d(rng, 32)}, "x": d(rng, 16, 64)},
    }


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
    description = (
        "PyTorch nn.Linear and nn.Conv2d with weights from a file, on the GPU, against archaudit's own reference"
    )
    steps = (
        ("linear", "torch nn.Linear(64, 32), weights from a file"),
        ("conv", "torch nn.Conv2d(3, 8, 3), weights from a file"),
    )
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
                rows.append(
                    Row(
                        self.name,
                        subjects["aoti-load"],
                        SKIP,
                        "not run: there is no compiled package (aoti-compile did not pass)",
                    )
                )
                continue
            run = ctx.run_task("torch", list(group), {"workdir": work, "data": path}, resume=False)
            for step, out in zip(group, run.outcomes):
                rows.append(self.judge(ctx, step, subjects[step], out, data, work))
            rows += ctx.death_rows(self.name, run, "torch child")
        return rows

    def _gate(self, ctx: ProbeContext, subject: str, out: child.Outcome | None) -> Row | None:
        """A row when the step could not run on this GPU (no observation, no torch, no GPU, no CUDA,
        no code for the GPU); None when it could."""
        if out is None or out.status != child.OBS:
            return ctx.row(self.name, subject, out)
        d = out.details
        if not d.get("importable"):
            row = ctx.verdict(self.name, subject, out, SKIP, f"torch is not importable here: {d.get('error')}")
            if ctx.depends_on("torch"):
                row = Row(
                    row.probe, row.subject, FAIL, f"{row.reason} ({ctx.distribution} is or needs torch)", row.duration
                )
            return row
        if not ctx.gpus:
            return ctx.verdict(self.name, subject, out, SKIP, no_gpu_here(ctx), gpu=True)
        if not d.get("cuda_available"):
            return ctx.verdict(
                self.name,
                subject,
                out,
                SKIP,
                f"torch {d.get('torch')} sees no CUDA device "
                f"(torch.version.cuda={d.get('torch_cuda')}), so nothing can run on a GPU here",
                gpu=True,
            )
        sm = ctx.gpus[0]["sm"]
        archs = [str(a) for a in d.get("arch_list") or ()]
        ptx = [a for a in archs if a.startswith("compute_") and sm_number(a) <= sm_number(sm)]
        if sm not in archs and not ptx:
            return ctx.verdict(
                self.name,
                subject,
                out,
                SKIP,
                f"torch {d.get('torch')} carries no code for {sm} ({ctx.gpus[0]['name']}); its arch list is {archs}",
                gpu=True,
            )
        return None

    def _judge_compile(self, ctx: ProbeContext, subject: str, out: child.Outcome, work: str) -> Row:
        """aoti-compile: the package the child said it wrote is a file in the work directory."""
        d = out.details
        pkg = str(d.get("package", ""))
        inside = os.path.realpath(pkg).startswith(os.path.realpath(work) + os.sep)
        if not (inside and os.path.isfile(pkg)):
            return ctx.verdict(self.name, subject, out, FAIL, f"no package where the child said it wrote one ({pkg!r})")
        return ctx.verdict(
            self.name,
            subject,
            out,
            PASS,
            f"AOTInductor compiled nn.Linear(64, 32) for "
            f"{gpu_name(ctx)} into a {os.path.getsize(pkg)}-byte package in "
            f"{float(d.get('seconds') or 0):.1f} s",
        )

    def judge(
        self, ctx: ProbeContext, step: str, subject: str, out: child.Outcome | None, data: dict[str, Any], work: str
    ) -> Row:
        early = self._gate(ctx, subject, out)
        if early is not None:
            return early
        assert out is not None
        d = out.details
        if "error" in d:
            return ctx.verdict(self.name, subject, out, FAIL, str(d["error"]))
        where = gpu_name(ctx)
        if step == "aoti-compile":
            return self._judge_compile(ctx, subject, out, work)
        match = reference.compare(d.get("shape"), d.get("output"), torch_reference(data, step), TORCH_RTOL, TORCH_ATOL)
        what = self.what.get(step, step)
        if not match.ok:
            return ctx.verdict(self.name, subject, out, FAIL, f"{what} ran, but {match.why}")
        ran = ran_on_gpu(out, d)
        if ran:
            return ctx.verdict(self.name, subject, out, FAIL, f"{what} matched archaudit's reference, but {ran}")
        if step == "aoti-load":
            return ctx.verdict(
                self.name,
                subject,
                out,
                PASS,
                f"a fresh process loaded the AOTInductor package "
                f"with aoti_load_package and ran it on {where}: matched archaudit's own float64 "
                f"reference, {match.why}",
            )
        return ctx.verdict(
            self.name,
            subject,
            out,
            PASS,
            f"{what} with weights loaded from a "
            f"{d.get('file_bytes')}-byte file ran on {where} and matched archaudit's own float64 "
            f"reference: {match.why}",
            torch=d.get("torch"),
            max_abs=match.max_abs,
        )


class TorchAotiProbe(TorchModelProbe):
    """AOTInductor: compile a model with weights, then load the package in a fresh process."""

    name = "model-torch-aoti"
    description = (
        "AOTInductor: compile nn.Linear into a package, then aoti_load_package and run "
        "it in a fresh process, against archaudit's own reference"
    )
    steps = (
        ("aoti-compile", "torch AOTInductor compile of nn.Linear(64, 32)"),
        ("aoti-load", "torch aoti_load_package in a fresh process"),
    )
    groups = (("aoti-compile",), ("aoti-load",))


__all__ = ["torch_data", "torch_reference", "TORCH_ATOL", "TORCH_RTOL", "TorchAotiProbe", "TorchModelProbe"]
