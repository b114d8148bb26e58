"""The launch tracer (smoke/cupti.py) without a GPU: its callback fed the structs CUPTI hands it
(CUpti_ResourceData, CUpti_ModuleResourceData, CUpti_CallbackData) around the cubins cuobjdump
extracts from the nvcc-built fixtures in tests/fixtures/trace/, the records it writes, its ctypes
layouts against CUPTI's headers as a C compiler reads them, the names it gives a refused launch,
and the bootstrap a traced command imports.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from archaudit.smoke import cupti, trace
from smoke_helpers import BF16, CUPTI_CTX as CTX, SM80, SM90, TRACE_BIN as BIN, api_exit, cubins, recorded


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


def cupti_include() -> Path | None:
    """The CUDA toolkit's include directory with CUPTI's headers, beside nvcc, if there is one."""
    import shutil

    nvcc = shutil.which("nvcc")
    for base in ([Path(nvcc).resolve().parents[1]] if nvcc else []) + [Path("/usr/local/cuda")]:
        for inc in (base / "include", base / "extras" / "CUPTI" / "include"):
            if (inc / "cupti_callbacks.h").is_file():
                return inc
    return None


def c_printout(exe: Path, cc: str, include: Path, lines: list[str]) -> dict[str, str]:
    """Compile a C program of ``lines`` against the CUPTI headers and run it: each line it prints,
    "NAME VALUE", as NAME -> VALUE."""
    src = exe.with_suffix(".c")
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([cc, f"-I{include}", "-o", str(exe), str(src)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return dict(line.rsplit(" ", 1) for line in out.splitlines())


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
    got = c_printout(tmp_path / "layout", cc, inc, lines)
    for cname, struct in fields.items():
        assert int(got[f"{cname} size"]) == ctypes.sizeof(struct), cname
        for f, *_ in struct._fields_:
            assert int(got[f"{cname} {f}"]) == getattr(struct, f).offset, (cname, f)
    assert {e: int(got[f"enum {e}"]) for e in enums} == enums


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
    got = c_printout(tmp_path / "params", cc, inc, lines)
    assert {s: int(v) for s, v in got.items()} == {s: 8 * at for s, (_, at) in structs.items()}


def test_api_name_drops_only_a_numeric_version_suffix():
    runtime = [cupti.api_name(n) for n in cupti.RUNTIME_LAUNCHES.values()]
    assert runtime[:3] == ["cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaLaunchCooperativeKernel"]
    assert cupti.api_name(cupti.RUNTIME_SYNCS[165]) == "cudaDeviceSynchronize"
    assert cupti.api_name(cupti.DRIVER_SYNCS[800]) == "cuCtxSynchronize"  # 13.0's _v2 is the same call
    for table in (cupti.RUNTIME_LAUNCHES, cupti.DRIVER_LAUNCHES, cupti.RUNTIME_SYNCS, cupti.DRIVER_SYNCS):
        for cbid_name in table.values():
            name = cupti.api_name(cbid_name)
            suffix = cbid_name[len(name) :]
            assert cbid_name.startswith(name) and (suffix == "" or suffix[:2] == "_v" and suffix[2:].isdigit())
    assert cupti.api_name("cuLaunchKernel_ptsz") == "cuLaunchKernel_ptsz"  # no version: kept whole
    assert cupti.api_name("_v2") == "_v2"  # nothing before the suffix: kept whole


def test_candidates_put_the_named_libcupti_first_then_the_environments_wheels_once_each(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    wheel_libs = [
        site / "nvidia" / "cuda_cupti" / "lib" / "libcupti.so.12",
        site / "nvidia" / "cu13" / "lib" / "libcupti.so.13",
        site / "torch" / "lib" / "libcupti-a1b2c3.so.12",
    ]
    for lib in wheel_libs:
        lib.parent.mkdir(parents=True, exist_ok=True)
        lib.write_bytes(b"\x7fELF")
    (site / "nvidia" / "cu13" / "lib" / "libcudart.so.13").write_bytes(b"\x7fELF")  # not a libcupti
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(cupti.ENV_CUPTI, str(wheel_libs[1]))
    found = cupti.candidates([str(site), str(site), str(tmp_path / "absent")])
    assert found[0] == str(wheel_libs[1])  # the one asked for, before any found
    assert found[1:3] == [str(wheel_libs[0]), str(wheel_libs[2])]  # then the wheels', in pattern order
    assert found[-1] == "libcupti.so"  # the loader's own search, last
    assert len(found) == len(set(found)) and not any("libcudart" in f for f in found)
    assert set(map(str, wheel_libs)) <= set(found)


def test_cubin_functions_refuses_what_is_not_a_whole_64_bit_elf(tmp_path):
    image = [i for i in cubins("lib_trace_sm80.so", tmp_path) if cupti.cubin_functions(i)][0]
    assert cupti.cubin_functions(image) == [SM80]
    assert cupti.cubin_functions(image[: len(image) // 2]) == []  # its section headers cut off
    big_endian = image[:5] + b"\x02" + image[6:]
    assert cupti.cubin_functions(big_endian) == []
    assert cupti.cubin_functions(image[:63]) == []


def test_the_callback_counts_only_api_exits_and_keeps_its_errors_from_cupti():
    rec = cupti.Recorder()
    ret = ctypes.c_int(0)
    enter = cupti.CallbackData(
        0, b"cuLaunchKernel", None, ctypes.cast(ctypes.pointer(ret), ctypes.c_void_p), SM90.encode(), CTX, 1, None, 7
    )
    rec.callback(None, cupti.DOMAIN_DRIVER_API, 307, ctypes.addressof(enter))  # the API's entry: not counted
    assert rec.counts == {}
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, SM90, 0)
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, SM90, 0)
    assert rec.counts == {("driver", CTX, SM90, 0): 2}
    rec.callback(None, cupti.DOMAIN_DRIVER_API, 307, None)  # no data: nothing to read, nothing raised
    assert rec.counts == {("driver", CTX, SM90, 0): 2} and rec.callback_errors == []
