"""The trace probe on an NVIDIA GPU of compute capability 9.0 (marker `gpu`; deselected by default).

Run with tools/trace_on_gpu.sh (torch 2.11.0+cu130, jax 0.11.2 with the jax-cuda13 plugins,
CUPTI from the nvidia-cuda-cupti wheel torch depends on). With ARCHAUDIT_SMOKE_RECORDS=DIR set,
each report is also written there as text and JSON. On a GPU other than 9.0 the fixture
expectations skip, saying so.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

from archaudit.report import smoke as render
from archaudit.smoke import runner
from archaudit.smoke.report import FAIL, PASS, is_dispatch

pytestmark = pytest.mark.gpu
HERE = Path(__file__).parents[1]
BIN = HERE / "fixtures" / "trace" / "bin"
SM80 = "_ZN12cutlass_like11gemm_kernelINS_4Sm80EEEvPfPKfS4_i"
ABSENT = "_Z18bf16_absent_kernelP13__nv_bfloat16fi"
# The trapping fixture goes last: its error (719) is sticky and ends the context, so a launch after
# it never reaches the driver (the H100 showed the absent kernel's 500 lost behind it).
FIXTURES = ("lib_trace_sm90.so", "lib_trace_sm80.so", "lib_trace_bf16_absent.so", "lib_trace_bf16_ptx75.so")


def neutral(text: str) -> str:
    text = text.replace(str(HERE.parent) + "/", "")
    return re.sub(r"/tmp/[A-Za-z0-9_.-]+", "$TMPDIR/...", text)


def record(name: str, report, json: bool = False) -> None:
    out = os.environ.get("ARCHAUDIT_SMOKE_RECORDS")
    if out:
        Path(out, f"{name}.txt").write_text(neutral(render.render(report, "text")))
        if json:
            Path(out, f"{name}.json").write_text(neutral(render.render(report, "json")))


def traced(installed: str, **kw):
    report = runner.run_smoke(None, installed=installed, require_gpu=True, timeout=240.0, probes=["trace"], **kw)
    return report


def on_sm90(report) -> None:
    if not report.gpus or not report.gpus[0].endswith("(sm_90)"):
        pytest.skip(f"these expectations are a 9.0 GPU's; here: {report.gpus}")


def dispatch(report) -> dict[str, str]:
    return {r.subject: r.reason for r in report.rows if is_dispatch(r)}


def test_the_fixtures_failed_launch_is_beside_checks_prediction():
    libs = " ".join(str(BIN / n) for n in FIXTURES)
    report = traced("torch", run_command=f"{sys.executable} tests/fixtures/trace/launch.py {libs}")
    record("trace-fixtures", report)
    on_sm90(report)
    rows = {r.subject: r for r in report.rows}
    refused = [r for r in report.rows if r.subject.endswith(SM80)]
    assert refused and refused[0].status == PASS and "as check predicted" in refused[0].reason, report.rows
    # the bf16 kernel absent from the compute_75 PTX 9.0 JIT-compiles: 500 (or 98), beside check's prediction
    absent = [r for r in report.rows if r.subject.endswith(ABSENT)]
    assert absent and absent[0].status == PASS and "as check predicted" in absent[0].reason, report.rows
    served = [s for s in dispatch(report) if s.endswith("lib_trace_sm90.so")]
    assert served and "sm_90 SASS" in dispatch(report)[served[0]]
    traps = [r for r in report.rows if r.status == FAIL and "bf16_scale_kernel" in r.subject]
    assert traps, rows  # the JIT-served fallback body traps: a failed run, recorded, never passed


def test_the_torch_sweep_reaches_the_vendor_libraries_from_containers_check_says_run():
    report = traced("torch")
    record("trace-torch", report, json=True)
    assert not [r for r in report.rows if "a false pass of check" in r.reason]
    served = " ".join(dispatch(report))
    for lib in ("libcublasLt", "libcudnn", "libcufft", "libcusparse", "libtorch_cuda"):
        assert lib in served, (lib, sorted(dispatch(report)))
    # cuBLASLt 13.1's cubins stored as bare zstd frames (.data, .ldata) are check's containers too (role
    # cubin): their launches are tied to them by the loaded image's bytes, so no row says "unread".
    assert [r for r in report.rows if "check does not read them" in r.reason] == []
    assert [r.subject for r in report.rows if r.status == FAIL] == []
    assert [r.status for r in report.rows if r.subject.startswith("model-torch: ")] == [PASS, PASS]


def test_jax_is_traced():
    if importlib.util.find_spec("jax_plugins") is None and importlib.util.find_spec("jax_cuda13_plugin") is None:
        pytest.skip("no JAX CUDA plugin here")
    report = traced("jax-cuda13-plugin")
    record("trace-jax", report)
    # XLA's own kernels are compiled at run time (no file holds them); cuBLAS's come from containers
    assert dispatch(report) or [r for r in report.rows if r.subject == "code no file holds"], report.rows
    assert not [r for r in report.rows if "a false pass of check" in r.reason]
    jit = [r for r in report.rows if r.subject.startswith("model-jax: jax MLP")]
    assert [r.status for r in jit] == [PASS], report.rows


def test_executorch_is_traced():
    """ExecuTorch's CUDA delegate under the tracer (executorch with a CUDA backend library in its
    lib/, as tools/gpu_records.sh executorch installs it): its model probe runs, and every launch
    is judged against check's inventory of the module it came from."""
    spec = importlib.util.find_spec("executorch")
    where = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not where or not (Path(where[0]) / "lib" / "libexecutorch_backend_cuda.so").is_file():
        pytest.skip("no executorch with a CUDA backend here (PyPI's wheel is a CPU build)")
    report = traced("executorch")
    record("trace-executorch", report, json=True)
    assert not [r for r in report.rows if "a false pass of check" in r.reason], report.rows
    model = [r for r in report.rows if r.subject.startswith("model-executorch: ")]
    assert model and [r.status for r in model] == [PASS] * len(model), [(r.subject, r.reason) for r in model]
    assert dispatch(report) or [r for r in report.rows if r.subject == "code no file holds"], report.rows
