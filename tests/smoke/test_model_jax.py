"""The model-jax probe (archaudit.smoke.model_jax): which distributions it runs for, and its
verdicts on what the child observed (JAX 0.11.2's own texts on the H200), decided in archaudit's
process against archaudit's own reference."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from archaudit.smoke import child, reference
from archaudit.smoke.model_jax import JAX_FAMILY, JaxModelProbe, jax_data
from archaudit.smoke.report import FAIL, PASS, SKIP, Row
from smoke_helpers import GPU_FDS, H200, probe_context


def ctx(tmp_path: Path, **kw: object):
    """A JAX plugin under test on an H200, under --require-gpu."""
    return probe_context(tmp_path, **{"gpus": (H200,), "gpu_error": None, "require_gpu": True, **kw})


def test_jax_wrong_shaped_weights_pass_only_with_jaxs_own_shape_error(tmp_path):
    jx = JaxModelProbe()
    c = ctx(tmp_path, distribution="jax-cuda13-plugin")
    twin = Row("model-jax", "roundtrip", PASS, "matched")
    message = (
        "ValueError: Shape mismatch for args[0][0].shape[0] (expected same constant): expected (8, 16) "
        "and called with (4, 16)"
    )
    base = {"importable": True, "jax": "0.11.2", "backend": "gpu", "wrong_shape": [4, 16]}

    def judge(**d) -> Row:
        return jx.judge_wrong_shape(
            c, "wrong", child.Outcome(child.OBS, "", 1.0, details={**base, **d}, devices_open=GPU_FDS), twin
        )

    assert judge(refused=True, error=message, error_type="ValueError").status == PASS
    other = judge(refused=True, error="XlaRuntimeError: INTERNAL: cudaMalloc failed", error_type="XlaRuntimeError")
    assert other.status == FAIL and "not with JAX's shape check" in other.reason
    ran = judge(refused=False, shape=[5, 4], output=[0.0] * 20)
    assert ran.status == FAIL and "JAX did not check them" in ran.reason


def test_model_jax_runs_for_the_gpu_plugin_families_only(tmp_path):
    jx = JaxModelProbe()
    (row,) = jx.run(ctx(tmp_path, distribution="jax"))
    assert row.status == SKIP and "is not of the jax-cuda*/jax-rocm* families" in row.reason
    for name in ("jax-cuda13-plugin", "jax-cuda12-pjrt", "jax-rocm7-plugin"):
        assert JAX_FAMILY.match(name), name


def test_an_mlp_numpy_computed_from_the_drawn_weights_matches_only_where_the_gpu_was_held(tmp_path):
    """The MLP's output as numpy computes it from the weights archaudit drew (float32 out, as the
    GPU gives it) passes; the same numbers from a child that held no GPU, or one value off, fail."""
    m = jax_data(reference.fresh_rng())["mlp"]

    def arr(t: reference.Tensor) -> np.ndarray:
        return np.array(t.values, dtype=np.float64).reshape(t.shape)

    y = (np.tanh(arr(m["x"]) @ arr(m["w1"]) + arr(m["b1"])) @ arr(m["w2"]) + arr(m["b2"])).astype(np.float32)
    want = reference.mlp(m["x"], m["w1"], m["b1"], m["w2"], m["b2"])
    jx = JaxModelProbe()
    c = ctx(tmp_path, distribution="jax-cuda13-plugin")

    def judge(output: list[float], fds: tuple[str, ...] = GPU_FDS) -> Row:
        d = {
            "importable": True,
            "jax": "0.11.2",
            "backend": "gpu",
            "device": "cuda:0",
            "shape": [5, 4],
            "output": output,
        }
        out = child.Outcome(child.OBS, "", 1.0, details=d, devices_open=fds)
        return jx.judge_output(c, "jit", out, want, "the jitted MLP")

    values = [float(v) for v in y.ravel()]
    assert judge(values).status == PASS, judge(values).reason
    assert judge(values, fds=()).status == FAIL
    off = judge([values[0] + 1e-3, *values[1:]])
    assert off.status == FAIL and "1 of 20 values differ" in off.reason
