"""The trace probe without a GPU: the records its tracer writes, and the parent's judgement of them.

The records are made by the tracer's own callback (cupti.Recorder, through its ctypes callback
pointer), fed the structs CUPTI hands it (CUpti_ResourceData, CUpti_ModuleResourceData,
CUpti_CallbackData, laid out as cupti_callbacks.h says) around real images: the cubins
cuobjdump extracts from the nvcc-built fixtures in tests/fixtures/trace/. The judge is
archaudit's own, against check's inventory of those fixtures read by archaudit's reader.
"""

from __future__ import annotations

import ctypes
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
from archaudit.smoke.report import FAIL, PASS, SKIP, Row, SmokeReport

HERE = Path(__file__).parents[1]
BIN = HERE / "fixtures" / "trace" / "bin"
H100 = {"ordinal": 0, "name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "sm": "sm_90"}
CTX = 0x5000  # a context handle, as CUPTI passes it
SM90 = "_Z18hopper_axpy_kernelPfPKffi"
SM80 = "_ZN12cutlass_like11gemm_kernelINS_4Sm80EEEvPfPKfS4_i"
BF16 = "_Z17bf16_scale_kernelP13__nv_bfloat16fi"


def cubins(lib: str, tmp_path: Path) -> list[bytes]:
    """The cubins of a fixture library, as cuobjdump extracts them (the oracle, not archaudit's reader)."""
    sys.path.insert(0, str(HERE))
    import oracle

    tool = oracle.find_cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump is not installed (pip install nvidia-cuda-cuobjdump)")
    out = Path(tempfile.mkdtemp(prefix=lib, dir=tmp_path))
    subprocess.run([tool, "-xelf", "all", str(BIN / lib)], cwd=out, check=True, capture_output=True)
    return [p.read_bytes() for p in sorted(out.glob("*.cubin"))]


def load_module(rec: cupti.Recorder, image: bytes, module_id: int) -> None:
    """CUPTI_CBID_RESOURCE_MODULE_LOADED with the image, through the tracer's callback pointer."""
    buf = ctypes.create_string_buffer(image, len(image))
    md = cupti.ModuleResourceData(module_id, len(image), ctypes.cast(buf, ctypes.c_void_p))
    rd = cupti.ResourceData(CTX, None, ctypes.cast(ctypes.pointer(md), ctypes.c_void_p))
    rec.callback(None, cupti.DOMAIN_RESOURCE, cupti.CBID_RESOURCE_MODULE_LOADED, ctypes.addressof(rd))


def api_exit(rec: cupti.Recorder, domain: int, cbid: int, name: str, result: int) -> None:
    """A driver or runtime API call's exit callback, with its return value and symbol name."""
    ret = ctypes.c_int(result)
    cd = cupti.CallbackData(
        cupti.API_EXIT,
        b"api",
        None,
        ctypes.cast(ctypes.pointer(ret), ctypes.c_void_p),
        name.encode() if name else None,
        CTX,
        1,
        None,
        7,
    )
    rec.callback(None, domain, cbid, ctypes.addressof(cd))


def recorded(tmp_path: Path, *, sm90_fails: bool = False, sm80_runs: bool = False) -> Path:
    """Records as the tracer writes them for the fixture run: sm_90 launched three times from its
    module; the sm_80-only kernel refused by the runtime with 209; the bf16 kernel's trap seen at
    cudaDeviceSynchronize (719)."""
    rec = cupti.Recorder()
    for k, image in enumerate(cubins("lib_trace_sm90.so", tmp_path)):
        load_module(rec, image, k + 1)
    for _ in range(3):
        api_exit(rec, cupti.DOMAIN_RUNTIME_API, 211, SM90, 209 if sm90_fails else 0)
        if not sm90_fails:
            api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, SM90, 0)
    api_exit(rec, cupti.DOMAIN_RUNTIME_API, 211, SM80, 0 if sm80_runs else 209)
    if sm80_runs:
        api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, SM80, 0)
    api_exit(rec, cupti.DOMAIN_RUNTIME_API, 211, BF16, 0)
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, BF16, 0)
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 17, "", 719)  # cuCtxSynchronize under cudaDeviceSynchronize
    api_exit(rec, cupti.DOMAIN_RUNTIME_API, 165, "", 719)
    out = tmp_path / "records"
    out.mkdir()
    rec.write(str(out))
    return out


def inventory(paths: list[Path], sizes: set[int]) -> trace.Inventory:
    inv = trace.Inventory([(p.name, scan_file(str(p), decode=True)) for p in paths])
    inv.index_kernels()
    assert inv.index_hashes([str(p) for p in paths], sizes) == []
    return inv


LIBS = [BIN / "lib_trace_sm90.so", BIN / "lib_trace_sm80.so", BIN / "lib_trace_bf16_ptx75.so"]


def judged(tmp_path: Path, **kw: bool) -> list[Row]:
    t = trace.read_trace(str(recorded(tmp_path, **kw)))
    return trace.judge_trace(t, inventory(LIBS, {m.size for m in t.modules}), H100, (13, 0))


def test_the_recorder_counts_launches_per_kernel_and_result_and_hashes_each_image(tmp_path):
    images = cubins("lib_trace_sm90.so", tmp_path)
    raw = json.loads(next(recorded(tmp_path).glob("*.json")).read_text())
    assert sorted(m["sha256"] for m in raw["modules"]) == sorted(hashlib.sha256(i).hexdigest() for i in images)
    by = {(r["layer"], r["kernel"], r["code"]): r for r in raw["launches"]}
    assert by[("runtime", SM90, 0)]["count"] == 3 and by[("driver", SM90, 0)]["count"] == 3
    assert by[("runtime", SM80, 209)]["count"] == 1
    # the kernel is tied to the one image that defines it, by that image's bytes
    defining = [hashlib.sha256(i).hexdigest() for i in images if SM90 in cupti.cubin_functions(i)]
    assert len(defining) == 1 and by[("driver", SM90, 0)]["modules"] == defining
    assert raw["async_errors"] == [
        {"layer": "driver", "api": "cuCtxSynchronize", "code": 719, "context": CTX, "after": BF16},
        {"layer": "runtime", "api": "cudaDeviceSynchronize", "code": 719, "context": CTX, "after": BF16},
    ]
    assert str(BIN / "lib_trace_sm90.so") not in raw["mapped"]  # the test process never dlopened it


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


def test_cubin_functions_reads_the_text_sections_of_a_real_cubin(tmp_path):
    images = cubins("lib_trace_sm80.so", tmp_path)
    assert [cupti.cubin_functions(i) for i in images] == [[], [SM80]]
    assert cupti.cubin_functions(b"not an elf") == []


def test_the_bootstrap_traces_a_plain_python_process_and_reports_why_it_could_not(tmp_path):
    """A traced command's Python processes import the bootstrap; without a GPU, CUPTI refuses to
    subscribe, and the process says so in its .error file instead of dying."""
    boot = cupti.write_bootstrap(str(tmp_path / "boot"))
    out = tmp_path / "out"
    out.mkdir()
    env = {
        "PYTHONPATH": boot,
        cupti.ENV_OUT: str(out),
        cupti.ENV_MODULE: cupti.__file__,
        "PATH": "/usr/bin:/bin",
        cupti.ENV_CUPTI: str(tmp_path / "no-such-libcupti.so"),
    }
    done = subprocess.run(
        [sys.executable, "-c", "import sys; print('ran', 'sitecustomize' in sys.modules)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ran True"
    errors = list(out.glob("*.error"))
    # the libcupti named is not there; the next one found (the toolkit's, a wheel's) refuses to subscribe
    text = errors[0].read_text() if len(errors) == 1 else ""
    assert text.startswith("no libcupti here both loads and subscribes: ")
    assert f"{tmp_path / 'no-such-libcupti.so'}: no libcupti could be loaded" in text
    assert trace.read_trace(str(out)).problems[0].endswith(errors[0].read_text()[:2000])


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


def cupti_include() -> Path | None:
    """The CUDA toolkit's include directory with CUPTI's headers, beside nvcc, if there is one."""
    import shutil

    nvcc = shutil.which("nvcc")
    for base in ([Path(nvcc).resolve().parents[1]] if nvcc else []) + [Path("/usr/local/cuda")]:
        for inc in (base / "include", base / "extras" / "CUPTI" / "include"):
            if (inc / "cupti_callbacks.h").is_file():
                return inc
    return None


def test_the_ctypes_layouts_are_the_cupti_headers(tmp_path):
    """sizeof and offsetof of the three structs and the enum values, as a C compiler reads CUPTI's
    headers, against the ctypes layouts and constants of cupti.py."""
    import shutil

    inc = cupti_include()
    cc = shutil.which("gcc") or shutil.which("cc")
    if inc is None or cc is None:
        pytest.skip("no CUPTI headers (a CUDA toolkit) or no C compiler here")
    fields = {
        "CUpti_CallbackData": cupti.CallbackData,
        "CUpti_ResourceData": cupti.ResourceData,
        "CUpti_ModuleResourceData": cupti.ModuleResourceData,
    }
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <cupti.h>", "int main(void) {"]
    for cname, struct in fields.items():
        lines.append(f'printf("{cname} size %zu\\n", sizeof({cname}));')
        for f, *_ in struct._fields_:
            cf = "resourceHandle.stream" if f == "resourceHandle" else f
            lines.append(f'printf("{cname} {f} %zu\\n", offsetof({cname}, {cf}));')
    enums = {
        "CUPTI_CB_DOMAIN_DRIVER_API": cupti.DOMAIN_DRIVER_API,
        "CUPTI_CB_DOMAIN_RUNTIME_API": cupti.DOMAIN_RUNTIME_API,
        "CUPTI_CB_DOMAIN_RESOURCE": cupti.DOMAIN_RESOURCE,
        "CUPTI_API_EXIT": cupti.API_EXIT,
        "CUPTI_CBID_RESOURCE_MODULE_LOADED": cupti.CBID_RESOURCE_MODULE_LOADED,
    }
    enums |= {f"CUPTI_DRIVER_TRACE_CBID_{n}": k for k, n in {**cupti.DRIVER_LAUNCHES, **cupti.DRIVER_SYNCS}.items()}
    enums |= {f"CUPTI_RUNTIME_TRACE_CBID_{n}": k for k, n in {**cupti.RUNTIME_LAUNCHES, **cupti.RUNTIME_SYNCS}.items()}
    lines += [f'printf("enum {e} %d\\n", (int){e});' for e in enums]
    lines += ["return 0; }"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, f"-I{inc}", "-o", str(exe), str(src)], check=True, capture_output=True)
    got = dict(
        line.rsplit(" ", 1)
        for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    )
    for cname, struct in fields.items():
        assert int(got[f"{cname} size"]) == ctypes.sizeof(struct), cname
        for f, *_ in struct._fields_:
            assert int(got[f"{cname} {f}"]) == getattr(struct, f).offset, (cname, f)
    assert {e: int(got[f"enum {e}"]) for e in enums} == enums


ABSENT = "_Z18bf16_absent_kernelP13__nv_bfloat16fi"
F32 = "_Z16f32_scale_kernelPffi"


def test_a_refused_runtime_launch_without_a_symbol_name_is_named_from_its_host_stub():
    """CUPTI gives no symbolName for a launch the runtime refuses (209 on the H100): the params'
    host stub `func` is named from the library's symbol table (nvcc's stubs are static)."""
    path = BIN / "lib_trace_sm80.so"
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        pytest.skip(f"the fixture does not load here (its CUDA runtime): {exc}")
    funcs = cupti.elf_functions(str(path))
    assert funcs is not None and funcs[0]
    stub = [a for a, n in funcs[1].items() if cupti.kernel_of_stub(n) == SM80]
    assert stub  # the stub carries the kernel's name, with the internal-linkage marker
    info = cupti.DlInfo()
    libc = ctypes.CDLL(None)
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(cupti.DlInfo)]
    assert libc.dladdr(ctypes.cast(lib.trace_launch, ctypes.c_void_p), ctypes.byref(info))
    params = (ctypes.c_void_p * 8)(info.dli_fbase + stub[0])  # cudaLaunchKernel_v7000_params: func first
    rec = cupti.Recorder()
    ret = ctypes.c_int(209)
    cd = cupti.CallbackData(
        cupti.API_EXIT,
        b"cudaLaunchKernel",
        ctypes.cast(params, ctypes.c_void_p),
        ctypes.cast(ctypes.pointer(ret), ctypes.c_void_p),
        None,
        CTX,
        1,
        None,
        7,
    )
    rec.callback(None, cupti.DOMAIN_RUNTIME_API, 211, ctypes.addressof(cd))
    params[0] = info.dli_fbase + stub[0] + 1  # not a function's start: no name, never a guess
    rec.callback(None, cupti.DOMAIN_RUNTIME_API, 211, ctypes.addressof(cd))
    assert {(k[2], k[3]): n for k, n in rec.counts.items()} == {(SM80, 209): 1, ("", 209): 1}
    assert rec.callback_errors == []


def test_kernel_of_stub_drops_only_the_internal_linkage_marker():
    assert cupti.kernel_of_stub("_ZN12cutlass_likeL11gemm_kernelINS_4Sm80EEEvPfPKfS4_i") == SM80
    assert cupti.kernel_of_stub("_ZL3foov") == "_Z3foov"
    assert cupti.kernel_of_stub("_Z11hasL3insidev") == "_Z11hasL3insidev"
    assert cupti.kernel_of_stub("_ZN2ns5kernelILi128EEEvv") == "_ZN2ns5kernelILi128EEEvv"


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


def test_the_launched_function_fields_are_the_params_structs_of_the_headers(tmp_path):
    """Where a launch's params hold the host stub (runtime) or CUfunction (driver), as a C compiler
    reads the generated_*_meta.h headers beside CUPTI's: offsetof == 8 * the field index cupti.py reads."""
    import shutil

    inc = cupti_include()
    cc = shutil.which("gcc") or shutil.which("cc")
    if inc is None or cc is None or not (inc / "generated_cuda_meta.h").is_file():
        pytest.skip("no CUDA toolkit headers or no C compiler here")
    structs = {f"{n}_params": ("func", cupti.RUNTIME_FUNC_FIELD[k]) for k, n in cupti.RUNTIME_LAUNCHES.items()}
    structs |= {f"{n}_params": ("f", cupti.DRIVER_FUNC_FIELD[k]) for k, n in cupti.DRIVER_LAUNCHES.items()}
    # the legacy (_v1) typedefs the driver's meta header names are declared only for the API's own build
    lines = [
        "#include <stdio.h>",
        "#include <stddef.h>",
        "#define __CUDA_API_VERSION_INTERNAL 1",
        "#include <cuda.h>",
        "#include <cuda_runtime_api.h>",
        "#include <generated_cuda_meta.h>",
        "#include <generated_cuda_runtime_api_meta.h>",
        "int main(void) {",
    ]
    lines += [f'printf("{s} %zu\\n", offsetof({s}, {f}));' for s, (f, _) in structs.items()]
    lines += ["return 0; }"]
    src = tmp_path / "params.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "params"
    subprocess.run([cc, f"-I{inc}", "-o", str(exe), str(src)], check=True, capture_output=True)
    got = dict(
        line.rsplit(" ", 1)
        for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    )
    assert {s: int(v) for s, v in got.items()} == {s: 8 * at for s, (_, at) in structs.items()}


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
