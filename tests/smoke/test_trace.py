"""The trace probe without a GPU: the records its tracer writes, and the parent's judgement of them.

The records are made by the tracer's own callback (cupti.Recorder, through its ctypes callback
pointer), fed the structs CUPTI hands it (CUpti_ResourceData, CUpti_ModuleResourceData,
CUpti_CallbackData, laid out as cupti_callbacks.h says) around real images: the cubins
cuobjdump extracts from the nvcc-built fixtures in tests/fixtures/trace/. The judge is
archaudit's own, against check's inventory of those fixtures read by archaudit's reader.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from archaudit.read.library import scan_file
from archaudit.report import smoke as render
from archaudit.smoke import cupti, probes, trace, trace_inventory
from archaudit.smoke.report import FAIL, PASS, SKIP, SmokeReport
from smoke_helpers import BF16, H100, SM80, SM90, TRACE_BIN, api_exit, cubins, inventory, judged, load_module

HERE = Path(__file__).parents[1]
BIN = TRACE_BIN
LIBS = [BIN / "lib_trace_sm90.so", BIN / "lib_trace_sm80.so", BIN / "lib_trace_bf16_ptx75.so"]


def test_the_judge_ties_each_launch_to_its_container_and_agrees_with_check(tmp_path):
    rows = judged(tmp_path)
    by = {(r.subject, r.status): r for r in rows}
    served = by[("lib_trace_sm90.so", PASS)]
    details = dict(served.details)
    assert details["launches"] == 3 and details["launches_by_name"] == 0  # identified by its bytes
    containers = details["containers"]
    assert isinstance(containers, list) and [c["served"] for c in containers] == ["sm_90 SASS"]
    assert "none of its 0 container(s) without code for sm_90 was used" in served.reason
    refused = by[(f"lib_trace_sm80.so: {SM80}", PASS)]
    assert "failed with no kernel image for this GPU (209), as check predicted" in refused.reason
    assert "predicted none" in refused.reason
    ptx = by[("lib_trace_bf16_ptx75.so", PASS)]  # the PTX JIT serves 9.0: check says it runs there
    assert "sm_75 PTX (JIT)" in ptx.reason and dict(ptx.details)["launches_by_name"] == 1
    trap = by[(BF16, FAIL)]  # ... and the kernel then traps: a failed run is never passed
    assert "cuCtxSynchronize returned error 719" in trap.reason  # one row: the runtime's report is the same error
    assert sorted(r.status for r in rows) == [FAIL, PASS, PASS, PASS]


def test_a_failed_launch_check_said_runs_is_a_false_pass_of_check(tmp_path):
    rows = judged(tmp_path, sm90_fails=True)
    bad = [r for r in rows if r.subject == f"lib_trace_sm90.so: {SM90}"]
    assert len(bad) == 1 and bad[0].status == FAIL
    assert bad[0].reason.startswith("a false pass of check: 3 launch(es)")
    assert "container 1" in bad[0].reason and "predicted native" in bad[0].reason


def test_a_kernel_that_ran_from_a_container_without_code_for_the_gpu_fails(tmp_path):
    rows = judged(tmp_path, sm80_runs=True)
    bad = [r for r in rows if r.subject.startswith("lib_trace_sm80.so container")]
    assert len(bad) == 1 and bad[0].status == FAIL
    assert "from code check predicts cannot run there" in bad[0].reason


def test_launches_from_code_no_file_holds_are_said_and_unreadable_records_fail(tmp_path):
    rec = cupti.Recorder()
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, "triton_poi_fused_0", 0)
    out = tmp_path / "r"
    out.mkdir()
    rec.write(str(out))
    (out / "999.json").write_text("[1, 2")
    (out / "998.error").write_text("no libcupti could be loaded")
    t = trace.read_trace(str(out))
    rows = trace.judge_trace(t, inventory(LIBS, set()), H100, (13, 0))
    assert [(r.subject, r.status) for r in rows] == [("code no file holds", SKIP), ("tracer", FAIL), ("tracer", FAIL)]
    assert "triton_poi_fused_0" in rows[0].reason
    assert "the tracer did not start: no libcupti" in rows[1].reason + rows[2].reason


def ctx(tmp_path: Path, **kw: object) -> probes.ProbeContext:
    base: dict[str, object] = dict(
        python=sys.executable,
        distribution="torch",
        version="2.11.0",
        requires=(),
        location=str(tmp_path),
        files=(),
        gpus=(),
        gpu_error="cuInit failed: no device",
        require_gpu=False,
        timeout=60.0,
        workdir=str(tmp_path),
        child_env={},
    )
    base.update(kw)
    return probes.ProbeContext(**base)  # type: ignore[arg-type]


def test_without_a_gpu_the_probe_skips_and_require_gpu_makes_it_fail(tmp_path):
    skip = probes.TraceProbe().run(ctx(tmp_path))
    assert [(r.status, r.subject) for r in skip] == [(SKIP, "torch")]
    assert "no launch to trace: cuInit failed: no device" in skip[0].reason
    fail = probes.TraceProbe().run(ctx(tmp_path, require_gpu=True))
    assert [r.status for r in fail] == [FAIL] and fail[0].reason.startswith("--require-gpu: this must run on a GPU")
    other = probes.TraceProbe().run(ctx(tmp_path, distribution="numpy"))
    assert other[0].status == SKIP and "no --run COMMAND was given: no workload to trace" in other[0].reason
    # a --run command is traced whatever the distribution is; without a GPU it is the same SKIP
    run = probes.TraceProbe().run(ctx(tmp_path, distribution="numpy", run_command="python -c pass"))
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
        ctx(tmp_path, gpus=(H100,), gpu_error=None, driver="13.0", child_env=dict(os.environ))
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
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "src"))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [r for r in json.loads(done.stdout)["rows"] if r["probe"] == "trace"]
    assert [(r["status"], r["subject"]) for r in rows] == [(SKIP, "pytest")]
    assert rows[0]["reason"].startswith("no launch to trace: ")
    strict = subprocess.run([*cmd, "--require-gpu"], capture_output=True, text=True, env=env, timeout=300)
    assert strict.returncode == 1, strict.stderr
    rows = [r for r in json.loads(strict.stdout)["rows"] if r["probe"] == "trace"]
    assert rows[0]["status"] == FAIL and rows[0]["reason"].startswith("--require-gpu: this must run on a GPU")


ABSENT = "_Z18bf16_absent_kernelP13__nv_bfloat16fi"
F32 = "_Z16f32_scale_kernelPffi"


def test_a_kernel_absent_from_the_ptx_the_driver_picks_fails_as_check_predicts():
    """bf16_absent_kernel exists only for __CUDA_ARCH__ >= 800; built 7.5+PTX;8.0, 9.0 gets the
    compute_75 PTX, which lacks it: the launch fails with 500, and check's inventory says so (the
    f32 kernel beside it runs there from that PTX)."""
    lib = BIN / "lib_trace_bf16_absent.so"
    rec = cupti.Recorder()
    for name, code in ((F32, 0), (ABSENT, 500)):
        api_exit(rec, cupti.DOMAIN_RUNTIME_API, 211, name, code)
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, F32, 0)
    out = Path(tempfile.mkdtemp())
    rec.write(str(out))
    t = trace.read_trace(str(out))
    rows = trace.judge_trace(t, inventory([lib], set()), H100, (13, 0))
    by = {(r.subject, r.status): r for r in rows}
    refused = by[(f"lib_trace_bf16_absent.so: {ABSENT}", PASS)]
    assert "failed with not found (500), as check predicted" in refused.reason
    assert "sm_75 PTX on GPU 9.0, which does not define" in refused.reason and "sm_80 only" in refused.reason
    served = by[("lib_trace_bf16_absent.so", PASS)]
    assert "sm_75 PTX (JIT)" in served.reason
    assert [r.status for r in rows] == [PASS, PASS]


def _framed_library(tmp_path: Path) -> tuple[bytes, Path, int]:
    """The sm_90 cubin of lib_trace_sm90.so as a bare zstd frame after a host library's bytes (as
    cuBLASLt 13.1 keeps cubins in .ldata): the image, the file, the frame's offset."""
    import zstandard

    image = [i for i in cubins("lib_trace_sm90.so", tmp_path) if SM90 in cupti.cubin_functions(i)][0]
    host = (BIN / "lib_trace_sm80.so").read_bytes()
    lib = tmp_path / "libloose.so"
    lib.write_bytes(host + b"\0" * 13 + zstandard.ZstdCompressor().compress(image) + b"\0" * 7)
    return image, lib, len(host) + 13


def _launched_from(tmp_path: Path, image: bytes) -> trace.Trace:
    rec = cupti.Recorder()
    load_module(rec, image, 1)
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, SM90, 0)
    out = tmp_path / "records"
    out.mkdir()
    rec.write(str(out))
    return trace.read_trace(str(out))


def test_a_launch_from_a_cubin_stored_as_a_zstd_frame_is_tied_to_its_container(tmp_path):
    """check reads a cubin a library keeps as a bare zstd frame (role cubin, its entry the frame):
    the image the driver loaded is that frame decoded, so its launch is tied to the container by
    its bytes and judged against check's prediction; nothing is left unread."""
    image, lib, at = _framed_library(tmp_path)
    t = _launched_from(tmp_path, image)
    inv = inventory([lib], {m.size for m in t.modules})
    ((li, ci, ei),) = [(s.library, s.container, s.entry) for s in inv.by_hash[hashlib.sha256(image).hexdigest()]]
    c = inv.libraries[li][1].containers[ci]
    assert ei is not None  # tied by its bytes, so the entry is known
    assert (c.role, c.offset, c.entries[ei].compression, c.entries[ei].size) == ("cubin", at, "zstd", len(image))
    assert inv.index_loose([str(lib)], t.modules) == [] and inv.loose == {}
    rows = trace.judge_trace(t, inv, H100, (13, 0))
    assert [(r.subject, r.status) for r in rows] == [("libloose.so", PASS)]
    assert "1 launch(es) of 1 kernel(s)" in rows[0].reason and "sm_90 SASS" in rows[0].reason


def test_a_launch_from_a_frame_check_could_not_read_is_not_skipped(tmp_path):
    """Just outside it: a frame check refuses (here past a verification bound smaller than the
    cubin: E012) holds no container, so a launch from it is tied to the file and frame, and fails,
    never SKIPs."""
    image, lib, at = _framed_library(tmp_path)
    t = _launched_from(tmp_path, image)
    scanned = scan_file(str(lib), decode=True, max_payload=len(image) - 1)
    assert "E012" in [p.code for p in scanned.problems]
    inv = trace.Inventory([(lib.name, scanned)])
    inv.index_kernels()
    assert inv.index_hashes([str(lib)], {m.size for m in t.modules}) == []
    assert hashlib.sha256(image).hexdigest() not in inv.by_hash  # not in check's containers
    assert inv.index_loose([str(lib)], t.modules) == []
    assert inv.loose == {hashlib.sha256(image).hexdigest(): ("libloose.so", at)}
    rows = trace.judge_trace(t, inv, H100, (13, 0))
    assert [(r.subject, r.status) for r in rows] == [("libloose.so", FAIL)]
    assert f"bare zstd frames at 0x{at:x}): check does not read them" in rows[0].reason
    assert SM90 in rows[0].reason


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_loose_frames_are_found_across_read_boundaries(tmp_path, monkeypatch, chunk):
    import zstandard

    images = [b"\x7fELF" + bytes([k]) * (3000 + k) for k in range(3)]
    blob = bytearray(b"x" * 50)
    offsets = []
    for image in images:
        offsets.append(len(blob))
        blob += zstandard.ZstdCompressor().compress(image) + b"\x28\xb5\x2f\xfd" + b"y" * 5  # a stray magic too
    path = tmp_path / "blob"
    path.write_bytes(bytes(blob))
    monkeypatch.setattr(trace_inventory, "CHUNK", chunk)
    got = trace_inventory.loose_cubins(str(path), {len(i) for i in images[:2]}, 100)
    assert got == [(o, hashlib.sha256(i).hexdigest()) for o, i in zip(offsets[:2], images[:2])]
    # the budget bounds the decoding
    assert trace_inventory.loose_cubins(str(path), {len(i) for i in images}, 1) == got[:1]
