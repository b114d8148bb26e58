"""archaudit smoke on a real NVIDIA GPU (marker `gpu`; deselected by default).

Run on the device machine:  pytest -m gpu tests/test_smoke_gpu.py
With ARCHAUDIT_SMOKE_RECORDS=DIR set, each report is also written there as text (exactly
what `archaudit smoke` prints) and JSON: these are the records kept under records/.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from archaudit.smoke import render, runner
from archaudit.smoke.report import FAIL, PASS, SKIP

pytestmark = pytest.mark.gpu
WHEELS = Path(__file__).parent / "fixtures" / "smoke" / "wheels"


def record(name: str, report) -> None:
    out = os.environ.get("ARCHAUDIT_SMOKE_RECORDS")
    if out:
        Path(out, f"{name}.txt").write_text(render.render_text(report) + "\n")
        Path(out, f"{name}.json").write_text(render.to_json(report) + "\n")


def smoke(target=None, **kw):
    kw.setdefault("installed", None)
    kw.setdefault("require_gpu", True)
    kw.setdefault("timeout", 240.0)
    kw.setdefault("system_site_packages", False)
    kw.setdefault("probes", None)
    return runner.run_smoke(target, **kw)


@pytest.fixture(scope="module")
def cuda_fixture_report():
    report = smoke(str(WHEELS / "smoke_cuda-1.0-py3-none-linux_x86_64.whl"), probes=["load", "device-load"])
    record("smoke-cuda-fixture", report)
    return report


def test_a_gpu_is_visible(cuda_fixture_report):
    assert cuda_fixture_report.gpus, cuda_fixture_report.gpu_error


def test_device_code_without_this_gpu_is_named(cuda_fixture_report):
    r = cuda_fixture_report
    if not all("(sm_90)" in g for g in r.gpus):
        pytest.skip(f"expectations are written for sm_90 GPUs; these are {r.gpus}")
    rows = {x.subject: x for x in r.rows if x.probe == "device-load"}
    sm80 = rows["smoke_cuda/libsmoke_sm80.so"]
    assert sm80.status == FAIL
    assert "CUDA_ERROR_NO_BINARY_FOR_GPU (209)" in sm80.reason
    assert "smoke_scale" in sm80.reason and "no kernel image" in sm80.reason
    ptx = rows["smoke_cuda/libsmoke_ptx80.so"]
    assert ptx.status == PASS and "only through the PTX JIT" in ptx.reason
    assert dict(ptx.details)["jit"] >= 1 and dict(ptx.details)["jit_seconds"] > 0
    sm90 = rows["smoke_cuda/libsmoke_sm90.so"]
    assert sm90.status == PASS and "none needs the PTX JIT" in sm90.reason
    assert all(x.status == PASS for x in r.rows if x.probe == "load")
    assert r.exit_code == 1


@pytest.fixture(scope="module")
def torch_report():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    report = smoke(installed="torch", probes=["load", "device-load", "model-torch"])
    record("smoke-torch", report)
    return report


def test_torch_device_code_loads_natively(torch_report):
    rows = [r for r in torch_report.rows if r.probe == "device-load"]
    assert rows and all(r.status == PASS for r in rows), [r.reason for r in rows if r.status != PASS]
    assert any(r.subject.endswith("libtorch_cuda.so") for r in rows)


def test_torch_models_with_weights_match_cpu(torch_report):
    rows = [r for r in torch_report.rows if r.probe == "model-torch"]
    assert [r.status for r in rows] == [PASS, PASS], [r.reason for r in rows]
    assert all("matched CPU" in r.reason and "weights loaded from a" in r.reason for r in rows)


def test_executorch_cuda_procedure_runs_as_far_as_it_can_and_never_passes_without_its_backend():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    if importlib.util.find_spec("executorch") is None:
        report = smoke(installed="torch", probes=["model-executorch"])
        record("smoke-executorch", report)
        assert [r.status for r in report.rows] == [SKIP]
        assert report.rows[0].reason == ("executorch is not importable here: ModuleNotFoundError: "
                                         "No module named 'executorch'")
        return
    report = smoke(installed="executorch", probes=["model-executorch"])
    record("smoke-executorch", report)
    rows = {r.subject.split(" ", 2)[1]: r for r in report.rows}
    assert rows["import"].status == PASS
    backends = dict(rows["import"].details).get("backends", [])
    if "CudaBackend" not in backends:
        for step in ("run", "negative"):
            for r in report.rows:
                if r.subject.split(" ", 2)[1] == step:
                    assert r.status != PASS  # a CPU build can never pass the run steps
        assert report.exit_code == 1


def test_torch_aoti_in_a_fresh_process_is_reported_not_crashed():
    # torch._inductor.aoti_load_package is known to segfault in some images in a fresh
    # process: whatever it does, the report has a row for it and archaudit survives.
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    report = smoke(installed="torch", probes=["model-torch-aoti"])
    record("smoke-torch-aoti", report)
    rows = {r.subject: r for r in report.rows}
    load = rows["torch aoti_load_package in a fresh process"]
    assert load.status in (PASS, FAIL, SKIP)
    if load.status == FAIL and load.signal:
        assert load.stderr_tail
