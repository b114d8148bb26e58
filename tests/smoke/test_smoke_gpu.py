"""archaudit smoke on an NVIDIA H200 or H100 (marker `gpu`; deselected by default).

Each test asserts the outcome the H200 gives (driver 580.159.04, CUDA 13.0, torch 2.11.0+cu130,
executorch 1.2.0 from PyPI, with or without a CUDA backend library beside it; jax 0.11.2 with the
jax-cuda13 plugins): records/smoke-h200/ holds the log of the run that passed. On any
other GPU they skip, saying so. Run there with tests/fixtures/smoke/run_on_gpu.sh.
With ARCHAUDIT_SMOKE_RECORDS=DIR set, each report is also written there as text and JSON.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

from archaudit.gpus import predict as P
from archaudit.read.library import scan_file
from archaudit.report import smoke as render
from archaudit.smoke import child, runner
from archaudit.smoke.report import FAIL, PASS, SKIP

pytestmark = pytest.mark.gpu
HERE = Path(__file__).parents[1]
WHEELS = HERE / "fixtures" / "smoke" / "wheels"
BIN = HERE / "fixtures" / "smoke" / "bin"


def neutral(text: str) -> str:
    """A record names files relative to the checkout and scratch directories as $TMPDIR."""
    text = text.replace(str(HERE.parent) + "/", "")
    return re.sub(r"/tmp/[A-Za-z0-9_.-]+", "$TMPDIR/...", text)


def record(name: str, report) -> None:
    out = os.environ.get("ARCHAUDIT_SMOKE_RECORDS")
    if out:
        Path(out, f"{name}.txt").write_text(neutral(render.render(report, "text")))
        Path(out, f"{name}.json").write_text(neutral(render.render(report, "json")))


def smoke(target=None, **kw):
    kw.setdefault("installed", None)
    kw.setdefault("require_gpu", True)
    kw.setdefault("timeout", 240.0)
    kw.setdefault("system_site_packages", False)
    kw.setdefault("probes", None)
    return runner.run_smoke(target, **kw)


def on_h200(report) -> None:
    """The expectations hold for one sm_90 GPU under a CUDA 13.0 driver: an H200 or an H100."""
    if len(report.gpus) != 1 or not report.gpus[0].endswith("(sm_90)") or report.driver != "13.0":
        pytest.skip(f"these expectations are the H200's (CUDA 13.0 driver); here: {report.gpus}, {report.driver}")


@pytest.fixture(scope="module")
def fixture_report():
    report = smoke(str(WHEELS / "smoke_cuda-1.0-py3-none-linux_x86_64.whl"), probes=["load", "device-load"])
    record("smoke-cuda-fixture", report)
    on_h200(report)
    return report


def rows(report, probe: str) -> dict:
    return {r.subject: r for r in report.rows if r.probe == probe}


def gpu_row_name(report) -> str:
    """The one GPU as rows name it, an H200's or an H100's ("GPU0 NVIDIA H200 (sm_90)")."""
    return report.gpus[0]


def gpu_name(report) -> str:
    return report.gpus[0].removeprefix("GPU0 ").removesuffix(" (sm_90)")


def test_fixture_libraries_all_load(fixture_report):
    assert [r.status for r in rows(fixture_report, "load").values()] == [PASS] * 4


def test_a_library_with_only_sm80_code_fails_naming_its_kernel(fixture_report):
    gpu = gpu_row_name(fixture_report)
    r = rows(fixture_report, "device-load")["smoke_cuda/libsmoke_sm80.so"]
    assert r.status == FAIL
    assert r.reason.startswith(
        f"all 2 container(s) answered on {gpu} as predicted, with the JIT on and off: "
        f"2 with no code for this GPU; but its code does not run on every GPU here: GPU0: G009 "
    )
    assert "kernels that would fail with 'no kernel image is available': _Z11smoke_scalePffi" in r.reason
    assert dict(r.details)["answers"] == {"none: 209 / 209": 2}
    assert fixture_report.exit_code == 1


def test_ptx_only_code_runs_through_the_jit_and_is_refused_without_it(fixture_report):
    gpu = gpu_row_name(fixture_report)
    r = rows(fixture_report, "device-load")["smoke_cuda/libsmoke_ptx80.so"]
    assert r.status == PASS, r.reason
    assert r.reason.startswith(
        f"all 2 container(s) answered on {gpu} as predicted, with the JIT on and off: "
        f"1 PTX JIT only, 1 with no code for this GPU (the JIT took "
    )
    # the JIT compiles it (0); with CUDA_DISABLE_PTX_JIT=1 the driver refuses it (223); the
    # empty device-link container nvcc adds has nothing for any GPU (209)
    assert dict(r.details)["answers"] == {"jit: 0 / 223": 1, "none: 209 / 209": 1}


def test_sm90_code_is_native(fixture_report):
    r = rows(fixture_report, "device-load")["smoke_cuda/libsmoke_sm90.so"]
    assert r.status == PASS and dict(r.details)["answers"] == {"native: 0 / 0": 2}, r.reason


def test_relocatable_code_that_needs_linking_is_predicted_and_refused(fixture_report):
    """The driver refuses the container whose cubin calls a function it does not carry (500,
    JIT on and off, as predicted), and nothing in the library links device code at run time
    (no nvJitLink): its kernel runs on no GPU, so device-load fails it by check's rule (G013)."""
    r = rows(fixture_report, "device-load")["smoke_cuda/libsmoke_rdc.so"]
    assert r.status == FAIL, r.reason
    assert "3 native SASS, 1 not loadable alone" in r.reason
    assert "not loadable alone: relocatable code that calls _Z10rdc_helperf" in r.reason
    assert "G013" in r.reason and "rdc_needs_helper" in r.reason and "no nvJitLink" in r.reason
    assert dict(r.details)["answers"] == {"native: 0 / 0": 3, "not-loadable-alone: 500 / 500": 1}


# The driver's answers to bare containers, JIT on and off (CUresult codes), as the H200 gave them
# (the H100 gives the same).
EDGE = {
    "lto90.fatbin": (209, 209),  # LTO IR is never loaded
    "ptx90_as100a.fatbin": (218, 223),  # header compute_90, text .target sm_100a: CUDA_ERROR_INVALID_PTX
    "ptx90_as90a.fatbin": (0, 223),  # header compute_90, text sm_90a: compiled for this very GPU
    "ptx90_isa91.fatbin": (222, 223),  # ISA 9.1 on a CUDA 13.0 driver: CUDA_ERROR_UNSUPPORTED_PTX_VERSION
    "rdc_ext.fatbin": (500, 500),  # relocatable, calls rdc_helper: CUDA_ERROR_NOT_FOUND
    "rdc_self.fatbin": (0, 0),  # relocatable, calls nothing outside: loads
    "multi_ptx90.fatbin": (0, 223),  # sm_80 SASS and compute_90 PTX: the JIT compiles the PTX
}


def driver_codes(tmp_path, paths: list[Path], jit: bool, level: int | None) -> list[int]:
    """The H200's cuModuleLoadData answer to each file (eager loading, JIT cache off)."""
    items = [{"file": str(p), "offset": 0, "size": p.stat().st_size, "text": False} for p in paths]
    # Eager module loading, as device-load uses: with the default lazy loading the driver
    # accepts rdc_ext.fatbin at load (0) and refuses it only when its kernel is fetched.
    env = child.child_env(
        {"CUDA_CACHE_DISABLE": "1", "CUDA_MODULE_LOADING": "EAGER", "CUDA_DISABLE_PTX_JIT": "0" if jit else "1"}
    )
    run = child.run_task(
        sys.executable,
        "device-load",
        items,
        {"jit_level": level},
        env=env,
        cwd=str(tmp_path),
        timeout=120,
        sys_path=tuple(sys.path),
    )
    info = run.infos[0]
    if [d["sm"] for d in info.get("devices", [])] != ["sm_90"] or info.get("driver") != "13.0":
        pytest.skip(f"these are the H200's answers; here: {info}")
    assert None not in run.outcomes
    return [out.details["per_device"][0]["code"] for out in run.outcomes if out is not None]


def test_bare_containers_get_exactly_the_answers_predicted(tmp_path):
    names = sorted(EDGE)
    # device-load's optimisation level (0) and the driver's default give the same answers:
    # the ISA version and the .target are checked, and every function compiled, at both
    for level in (0, None):
        got: dict[str, list[int]] = {n: [] for n in names}
        for jit in (True, False):
            for n, code in zip(names, driver_codes(tmp_path, [BIN / n for n in names], jit, level)):
                got[n].append(code)
        assert {n: tuple(v) for n, v in got.items()} == EDGE, level

    h200 = P.Gpu((9, 0), (13, 0))
    for n, (on, off) in EDGE.items():
        lib = scan_file(str(BIN / n), decode=True)
        if lib.problems:  # the scanner refuses what it cannot verify (E014): nothing to predict
            assert n == "ptx90_as100a.fatbin", lib.problems
            continue
        (c,) = lib.containers
        assert P.predict(c, h200).agrees(on) and P.predict(c, h200.with_jit(False)).agrees(off), n


def test_each_part_of_a_split_jit_gets_the_whole_containers_answers(tmp_path):
    from archaudit.smoke import ptx_split

    paths = []
    for k, image in enumerate(ptx_split.part_containers((BIN / "multi_ptx90.fatbin").read_bytes(), 4)):
        paths.append(tmp_path / f"part{k}.fatbin")
        paths[-1].write_bytes(image)
    assert len(paths) == 4
    assert driver_codes(tmp_path, paths, True, 0) == [0, 0, 0, 0]
    assert driver_codes(tmp_path, paths, False, 0) == [223, 223, 223, 223]


def test_cusparselt_71_mb_ptx_container_is_compiled_in_parts_and_answers_as_predicted():
    if importlib.util.find_spec("nvidia.cusparselt") is None:
        pytest.skip("nvidia-cusparselt-cu13 is not installed here")
    report = smoke(installed="nvidia-cusparselt-cu13", probes=["device-load"], timeout=300.0)
    on_h200(report)
    (r,) = report.rows
    details = dict(r.details)
    # The driver agrees with the prediction on every container, and the row passes, as check does:
    # cuSPARSELt is NVIDIA's, identified by its own bytes, and 9.0 is in the range its release
    # documents, so the Blackwell-only containers are its host's dispatch (K005), not a gap.
    assert r.status == PASS, r.reason
    assert r.reason.startswith(f"all 994 container(s) answered on {gpu_row_name(report)} as predicted")
    assert r.reason.endswith(f"check's rule: its code runs on {gpu_row_name(report)}")
    assert details["answers"] == {"native: 0 / 0": 115, "jit: 0 / 223": 1, "none: 209 / 209": 878}
    assert details["jit_split"] == {"containers": 1, "parts": 16, "reloaded_whole": 0}
    assert "1 container(s) compiled in 16 parts that share out their kernels" in r.reason


@pytest.fixture(scope="module")
def torch_report():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    report = smoke(installed="torch", probes=["load", "device-load", "model-torch"])
    record("smoke-torch", report)
    on_h200(report)
    return report


def test_torch_device_code_answers_as_predicted(torch_report):
    device = rows(torch_report, "device-load")
    assert set(device) == {
        "torch/lib/libtorch_cuda.so",
        "torch/lib/libtorch_cuda_linalg.so",
        "torch/lib/libtorch_nvshmem.so",
    }
    assert all(r.status == PASS for r in device.values()), [r.reason for r in device.values()]
    assert dict(device["torch/lib/libtorch_cuda.so"].details)["answers"] == {"native: 0 / 0": 444}


def test_torch_models_with_weights_match_cpu(torch_report):
    models = list(rows(torch_report, "model-torch").values())
    assert [r.status for r in models] == [PASS, PASS], [r.reason for r in models]
    assert all(
        "matched archaudit's own float64 reference" in r.reason
        and "weights loaded from a" in r.reason
        and f"ran on {gpu_name(torch_report)} (sm_90)" in r.reason
        for r in models
    )


def test_torch_aoti_package_load_in_a_fresh_process_is_a_row_with_its_signal():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    report = smoke(installed="torch", probes=["model-torch-aoti"], timeout=300.0)
    record("smoke-torch-aoti", report)
    on_h200(report)
    got = rows(report, "model-torch-aoti")
    compile_ = got["torch AOTInductor compile of nn.Linear(64, 32)"]
    assert compile_.status == PASS, compile_.reason
    load = got["torch aoti_load_package in a fresh process"]
    # On this image aoti_load_package dies in a fresh process (issue 13): a FAIL row with the
    # signal and the stderr tail, and archaudit goes on.
    assert (load.status, load.signal) == (FAIL, "SIGSEGV"), load.reason
    assert load.stderr_tail


def _executorch_backend() -> Path | None:
    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        return None
    lib = Path(list(spec.submodule_search_locations)[0]) / "lib" / "libexecutorch_backend_cuda.so"
    return lib if lib.is_file() else None


def test_executorch_runs_the_cuda_delegate_where_a_backend_exists_and_skips_where_none_does():
    if importlib.util.find_spec("executorch") is None:
        pytest.skip("executorch is not installed here")
    backend = _executorch_backend()
    report = smoke(installed="executorch", probes=["model-executorch"], require_gpu=backend is not None, timeout=300.0)
    record("smoke-executorch" + ("-cuda-backend" if backend else ""), report)
    on_h200(report)
    got = {r.subject: r for r in report.rows}
    imp = got["executorch import and registered backends"]
    assert imp.status == PASS
    rows_ = [r for r in report.rows if r.subject.startswith("executorch export")]
    assert [r.status for r in rows_] == [PASS, PASS, PASS], [r.reason for r in rows_]
    assert dict(rows_[0].details)["blob_bytes"] == 256 and dict(rows_[1].details)["blob_bytes"] == 384
    assert "carries the CudaBackend delegate" in rows_[0].reason and "on sm_90" in rows_[0].reason
    blob = got["executorch aoti_cuda_blob.ptd carries the weights"]
    assert blob.status == PASS
    assert dict(blob.details) == {"blob_bytes": 384, "weightless_blob_bytes": 256, "weight_bytes": 128}
    runs = [
        r for r in report.rows if r.subject.startswith(("executorch run", "executorch negative", "executorch positive"))
    ]
    assert len(runs) == 5
    if backend is None:
        assert dict(imp.details)["backends"] == ["QnnBackend", "XnnpackBackend"]
        for r in runs:
            assert r.status == SKIP
            assert r.reason == (
                "executorch 1.2.0 registers no CudaBackend (registered: QnnBackend, XnnpackBackend) "
                "and ships no lib/libexecutorch_backend_cuda.so: a CPU build, so the delegate cannot "
                "run here"
            )
        assert report.exit_code == 0
        return
    # A CUDA backend library beside the wheel's runtime: loaded, registered, and every run passes.
    assert "CudaBackend registered by loading executorch/lib/libexecutorch_backend_cuda.so" in imp.reason
    assert "CudaBackend" in dict(imp.details)["backends"]
    assert [r.status for r in runs] == [PASS] * 5, [r.reason for r in runs]
    assert "matched archaudit's own float64 reference" in runs[0].reason
    assert "follows that file's weights" in runs[2].reason
    negative = runs[4]
    assert "without aoti_cuda_blob.ptd" in negative.reason
    assert "illegal memory access" in negative.reason or "not found" in negative.reason
    assert report.exit_code == 0


def test_jax_mlp_with_weights_runs_on_the_gpu_and_its_export_round_trips():
    if importlib.util.find_spec("jax_plugins") is None and importlib.util.find_spec("jax_cuda13_plugin") is None:
        pytest.skip("no JAX CUDA plugin is installed here")
    report = smoke(installed="jax-cuda13-plugin", probes=["model-jax"], timeout=300.0)
    record("smoke-jax", report)
    on_h200(report)
    assert [r.status for r in report.rows] == [PASS] * 4, [r.reason for r in report.rows]
    jit, export, trip, wrong = report.rows
    assert f"ran on {gpu_name(report)} (sm_90)" in jit.reason and "precision 'highest'" in jit.reason
    assert dict(export.details)["artifact_bytes"] > 0
    assert "matched archaudit's own float64 reference" in trip.reason
    assert "refused by JAX itself" in wrong.reason and "Shape mismatch" in wrong.reason
