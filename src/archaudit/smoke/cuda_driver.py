"""The CUDA driver API through ctypes: just what the smoke probes need.

Standard library only: this module also runs inside child interpreters of environments
that do not have archaudit installed (see child.py, which loads it by path).
Nothing here is called in the archaudit process itself; cuInit can hang or crash.
"""

from __future__ import annotations

import ctypes
import time

CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_NO_BINARY_FOR_GPU = 209
ATTR_CC_MAJOR = 75  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
ATTR_CC_MINOR = 76
CU_JIT_OPTIMIZATION_LEVEL = 7  # CUjit_option: 0 (fastest) to 4 (the driver's default)
LIBRARY_NAMES = ("libcuda.so.1", "libcuda.so")


class DriverUnavailable(Exception):
    """No usable CUDA driver here: the library is missing, or cuInit failed."""


class CudaError(Exception):
    def __init__(self, call: str, code: int, name: str, text: str):
        super().__init__(f"{call} failed: {name} ({code}): {text}")
        self.call, self.code, self.name, self.text = call, code, name, text


class Driver:
    """A thin wrapper over libcuda. Every call returns or raises with the driver's names."""

    def __init__(self) -> None:
        errors = []
        for name in LIBRARY_NAMES:
            try:
                self.lib = ctypes.CDLL(name)
                self.library = name
                break
            except OSError as exc:
                errors.append(str(exc))
        else:
            raise DriverUnavailable("no CUDA driver: " + "; ".join(errors))
        lib = self.lib
        vp = ctypes.c_void_p
        for fn, args in {
            "cuInit": [ctypes.c_uint],
            "cuDriverGetVersion": [ctypes.POINTER(ctypes.c_int)],
            "cuDeviceGetCount": [ctypes.POINTER(ctypes.c_int)],
            "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
            "cuDeviceGetName": [ctypes.c_char_p, ctypes.c_int, ctypes.c_int],
            "cuDeviceGetAttribute": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(vp), ctypes.c_int],
            "cuCtxSetCurrent": [vp],
            "cuModuleLoadData": [ctypes.POINTER(vp), ctypes.c_char_p],
            "cuModuleLoadDataEx": [
                ctypes.POINTER(vp),
                ctypes.c_char_p,
                ctypes.c_uint,
                ctypes.POINTER(ctypes.c_int),
                ctypes.POINTER(vp),
            ],
            "cuModuleUnload": [vp],
            "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
            "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
        }.items():
            f = getattr(lib, fn)
            f.argtypes = args
            f.restype = ctypes.c_int
        release = getattr(lib, "cuDevicePrimaryCtxRelease_v2", None) or lib.cuDevicePrimaryCtxRelease
        release.argtypes = [ctypes.c_int]
        release.restype = ctypes.c_int
        self._release = release

    # -- errors -------------------------------------------------------------------------
    def error_name(self, code: int) -> str:
        p = ctypes.c_char_p()
        if self.lib.cuGetErrorName(code, ctypes.byref(p)) == 0 and p.value:
            return p.value.decode()
        return f"CUDA_ERROR_{code}"

    def error_text(self, code: int) -> str:
        p = ctypes.c_char_p()
        if self.lib.cuGetErrorString(code, ctypes.byref(p)) == 0 and p.value:
            return p.value.decode()
        return "unknown error"

    def check(self, call: str, code: int) -> None:
        if code != CUDA_SUCCESS:
            raise CudaError(call, code, self.error_name(code), self.error_text(code))

    # -- devices ------------------------------------------------------------------------
    def init(self) -> None:
        code = self.lib.cuInit(0)
        if code != CUDA_SUCCESS:
            raise DriverUnavailable(f"cuInit failed: {self.error_name(code)} ({code}): {self.error_text(code)}")

    def version(self) -> str:
        v = ctypes.c_int()
        self.check("cuDriverGetVersion", self.lib.cuDriverGetVersion(ctypes.byref(v)))
        return f"{v.value // 1000}.{v.value % 1000 // 10}"

    def device_count(self) -> int:
        n = ctypes.c_int()
        self.check("cuDeviceGetCount", self.lib.cuDeviceGetCount(ctypes.byref(n)))
        return n.value

    def device(self, ordinal: int) -> int:
        d = ctypes.c_int()
        self.check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(d), ordinal))
        return d.value

    def name(self, dev: int) -> str:
        buf = ctypes.create_string_buffer(256)
        self.check("cuDeviceGetName", self.lib.cuDeviceGetName(buf, 256, dev))
        return buf.value.decode(errors="replace")

    def compute_capability(self, dev: int) -> tuple[int, int]:
        out = []
        for attr in (ATTR_CC_MAJOR, ATTR_CC_MINOR):
            v = ctypes.c_int()
            self.check("cuDeviceGetAttribute", self.lib.cuDeviceGetAttribute(ctypes.byref(v), attr, dev))
            out.append(v.value)
        return out[0], out[1]

    def devices(self) -> list[dict[str, object]]:
        result = []
        for i in range(self.device_count()):
            dev = self.device(i)
            major, minor = self.compute_capability(dev)
            result.append({"ordinal": i, "name": self.name(dev), "cc": f"{major}.{minor}", "sm": f"sm_{major}{minor}"})
        return result

    # -- contexts and modules -----------------------------------------------------------
    def retain_primary(self, dev: int) -> int:
        ctx = ctypes.c_void_p()
        self.check("cuDevicePrimaryCtxRetain", self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
        return ctx.value or 0

    def release_primary(self, dev: int) -> None:
        self._release(dev)

    def set_current(self, ctx: int) -> None:
        self.check("cuCtxSetCurrent", self.lib.cuCtxSetCurrent(ctypes.c_void_p(ctx)))

    def load_data(self, image: bytes, jit_level: int | None = None) -> tuple[int, float, int | None]:
        """cuModuleLoadData on image (cuModuleLoadDataEx with CU_JIT_OPTIMIZATION_LEVEL when
        jit_level is given); returns (result code, seconds, module handle or None)."""
        mod = ctypes.c_void_p()
        t0 = time.perf_counter()
        if jit_level is None:
            code = self.lib.cuModuleLoadData(ctypes.byref(mod), image)
        else:
            options = (ctypes.c_int * 1)(CU_JIT_OPTIMIZATION_LEVEL)
            values = (ctypes.c_void_p * 1)(jit_level)  # the value travels in the pointer itself
            code = self.lib.cuModuleLoadDataEx(ctypes.byref(mod), image, 1, options, values)
        seconds = time.perf_counter() - t0
        return code, seconds, (mod.value if code == CUDA_SUCCESS else None)

    def unload(self, module: int) -> None:
        self.check("cuModuleUnload", self.lib.cuModuleUnload(ctypes.c_void_p(module)))
