"""Launch the kernels of the excuse counter-example fixtures on this machine's GPU and print what
the CUDA runtime answers, beside what `archaudit check --gpu` says for the same GPU.

    python tools/excuses_on_gpu.py            # writes $OUT/excuses_on_gpu.txt when OUT is set

Each fixture (tests/fixtures/cuda/bin, built by build_gaps.sh) links libcudart.so.13 and exports
host launchers; the script loads the CUDA runtime from the environment (the nvidia-cuda-runtime
wheel that torch cu13x installs, or LD_LIBRARY_PATH), allocates a buffer, calls each launcher and
synchronises. An error code other than 0 is what the GPU says about that kernel there.
"""

from __future__ import annotations

import ctypes
import glob
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
BIN = HERE / "tests" / "fixtures" / "cuda" / "bin"

# fixture -> [(launcher, signature)]: "p" (float*, int), "axpy" (float, float*, float*, int)
CASES = {
    "lib_archtag_sm80.so": [("launch_axpy", "axpy"), ("launch_gemm", "p")],
    "lib_guard_75ptx_80.so": [("launch_f32_scale", "p"), ("launch_bf16_scale", "p")],
    "lib_zero_fill_100a.so": [("launch_axpy", "axpy"), ("launch_zero_fill", "p")],
    "lib_sm100_zero_fill_100a.so": [("launch_axpy", "axpy"), ("launch_zero_fill", "p")],
    # axpy<float> in a TU for sm_80 and one for 80;90 (K004): static template stubs (nvcc 13's
    # default), each TU launching its own module; then weak stubs (CUDA 12's default), of which
    # the linker keeps one for both launchers
    "lib_axpy_narrow_first.so": [("launch_axpy_narrow", "axpy"), ("launch_axpy_wide", "axpy")],
    "lib_axpy_wide_first.so": [("launch_axpy_narrow", "axpy"), ("launch_axpy_wide", "axpy")],
    "lib_axpy_weak_narrow_first.so": [("launch_axpy_narrow", "axpy"), ("launch_axpy_wide", "axpy")],
    "lib_axpy_weak_wide_first.so": [("launch_axpy_narrow", "axpy"), ("launch_axpy_wide", "axpy")],
}


def cudart() -> ctypes.CDLL:
    candidates = [p for d in sys.path for p in glob.glob(os.path.join(d, "nvidia", "cu*", "lib", "libcudart.so.13"))]
    candidates += [
        p for d in sys.path for p in glob.glob(os.path.join(d, "nvidia", "cuda_runtime", "lib", "libcudart.so.13"))
    ]
    for path in candidates + ["libcudart.so.13"]:
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
    raise SystemExit("libcudart.so.13 not found (install nvidia-cuda-runtime or set LD_LIBRARY_PATH)")


def main() -> int:
    rt = cudart()
    rt.cudaGetErrorName.restype = ctypes.c_char_p
    major, minor, driver = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    rt.cudaDeviceGetAttribute(ctypes.byref(major), 75, 0)
    rt.cudaDeviceGetAttribute(ctypes.byref(minor), 76, 0)
    rt.cudaDriverGetVersion(ctypes.byref(driver))
    lines = [f"GPU compute capability {major.value}.{minor.value}, CUDA driver API {driver.value}"]
    buf = ctypes.c_void_p()
    rc = rt.cudaMalloc(ctypes.byref(buf), 4096)
    lines.append(f"cudaMalloc: {rc}")
    for name, launchers in CASES.items():
        lib = ctypes.CDLL(str(BIN / name))
        for launcher, sig in launchers:
            fn = getattr(lib, launcher)
            rt.cudaGetLastError()
            if sig == "axpy":
                fn(ctypes.c_float(1.0), buf, buf, ctypes.c_int(256))
            else:
                fn(buf, ctypes.c_int(256))
            launch = rt.cudaGetLastError()
            sync = rt.cudaDeviceSynchronize()
            lines.append(f"{name} {launcher}: launch {launch} ({rt.cudaGetErrorName(launch).decode()}), sync {sync}")
    gpu = f"sm_{major.value}{minor.value}"
    for name in CASES:
        out = subprocess.run(
            [sys.executable, "-m", "archaudit", "check", "--no-config", "-q", "--gpu", gpu, str(BIN / name)],
            capture_output=True,
            text=True,
        )
        lines.append(f"archaudit check --gpu {gpu} {name}: exit {out.returncode}")
        lines += ["  " + x for x in out.stdout.splitlines() if x.startswith(("✗", "·", "✓"))]
    text = "\n".join(lines)
    print(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "excuses_on_gpu.txt").write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
