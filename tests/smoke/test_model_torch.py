"""The model-torch probes (archaudit.smoke.model_torch): the reference each step must match, the
verdicts on what a child observed, decided in archaudit's process, and the probe run end to end
in a child of this interpreter, which has no torch."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from archaudit.smoke import child, reference
from archaudit.smoke.model_torch import TorchAotiProbe, TorchModelProbe, torch_data, torch_reference
from archaudit.smoke.report import FAIL, PASS, SKIP, Row
from smoke_helpers import GPU_FDS, H200, probe_context


def arr(t: reference.Tensor) -> np.ndarray:
    return np.array(t.values, dtype=np.float64).reshape(t.shape)


def test_each_step_is_judged_against_its_own_model_and_weights():
    data = torch_data(reference.fresh_rng())
    for step, key in (("linear", "linear"), ("aoti-load", "aoti")):
        m = data[key]
        want = arr(m["x"]) @ arr(m["weights"]["weight"]).T + arr(m["weights"]["bias"])
        got = torch_reference(data, step)
        assert got.shape == (16, 32) and np.allclose(arr(got), want, rtol=1e-12, atol=1e-12)
    conv = torch_reference(data, "conv")
    assert conv.shape == (2, 8, 16, 16)  # padding 1 keeps 16x16
    assert arr(torch_reference(data, "linear")).tolist() != arr(torch_reference(data, "aoti-load")).tolist()


def ctx(tmp_path: Path, **kw: object):
    """torch under test on an H200 whose arch list carries sm_90."""
    return probe_context(tmp_path, **{"gpus": (H200,), "gpu_error": None, **kw})


def observed(output: list[float], fds: tuple[str, ...] = GPU_FDS, **d: object) -> child.Outcome:
    facts = {
        "importable": True,
        "torch": "2.11.0+cu130",
        "cuda_available": True,
        "arch_list": ["sm_80", "sm_90", "sm_100"],
        "device": "cuda:0",
        "file_bytes": 9876,
        "shape": [16, 32],
        "output": output,
        **d,
    }
    return child.Outcome(child.OBS, "", 1.0, details=facts, devices_open=fds)


def test_a_linear_computed_in_float32_passes_only_from_a_child_that_held_the_gpu(tmp_path):
    data = torch_data(reference.fresh_rng())
    m = data["linear"]
    f32 = {k: arr(t).astype(np.float32) for k, t in (("x", m["x"]), *m["weights"].items())}
    values = [float(v) for v in (f32["x"] @ f32["weight"].T + f32["bias"]).ravel()]
    probe, c = TorchModelProbe(), ctx(tmp_path)

    def judge(out: child.Outcome) -> Row:
        return probe.judge(c, "linear", "linear", out, data, str(tmp_path))

    ok = judge(observed(values))
    assert ok.status == PASS and "with weights loaded from a 9876-byte file ran on" in ok.reason, ok.reason
    assert judge(observed(values, fds=())).status == FAIL
    assert judge(observed(values, device="cpu")).reason.endswith("its output lived on cpu, not on the GPU")
    wrong = judge(observed([*values[:-1], values[-1] + 0.5]))
    assert wrong.status == FAIL and wrong.reason.startswith("nn.Linear(64, 32) ran, but 1 of 512 values differ")
    # a step that could not run on this GPU is a SKIP saying why, never judged by its numbers
    no_code = judge(observed(values, arch_list=["sm_80", "sm_100"]))
    assert no_code.status == SKIP and "carries no code for sm_90" in no_code.reason
    assert judge(observed(values, arch_list=["compute_90"])).status == PASS  # PTX the GPU can JIT
    assert judge(observed(values, cuda_available=False)).status == SKIP


def test_the_aoti_package_must_be_a_file_inside_the_work_directory(tmp_path):
    probe, c = TorchAotiProbe(), ctx(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    pkg = work / "model.pt2"
    pkg.write_bytes(b"\0" * 321)
    outside = tmp_path / "elsewhere.pt2"
    outside.write_bytes(b"\0")

    def judge(package: Path) -> Row:
        return probe.judge(c, "aoti-compile", "compile", observed([], package=str(package), seconds=2.5), {}, str(work))

    made = judge(pkg)
    assert made.status == PASS and "into a 321-byte package in 2.5 s" in made.reason
    assert judge(outside).status == FAIL and judge(work / "absent.pt2").status == FAIL


def test_without_torch_the_steps_skip_and_fail_for_a_wheel_that_needs_torch(tmp_path):
    """End to end in children of this interpreter, which has no torch: each step says torch is not
    importable, a SKIP for a wheel that does not need torch (run by --probe), a FAIL for one that does."""
    env = dict(os.environ)
    asked = TorchModelProbe().run(ctx(tmp_path, distribution="demo", selected=("model-torch",), child_env=env))
    assert [r.subject for r in asked] == [s for _, s in TorchModelProbe.steps]
    assert all(r.status == SKIP and r.reason.startswith("torch is not importable here") for r in asked)
    needs = TorchModelProbe().run(ctx(tmp_path, distribution="demo", requires=("torch>=2.4",), child_env=env))
    assert all(r.status == FAIL and r.reason.endswith("(demo is or needs torch)") for r in needs)
    (other,) = TorchModelProbe().run(ctx(tmp_path, distribution="demo"))
    assert other.status == SKIP and "neither is nor depends on torch" in other.reason
    aoti = TorchAotiProbe().run(ctx(tmp_path, distribution="demo", selected=("model-torch-aoti",), child_env=env))
    assert [r.status for r in aoti] == [SKIP, SKIP]
    assert aoti[1].reason == "not run: there is no compiled package (aoti-compile did not pass)"
