"""archaudit smoke on real wheels from PyPI, without a GPU.

Wheels are downloaded with pip into $ARCHAUDIT_WHEEL_CACHE (default
~/.cache/archaudit/wheels) and reused from there.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from archaudit.smoke import runner
from archaudit.smoke.report import FAIL, PASS, SKIP


def have_cuda_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(have_cuda_driver(), reason="a CUDA driver is present: see test_smoke_gpu.py")


def cache_dir() -> Path:
    d = Path(os.environ.get("ARCHAUDIT_WHEEL_CACHE") or Path.home() / ".cache" / "archaudit" / "wheels")
    d.mkdir(parents=True, exist_ok=True)
    return d


def fetch(name: str, version: str) -> Path:
    d = cache_dir()
    stem = name.replace("-", "_") + "-" + version + "-"
    have = sorted(d.glob(stem + "*.whl"))
    if not have:
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                            "--dest", str(d), f"{name}=={version}"], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot download {name}=={version}: {r.stderr.strip().splitlines()[-1:]}")
        have = sorted(d.glob(stem + "*.whl"))
    assert have, f"pip did not leave a {name} wheel in {d}"
    return have[-1]


def smoke(target, **kw):
    return runner.run_smoke(str(target), installed=None, require_gpu=kw.pop("require_gpu", False),
                            timeout=120.0, system_site_packages=False, **kw)


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
    assert "fatbin container(s) not loaded: no CUDA driver" in device.reason
    assert report.exit_code == 0
    strict = smoke(whl, probes=["device-load"], require_gpu=True)
    assert [r.status for r in strict.rows] == [FAIL] and strict.exit_code == 1


@pytest.mark.slow
def test_a_cpu_torch_wheel_skips_the_gpu_model_steps_and_fails_them_under_require_gpu():
    # A CPU build of torch from the wheel cache (PyPI's torch is the CUDA build): the model
    # probes run in the child, import torch, and find no device.
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    have = sorted(cache_dir().glob(f"torch-*+cpu-{tag}-{tag}-*.whl"))
    if not have:
        pytest.skip(f"no CPU torch wheel for {tag} in {cache_dir()}")
    report = smoke(have[-1], probes=["model-torch", "model-executorch"], require_gpu=True)
    rows = {r.subject: r for r in report.rows}
    for subject in ("torch nn.Linear(64, 32), weights from a file", "torch nn.Conv2d(3, 8, 3), weights from a file"):
        assert rows[subject].status == FAIL
        assert rows[subject].reason.startswith("--require-gpu: this must run on a GPU, but torch ")
        assert "sees no CUDA device" in rows[subject].reason
    et = rows["executorch import and registered backends"]
    assert et.status == SKIP and et.reason == ("executorch is not importable here: ModuleNotFoundError: "
                                               "No module named 'executorch'")
    assert report.exit_code == 1
