"""archaudit smoke on real wheels from PyPI, without a GPU.

Wheels are downloaded with pip into tests/wheels.py's cache ($ARCHAUDIT_WHEEL_CACHE, else
$XDG_CACHE_HOME/archaudit/wheels, else ~/.cache/archaudit/wheels) and reused from there.
"""

from __future__ import annotations

import pytest

from archaudit.smoke import runner
from archaudit.smoke.report import FAIL, PASS, SKIP
from helpers import NO_GPU_REASONS, no_gpu_reason  # noqa: E402,F401
from wheels import fetch  # noqa: E402

# Every test hides the GPUs from the children (CUDA_VISIBLE_DEVICES=""), so on a GPU runner
# these run too, instead of skipping: the GPU side is tests/smoke/test_smoke_gpu.py.
pytestmark = pytest.mark.usefixtures("no_gpu")


def smoke(target, **kw):
    return runner.run_smoke(
        str(target),
        installed=None,
        require_gpu=kw.pop("require_gpu", False),
        timeout=120.0,
        system_site_packages=False,
        **kw,
    )


def test_nvidia_curand_loads_and_its_device_code_waits_for_a_gpu():
    whl = fetch("nvidia-curand", "10.4.0.35")
    report = smoke(whl, probes=["load", "device-load"])
    assert report.distribution == "nvidia-curand" and report.version == "10.4.0.35"
    load = [r for r in report.rows if r.probe == "load"]
    assert [r.subject for r in load] == ["nvidia/cu13/lib/libcurand.so.10"]
    assert load[0].status == PASS
    assert "libc.so.6" in dict(load[0].details)["needed"]
    (device,) = [r for r in report.rows if r.probe == "device-load"]
    assert device.subject == "nvidia/cu13/lib/libcurand.so.10" and device.status == SKIP
    assert "fatbin container(s) not loaded: " in device.reason and no_gpu_reason(device.reason), device.reason
    assert report.exit_code == 0
    strict = smoke(whl, probes=["device-load"], require_gpu=True)
    assert [r.status for r in strict.rows] == [FAIL] and strict.exit_code == 1


@pytest.mark.census  # torch CPU: 192 MB
def test_a_cpu_torch_wheel_skips_the_gpu_model_steps_and_fails_them_under_require_gpu():
    # A CPU build of torch (torch==2.13.0 is one here; PyPI's default torch is the CUDA build):
    # the model probes run in the child, import torch, and find no device.
    whl = fetch("torch", "2.13.0+cpu")
    if "+cpu" not in whl.name:
        pytest.skip(f"{whl.name} is not a CPU build of torch")
    report = smoke(whl, probes=["model-torch", "model-executorch"], require_gpu=True)
    rows = {r.subject: r for r in report.rows}
    for subject in ("torch nn.Linear(64, 32), weights from a file", "torch nn.Conv2d(3, 8, 3), weights from a file"):
        assert rows[subject].status == FAIL
        # the parent decides: its own driver query (not the wheel's torch) says there is no GPU
        assert rows[subject].reason.startswith(
            "--require-gpu: this must run on a GPU, but archaudit's own driver query found no GPU"
        )
    et = rows["executorch import and registered backends"]
    assert et.status == SKIP and et.reason == (
        "executorch is not importable here: ModuleNotFoundError: No module named 'executorch'"
    )
    assert report.exit_code == 1
