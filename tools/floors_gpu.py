"""What the GPU says of the driver-floor and diff fixtures (tests/fixtures/cuda/bin/floors/).

Run on a machine with an NVIDIA GPU and the CUDA 13 runtime installed as a wheel
(nvidia-cuda-runtime, as torch cu130 brings it), from the repository root:

    python tools/floors_gpu.py > "$OUT/floors_gpu.txt"

For each fixture it launches each kernel through the library's own launcher and prints the CUDA
error code the launch gives (0: it ran; 209: cudaErrorNoKernelImageForDevice; 35:
cudaErrorInsufficientDriver), with the device, its compute capability and the driver version.
Standard library only (ctypes).
"""

from __future__ import annotations

import ctypes
import glob
import os
import site
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FLOORS = os.path.join(HERE, "..", "tests", "fixtures", "cuda", "bin", "floors")
N = 1024


def cudart() -> ctypes.CDLL:
    """libcudart.so.13 from the installed nvidia wheels, loaded globally (the -cudart none and
    -cudart shared fixtures resolve their registration calls against it)."""
    roots = [*site.getsitepackages(), site.getusersitepackages(), sys.prefix]
    for root in roots:
        for path in sorted(glob.glob(os.path.join(root, "**", "libcudart.so.13*"), recursive=True)):
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)


def main() -> int:
    rt = cudart()
    version = ctypes.c_int()
    rt.cudaDriverGetVersion(ctypes.byref(version))
    print(f"driver API version {version.value} (cudaDriverGetVersion)")
    rt.cudaRuntimeGetVersion(ctypes.byref(version))
    print(f"shared runtime {version.value} (cudaRuntimeGetVersion)")
    major, minor = ctypes.c_int(), ctypes.c_int()
    rt.cudaDeviceGetAttribute(ctypes.byref(major), 75, 0)  # cudaDevAttrComputeCapabilityMajor
    rt.cudaDeviceGetAttribute(ctypes.byref(minor), 76, 0)  # cudaDevAttrComputeCapabilityMinor
    name = ctypes.create_string_buffer(256)
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuInit(0)
    cuda.cuDeviceGetName(name, 256, 0)
    drv = ctypes.create_string_buffer(80)
    nvml = None
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        nvml.nvmlInit_v2()
        nvml.nvmlSystemGetDriverVersion(drv, 80)
    except OSError:
        pass
    print(f"device 0: {name.value.decode()} ({major.value}.{minor.value}), driver {drv.value.decode() or '?'}")

    bufs = []
    for _ in range(3):
        p = ctypes.c_void_p()
        rt.cudaMalloc(ctypes.byref(p), N * 4)
        bufs.append(p)
    x, y, z = bufs
    rt.cudaGetLastError.restype = ctypes.c_int
    rt.cudaDeviceSynchronize.restype = ctypes.c_int

    def launched(fn: ctypes._CFuncPtr, *args: object) -> str:
        rt.cudaGetLastError()
        fn(*args)
        err = rt.cudaGetLastError()
        sync = rt.cudaDeviceSynchronize()
        return f"launch {err}, synchronize {sync}"

    for lib in ("lib_two_8090.so", "lib_two_mul80.so", "lib_ptx70.so"):
        so = ctypes.CDLL(os.path.join(FLOORS, lib))
        so.launch_axpy.argtypes = (ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
        print(f"{lib}: axpy {launched(so.launch_axpy, 2.0, x, y, N)}")
        if hasattr(so, "launch_mul"):
            so.launch_mul.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
            print(f"{lib}: mul {launched(so.launch_mul, x, y, z, N)}")
    # its own CUDA 13.0 runtime, linked in statically: the launch goes through that runtime, so
    # its error is not the shared runtime's; the synchronize after it shows whether it ran
    static = ctypes.CDLL(os.path.join(FLOORS, "lib_ptx84_static13.so"))
    static.launch_axpy.argtypes = (ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
    print(f"lib_ptx84_static13.so: axpy {launched(static.launch_axpy, 2.0, x, y, N)} (the shared runtime's view)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
