"""The trace judge (archaudit.smoke.trace_judge): each launch the tracer recorded, tied to the
container it came from and judged against check's prediction for the GPU.

The records are the tracer's own (cupti.Recorder, tests/smoke_helpers.py) around the cubins
cuobjdump extracts from the nvcc-built fixtures in tests/fixtures/trace/; the inventory is
check's, of those fixtures, read by archaudit's reader.
"""

from __future__ import annotations

from archaudit.smoke import cupti
from archaudit.smoke.report import FAIL, PASS, SKIP
from archaudit.smoke.trace_judge import judge_trace
from archaudit.smoke.trace_records import read_trace
from smoke_helpers import BF16, H100, SM80, SM90, TRACE_BIN, TRACE_LIBS, api_exit, inventory, judged


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
    t = read_trace(str(out))
    rows = judge_trace(t, inventory(TRACE_LIBS, set()), H100, (13, 0))
    assert [(r.subject, r.status) for r in rows] == [("code no file holds", SKIP), ("tracer", FAIL), ("tracer", FAIL)]
    assert "triton_poi_fused_0" in rows[0].reason
    assert "the tracer did not start: no libcupti" in rows[1].reason + rows[2].reason


ABSENT = "_Z18bf16_absent_kernelP13__nv_bfloat16fi"


F32 = "_Z16f32_scale_kernelPffi"


def test_a_kernel_absent_from_the_ptx_the_driver_picks_fails_as_check_predicts(tmp_path):
    """bf16_absent_kernel exists only for __CUDA_ARCH__ >= 800; built 7.5+PTX;8.0, 9.0 gets the
    compute_75 PTX, which lacks it: the launch fails with 500, and check's inventory says so (the
    f32 kernel beside it runs there from that PTX)."""
    lib = TRACE_BIN / "lib_trace_bf16_absent.so"
    rec = cupti.Recorder()
    for name, code in ((F32, 0), (ABSENT, 500)):
        api_exit(rec, cupti.DOMAIN_RUNTIME_API, 211, name, code)
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, F32, 0)
    out = tmp_path
    rec.write(str(out))
    t = read_trace(str(out))
    rows = judge_trace(t, inventory([lib], set()), H100, (13, 0))
    by = {(r.subject, r.status): r for r in rows}
    refused = by[(f"lib_trace_bf16_absent.so: {ABSENT}", PASS)]
    assert "failed with not found (500), as check predicted" in refused.reason
    assert "sm_75 PTX on GPU 9.0, which does not define" in refused.reason and "sm_80 only" in refused.reason
    served = by[("lib_trace_bf16_absent.so", PASS)]
    assert "sm_75 PTX (JIT)" in served.reason
    assert [r.status for r in rows] == [PASS, PASS]
