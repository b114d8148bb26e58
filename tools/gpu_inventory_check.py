"""On a GPU: what the driver says of the inventory fixtures of issue 37, beside what `check` says.

    python tools/gpu_inventory_check.py [OUT_DIR]     # writes OUT_DIR/gpu_inventory_check.txt

Needs libcuda (no CUDA toolkit, no network). For each host library that carries whole cubins in
.rodata (tests/fixtures/cuda/build_embedded.sh), the library's own load_embedded() hands each
cubin to cuModuleLoadData: the result on this GPU, and cuModuleGetFunction of its kernel. For the
bare .fatbin of two concatenated containers, cuModuleLoad and cuModuleGetFunction of the kernel
each container defines (G017: the second container's kernel should give 500). Prints the GPU,
its compute capability and the driver version first.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

BIN = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "cuda" / "bin"
KERNELS = {"axpy": b"_Z4axpyfPKfPfi", "layernorm": b"_Z16layernorm_kernelPKfPfi"}


def main() -> int:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "."))
    lines: list[str] = []
    cu = ctypes.CDLL("libcuda.so.1")
    assert cu.cuInit(0) == 0
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    name = ctypes.create_string_buffer(256)
    cu.cuDeviceGetName(name, 256, dev)
    major, minor, version = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    cu.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)
    cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
    cu.cuDriverGetVersion(ctypes.byref(version))
    lines.append(
        f"GPU {name.value.decode()} (compute capability {major.value}.{minor.value}), driver API {version.value}"
    )
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cu.cuCtxSetCurrent(ctx) == 0

    load = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(
        ctypes.cast(cu.cuModuleLoadData, ctypes.c_void_p).value
    )
    for lib_name, cubins in [
        ("lib_embedded_cubin_sm80.so", {0: "axpy"}),
        ("lib_embedded_two_cubins.so", {0: "axpy", 1: "layernorm"}),
        ("lib_embedded_axpy_80_90.so", {0: "axpy", 1: "axpy"}),
    ]:
        lib = ctypes.CDLL(str(BIN / lib_name))
        lib.load_embedded.argtypes = [type(load), ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
        for which, kernel in cubins.items():
            mod = ctypes.c_void_p()
            rc = lib.load_embedded(load, ctypes.byref(mod), which)
            got = "-"
            if rc == 0:
                fn = ctypes.c_void_p()
                got = str(cu.cuModuleGetFunction(ctypes.byref(fn), mod, KERNELS[kernel]))
            lines.append(f"{lib_name} cubin {which}: cuModuleLoadData {rc}, cuModuleGetFunction({kernel}) {got}")

    mod = ctypes.c_void_p()
    rc = cu.cuModuleLoad(ctypes.byref(mod), str(BIN / "two_axpy_then_layernorm.fatbin").encode())
    lines.append(f"two_axpy_then_layernorm.fatbin: cuModuleLoad {rc}")
    if rc == 0:
        for kernel, mangled in KERNELS.items():
            fn = ctypes.c_void_p()
            lines.append(f"  cuModuleGetFunction({kernel}) {cu.cuModuleGetFunction(ctypes.byref(fn), mod, mangled)}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "gpu_inventory_check.txt").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
