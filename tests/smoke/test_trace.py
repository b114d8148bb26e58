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

import ctypes
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from archaudit.report import smoke as render
from archaudit.smoke import cupti, probes, trace
from archaudit.smoke.report import FAIL, SKIP, SmokeReport
from smoke_helpers import BF16, CUPTI_CTX, H100, SM80, SM90, TRACE_BIN, cubins, judged, probe_context, recorded


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
        {"layer": "driver", "api": "cuCtxSynchronize", "code": 719, "context": CUPTI_CTX, "after": BF16},
        {"layer": "runtime", "api": "cudaDeviceSynchronize", "code": 719, "context": CUPTI_CTX, "after": BF16},
    ]
    assert str(TRACE_BIN / "lib_trace_sm90.so") not in raw["mapped"]  # the test process never dlopened it


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


def test_a_refused_runtime_launch_without_a_symbol_name_is_named_from_its_host_stub():
    """CUPTI gives no symbolName for a launch the runtime refuses (209 on the H100): the params'
    host stub `func` is named from the library's symbol table (nvcc's stubs are static)."""
    path = TRACE_BIN / "lib_trace_sm80.so"
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
        CUPTI_CTX,
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
