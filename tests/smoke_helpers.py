"""Builders shared by the smoke tests of several modules (tests/smoke/): a probe's context, the
devices a driver query reports, and the trace probe's records made by the tracer's own callback
(cupti.Recorder) around the cubins cuobjdump extracts from the nvcc-built fixtures in
tests/fixtures/trace/. Test files import from here, never from one another."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import oracle
from archaudit.read.library import scan_file
from archaudit.smoke import cupti
from archaudit.smoke.context import ProbeContext
from archaudit.smoke.report import Row
from archaudit.smoke.trace_inventory import Inventory
from archaudit.smoke.trace_judge import judge_trace
from archaudit.smoke.trace_records import read_trace

TESTS = Path(__file__).resolve().parent
H100 = {"ordinal": 0, "name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "sm": "sm_90"}  # a device, as gpu-info says
H200 = {"ordinal": 0, "name": "NVIDIA H200", "cc": "9.0", "sm": "sm_90"}
GPU_FDS = ("/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl")  # what a child that used the GPU holds open


def probe_context(tmp_path: Path, **kw: object) -> ProbeContext:
    """A probe's context over this interpreter, with no GPU unless kw gives some."""
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
    return ProbeContext(**{**base, **kw})  # type: ignore[arg-type]


# ---- the trace probe's records ---------------------------------------------------------------------

TRACE_BIN = TESTS / "fixtures" / "trace" / "bin"  # nvcc-built (tests/fixtures/trace/build.sh)
TRACE_LIBS = [TRACE_BIN / "lib_trace_sm90.so", TRACE_BIN / "lib_trace_sm80.so", TRACE_BIN / "lib_trace_bf16_ptx75.so"]
CUPTI_CTX = 0x5000  # a context handle, as CUPTI passes it
SM90 = "_Z18hopper_axpy_kernelPfPKffi"
SM80 = "_ZN12cutlass_like11gemm_kernelINS_4Sm80EEEvPfPKfS4_i"
BF16 = "_Z17bf16_scale_kernelP13__nv_bfloat16fi"


def cubins(lib: str, tmp_path: Path) -> list[bytes]:
    """The cubins of a trace fixture library, as cuobjdump extracts them (the oracle, not archaudit's reader)."""
    tool = oracle.find_cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump is not installed (pip install nvidia-cuda-cuobjdump)")
    out = Path(tempfile.mkdtemp(prefix=lib, dir=tmp_path))
    subprocess.run([tool, "-xelf", "all", str(TRACE_BIN / lib)], cwd=out, check=True, capture_output=True)
    return [p.read_bytes() for p in sorted(out.glob("*.cubin"))]


def load_module(rec: cupti.Recorder, image: bytes, module_id: int) -> None:
    """CUPTI_CBID_RESOURCE_MODULE_LOADED with the image, through the tracer's callback pointer."""
    buf = ctypes.create_string_buffer(image, len(image))
    md = cupti.ModuleResourceData(module_id, len(image), ctypes.cast(buf, ctypes.c_void_p))
    rd = cupti.ResourceData(CUPTI_CTX, None, ctypes.cast(ctypes.pointer(md), ctypes.c_void_p))
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
        CUPTI_CTX,
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


def inventory(paths: list[Path], sizes: set[int]) -> Inventory:
    """check's inventory of the libraries, indexed as the trace probe indexes what was mapped."""
    inv = Inventory([(p.name, scan_file(str(p), decode=True)) for p in paths])
    inv.index_kernels()
    assert inv.index_hashes([str(p) for p in paths], sizes) == []
    return inv


def judged(tmp_path: Path, **kw: bool) -> list[Row]:
    """The trace judge's rows for the fixture run (recorded) on an H100 with CUDA 13.0."""
    t = read_trace(str(recorded(tmp_path, **kw)))
    return judge_trace(t, inventory(TRACE_LIBS, {m.size for m in t.modules}), H100, (13, 0))
