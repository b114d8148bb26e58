"""A launch tracer on CUPTI's callback API, through ctypes: what the `trace` probe runs in its child.

Standard library only, like cuda_driver.py: it runs inside the interpreter of the environment
under test (loaded by path, or by the bootstrap a traced command imports), next to the wheel's
code. What it writes is an observation; archaudit's process judges it (smoke/trace.py).

It subscribes one callback to three CUPTI domains:

- resource: CUPTI_CBID_RESOURCE_MODULE_LOADED hands over the image the driver loaded into a
  context (CUpti_ModuleResourceData: moduleId, cubinSize, pCubin). Its sha256 and size identify
  it against check's inventory (a cubin entry decodes to these very bytes); the ELF's `.text.<name>`
  sections say which functions it defines, so a launch is tied to the modules of its context that
  define its kernel.
- driver API: cuLaunchKernel, cuLaunchKernelEx, cuLaunchCooperativeKernel (and their _ptsz
  forms); on exit, symbolName is the kernel's name and functionReturnValue its CUresult.
- runtime API: cudaLaunchKernel, cudaLaunchKernelExC, cudaLaunchCooperativeKernel: a launch the
  runtime refuses before it reaches the driver (no image for this GPU: 209) is seen here; and
  cudaDeviceSynchronize / cudaStreamSynchronize / cuCtxSynchronize / cuStreamSynchronize, whose
  failure is an error of a kernel that already ran (a trap: 710, 719), pinned on the last
  launch of that context.

A launch the runtime refuses before the driver sees it has an empty symbolName (the H100's 209):
its name is then the host stub's (the params' `func`), found by dladdr() and the library's symbol
table; a driver launch without one is named by cuFuncGetName (Names).

Launches are counted per (layer, context, kernel, result): memory grows with the distinct
kernels, never with the number of launches. Enum values and struct layouts are those of CUPTI's
headers, identical in CUDA 12.8 (nvidia-cuda-cupti-cu12 12.8.90) and CUDA 13.0 (the toolkit's
extras/CUPTI include): cupti_callbacks.h, cupti_driver_cbid.h, cupti_runtime_cbid.h,
cupti_result.h; cuCtxSynchronize_v2 (800) is 13.0's alone. tests/smoke/test_cupti.py compiles the
headers to check the layouts and values against a C compiler's reading.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import json
import os
import struct
import sys
import threading
from typing import Any

# cupti_callbacks.h: CUpti_CallbackDomain
DOMAIN_DRIVER_API, DOMAIN_RUNTIME_API, DOMAIN_RESOURCE = 1, 2, 3
# cupti_callbacks.h: CUpti_ApiCallbackSite
API_ENTER, API_EXIT = 0, 1
# cupti_callbacks.h: CUpti_CallbackIdResource
CBID_RESOURCE_MODULE_LOADED = 6
# cupti_driver_cbid.h: CUpti_driver_api_trace_cbid
DRIVER_LAUNCHES = {
    307: "cuLaunchKernel",
    442: "cuLaunchKernel_ptsz",
    477: "cuLaunchCooperativeKernel",
    478: "cuLaunchCooperativeKernel_ptsz",
    652: "cuLaunchKernelEx",
    653: "cuLaunchKernelEx_ptsz",
}
DRIVER_SYNCS = {
    17: "cuCtxSynchronize",
    126: "cuStreamSynchronize",
    440: "cuStreamSynchronize_ptsz",
    800: "cuCtxSynchronize_v2",
}
# cupti_runtime_cbid.h: CUpti_runtime_api_trace_cbid
RUNTIME_LAUNCHES = {
    211: "cudaLaunchKernel_v7000",
    214: "cudaLaunchKernel_ptsz_v7000",
    269: "cudaLaunchCooperativeKernel_v9000",
    270: "cudaLaunchCooperativeKernel_ptsz_v9000",
    430: "cudaLaunchKernelExC_v11060",
    431: "cudaLaunchKernelExC_ptsz_v11060",
}
RUNTIME_SYNCS = {
    165: "cudaDeviceSynchronize_v3020",
    131: "cudaStreamSynchronize_v3020",
    239: "cudaStreamSynchronize_ptsz_v7000",
}
# Where a launch's params struct (CUpti_CallbackData.functionParams) holds the kernel: the runtime's
# host stub `func` (cupti_runtime_cbid.h's *_params: first field, after `config` in cudaLaunchKernelExC),
# the driver's CUfunction `f` (cuLaunchKernel_params first, cuLaunchKernelEx_params after `config`).
RUNTIME_FUNC_FIELD = {211: 0, 214: 0, 269: 0, 270: 0, 430: 1, 431: 1}
DRIVER_FUNC_FIELD = {307: 0, 442: 0, 477: 0, 478: 0, 652: 1, 653: 1}
CUPTI_SUCCESS = 0  # cupti_result.h
MAX_KEYS = 200_000  # distinct (layer, context, kernel, result) counted; beyond, launches are only tallied
MAX_NAME = 4096  # characters of a kernel name kept
MAX_ASYNC = 1000
ENV_OUT = "ARCHAUDIT_TRACE_OUT"  # directory each traced process writes <pid>.json into
ENV_MODULE = "ARCHAUDIT_TRACE_MODULE"  # this file, for the bootstrap of a traced command
ENV_CUPTI = "ARCHAUDIT_CUPTI"  # a libcupti to use instead of the one found


class CallbackData(ctypes.Structure):
    """CUpti_CallbackData (cupti_callbacks.h, CUDA 12.8 and 13.0)."""

    _fields_ = [
        ("callbackSite", ctypes.c_int),
        ("functionName", ctypes.c_char_p),
        ("functionParams", ctypes.c_void_p),
        ("functionReturnValue", ctypes.c_void_p),
        ("symbolName", ctypes.c_char_p),
        ("context", ctypes.c_void_p),
        ("contextUid", ctypes.c_uint32),
        ("correlationData", ctypes.c_void_p),
        ("correlationId", ctypes.c_uint32),
    ]


class ResourceData(ctypes.Structure):
    """CUpti_ResourceData (cupti_callbacks.h): context, union { CUstream stream } resourceHandle, descriptor."""

    _fields_ = [
        ("context", ctypes.c_void_p),
        ("resourceHandle", ctypes.c_void_p),
        ("resourceDescriptor", ctypes.c_void_p),
    ]


class ModuleResourceData(ctypes.Structure):
    """CUpti_ModuleResourceData (cupti_callbacks.h)."""

    _fields_ = [("moduleId", ctypes.c_uint32), ("cubinSize", ctypes.c_size_t), ("pCubin", ctypes.c_void_p)]


CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)


def api_name(cbid_name: str) -> str:
    """The API's name without the version suffix of its callback id (cudaLaunchKernel_v7000 -> cudaLaunchKernel)."""
    head, _, tail = cbid_name.rpartition("_v")
    return head if head and tail.isdigit() else cbid_name


class TracerUnavailable(Exception):
    """No CUPTI here, or it refused to subscribe."""


def candidates(paths: list[str] | None = None) -> list[str]:
    """Where a libcupti may be: the environment's CUDA wheels (nvidia-cuda-cupti-cu12's
    nvidia/cuda_cupti/lib, CUDA 13's nvidia/cu13/lib), torch's lib directory, the toolkit's."""
    found: list[str] = []
    if os.environ.get(ENV_CUPTI):
        found.append(os.environ[ENV_CUPTI])
    for base in paths if paths is not None else sys.path:
        if not base or not os.path.isdir(base):
            continue
        for pattern in (
            "nvidia/cuda_cupti/lib/libcupti.so*",
            "nvidia/cu1*/lib/libcupti.so*",
            "torch/lib/libcupti*.so*",
        ):
            found += sorted(glob.glob(os.path.join(base, pattern)), reverse=True)
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            for sub in ("extras/CUPTI/lib64", "lib64", "lib", "targets/x86_64-linux/lib"):
                found += sorted(glob.glob(os.path.join(home, sub, "libcupti.so*")), reverse=True)
    found.append("libcupti.so")
    out: list[str] = []
    for f in found:
        if f not in out:
            out.append(f)
    return out


def cubin_functions(image: bytes) -> list[str]:
    """The functions a 64-bit little-endian CUDA ELF defines: its `.text.<name>` sections."""
    if len(image) < 64 or image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        return []
    (shoff,) = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    if shentsize < 64 or shnum == 0 or shstrndx >= shnum or shoff + shnum * shentsize > len(image):
        return []
    str_off, str_size = struct.unpack_from("<QQ", image, shoff + shstrndx * shentsize + 0x18)
    names = image[str_off : str_off + str_size]
    out = []
    for k in range(shnum):
        (name_at,) = struct.unpack_from("<I", image, shoff + k * shentsize)
        end = names.find(b"\0", name_at)
        name = names[name_at : end if end >= 0 else len(names)]
        if name.startswith(b".text."):
            out.append(name[6:].decode(errors="replace")[:MAX_NAME])
    return out


class DlInfo(ctypes.Structure):
    """Dl_info (dlfcn.h): the file and the nearest symbol dladdr() finds for an address."""

    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


class Names:
    """A kernel's name where CUPTI gives none (a launch the runtime refuses before the driver sees it:
    symbolName is empty). The runtime's `func` is nvcc's host stub, a host function that carries the
    kernel's mangled name: dladdr() names it when the symbol is exported and starts exactly there. The
    driver's CUfunction is named by cuFuncGetName (CUDA 12.3 and newer) where the driver has it.
    Bounded: one lookup per distinct address, at most MAX_LOOKUPS; never raises."""

    MAX_LOOKUPS = 10_000

    def __init__(self) -> None:
        self.cache: dict[tuple[str, int], str] = {}
        self.symbols: dict[str, tuple[bool, dict[int, str]] | None] = {}
        self._dladdr: Any = None
        self._func_name: Any = None
        self._loaded = False

    def _load(self) -> None:
        self._loaded = True
        try:
            libc = ctypes.CDLL(None)
            self._dladdr = libc.dladdr
            self._dladdr.argtypes, self._dladdr.restype = [ctypes.c_void_p, ctypes.POINTER(DlInfo)], ctypes.c_int
        except (OSError, AttributeError):
            self._dladdr = None
        try:
            cuda = ctypes.CDLL("libcuda.so.1", mode=getattr(os, "RTLD_NOLOAD", 0) | ctypes.RTLD_GLOBAL)
            self._func_name = cuda.cuFuncGetName
            self._func_name.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p]
            self._func_name.restype = ctypes.c_int
        except (OSError, AttributeError):  # no driver loaded, or one older than 12.3
            self._func_name = None

    def name(self, layer: str, address: int) -> str:
        key = (layer, address)
        if not address:
            return ""
        if key in self.cache:
            return self.cache[key]
        if len(self.cache) >= self.MAX_LOOKUPS:
            return ""
        if not self._loaded:
            self._load()
        got = ""
        try:
            if layer == "runtime" and self._dladdr is not None:
                info = DlInfo()
                if self._dladdr(address, ctypes.byref(info)):
                    if info.dli_sname and info.dli_saddr == address:
                        got = kernel_of_stub(info.dli_sname.decode(errors="replace"))
                    elif info.dli_fname:  # nvcc's stubs are static: in .symtab, which dladdr does not read
                        got = self._local_symbol(
                            info.dli_fname.decode(errors="replace"), address, int(info.dli_fbase or 0)
                        )
            elif layer == "driver" and self._func_name is not None:
                p = ctypes.c_char_p()
                if self._func_name(ctypes.byref(p), address) == 0 and p.value:
                    got = p.value.decode(errors="replace")[:MAX_NAME]
        except (OSError, ValueError):
            got = ""
        self.cache[key] = got[:MAX_NAME]
        return got[:MAX_NAME]

    def _local_symbol(self, path: str, address: int, base: int) -> str:
        if path not in self.symbols:
            if len(self.symbols) >= 64:
                return ""
            self.symbols[path] = elf_functions(path)
        table = self.symbols[path]
        is_dyn, funcs = table if table else (True, {})
        name = funcs.get(address - base if is_dyn else address, "")
        return kernel_of_stub(name) if name else ""


MAX_SYMTAB = 64 << 20  # bytes of .symtab plus .strtab read from one file to name a host stub


def elf_functions(path: str) -> tuple[bool, dict[int, str]] | None:
    """A 64-bit little-endian ELF file's .symtab functions by address, and whether it is position
    independent (ET_DYN: addresses relative to its load base); None when it has none or cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            (e_type,) = struct.unpack_from("<H", head, 0x10)
            (shoff,) = struct.unpack_from("<Q", head, 0x28)
            shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
            if shentsize != 64 or not 0 < shnum <= 65535:
                return None
            f.seek(shoff)
            table = f.read(shnum * 64)
            sections = [struct.unpack_from("<IIQQQQIIQQ", table, k * 64) for k in range(len(table) // 64)]
            symtab = [sh for sh in sections if sh[1] == 2]  # SHT_SYMTAB
            if not symtab:
                return None
            sh = symtab[0]
            if sh[6] >= len(sections):
                return None
            strtab = sections[sh[6]]
            if sh[5] + strtab[5] > MAX_SYMTAB:
                return None
            f.seek(sh[4])
            syms = f.read(sh[5])
            f.seek(strtab[4])
            names = f.read(strtab[5])
    except OSError:
        return None
    out: dict[int, str] = {}
    for k in range(len(syms) // 24):
        st_name, st_info, _, _, st_value, _ = struct.unpack_from("<IBBHQQ", syms, k * 24)
        if st_info & 0xF == 2 and st_value and st_value not in out:  # STT_FUNC
            end = names.find(b"\0", st_name)
            out[st_value] = names[st_name : end if end >= 0 else len(names)].decode(errors="replace")
    return e_type == 3, out


def kernel_of_stub(symbol: str) -> str:
    """The kernel's mangled name from its host stub's symbol: nvcc gives the stub the kernel's name,
    with internal linkage where the stub is static, which the Itanium mangling marks with an `L`
    before the unqualified name (_ZN12cutlass_likeL11gemm_kernel... for _ZN12cutlass_like11gemm_kernel...,
    _ZL3foov for _Z3foov). Only that marker is dropped."""
    if not symbol.startswith("_Z"):
        return symbol
    i = 2
    if symbol[i : i + 1] == "L":
        return symbol[:i] + symbol[i + 1 :]
    if symbol[i : i + 1] != "N":
        return symbol
    i += 1
    while i < len(symbol):
        if symbol[i] == "L" and symbol[i + 1 : i + 2].isdigit():
            return symbol[:i] + symbol[i + 1 :]
        j = i
        while j < len(symbol) and symbol[j].isdigit():
            j += 1
        if j == i:
            return symbol
        i = j + int(symbol[i:j])
    return symbol


def launched_function(cd: CallbackData, layer: str, cbid: int) -> int:
    """The host stub (runtime) or CUfunction (driver) a launch's params hold; 0 when unknown."""
    fields = DRIVER_FUNC_FIELD if layer == "driver" else RUNTIME_FUNC_FIELD
    at = fields.get(cbid)
    if at is None or not cd.functionParams:
        return 0
    return int(ctypes.cast(cd.functionParams, ctypes.POINTER(ctypes.c_void_p))[at] or 0)


class Recorder:
    """What the callback does with what CUPTI hands it: count launches per kernel and result,
    remember every module loaded. No CUPTI here: Tracer subscribes it."""

    library = ""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.modules: dict[tuple[int, int], dict[str, Any]] = {}  # (context, moduleId) -> what was loaded
        self.defines: dict[tuple[int, str], list[tuple[int, int]]] = {}  # (context, function) -> modules
        self.counts: dict[tuple[str, int, str, int], int] = {}  # (layer, context, kernel, result) -> launches
        self.apis: dict[tuple[str, int, str, int], set[str]] = {}
        self.last: dict[int, str] = {}  # context -> the kernel launched last
        self.async_errors: list[dict[str, Any]] = []
        self.dropped = 0
        self.callback_errors: list[str] = []
        self.names = Names()
        self.callback = CALLBACK(self._on_callback)  # kept referenced for as long as CUPTI may call it
        self.running = True

    def version(self) -> int:
        return 0

    # -- the callback: on the thread that made the call -------------------------------------
    def _on_callback(self, userdata: int | None, domain: int, cbid: int, cbdata: int | None) -> None:
        if not self.running or not cbdata:
            return
        try:
            if domain == DOMAIN_RESOURCE:
                if cbid == CBID_RESOURCE_MODULE_LOADED:
                    self._module_loaded(ctypes.cast(cbdata, ctypes.POINTER(ResourceData)).contents)
                return
            cd = ctypes.cast(cbdata, ctypes.POINTER(CallbackData)).contents
            if cd.callbackSite != API_EXIT:
                return
            layer = "driver" if domain == DOMAIN_DRIVER_API else "runtime"
            launches = DRIVER_LAUNCHES if domain == DOMAIN_DRIVER_API else RUNTIME_LAUNCHES
            code = (
                ctypes.cast(cd.functionReturnValue, ctypes.POINTER(ctypes.c_int)).contents.value
                if cd.functionReturnValue
                else -1
            )
            ctx = cd.context or 0
            if cbid in launches:
                name = (cd.symbolName or b"").decode(errors="replace")[:MAX_NAME]
                if not name:  # a launch refused before the driver named it: the stub's or function's name
                    name = self.names.name(layer, launched_function(cd, layer, cbid))
                self._launch((layer, ctx, name, code), api_name(launches[cbid]))
            elif code != 0 and len(self.async_errors) < MAX_ASYNC:
                syncs = DRIVER_SYNCS if domain == DOMAIN_DRIVER_API else RUNTIME_SYNCS
                with self._lock:
                    self.async_errors.append(
                        {
                            "layer": layer,
                            "api": api_name(syncs.get(cbid, str(cbid))),
                            "code": code,
                            "context": ctx,
                            "after": self.last.get(ctx, ""),
                        }
                    )
        except Exception as exc:  # never into CUPTI: a Python error here is counted and reported
            if len(self.callback_errors) < 10:
                self.callback_errors.append(f"{type(exc).__name__}: {exc}")

    def _module_loaded(self, rd: ResourceData) -> None:
        if not rd.resourceDescriptor:
            return
        md = ctypes.cast(rd.resourceDescriptor, ctypes.POINTER(ModuleResourceData)).contents
        image = ctypes.string_at(md.pCubin, md.cubinSize) if md.pCubin and md.cubinSize else b""
        functions = cubin_functions(image)
        ctx = rd.context or 0
        key = (ctx, int(md.moduleId))
        with self._lock:
            self.modules[key] = {
                "context": ctx,
                "module": int(md.moduleId),
                "size": len(image),
                "sha256": hashlib.sha256(image).hexdigest(),
                "magic": image[:4].hex(),
                "functions": len(functions),
            }
            for f in functions:
                self.defines.setdefault((ctx, f), []).append(key)

    def _launch(self, key: tuple[str, int, str, int], api: str) -> None:
        with self._lock:
            if key in self.counts:
                self.counts[key] += 1
            elif len(self.counts) < MAX_KEYS:
                self.counts[key] = 1
                self.apis[key] = set()
            else:
                self.dropped += 1
                return
            self.apis[key].add(api)
            if key[3] == 0:
                self.last[key[1]] = key[2]

    # -- what the parent reads ---------------------------------------------------------------
    def records(self) -> dict[str, Any]:
        with self._lock:
            launches = []
            for (layer, ctx, name, code), n in sorted(self.counts.items(), key=lambda kv: kv[0][2:]):
                mods = [self.modules[m]["sha256"] for m in self.defines.get((ctx, name), ())]
                launches.append(
                    {
                        "layer": layer,
                        "context": ctx,
                        "kernel": name,
                        "code": code,
                        "count": n,
                        "apis": sorted(self.apis[(layer, ctx, name, code)]),
                        "modules": sorted(set(mods)),
                    }
                )
            return {
                "cupti": self.library,
                "cupti_version": self.version(),
                "pid": os.getpid(),
                "modules": list(self.modules.values()),
                "launches": launches,
                "async_errors": list(self.async_errors),
                "dropped": self.dropped,
                "callback_errors": list(self.callback_errors),
                "mapped": mapped_files(),
            }

    def write(self, directory: str) -> str:
        """The records as <directory>/<pid>.json, replaced whole (a reader never sees half a file)."""
        path = os.path.join(directory, f"{os.getpid()}.json")
        tmp = f"{path}.{threading.get_ident()}.tmp"  # the periodic writer and the one at exit may overlap
        with open(tmp, "w") as f:
            json.dump(self.records(), f)
        os.replace(tmp, path)
        return path


class Tracer(Recorder):
    """The Recorder subscribed to CUPTI's callbacks."""

    def __init__(self, library: str | None = None, paths: list[str] | None = None):
        errors = []
        for path in [library] if library else candidates(paths):
            try:
                self.lib = ctypes.CDLL(path)
                self.library = path
                break
            except OSError as exc:
                errors.append(f"{path}: {exc}")
        else:
            raise TracerUnavailable("no libcupti could be loaded: " + "; ".join(errors[-4:]))
        lib = self.lib
        vp = ctypes.c_void_p
        for fn, args in {
            "cuptiSubscribe": [ctypes.POINTER(vp), CALLBACK, vp],
            "cuptiUnsubscribe": [vp],
            "cuptiEnableDomain": [ctypes.c_uint32, vp, ctypes.c_int],
            "cuptiEnableCallback": [ctypes.c_uint32, vp, ctypes.c_int, ctypes.c_uint32],
            "cuptiGetResultString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
            "cuptiGetVersion": [ctypes.POINTER(ctypes.c_uint32)],
        }.items():
            f = getattr(lib, fn)
            f.argtypes, f.restype = args, ctypes.c_int
        super().__init__()
        self.running = False
        self._subscriber = ctypes.c_void_p()

    def _check(self, call: str, code: int) -> None:
        if code != CUPTI_SUCCESS:
            p = ctypes.c_char_p()
            text = p.value.decode() if self.lib.cuptiGetResultString(code, ctypes.byref(p)) == 0 and p.value else ""
            raise TracerUnavailable(f"{call} failed: CUPTI result {code} {text}".strip())

    def version(self) -> int:
        v = ctypes.c_uint32()
        return v.value if self.lib.cuptiGetVersion(ctypes.byref(v)) == 0 else 0

    def start(self) -> None:
        self._check("cuptiSubscribe", self.lib.cuptiSubscribe(ctypes.byref(self._subscriber), self.callback, None))
        sub = self._subscriber
        self._check(
            "cuptiEnableCallback(resource)",
            self.lib.cuptiEnableCallback(1, sub, DOMAIN_RESOURCE, CBID_RESOURCE_MODULE_LOADED),
        )
        for domain, cbids in (
            (DOMAIN_DRIVER_API, {**DRIVER_LAUNCHES, **DRIVER_SYNCS}),
            (DOMAIN_RUNTIME_API, {**RUNTIME_LAUNCHES, **RUNTIME_SYNCS}),
        ):
            for cbid in cbids:
                # A callback id this CUPTI does not know (cuCtxSynchronize_v2: 13.0's, not 12.8's) is skipped.
                self.lib.cuptiEnableCallback(1, sub, domain, cbid)
        self.running = True

    def stop(self) -> None:
        if self.running:
            self.running = False
            self.lib.cuptiUnsubscribe(self._subscriber)


def start_tracer(paths: list[str] | None = None) -> Tracer:
    """A started Tracer on the first libcupti found that loads and subscribes (a CUPTI newer than
    the driver refuses; the next one found may not); raises TracerUnavailable saying why each failed."""
    errors = []
    for path in candidates(paths):
        try:
            tracer = Tracer(library=path)
            tracer.start()
            return tracer
        except TracerUnavailable as exc:
            errors.append(f"{path}: {exc}")
    raise TracerUnavailable("no libcupti here both loads and subscribes: " + "; ".join(errors[:8]))


def mapped_files() -> list[str]:
    """The files this process maps (/proc/self/maps): where its device code can have come from."""
    out: list[str] = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    path = parts[5].strip()
                    if path not in out and not path.endswith(" (deleted)"):
                        out.append(path)
    except OSError:
        pass
    return out


def start_from_environment() -> Tracer | None:
    """The bootstrap of a traced command (trace_boot/sitecustomize.py): trace this process when
    ARCHAUDIT_TRACE_OUT names a directory, write the records there at exit and every few seconds."""
    import atexit

    out = os.environ.get(ENV_OUT)
    if not out or not os.path.isdir(out):
        return None
    try:
        tracer = start_tracer()
    except TracerUnavailable as exc:
        with open(os.path.join(out, f"{os.getpid()}.error"), "w") as f:
            f.write(str(exc))
        return None
    stop = threading.Event()
    pid = os.getpid()

    def flush() -> None:
        while not stop.wait(5.0):
            try:
                tracer.write(out)
            except OSError:
                pass

    def at_exit() -> None:
        stop.set()
        if os.getpid() != pid:  # a forked child inherited the counts: they are its parent's
            return
        try:
            tracer.write(out)
        finally:
            tracer.stop()

    threading.Thread(target=flush, name="archaudit-trace-flush", daemon=True).start()
    atexit.register(at_exit)
    return tracer


BOOTSTRAP = '''"""archaudit's launch tracer for a traced command, then the sitecustomize this one hides."""
import os, sys
try:
    import importlib.util as _u
    _s = _u.spec_from_file_location("_archaudit_cupti", os.environ["ARCHAUDIT_TRACE_MODULE"])
    _m = _u.module_from_spec(_s)
    _s.loader.exec_module(_m)
    _m.start_from_environment()
except Exception as _e:
    sys.stderr.write("archaudit trace: the tracer did not start: %s\\n" % (_e,))
_here = os.path.dirname(os.path.abspath(__file__))
try:  # the environment's own sitecustomize, which this one hides on the path
    import importlib.machinery as _mach
    import importlib.util as _u
    _next = _mach.PathFinder.find_spec("sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
    if _next is not None and _next.loader is not None:
        _next.loader.exec_module(_u.module_from_spec(_next))
except Exception as _e:
    sys.stderr.write("archaudit trace: the environment's sitecustomize failed: %s\\n" % (_e,))
'''


def write_bootstrap(directory: str) -> str:
    """A directory holding the sitecustomize.py that starts the tracer in any Python process whose
    PYTHONPATH names it (the traced command and every Python process it starts)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "sitecustomize.py"), "w") as f:
        f.write(BOOTSTRAP)
    return directory


__all__ = [
    "CallbackData",
    "candidates",
    "cubin_functions",
    "DlInfo",
    "elf_functions",
    "ENV_CUPTI",
    "ENV_MODULE",
    "ENV_OUT",
    "kernel_of_stub",
    "launched_function",
    "mapped_files",
    "ModuleResourceData",
    "Names",
    "Recorder",
    "ResourceData",
    "start_from_environment",
    "start_tracer",
    "Tracer",
    "TracerUnavailable",
    "write_bootstrap",
]
