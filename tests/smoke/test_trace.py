"""The trace probe without a GPU: the records its tracer writes, the probe's rows without a GPU,
and the trace in every report format and in the index.

The records are made by the tracer's own callback (cupti.Recorder, through its ctypes callback
pointer), fed the structs CUPTI hands it (CUpti_ResourceData, CUpti_ModuleResourceData,
CUpti_CallbackData, laid out as cupti_callbacks.h says) around real images: the cubins
cuobjdump extracts from the nvcc-built fixtures in tests/fixtures/trace/ (tests/smoke_helpers.py).
The parent's judgement of them is tested in test_trace_judge.py, the inventory it is judged
against in test_trace_inventory.py, the reading of the records in test_trace_records.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from archaudit.report import smoke as render
from archaudit.smoke import probes, trace
from archaudit.smoke.report import FAIL, SKIP, SmokeReport
from smoke_helpers import H100, judged, probe_context


def test_without_a_gpu_the_probe_skips_and_require_gpu_makes_it_fail(tmp_path):
    skip = probes.TraceProbe().run(probe_context(tmp_path))
    assert [(r.status, r.subject) for r in skip] == [(SKIP, "torch")]
    assert "no launch to trace: cuInit failed: no device" in skip[0].reason
    fail = probes.TraceProbe().run(probe_context(tmp_path, require_gpu=True))
    assert [r.status for r in fail] == [FAIL] and fail[0].reason.startswith("--require-gpu: this must run on a GPU")
    other = probes.TraceProbe().run(probe_context(tmp_path, distribution="numpy"))
    assert other[0].status == SKIP and "no --run COMMAND was given: no workload to trace" in other[0].reason
    # a --run command is traced whatever the distribution is; without a GPU it is the same SKIP
    run = probes.TraceProbe().run(probe_context(tmp_path, distribution="numpy", run_command="python -c pass"))
    assert run[0].status == SKIP and "no launch to trace" in run[0].reason


def test_every_report_format_carries_the_trace(tmp_path):
    rows = tuple(judged(tmp_path))
    report = SmokeReport(
        "torch", "torch", "2.11.0", "installed", "3.12", ("GPU0 NVIDIA H100 (sm_90)",), None, "13.0", False, 60.0, rows
    )
    for fmt in render.RENDERERS:
        text = render.render(report, fmt)
        if fmt == "markdown":  # names are escaped there, as check's are
            text = text.replace("\\_", "_")
        # the failed launch check predicted, the library's dispatch (a notice where only failures
        # show), and the kernel that failed while it ran
        if fmt not in ("github", "sarif"):
            assert "lib_trace_sm80.so" in text and "as check predicted" in text, fmt
        assert "from 1 of its 2 container(s): 1 sm_90 SASS" in text, fmt
        assert "cuCtxSynchronize returned error 719" in text, fmt


def test_the_index_stores_a_trace_and_query_dispatch_says_which_containers_served(tmp_path):
    from archaudit.cli import main

    rows = tuple(judged(tmp_path))
    report = SmokeReport(
        "torch", "torch", "2.11.0", "installed", "3.12", ("GPU0 NVIDIA H100 (sm_90)",), None, "13.0", False, 60.0, rows
    )
    path = tmp_path / "smoke.json"
    path.write_text(render.render(report, "json"))
    db = str(tmp_path / "index.db")
    assert main(["index", "--db", db, "--trace", str(path), "-q"]) == 0
    assert main(["index", "--db", db, "--trace", str(path), "-q"]) == 0  # the same report: stored once
    out = tmp_path / "dispatch.json"
    assert main(["query", "dispatch", "--db", db, "--gpu", "sm_90", "--format", "json", "-o", str(out)]) == 0
    table = json.loads(out.read_text())
    got = [(r["library"], r["container"], r["served"], r["launches"]) for r in table["rows"]]
    assert got == [("lib_trace_bf16_ptx75.so", 1, "sm_75 PTX (JIT)", 1), ("lib_trace_sm90.so", 1, "sm_90 SASS", 3)]
    assert main(["query", "dispatch", "--db", db, "--gpu", "sm_100", "--format", "json", "-o", str(out)]) == 0
    assert json.loads(out.read_text())["rows"] == []
    (tmp_path / "not.json").write_text('{"schema": "archaudit-check/1"}')
    assert main(["index", "--db", db, "--trace", str(tmp_path / "not.json"), "-q"]) == 2


def test_the_workload_children_carry_the_tracer_and_a_tracer_that_cannot_start_fails(tmp_path):
    """End to end without a GPU: the sweep and model-torch children start the tracer before any
    workload (here CUPTI refuses: no driver, or no libcupti), say why in their records directory,
    and the parent turns that into a FAIL; the workload's own rows say torch is not importable."""
    rows = probes.TraceProbe().run(
        probe_context(tmp_path, gpus=(H100,), gpu_error=None, driver="13.0", child_env=dict(os.environ))
    )
    tracer = [r for r in rows if r.subject == "tracer"]
    assert tracer and all(
        r.status == FAIL and "the tracer did not start: no libcupti here both loads and subscribes" in r.reason
        for r in tracer
    )
    assert len(tracer) == 2  # the sweep's child and model-torch's, each its own process
    sweep = [r for r in rows if r.subject.startswith("torch ")]
    assert [r.subject for r in sweep] == [f"torch {s}" for s in trace.SWEEP]
    assert all(r.status == FAIL and "not importable here" in r.reason for r in sweep)
    assert [r.subject for r in rows if r.subject.startswith("model-torch: ")] == [
        "model-torch: torch nn.Linear(64, 32), weights from a file",
        "model-torch: torch nn.Conv2d(3, 8, 3), weights from a file",
    ]


def test_the_command_line_runs_the_trace_for_run_and_require_gpu_fails_without_a_gpu(no_gpu):
    """`smoke --run COMMAND` adds the trace probe to the probes asked for; with no GPU it skips, and
    under --require-gpu it fails (exit 1)."""
    cmd = [
        sys.executable,
        "-m",
        "archaudit",
        "smoke",
        "--installed",
        "pytest",
        "--probe",
        "load",
        "--run",
        "python -c pass",
        "--format",
        "json",
    ]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2] / "src"))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [r for r in json.loads(done.stdout)["rows"] if r["probe"] == "trace"]
    assert [(r["status"], r["subject"]) for r in rows] == [(SKIP, "pytest")]
    assert rows[0]["reason"].startswith("no launch to trace: ")
    strict = subprocess.run([*cmd, "--require-gpu"], capture_output=True, text=True, env=env, timeout=300)
    assert strict.returncode == 1, strict.stderr
    rows = [r for r in json.loads(strict.stdout)["rows"] if r["probe"] == "trace"]
    assert rows[0]["status"] == FAIL and rows[0]["reason"].startswith("--require-gpu: this must run on a GPU")
