"""The JAX probe: a small MLP with real weights, jitted on the GPU, and a jax.export artifact
through bytes, against archaudit's own float64 reference; wrong-shaped weights must be refused.
The child computes (worker.py); the verdicts are decided here.
"""

from __future__ import annotations

import os
import re
import tempfile
from typing import Any

from . import child, reference
from .base import Probe, gpu_name, no_gpu_here, ran_on_gpu, write_data
from .context import ProbeContext, _normalise
from .report import FAIL, PASS, SKIP, Row

JAX_RTOL, JAX_ATOL = 1e-5, 1e-5  # float32 at "highest" matmul precision against float64
JAX_FAMILY = re.compile(r"^jax-(cuda|rocm)\d*(-plugin|-pjrt)?$")


def jax_data(rng: Any) -> dict[str, Any]:
    d = reference.draw
    return {"mlp": {"w1": d(rng, 8, 16), "b1": d(rng, 16), "w2": d(rng, 16, 4), "b2": d(rng, 4), "x": d(rng, 5, 8)}}


class JaxModelProbe(Probe):
    """A small MLP with real weights, jitted on the GPU, and a jax.export artifact through bytes."""

    name = "model-jax"
    description = (
        "JAX: a small MLP with weights jitted on the GPU and a jax.export artifact round-tripped "
        "through bytes, against archaudit's own reference; wrong-shaped weights must be refused"
    )
    steps = (
        ("jit", "jax MLP 8-16-4 with weights, jitted on the GPU"),
        ("export", "jax.export of the MLP, serialized"),
        ("roundtrip", "jax.export artifact deserialized from bytes and run in a fresh process"),
        ("wrong-shape", "jax negative control: the artifact called with wrong-shaped weights"),
    )

    def run(self, ctx: ProbeContext) -> list[Row]:
        sub = dict(self.steps)
        family = JAX_FAMILY.match(_normalise(ctx.distribution)) or any(
            JAX_FAMILY.match(_normalise(re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0])) for r in ctx.requires
        )
        if not family:
            return [
                Row(
                    self.name,
                    ctx.distribution,
                    SKIP,
                    f"{ctx.distribution} is not of the jax-cuda*/jax-rocm* "
                    f"families (JAX's GPU plugins) and needs none of them: model-jax runs for those",
                )
            ]
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
                rows.append(
                    ctx.verdict(
                        self.name, sub[s], None, SKIP, f"not run: the export did not pass ({rows[1].reason})", gpu=gpu
                    )
                )
            return rows
        trip = ctx.run_task("jax", ["roundtrip"], params)
        rows.append(
            self.judge_output(
                ctx, sub["roundtrip"], trip.outcomes[0], want, "the deserialized artifact, weights as inputs,"
            )
        )
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
            return ctx.verdict(
                self.name,
                subject,
                out,
                FAIL,
                f"jax is not importable here: {d.get('error')} ({ctx.distribution} is a JAX GPU plugin)",
            )
        if not ctx.gpus:
            return ctx.verdict(self.name, subject, out, SKIP, no_gpu_here(ctx), gpu=True)
        if d.get("backend") not in ("gpu", "cuda", "rocm"):
            return ctx.verdict(
                self.name,
                subject,
                out,
                SKIP,
                f"jax {d.get('jax')} runs on {d.get('backend')} here (devices {d.get('devices')}), not on a GPU",
                gpu=True,
            )
        if "error" in d and "refused" not in d:
            return ctx.verdict(self.name, subject, out, FAIL, str(d["error"]))
        return None

    def judge_output(
        self, ctx: ProbeContext, subject: str, out: child.Outcome | None, want: reference.Tensor, what: str
    ) -> Row:
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
        return ctx.verdict(
            self.name,
            subject,
            out,
            PASS,
            f"{what} ran on {gpu_name(ctx)} (jax {d.get('jax')}, "
            f"{d.get('device')}) and matched archaudit's own float64 reference at matmul precision "
            f"'highest': {match.why}",
            max_abs=match.max_abs,
        )

    def judge_export(self, ctx: ProbeContext, subject: str, out: child.Outcome | None, work: str) -> Row:
        early = self._gate(ctx, subject, out)
        if early is not None:
            return early
        assert out is not None
        path = os.path.join(work, "mlp.jax_export")
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            return ctx.verdict(self.name, subject, out, FAIL, "no serialized artifact was written")
        return ctx.verdict(
            self.name,
            subject,
            out,
            PASS,
            f"jax.export serialized the MLP for "
            f"{out.details.get('platforms')} into {os.path.getsize(path)} bytes, weights as inputs",
            artifact_bytes=os.path.getsize(path),
        )

    def judge_wrong_shape(self, ctx: ProbeContext, subject: str, out: child.Outcome | None, twin: Row) -> Row:
        early = self._gate(ctx, subject, out)
        if early is not None:
            return early
        assert out is not None
        d = out.details
        if twin.status != PASS:
            return ctx.verdict(
                self.name,
                subject,
                out,
                FAIL,
                f"the round trip did not pass ({twin.reason}), so a refusal here proves nothing",
            )
        if not d.get("refused"):
            return ctx.verdict(
                self.name,
                subject,
                out,
                FAIL,
                f"the artifact ran with weights of shape "
                f"{d.get('wrong_shape')} instead of (8, 16): JAX did not check them",
            )
        message = str(d.get("error", ""))
        if (
            d.get("error_type") == "ValueError"
            and "Shape mismatch" in message
            and "(8, 16)" in message
            and "(4, 16)" in message
        ):
            return ctx.verdict(
                self.name,
                subject,
                out,
                PASS,
                f"weights of shape (4, 16) for (8, 16) were refused by JAX itself: {message[:300]}",
            )
        return ctx.verdict(
            self.name,
            subject,
            out,
            FAIL,
            f"the wrong-shaped weights failed, but not with JAX's "
            f"shape check (a ValueError naming both shapes): {message[:300]}",
        )


__all__ = ["jax_data", "JAX_ATOL", "JAX_FAMILY", "JAX_RTOL", "JaxModelProbe"]
