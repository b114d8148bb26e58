"""The verdicts smoke decides in its own process, from what an untrusted child observed: the
negative control that passes only on the failure missing weights cause, JAX's own shape check,
the CUDA backend found beside ExecuTorch's runtime, and buffers that live as long as the module.

The observations are the texts real runs gave (records/smoke-h200/, pytorch/executorch#22089,
JAX 0.11.2 on the H200); the judges are archaudit's own code, run as they run in a probe."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from archaudit.smoke import child, probes, reference, worker_steps
from archaudit.smoke.report import FAIL, PASS, SKIP, Row

H200 = {"ordinal": 0, "name": "NVIDIA H200", "cc": "9.0", "sm": "sm_90"}
GPU_FDS = ("/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl")
FOUND_LOG = "Found forward_weights_blob in named data map"  # cuda_backend.cpp:346's Info line, as matched
ABORT_TAIL = (
    "CUDA error: an illegal memory access was encountered\n"
    "E 00:00:01.311 executorch:memory.cpp:..] In function memcpy_async(), assert failed"
)
NAMED_TAIL = (
    "[cuda_backend.cpp:1242] weights_blob 'forward_weights_blob' not found or update fn is null\n"
    "[cuda_allocator.cpp:87] cudaMemcpy D2H failed: an illegal memory access was encountered"
)


def ctx(tmp_path: Path, **kw) -> probes.ProbeContext:
    base: dict[str, Any] = dict(
        python=sys.executable,
        distribution="executorch",
        version="1.2.0",
        requires=(),
        location=str(tmp_path),
        files=(),
        gpus=(H200,),
        gpu_error=None,
        require_gpu=True,
        timeout=60.0,
        workdir=str(tmp_path),
        child_env={},
    )
    base.update(kw)
    return probes.ProbeContext(**base)


def run(outcome: child.Outcome, hits: dict[str, str] | None = None) -> child.TaskRun:
    return child.TaskRun([outcome], [], [], 1.0, hits or {})


PASSED_TWIN = (
    Row("model-executorch", "twin", PASS, "matched"),
    run(child.Outcome(child.OBS, "", 1.0), {probes.WEIGHTS_FOUND: FOUND_LOG}),
)
ET = probes.ExecuTorchCudaProbe()


def negative(outcome: child.Outcome, hits: dict[str, str] | None = None, twin=PASSED_TWIN) -> Row:
    return ET.judge_negative("negative", run(outcome, hits), twin)


def died(sig: str, tail: str) -> child.Outcome:
    return child.Outcome(
        FAIL, f"the child interpreter was killed by {sig}", 1.5, signal=sig, stderr_tail=tail, died=True
    )


def test_the_negative_control_passes_on_the_abort_that_unset_weights_cause_in_1_2():
    hits = {probes.MISSING_WEIGHTS[1][1]: "an illegal memory access was encountered"}
    row = negative(died("SIGABRT", ABORT_TAIL), hits)
    assert row.status == PASS, row.reason
    assert "no 'Found forward_weights_blob in named data map'" in row.reason and "killed by SIGABRT" in row.reason


def test_the_negative_control_passes_on_the_named_missing_blob():
    out = child.Outcome(
        child.OBS,
        "",
        1.0,
        details={"error": "RuntimeError: Failed to execute method forward, error: 0x1", "error_type": "RuntimeError"},
    )
    row = negative(out, {probes.MISSING_WEIGHTS[0][1]: NAMED_TAIL.splitlines()[0][20:]})
    assert row.status == PASS and "named the missing weights" in row.reason, row.reason


def test_any_other_death_of_the_negative_control_is_a_fail_naming_it():
    segv = negative(died("SIGSEGV", "Fatal Python error: Segmentation fault"))
    assert segv.status == FAIL and "killed by SIGSEGV" in segv.reason and "not as missing weights" in segv.reason
    hung = negative(
        child.Outcome(
            FAIL,
            "no progress for 60 s: hung, killed with its process group",
            60.0,
            signal="SIGKILL",
            stderr_tail=ABORT_TAIL,
            died=True,
        )
    )
    assert hung.status == FAIL  # a timeout is never the control's failure, whatever was printed
    # the weights were found (the blob was loaded), so the abort is not what missing weights do
    loaded = negative(
        died("SIGABRT", ABORT_TAIL),
        {probes.WEIGHTS_FOUND: FOUND_LOG, probes.MISSING_WEIGHTS[1][1]: "an illegal memory access"},
    )
    assert loaded.status == FAIL, loaded.reason


def test_the_negative_control_needs_a_positive_twin_that_passed():
    twin = (Row("model-executorch", "twin", FAIL, "the child interpreter was killed by SIGABRT"), PASSED_TWIN[1])
    row = negative(died("SIGABRT", ABORT_TAIL), {probes.MISSING_WEIGHTS[1][1]: "an illegal memory access"}, twin)
    assert row.status == FAIL and row.reason.startswith("the positive twin did not pass")
    # and a twin that passed without logging the weights: the 1.2 signature cannot be told apart
    quiet = (PASSED_TWIN[0], run(child.Outcome(child.OBS, "", 1.0)))
    row = negative(died("SIGABRT", ABORT_TAIL), {probes.MISSING_WEIGHTS[1][1]: "an illegal memory access"}, quiet)
    assert row.status == FAIL


def test_a_weighted_program_that_runs_without_its_data_fails_the_control():
    row = negative(child.Outcome(child.OBS, "", 1.0, details={"shape": [2, 4], "output": [0.0] * 8}))
    assert row.status == FAIL and "ran without its data file" in row.reason


def test_the_swapped_data_file_must_move_the_output_to_the_other_weights(tmp_path):
    rng = reference.fresh_rng()
    data = probes.executorch_data(rng)
    x = data["linear"]["inputs"][0]
    follows = reference.linear(x, data["linear_b"]["weights"]["weight"], data["linear"]["weights"]["bias"])
    own = reference.linear(x, data["linear"]["weights"]["weight"], data["linear"]["weights"]["bias"])

    def judge(t: reference.Tensor, fds=GPU_FDS) -> Row:
        out = child.Outcome(
            child.OBS, "", 1.0, details={"shape": list(t.shape), "output": list(t.values)}, devices_open=fds
        )
        return ET.judge_swapped(ctx(tmp_path), "swapped", out, data)

    assert judge(follows).status == PASS and "the bias stays in the .pte" in judge(follows).reason
    assert judge(own).status == FAIL and "still the program's own" in judge(own).reason
    assert judge(follows, fds=()).status == FAIL


def test_which_cuda_backend_was_found_is_said(tmp_path):
    lib = tmp_path / "executorch" / "lib" / "libexecutorch_backend_cuda.so"
    assert probes.find_cuda_backend(ctx(tmp_path)) is None
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"\x7fELF")
    c = ctx(tmp_path)
    assert probes.find_cuda_backend(c) == str(lib)
    facts = {
        "importable": True,
        "version": "1.2.0",
        "backends_before": ["QnnBackend", "XnnpackBackend"],
        "backends": ["CudaBackend", "QnnBackend", "XnnpackBackend"],
        "pybindings_error": None,
    }
    row = ET.judge_import(c, child.Outcome(child.OBS, "", 1.0, details=facts), str(lib), True)
    assert (
        row.status == PASS
        and "CudaBackend registered by loading executorch/lib/libexecutorch_backend_cuda.so" in row.reason
    )
    linked = {**facts, "backends_before": facts["backends"]}
    row = ET.judge_import(c, child.Outcome(child.OBS, "", 1.0, details=linked), None, True)
    assert "CudaBackend is linked into the pybindings" in row.reason
    cpu = {**facts, "backends": facts["backends_before"]}
    assert ET.no_backend(cpu, None) == (
        "executorch 1.2.0 registers no CudaBackend (registered: QnnBackend, "
        "XnnpackBackend) and ships no lib/libexecutorch_backend_cuda.so: a CPU "
        "build, so the delegate cannot run here"
    )


def test_the_runtime_reads_buffers_that_live_as_long_as_the_module(tmp_path):
    # ExecuTorch 1.2's pybindings keep no reference to the bytes they read in place; a temporary
    # (loader(open(p, "rb").read())) is freed under them. load_held passes bytes it keeps.
    pte, ptd = tmp_path / "model.pte", tmp_path / "aoti_cuda_blob.ptd"
    pte.write_bytes(b"PTE" * 1000)
    ptd.write_bytes(b"PTD" * 100)
    given: list[tuple[int, ...]] = []

    def runtime(*buffers: bytes) -> object:  # like the pybindings: remembers where, not what
        given.append(tuple(id(b) for b in buffers))
        return object()

    held = worker_steps.load_held(runtime, str(pte), str(ptd))
    assert given == [tuple(id(b) for b in held.buffers)]
    # the very objects the runtime was handed are alive, with their bytes, while the holder is
    assert held.buffers == (pte.read_bytes(), ptd.read_bytes())
    alone = worker_steps.load_held(runtime, str(pte), None)
    assert given[-1] == (id(alone.buffers[0]),) and len(alone.buffers) == 1


def test_jax_wrong_shaped_weights_pass_only_with_jaxs_own_shape_error(tmp_path):
    jx = probes.JaxModelProbe()
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
    jx = probes.JaxModelProbe()
    (row,) = jx.run(ctx(tmp_path, distribution="jax"))
    assert row.status == SKIP and "is not of the jax-cuda*/jax-rocm* families" in row.reason
    for name in ("jax-cuda13-plugin", "jax-cuda12-pjrt", "jax-rocm7-plugin"):
        assert probes.JAX_FAMILY.match(name), name


def test_device_load_verdict_holds_the_driver_to_check_s_ptx_floor() -> None:
    """On the H200 (driver 580.159.04, CUDA 13.0) lib_ptx94_late.so's PTX of ISA 9.4 is refused
    with 222 (records/smoke-h200/ptx94.txt): late_fill has no other code for 9.0, so check's rule
    with that driver is D001 and the library does not run there; from CUDA 13.4 on it does.
    lib_ptx94_named.so's kernel is named sm80_tail_kernel, which by NVIDIA's naming means 8.0 and
    newer, so the name excuses nothing on 9.0: its PTX sets the floor there too, as the driver
    answered for both (222)."""
    from archaudit.read.artifacts import inventory
    from archaudit.smoke.device_load import _coverage
    from helpers import CUDA_BIN

    (late,) = inventory(str(CUDA_BIN / "lib_ptx94_late.so"), decode=True).libraries
    (named,) = inventory(str(CUDA_BIN / "lib_ptx94_named.so"), decode=True).libraries
    runs, why, failing = _coverage(late, H200, (13, 0))
    assert (runs, failing) == (False, ("D001",)) and "late_fill" in why
    assert _coverage(late, H200, (13, 4))[0] and _coverage(late, H200, None)[0]
    runs, why, failing = _coverage(named, H200, (13, 0))
    assert (runs, failing) == (False, ("D001",)) and _coverage(named, H200, (13, 4))[0]


def test_the_referee_loads_a_cubin_kept_as_a_zstd_frame_as_the_library_does(tmp_path):
    """device-load hands the driver what the library hands it: a cubin kept as a bare zstd frame
    (tests/fixtures/cuda/bin/lib_zstd_cubin_sm80.so) is decoded in archaudit's process into the
    scratch directory, and that file is the spec the child loads; other containers stay in place."""
    import zstandard

    from archaudit.read.library import scan_file
    from archaudit.smoke import device_load

    cuda = Path(__file__).parents[1] / "fixtures" / "cuda" / "bin"
    framed, plain = str(cuda / "lib_zstd_cubin_sm80.so"), str(cuda / "lib_embedded_cubin_sm80.so")
    items = device_load.decoded(device_load.plan([(p, scan_file(p)) for p in (framed, plain)]), str(tmp_path))
    (spec, other) = [it.spec() for it in items]
    c = items[0].container
    with open(framed, "rb") as f:
        f.seek(c.offset)
        expected = zstandard.ZstdDecompressor().decompressobj().decompress(f.read(c.size))
    assert (spec["offset"], spec["size"]) == (0, len(expected))
    assert Path(str(spec["file"])).read_bytes() == expected and expected[:4] == b"\x7fELF"
    assert (other["file"], other["offset"]) == (plain, items[1].container.offset)
