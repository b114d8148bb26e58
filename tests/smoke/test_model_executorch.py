"""The model-executorch probe's verdicts (archaudit.smoke.model_executorch), decided in archaudit's
own process from what an untrusted child observed: the negative control that passes only on the
failure missing weights cause, the swapped data file that must move the output to the other
weights, and the CUDA backend found beside ExecuTorch's runtime.

The observations are the texts real runs gave (records/smoke-h200/, pytorch/executorch#22089);
the judges are archaudit's own code, run as they run in a probe."""

from __future__ import annotations

from pathlib import Path

from archaudit.smoke import child, reference
from archaudit.smoke.model_executorch import (
    MISSING_WEIGHTS,
    WEIGHTS_FOUND,
    ExecuTorchCudaProbe,
    executorch_data,
    find_cuda_backend,
    neg_found_text,
)
from archaudit.smoke.report import FAIL, PASS, SKIP, Row
from smoke_helpers import GPU_FDS, H200, probe_context


def ctx(tmp_path: Path, **kw: object):
    """ExecuTorch 1.2.0 under test on an H200, under --require-gpu."""
    return probe_context(
        tmp_path,
        **{
            "distribution": "executorch",
            "version": "1.2.0",
            "gpus": (H200,),
            "gpu_error": None,
            "require_gpu": True,
            **kw,
        },
    )


FOUND_LOG = "Found forward_weights_blob in named data map"  # cuda_backend.cpp:346's Info line, as matched


ABORT_TAIL = (
    "CUDA error: an illegal memory access was encountered\n"
    "E 00:00:01.311 executorch:memory.cpp:..] In function memcpy_async(), assert failed"
)


NAMED_TAIL = (
    "[cuda_backend.cpp:1242] weights_blob 'forward_weights_blob' not found or update fn is null\n"
    "[cuda_allocator.cpp:87] cudaMemcpy D2H failed: an illegal memory access was encountered"
)


def run(outcome: child.Outcome, hits: dict[str, str] | None = None) -> child.TaskRun:
    return child.TaskRun([outcome], [], [], 1.0, hits or {})


PASSED_TWIN = (
    Row("model-executorch", "twin", PASS, "matched"),
    run(child.Outcome(child.OBS, "", 1.0), {WEIGHTS_FOUND: FOUND_LOG}),
)


ET = ExecuTorchCudaProbe()


def negative(outcome: child.Outcome, hits: dict[str, str] | None = None, twin=PASSED_TWIN) -> Row:
    return ET.judge_negative("negative", run(outcome, hits), twin)


def died(sig: str, tail: str) -> child.Outcome:
    return child.Outcome(
        FAIL, f"the child interpreter was killed by {sig}", 1.5, signal=sig, stderr_tail=tail, died=True
    )


def test_the_negative_control_passes_on_the_abort_that_unset_weights_cause_in_1_2():
    hits = {MISSING_WEIGHTS[1][1]: "an illegal memory access was encountered"}
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
    row = negative(out, {MISSING_WEIGHTS[0][1]: NAMED_TAIL.splitlines()[0][20:]})
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
        died("SIGABRT", ABORT_TAIL), {WEIGHTS_FOUND: FOUND_LOG, MISSING_WEIGHTS[1][1]: "an illegal memory access"}
    )
    assert loaded.status == FAIL, loaded.reason


def test_the_negative_control_needs_a_positive_twin_that_passed():
    twin = (Row("model-executorch", "twin", FAIL, "the child interpreter was killed by SIGABRT"), PASSED_TWIN[1])
    row = negative(died("SIGABRT", ABORT_TAIL), {MISSING_WEIGHTS[1][1]: "an illegal memory access"}, twin)
    assert row.status == FAIL and row.reason.startswith("the positive twin did not pass")
    # and a twin that passed without logging the weights: the 1.2 signature cannot be told apart
    quiet = (PASSED_TWIN[0], run(child.Outcome(child.OBS, "", 1.0)))
    row = negative(died("SIGABRT", ABORT_TAIL), {MISSING_WEIGHTS[1][1]: "an illegal memory access"}, quiet)
    assert row.status == FAIL


def test_a_weighted_program_that_runs_without_its_data_fails_the_control():
    row = negative(child.Outcome(child.OBS, "", 1.0, details={"shape": [2, 4], "output": [0.0] * 8}))
    assert row.status == FAIL and "ran without its data file" in row.reason


def test_the_swapped_data_file_must_move_the_output_to_the_other_weights(tmp_path):
    rng = reference.fresh_rng()
    data = executorch_data(rng)
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
    assert find_cuda_backend(ctx(tmp_path)) is None
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"\x7fELF")
    c = ctx(tmp_path)
    assert find_cuda_backend(c) == str(lib)
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


def test_the_watched_log_lines_match_what_the_runtime_prints():
    """The patterns the child's stderr is watched for, against the lines ExecuTorch 1.2.0 and the
    delegate after it print (the texts above); the control quotes the line the twin logged."""
    import re

    named, unset = (p for _, p in MISSING_WEIGHTS)
    found, missing = re.search(WEIGHTS_FOUND, FOUND_LOG), re.search(named, NAMED_TAIL)
    assert found and found.group(0) == FOUND_LOG
    assert missing and missing.group(0) == "weights_blob 'forward_weights_blob' not found or update fn is null"
    assert re.search(unset, ABORT_TAIL) and not re.search(named, ABORT_TAIL)
    other = "Found linear_weights_blob in named data map"
    assert (
        re.fullmatch(WEIGHTS_FOUND, other)
        and neg_found_text(run(child.Outcome(child.OBS, "", 1.0), {WEIGHTS_FOUND: other})) == other
    )
    assert neg_found_text(run(child.Outcome(child.OBS, "", 1.0))) == "Found forward_weights_blob in named data map"


def test_without_executorch_the_import_fails_for_its_own_wheel_and_every_later_step_is_not_run(tmp_path):
    """End to end in a child of this interpreter, which has no executorch: one FAIL for the import
    when executorch is the target, and each later step a SKIP that says why; a wheel that neither
    is nor needs executorch gets one SKIP."""
    import os

    probe = ExecuTorchCudaProbe()
    rows = probe.run(ctx(tmp_path, child_env=dict(os.environ)))
    assert rows[0].status == FAIL and "executorch" in rows[0].reason, rows[0]
    later = [r for r in rows[1:] if r.subject in dict(probe.steps).values()]
    assert [r.subject for r in later] == [s for _, s in probe.steps[1:]]
    assert all(r.status == SKIP and r.reason == "not run: executorch did not import" for r in later)
    (other,) = probe.run(ctx(tmp_path, distribution="numpy"))
    assert other.status == SKIP and "neither is nor depends on executorch" in other.reason
