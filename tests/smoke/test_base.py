"""What every built-in probe shares (smoke/base.py): the judging, in archaudit's process, of whether
an untrusted child ran on a GPU, and the inputs archaudit draws written for the child to read."""

from __future__ import annotations

import json
from pathlib import Path

from archaudit.smoke import base, child, reference
from archaudit.smoke.context import ProbeContext
from smoke_helpers import H100, probe_context


def ctx(tmp_path: Path, gpus: tuple = (H100,), gpu_error: str | None = None) -> ProbeContext:
    return probe_context(tmp_path, gpus=gpus, gpu_error=gpu_error)


def seen(*devices: str) -> child.Outcome:
    return child.Outcome(child.OBS, "", 1.0, devices_open=devices)


def test_a_gpu_is_held_only_through_a_gpu_device_file():
    for device in ("/dev/nvidia0", "/dev/nvidia-uvm", "/dev/kfd", "/dev/dri/renderD128"):
        assert base.holds_gpu(seen("/dev/null", device)), device
    assert not base.holds_gpu(seen("/dev/null", "/dev/dri/card0", "/dev/nvme0n1"))
    assert not base.holds_gpu(seen())


def test_ran_on_gpu_needs_the_device_held_and_the_output_on_it():
    assert base.ran_on_gpu(seen("/dev/nvidiactl"), {"device": "cuda:0"}) == ""
    assert base.ran_on_gpu(seen("/dev/kfd"), {"device": "rocm:0"}) == ""
    assert base.ran_on_gpu(seen("/dev/nvidiactl"), {"device": "cpu"}) == "its output lived on cpu, not on the GPU"
    assert base.ran_on_gpu(seen("/dev/nvidiactl"), {}) == "its output lived on no device, not on the GPU"
    held_none = base.ran_on_gpu(seen("/dev/null"), {"device": "cuda:0"})  # the child's word is not enough
    assert held_none.startswith("the child held no GPU device file open") and held_none.endswith("not run on a GPU")


def test_the_gpu_named_is_archaudits_own_query(tmp_path):
    assert base.gpu_name(ctx(tmp_path)) == "NVIDIA H100 80GB HBM3 (sm_90)"
    assert base.no_gpu_here(ctx(tmp_path, (), "cuInit failed: CUDA_ERROR_NO_DEVICE (100)")) == (
        "archaudit's own driver query found no GPU (cuInit failed: CUDA_ERROR_NO_DEVICE (100)), "
        "so nothing can have run on one here"
    )
    assert "found no GPU (none)" in base.no_gpu_here(ctx(tmp_path, (), None))
    assert [base.sm_number(s) for s in ("sm_90", "sm_90a", "sm_100f", "gfx942", "")] == [90, 90, 100, 942, 0]


def test_the_data_written_for_a_child_is_the_drawn_tensors_as_json(tmp_path):
    x = reference.draw(reference.fresh_rng(), 2, 3)
    data = {"linear": {"inputs": [x], "weights": {"weight": x}, "note": ("a", 1)}}
    path = Path(base.write_data(ctx(tmp_path), "linear", data))
    assert path.parent == tmp_path and path.name.startswith("linear-") and path.suffix == ".json"
    doc = json.loads(path.read_text())
    assert doc == {"linear": {"inputs": [x.as_json()], "weights": {"weight": x.as_json()}, "note": ["a", 1]}}
    assert doc["linear"]["inputs"][0]["values"] == list(x.values)  # every float as drawn
