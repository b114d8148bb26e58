"""What runs inside each probe's child interpreter.

This file is executed by path (runpy.run_path) in the interpreter of the environment under
test, which need not have archaudit installed: it uses the standard library only, and loads
cuda_driver.py from beside itself. The parent (child.py) passes a task name, a JSON spec
file and a pipe descriptor; the worker writes one JSON line per event to that pipe, so
output the libraries under test print on stdout or stderr cannot corrupt the protocol:

  {"ev": "begin", "i": 3}                 item 3 is about to run
  {"ev": "result", "i": 3, "status": ..}  item 3 finished
  {"ev": "info", ...}                     task-level facts (devices, versions)

If the process dies between "begin" and "result", the parent knows which item killed it.
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
import sys
import time
import traceback
from typing import Any

_CHANNEL: Any = None  # the event pipe, a text file once opened
_SIGN: Any = None  # the key-holding HMAC (see child.py): only archaudit's own events carry it
_SEQ = [0]
_BEGUN = [0.0]


def emit(**event: Any) -> None:
    if event.get("ev") == "begin":
        _BEGUN[0] = time.perf_counter()
    _SEQ[0] += 1
    line = json.dumps({**event, "seq": _SEQ[0]})
    mac = _SIGN.copy()
    mac.update(line.encode())
    _CHANNEL.write(mac.hexdigest() + " " + line + "\n")
    _CHANNEL.flush()


def result(i: int, status: str, reason: str, gpu: bool = False, **details: Any) -> None:
    emit(ev="result", i=i, status=status, reason=reason, gpu=gpu,
         elapsed=time.perf_counter() - _BEGUN[0], details=details)


def _load_driver_module() -> Any:
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_driver.py")
    spec = importlib.util.spec_from_file_location("_archaudit_cuda_driver", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _exc(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) < 2000 else text[:2000] + " ..."


# ---------------------------------------------------------------------------------------
# inspect: the distribution's metadata and files, as this interpreter sees them
# ---------------------------------------------------------------------------------------

def task_inspect(spec: dict[str, Any]) -> None:
    import importlib.metadata as md
    import platform

    name = spec["params"]["distribution"]
    info = {"python": platform.python_version(), "executable": sys.executable,
            "machine": platform.machine()}
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        emit(ev="info", found=False, **info)
        return
    files = []
    for f in dist.files or ():
        try:
            files.append(os.path.realpath(str(f.locate())))
        except Exception:  # a RECORD line this interpreter cannot place
            continue
    emit(ev="info", found=True, name=dist.metadata["Name"], version=dist.version,
         requires=list(dist.requires or ()), files=files,
         location=os.path.realpath(str(dist.locate_file(""))), **info)


# ---------------------------------------------------------------------------------------
# gpu-info: the driver and the visible devices
# ---------------------------------------------------------------------------------------

def task_gpu_info(spec: dict[str, Any]) -> None:
    cd = _load_driver_module()
    try:
        drv = cd.Driver()
        drv.init()
        emit(ev="info", driver=drv.version(), devices=drv.devices(), error=None)
    except cd.DriverUnavailable as exc:
        emit(ev="info", driver=None, devices=[], error=str(exc))


# ---------------------------------------------------------------------------------------
# load: dlopen one shared library with RTLD_NOW, and explain a failure
# ---------------------------------------------------------------------------------------

ET_DYN = 3  # the ELF facts come from the parent (archaudit.read.elf, smoke.probes.load_item)


def expand_origin(entry: str, origin: str) -> str:
    for token in ("$ORIGIN", "${ORIGIN}"):
        entry = entry.replace(token, origin)
    lib = "lib64" if struct.calcsize("P") == 8 else "lib"
    for token in ("$LIB", "${LIB}"):
        entry = entry.replace(token, lib)
    return os.path.normpath(entry)


def dangling_search_paths(path: str, info: dict[str, Any]) -> list[str]:
    origin = os.path.dirname(os.path.realpath(path))
    out = []
    for kind in ("runpath", "rpath"):
        for entry in info.get(kind, ()):
            if "$PLATFORM" in entry or "${PLATFORM}" in entry:
                continue
            resolved = expand_origin(entry, origin)
            if not os.path.isdir(resolved):
                out.append(f"{kind.upper()} {entry} (-> {resolved}, which does not exist)")
    return out


def resolve_needed(path: str, info: dict[str, Any]) -> dict[str, str | None]:
    """Where each direct NEEDED entry would come from, or None where nothing provides it."""
    origin = os.path.dirname(os.path.realpath(path))
    own = [expand_origin(e, origin) for e in info.get("runpath") or info.get("rpath") or ()]
    env = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    found = {}
    for name in info.get("needed", ()):
        where = None
        if "/" in name:
            where = name if os.path.exists(name) else None
        else:
            dirs = (own + env) if not info.get("runpath") else (env + own)
            for d in dirs:
                candidate = os.path.join(d, name)
                if os.path.exists(candidate):
                    where = candidate
                    break
            if where is None:
                try:  # the system search path: ld.so.cache and the default directories
                    ctypes.CDLL(name, mode=os.RTLD_LAZY | os.RTLD_LOCAL)
                    where = "the system search path"
                except OSError:
                    where = None
        found[name] = where
    return found


def task_load(spec: dict[str, Any]) -> None:
    import platform

    here = platform.machine()
    here = {"amd64": "x86_64", "arm64": "aarch64"}.get(here.lower(), here)
    for i in range(spec["start"], len(spec["items"])):
        path, info = spec["items"][i]["path"], spec["items"][i]["elf"]
        emit(ev="begin", i=i)
        if "unreadable" in info:
            result(i, "FAIL", f"cannot read: {info['unreadable']}")
            continue
        if not info.get("elf"):
            result(i, "SKIP", "not an ELF file (a linker script or data named like a library)")
            continue
        if info.get("inspected") and info["type"] != ET_DYN:
            result(i, "SKIP", f"ELF type {info['type']} is not a shared object; nothing to dlopen")
            continue
        if info.get("inspected") and info["machine"] != here:
            result(i, "SKIP", f"built for {info['machine']}, this machine is {here}")
            continue
        dangling = dangling_search_paths(path, info) if info.get("inspected") else []
        try:
            ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as exc:
            message = str(exc)
            parts = [f"dlopen(RTLD_NOW) failed: {message}"]
            missing = [n for n, w in resolve_needed(path, info).items() if w is None]
            if missing:
                parts.append("missing dependencies: " + ", ".join(missing))
            if "undefined symbol:" in message:
                symbol = message.split("undefined symbol:", 1)[1].strip().split()[0]
                parts.append(f"undefined symbol: {symbol}")
            if dangling:
                parts.append("search paths that resolve to nothing: " + "; ".join(dangling))
            result(i, "FAIL", "; ".join(parts), missing=missing,
                   dangling=dangling, needed=info.get("needed", []))
            continue
        reason = f"dlopen(RTLD_NOW) loaded it with every symbol bound ({len(info.get('needed', []))} NEEDED)"
        if dangling:
            reason += "; warning: " + "; ".join(dangling)
        result(i, "PASS", reason, dangling=dangling, needed=info.get("needed", []))


# ---------------------------------------------------------------------------------------
# device-load: hand each fatbin container to the driver on every visible GPU
# ---------------------------------------------------------------------------------------

def task_device_load(spec: dict[str, Any]) -> None:
    cd = _load_driver_module()
    try:
        drv = cd.Driver()
        drv.init()
        devices = drv.devices()
    except cd.DriverUnavailable as exc:
        emit(ev="info", devices=[], error=str(exc))
        return
    emit(ev="info", devices=devices, error=None, driver=drv.version(),
         jit_disabled=os.environ.get("CUDA_DISABLE_PTX_JIT") == "1")
    level = spec["params"].get("jit_level")  # None: the driver's default optimisation level
    contexts = []
    for d in devices:
        dev = drv.device(d["ordinal"])
        contexts.append((d, drv.retain_primary(dev)))
    for i in range(spec["start"], len(spec["items"])):
        item = spec["items"][i]
        emit(ev="begin", i=i)
        try:
            with open(item["file"], "rb") as f:
                f.seek(item["offset"])
                image = f.read(item["size"])
        except OSError as exc:
            result(i, "FAIL", f"cannot read the container: {_exc(exc)}")
            continue
        if item.get("text"):
            image += b"\0"  # PTX text must be NUL-terminated for cuModuleLoadData
        per_device = []
        for d, ctx in contexts:
            drv.set_current(ctx)
            code, seconds, module = drv.load_data(image, level)
            if module is not None:
                drv.unload(module)
            per_device.append({"gpu": d["ordinal"], "sm": d["sm"], "code": code,
                               "error": None if code == 0 else drv.error_name(code),
                               "text": None if code == 0 else drv.error_text(code),
                               "seconds": seconds})
        ok = all(p["code"] == 0 for p in per_device)
        result(i, "PASS" if ok else "FAIL", "loaded" if ok else "rejected", per_device=per_device)


# ---------------------------------------------------------------------------------------
# torch: nn.Linear and nn.Conv2d with weights from a file, GPU against CPU
# ---------------------------------------------------------------------------------------

TORCH_RTOL, TORCH_ATOL = 1e-4, 1e-4


# step -> (what it is, the module built from torch, the input's shape)
_TORCH_MODELS: dict[str, tuple[str, Any, tuple[int, ...]]] = {
    "linear": ("nn.Linear(64, 32)", lambda torch: torch.nn.Linear(64, 32), (16, 64)),
    "conv": ("nn.Conv2d(3, 8, 3)", lambda torch: torch.nn.Conv2d(3, 8, 3, padding=1), (2, 3, 16, 16)),
}


def _torch_gpu_gate(torch: Any) -> tuple[bool, str]:
    if not torch.cuda.is_available():
        return False, (f"torch {torch.__version__} sees no CUDA device "
                       f"(torch.version.cuda={torch.version.cuda}), so nothing can run on a GPU here")
    major, minor = torch.cuda.get_device_capability(0)
    arch = f"sm_{major}{minor}"
    archs = torch.cuda.get_arch_list()
    ptx_ok = [a for a in archs if a.startswith("compute_") and int(a[8:].rstrip("af")) <= major * 10 + minor]
    if arch not in archs and not ptx_ok:
        return False, (f"torch {torch.__version__} carries no code for {arch} "
                       f"({torch.cuda.get_device_name(0)}); its arch list is {archs}")
    return True, f"{torch.cuda.get_device_name(0)} ({arch})"


def _compare(torch: Any, got: Any, want: Any) -> str:
    torch.testing.assert_close(got, want, rtol=TORCH_RTOL, atol=TORCH_ATOL)
    return f"max |gpu-cpu| {float((got - want).abs().max()):.2e} within rtol={TORCH_RTOL}, atol={TORCH_ATOL}"


def _weights_from_file(torch: Any, make: Any, path: str) -> tuple[Any, Any, int]:
    """A CPU reference saved to path, and a GPU twin whose weights come from that file only."""
    torch.manual_seed(1234)
    ref = make().eval()
    torch.save(ref.state_dict(), path)
    torch.manual_seed(4321)
    gpu = make().to("cuda").eval()
    before = max(float((gpu.state_dict()[k].cpu() - v).abs().max()) for k, v in ref.state_dict().items())
    state = torch.load(path, map_location="cuda", weights_only=True)
    gpu.load_state_dict(state)
    for k, v in ref.state_dict().items():
        if not torch.equal(gpu.state_dict()[k].cpu(), v):
            raise AssertionError(f"parameter {k} on the GPU differs from the file")
    if before == 0.0:
        raise AssertionError("the GPU model's own initial weights already equal the file's")
    return ref, gpu, os.path.getsize(path)


def task_torch(spec: dict[str, Any]) -> None:
    work = spec["params"]["workdir"]
    for i in range(spec["start"], len(spec["items"])):
        step = spec["items"][i]
        emit(ev="begin", i=i)
        try:
            import torch
        except Exception as exc:
            result(i, "SKIP", f"torch is not importable here: {_exc(exc)}", importable=False)
            continue
        ok, where = _torch_gpu_gate(torch)
        if not ok:
            result(i, "SKIP", where, gpu=True)
            continue
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        try:
            if step in _TORCH_MODELS:
                what, make, shape = _TORCH_MODELS[step]
                ref, gpu, size = _weights_from_file(torch, lambda make=make: make(torch),
                                                    os.path.join(work, f"{step}.pt"))
                x = torch.randn(*shape, generator=torch.Generator().manual_seed(7))
                with torch.no_grad():
                    want = ref(x)
                    got = gpu(x.to("cuda"))
                    torch.cuda.synchronize()
                result(i, "PASS", f"{what} with weights loaded from a {size}-byte file ran on "
                       f"{where} and matched CPU: {_compare(torch, got.cpu(), want)}", torch=torch.__version__)
            elif step == "aoti-compile":
                import torch._inductor

                torch.manual_seed(1234)
                model = torch.nn.Linear(64, 32).to("cuda").eval()
                x = torch.randn(16, 64, generator=torch.Generator().manual_seed(7)).to("cuda")
                with torch.no_grad():
                    ep = torch.export.export(model, (x,))
                    t0 = time.perf_counter()
                    pkg = torch._inductor.aoti_compile_and_package(
                        ep, package_path=os.path.join(work, "linear_aoti.pt2"))
                    seconds = time.perf_counter() - t0
                    torch.save({"x": x.cpu(), "want": model(x).cpu()}, os.path.join(work, "aoti_io.pt"))
                result(i, "PASS", f"AOTInductor compiled nn.Linear(64, 32) for {where} into a "
                       f"{os.path.getsize(pkg)}-byte package in {seconds:.1f} s")
            elif step == "aoti-load":
                pkg = os.path.join(work, "linear_aoti.pt2")
                if not os.path.exists(pkg):
                    result(i, "SKIP", "not run: there is no compiled package (aoti-compile did not pass)")
                    continue
                import torch._inductor

                io = torch.load(os.path.join(work, "aoti_io.pt"), weights_only=True)
                runner = torch._inductor.aoti_load_package(pkg)
                with torch.no_grad():
                    got = runner(io["x"].to("cuda"))
                    torch.cuda.synchronize()
                result(i, "PASS", f"a fresh process loaded the AOTInductor package with "
                       f"aoti_load_package and ran it on {where}: {_compare(torch, got.cpu(), io['want'])}")
            else:
                result(i, "FAIL", f"unknown torch step {step!r}")
        except Exception as exc:
            result(i, "FAIL", _exc(exc), traceback=traceback.format_exc()[-3000:])


# ---------------------------------------------------------------------------------------
# executorch: the CUDA delegate with and without weights (pytorch/executorch#22089)
# ---------------------------------------------------------------------------------------

def task_executorch(spec: dict[str, Any]) -> None:
    work = spec["params"]["workdir"]
    st: dict[str, Any] = {}
    # (reason, gpu) once a step that later ones need did not pass; the parent passes the
    # first child's verdict to the second (the negative control runs in a fresh process).
    blocked = tuple(spec["params"]["blocked"]) if spec["params"].get("blocked") else None
    for i in range(spec["start"], len(spec["items"])):
        step = spec["items"][i]
        emit(ev="begin", i=i)
        try:
            _executorch_step(i, step, work, st, blocked)
        except _Blocked as b:
            blocked = (b.reason, b.gpu)
        except Exception as exc:
            result(i, "FAIL", _exc(exc), traceback=traceback.format_exc()[-3000:])
            if step in ("export-add", "export-linear"):
                blocked = (f"{step} failed", False)


class _Blocked(Exception):
    def __init__(self, reason: str, gpu: bool):
        super().__init__(reason)
        self.reason, self.gpu = reason, gpu


def _executorch_step(i: int, step: str, work: str, st: dict[str, Any], blocked: Any) -> None:
    blob: Any  # names reused across the steps below with values of different types
    pte: Any
    f: Any
    ex: tuple[Any, ...]
    if step == "import":
        try:
            _executorch_import(st)
        except Exception as exc:
            result(i, "SKIP", f"executorch is not importable here: {_exc(exc)}", importable=False)
            raise _Blocked("executorch is not importable", False) from None
        if st["pybindings_error"]:
            result(i, "PASS", f"executorch {st['version']} imported CudaPartitioner and "
                   f"to_edge_transform_and_lower (export can run); its pybindings did not import, so "
                   f"nothing can run: {st['pybindings_error']}", backends=[],
                   pybindings_error=st["pybindings_error"])
        else:
            result(i, "PASS", f"executorch {st['version']} imported CudaPartitioner, "
                   f"to_edge_transform_and_lower and the pybindings; registered backends: "
                   f"{', '.join(st['backends']) or 'none'}", backends=st["backends"])
        return
    if blocked:
        result(i, "SKIP", f"not run: {blocked[0]}", gpu=blocked[1])
        return
    if "ok" not in st:
        _executorch_import(st)  # a fresh child (the negative control) imports again
    import torch

    needs_runtime = step in ("run-add", "run-linear", "no-data")
    if needs_runtime and st["pybindings_error"]:
        result(i, "FAIL", f"executorch's pybindings do not import: {st['pybindings_error']}")
        return
    if needs_runtime and "CudaBackend" not in st["backends"]:
        result(i, "SKIP", f"executorch {st['version']} registers no CudaBackend (registered: "
               f"{', '.join(st['backends']) or 'none'}): a CPU build, so the delegate cannot run here",
               gpu=True)
        return
    if needs_runtime and not torch.cuda.is_available():
        result(i, "SKIP", "torch sees no CUDA device, so the CUDA delegate cannot run here", gpu=True)
        return
    sm = ""
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(0)
        sm = f"sm_{major}{minor}"
    if step in ("export-add", "export-linear"):
        from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
        from executorch.exir import to_edge_transform_and_lower

        if step == "export-add":
            class Add(torch.nn.Module):  # type: ignore[misc]  # torch is untyped here
                def forward(self, x: Any, y: Any) -> Any:
                    return x + y

            model, ex = Add().eval(), (torch.randn(3, 4), torch.randn(3, 4))
        else:
            torch.manual_seed(0)
            model = torch.nn.Linear(8, 4).eval()
            ex = (torch.randn(2, 8),)
        from executorch.backends.cuda.cuda_backend import CudaBackend

        _flatc()
        # ExecuTorch 1.2 needs the method name in the compile specs (an empty list fails at
        # lowering: "Could not find method name in compile specs: []"), as its own
        # backends/cuda/tests/test_cuda_export.py passes it.
        specs = [CudaBackend.generate_method_name_compile_spec("forward")]
        try:
            prog = to_edge_transform_and_lower(torch.export.export(model, ex),
                                               partitioner=[CudaPartitioner(specs)]).to_executorch()
        except Exception as exc:
            if not torch.cuda.is_available():
                result(i, "SKIP", f"export through CudaPartitioner needs a CUDA device here and failed: "
                       f"{_exc(exc)}", gpu=True)
                raise _Blocked(f"{step} could not run without a GPU", True) from None
            raise
        if b"CudaBackend" not in prog.buffer:
            result(i, "FAIL", "the exported program carries no CudaBackend delegate: the partitioner "
                   "declined the model, so it would run on the portable kernels")
            raise _Blocked(f"{step} produced no CUDA delegate", False)
        key = step.split("-")[1]
        d = os.path.join(work, key)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.pte"), "wb") as f:
            prog.write_to_file(f)
        prog.write_tensor_data_to_file(d)
        st[key] = {"prog": prog, "model": model, "ex": ex, "dir": d}
        blob = os.path.join(d, "aoti_cuda_blob.ptd")
        if not os.path.exists(blob):
            result(i, "FAIL", f"export wrote no aoti_cuda_blob.ptd (files: {sorted(os.listdir(d))})")
            raise _Blocked("no aoti_cuda_blob.ptd", False)
        pte = os.path.getsize(os.path.join(d, "model.pte"))
        result(i, "PASS", f"exported through CudaPartitioner on {sm or 'this machine'}: model.pte is {pte} bytes "
               f"and carries the CudaBackend delegate; aoti_cuda_blob.ptd is {os.path.getsize(blob)} bytes",
               pte_bytes=pte, blob_bytes=os.path.getsize(blob))
    elif step == "blob":
        fc = st["linear"]["model"]
        weight_bytes = fc.weight.numel() * fc.weight.element_size()
        blob = os.path.getsize(os.path.join(st["linear"]["dir"], "aoti_cuda_blob.ptd"))
        empty = os.path.getsize(os.path.join(st["add"]["dir"], "aoti_cuda_blob.ptd"))
        if blob - empty >= weight_bytes:
            result(i, "PASS", f"aoti_cuda_blob.ptd is {blob} bytes, {blob - empty} more than the weightless "
                   f"model's {empty}: at least the {weight_bytes} bytes of the weight matrix",
                   blob_bytes=blob, weightless_blob_bytes=empty, weight_bytes=weight_bytes)
        else:
            result(i, "FAIL", f"aoti_cuda_blob.ptd is {blob} bytes, only {blob - empty} more than the "
                   f"weightless model's {empty}, less than the {weight_bytes}-byte weight matrix")
    elif step in ("run-add", "run-linear"):
        from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

        key = step.split("-")[1]
        s = st[key]
        with open(os.path.join(s["dir"], "model.pte"), "rb") as f:
            pte = f.read()
        with torch.no_grad():
            want = s["model"](*s["ex"])
        if key == "add":
            module = _load_for_executorch_from_buffer(pte)
        else:
            with open(os.path.join(s["dir"], "aoti_cuda_blob.ptd"), "rb") as f:
                blob = f.read()
            module = _load_for_executorch_from_buffer(pte, blob)
        got = module.forward(list(s["ex"]))[0]
        torch.testing.assert_close(got.cpu(), want, rtol=1e-3, atol=1e-3)
        if key == "add":
            result(i, "PASS", f"a CUDA-delegated model ran on {sm} and matched eager (rtol=atol=1e-3)")
        else:
            result(i, "PASS", f"a CUDA-delegated model with weights ran on {sm} from a {len(blob)}-byte "
                   f"aoti_cuda_blob.ptd and matched eager (rtol=atol=1e-3)")
    elif step == "no-data":
        from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

        d = os.path.join(work, "linear")
        if not os.path.exists(os.path.join(d, "model.pte")):
            result(i, "SKIP", "not run: there is no exported weighted program")
            return
        with open(os.path.join(d, "model.pte"), "rb") as f:
            pte = f.read()
        torch.manual_seed(0)
        x = torch.randn(2, 8)
        try:
            module = _load_for_executorch_from_buffer(pte)
            out = module.forward([x])[0]
            torch.cuda.synchronize()
        except Exception as exc:
            result(i, "PASS", f"without aoti_cuda_blob.ptd the weighted program failed, as it must: {_exc(exc)}")
            return
        result(i, "FAIL", f"the weighted program ran without its data file and returned a "
               f"{tuple(out.shape)} tensor: its weights do not come from aoti_cuda_blob.ptd")
    else:
        result(i, "FAIL", f"unknown executorch step {step!r}")


def _flatc() -> None:
    """Serialising a program needs flatc: on PATH, or the one the wheel ships (FLATC_EXECUTABLE)."""
    import shutil

    if os.environ.get("FLATC_EXECUTABLE") or shutil.which("flatc"):
        return
    import executorch

    for base in getattr(executorch, "__path__", ()):
        candidate = os.path.join(base, "data", "bin", "flatc")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            os.environ["FLATC_EXECUTABLE"] = candidate
            return


def _executorch_import(st: dict[str, Any]) -> None:
    """Import what export needs; the pybindings (what running needs) may fail on their own."""
    import importlib.metadata as md

    import executorch
    import torch  # noqa: F401
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner  # noqa: F401
    from executorch.exir import to_edge_transform_and_lower  # noqa: F401

    try:
        version = md.version("executorch")
    except md.PackageNotFoundError:
        version = getattr(executorch, "__version__", "?")
    st["version"] = version
    try:
        from executorch.extension.pybindings import portable_lib

        st["backends"] = sorted(portable_lib._get_registered_backend_names())
        st["pybindings_error"] = None
    except Exception as exc:
        st["backends"] = []
        st["pybindings_error"] = _exc(exc)
    st["ok"] = True


def task_plugin(spec: dict[str, Any]) -> None:
    """Load one archaudit.probes entry point and run it; its rows go back as one result."""
    import dataclasses
    from importlib.metadata import EntryPoint

    p = spec["params"]
    emit(ev="begin", i=0)
    try:
        obj = EntryPoint(name=p["name"], value=p["value"], group="archaudit.probes").load()
        probe = obj() if isinstance(obj, type) else obj
        if "ctx" not in p:
            result(0, "PASS", str(getattr(probe, "description", "") or "(no description)"))
            return
        from archaudit.smoke.probes import ProbeContext

        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) and k != "child_env" else v
                                  for k, v in p["ctx"].items()}
        ctx = ProbeContext(**fields)
        rows = [dataclasses.asdict(r) for r in probe.run(ctx)]
        result(0, "PASS", f"{len(rows)} row(s)", rows=rows)
    except BaseException as exc:  # a broken plugin is a row
        result(0, "FAIL", _exc(exc), traceback=traceback.format_exc()[-3000:])


TASKS = {"plugin": task_plugin, "inspect": task_inspect, "gpu-info": task_gpu_info, "load": task_load,
         "device-load": task_device_load, "torch": task_torch, "executorch": task_executorch}


def main(argv: list[str], key: bytes) -> int:
    """Run one task. The caller (child.BOOT) read the key from its own pipe before anything else ran."""
    global _CHANNEL, _SIGN
    import hashlib
    import hmac

    task, spec_path, fd = argv[0], argv[1], int(argv[2])
    _SIGN = hmac.new(key, digestmod=hashlib.sha256)
    _CHANNEL = os.fdopen(fd, "w", buffering=1)
    with open(spec_path) as f:
        spec = json.load(f)
    TASKS[task](spec)
    emit(ev="end")
    return 0
