"""What runs inside each probe's child interpreter.

Two kinds of task. The trusted ones (child.TRUSTED_TASKS: inspect, gpu-info, device-load) run
no code of the wheel under test and report results with a status. Every other task runs the
wheel's code on purpose (dlopen, `import torch`) and reports observations only (observe()):
that code shares the process and could rewrite anything here, so archaudit's process decides
every verdict from what these say, against references it computed itself.

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
_ACK: list[int | None] = [None]  # untrusted tasks: after a result, wait for archaudit's byte here
_TRACE: list[Any] = [None, ""]  # the launch tracer of a traced task (cupti.py) and the directory it writes to


def emit(**event: Any) -> None:
    if event.get("ev") == "begin":
        _BEGUN[0] = time.perf_counter()
    _SEQ[0] += 1
    line = json.dumps({**event, "seq": _SEQ[0]})
    mac = _SIGN.copy()
    mac.update(line.encode())
    _CHANNEL.write(mac.hexdigest() + " " + line + "\n")
    _CHANNEL.flush()
    if event.get("ev") == "result" and _TRACE[0] is not None:
        try:
            _TRACE[0].write(_TRACE[1])  # each item's launches are on disk before the next item runs
        except OSError:
            pass
    if event.get("ev") == "result" and _ACK[0] is not None:
        os.read(_ACK[0], 1)  # archaudit has looked at this process (child.open_devices)


def result(i: int, status: str, reason: str, gpu: bool = False, **details: Any) -> None:
    emit(ev="result", i=i, status=status, reason=reason, gpu=gpu,
         elapsed=time.perf_counter() - _BEGUN[0], details=details)


def observe(i: int, **obs: Any) -> None:
    """One item's observation (the parent replaces any status an untrusted child writes)."""
    emit(ev="result", i=i, status="OBS", reason="", gpu=False,
         elapsed=time.perf_counter() - _BEGUN[0], details=obs)


def _load_driver_module() -> Any:
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_driver.py")
    spec = importlib.util.spec_from_file_location("_archaudit_cuda_driver", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_sibling(name: str) -> Any:
    """A module beside this file (cuda_driver.py, cupti.py), loaded by path: archaudit need not be installed."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_archaudit_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _start_trace(spec: dict[str, Any]) -> None:
    """A traced task (params["trace_out"]): CUPTI's launch tracer starts before the task imports
    anything of the wheel, and writes what it counted after every item and at the end."""
    out = spec["params"].get("trace_out")
    if not out:
        return
    cupti = _load_sibling("cupti")
    try:
        tracer = cupti.start_tracer(list(sys.path))
    except cupti.TracerUnavailable as exc:
        with open(os.path.join(out, f"{os.getpid()}.error"), "w") as f:
            f.write(str(exc))  # read by the parent (trace.read_trace): a trace that did not start fails
        emit(ev="info", trace_error=str(exc))
        return
    _TRACE[0], _TRACE[1] = tracer, out
    emit(ev="info", trace_library=tracer.library, trace_version=tracer.version())


def _stop_trace() -> None:
    tracer = _TRACE[0]
    if tracer is not None:
        try:
            tracer.write(_TRACE[1])
        finally:
            tracer.stop()
            _TRACE[0] = None


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
    # The environment's paths come as params (a trusted child has none of them on sys.path):
    # metadata is read from them, no module of the environment is imported.
    paths = spec["params"].get("paths") or sys.path
    dist = next(iter(md.distributions(name=name, path=paths)), None)
    if dist is None:
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

# The ELF facts come from the parent (archaudit.read.elf, smoke.probes.load_item), which also judges.


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
    """dlopen each library; report what happened (the parent judges: probes.judge_load)."""
    for i in range(spec["start"], len(spec["items"])):
        path, info = spec["items"][i]["path"], spec["items"][i]["elf"]
        emit(ev="begin", i=i)
        try:
            ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as exc:
            missing = [n for n, w in resolve_needed(path, info).items() if w is None]
            observe(i, loaded=False, message=str(exc), missing=missing)
            continue
        observe(i, loaded=True)


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
# model probes: the child computes, archaudit judges (probes.py, reference.py)
# ---------------------------------------------------------------------------------------
# Each item's report is an observation: what was imported, what ran where, the output's
# numbers, an error's type and text. The inputs and weights come from archaudit's process
# (params["data"]); the child never learns what the answer should be.

def _data(spec: dict[str, Any]) -> dict[str, Any]:
    with open(spec["params"]["data"]) as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


def _tensor(torch: Any, t: dict[str, Any]) -> Any:
    return torch.tensor(t["values"], dtype=torch.float32).reshape(t["shape"])


def _numbers(out: Any) -> dict[str, Any]:
    """An output tensor as raw numbers, with where it lived."""
    return {"device": str(out.device), "shape": list(out.shape),
            "output": [float(v) for v in out.detach().to("cpu").reshape(-1).tolist()]}


def _error(exc: BaseException) -> dict[str, Any]:
    return {"error": _exc(exc), "error_type": type(exc).__name__, "traceback": traceback.format_exc()[-3000:]}


def _torch_facts(torch: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {"importable": True, "torch": str(torch.__version__),
                             "torch_cuda": str(torch.version.cuda), "cuda_available": bool(torch.cuda.is_available())}
    if facts["cuda_available"]:
        facts["arch_list"] = list(torch.cuda.get_arch_list())
        facts["capability"] = list(torch.cuda.get_device_capability(0))
        facts["device_name"] = str(torch.cuda.get_device_name(0))
    return facts


def _with_weights(torch: Any, module: Any, tensors: dict[str, Any]) -> Any:
    with torch.no_grad():
        for name, t in tensors.items():
            getattr(module, name).copy_(_tensor(torch, t))
    return module


_TORCH_MAKE = {
    "linear": lambda torch: torch.nn.Linear(64, 32),
    "conv": lambda torch: torch.nn.Conv2d(3, 8, 3, padding=1),
}


def _torch_with_cuda(i: int) -> tuple[Any, dict[str, Any]] | None:
    """torch and its facts for step i, or None once the step is observed as torch that does not
    import or sees no CUDA device (the torch model steps and the trace sweep start alike)."""
    try:
        import torch
    except Exception as exc:
        observe(i, importable=False, error=_exc(exc))
        return None
    facts = _torch_facts(torch)
    if not facts["cuda_available"]:
        observe(i, **facts)
        return None
    return torch, facts


def task_torch(spec: dict[str, Any]) -> None:
    work = spec["params"]["workdir"]
    data = _data(spec)
    for i in range(spec["start"], len(spec["items"])):
        step = spec["items"][i]
        emit(ev="begin", i=i)
        got_torch = _torch_with_cuda(i)
        if got_torch is None:
            continue
        torch, facts = got_torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        try:
            observe(i, **facts, **_torch_step(torch, step, work, data))
        except Exception as exc:
            observe(i, **facts, **_error(exc))


def _torch_step(torch: Any, step: str, work: str, data: dict[str, Any]) -> dict[str, Any]:
    if step in _TORCH_MAKE:
        d = data[step]
        path = os.path.join(work, f"{step}.pt")
        torch.save(_with_weights(torch, _TORCH_MAKE[step](torch), d["weights"]).state_dict(), path)
        torch.manual_seed(4321)  # the GPU model starts from other weights: only the file's can match
        gpu = _TORCH_MAKE[step](torch).to("cuda").eval()
        gpu.load_state_dict(torch.load(path, map_location="cuda", weights_only=True))
        with torch.no_grad():
            out = gpu(_tensor(torch, d["x"]).to("cuda"))
            torch.cuda.synchronize()
        return {"file_bytes": os.path.getsize(path), **_numbers(out)}
    if step == "aoti-compile":
        import importlib

        inductor = importlib.import_module("torch._inductor")
        d = data["aoti"]
        model = _with_weights(torch, torch.nn.Linear(64, 32), d["weights"]).to("cuda").eval()
        x = _tensor(torch, d["x"]).to("cuda")
        with torch.no_grad():
            t0 = time.perf_counter()
            pkg = inductor.aoti_compile_and_package(torch.export.export(model, (x,)),
                                                           package_path=os.path.join(work, "linear_aoti.pt2"))
        return {"package": str(pkg), "seconds": time.perf_counter() - t0}
    if step == "aoti-load":
        import importlib

        d = data["aoti"]
        runner = importlib.import_module("torch._inductor").aoti_load_package(os.path.join(work, "linear_aoti.pt2"))
        with torch.no_grad():
            out = runner(_tensor(torch, d["x"]).to("cuda"))
            torch.cuda.synchronize()
        return _numbers(out)
    raise ValueError(f"unknown torch step {step!r}")


# ---------------------------------------------------------------------------------------
# executorch: the CUDA delegate with and without weights (pytorch/executorch#22089)
# ---------------------------------------------------------------------------------------

class HeldProgram:
    """A loaded ExecuTorch module with the bytes it reads. ExecuTorch 1.2's pybindings read the
    .pte/.ptd buffers in place without keeping a reference: a temporary buffer is freed while the
    runtime still reads it (a segfault, InvalidProgram, an abort), so the buffers live here, as
    long as the module."""

    def __init__(self, module: Any, buffers: tuple[bytes, ...]):
        self.module = module
        self.buffers = buffers


def load_held(loader: Any, pte_path: str, ptd_path: str | None) -> HeldProgram:
    """loader(pte[, ptd]) over bytes that stay referenced by the returned HeldProgram."""
    with open(pte_path, "rb") as f:
        pte = f.read()
    if ptd_path is None:
        return HeldProgram(loader(pte), (pte,))
    with open(ptd_path, "rb") as f:
        ptd = f.read()
    return HeldProgram(loader(pte, ptd), (pte, ptd))


def task_executorch(spec: dict[str, Any]) -> None:
    p = spec["params"]
    data = _data(spec)
    setup = None
    for i in range(spec["start"], len(spec["items"])):
        item = spec["items"][i]
        emit(ev="begin", i=i)
        if setup is None:
            try:
                setup = _executorch_setup(p.get("backend_library"))
            except Exception as exc:
                observe(i, importable=False, error=_exc(exc))
                setup = {"importable": False, "error": _exc(exc)}
                continue
        if not setup.get("importable"):
            observe(i, **setup)
            continue
        try:
            observe(i, **setup, **_executorch_step(item, data))
        except Exception as exc:
            observe(i, **setup, **_error(exc))


def _executorch_setup(backend_library: str | None) -> dict[str, Any]:
    """Import executorch; read the registered backends; load the CUDA backend library the parent
    found (when CudaBackend is not linked in) and read them again."""
    import importlib.metadata as md

    import executorch
    import torch
    from executorch.backends.cuda.cuda_partitioner import CudaPartitioner  # noqa: F401
    from executorch.exir import to_edge_transform_and_lower  # noqa: F401

    try:
        version = md.version("executorch")
    except md.PackageNotFoundError:
        version = str(getattr(executorch, "__version__", "?"))
    facts: dict[str, Any] = {"importable": True, "version": version,
                             "cuda_available": bool(torch.cuda.is_available())}
    try:
        from executorch.extension.pybindings import portable_lib

        facts["backends_before"] = sorted(portable_lib._get_registered_backend_names())
        facts["pybindings_error"] = None
    except Exception as exc:
        facts["backends_before"] = []
        facts["pybindings_error"] = _exc(exc)
        return facts
    facts["backends"] = facts["backends_before"]
    if backend_library and "CudaBackend" not in facts["backends_before"]:
        try:  # global: the delegate's compiled object binds its aoti_torch_* calls to these shims
            ctypes.CDLL(backend_library, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
            facts["backend_library_error"] = None
        except OSError as exc:
            facts["backend_library_error"] = _exc(exc)
        facts["backends"] = sorted(portable_lib._get_registered_backend_names())
    return facts


def _executorch_step(item: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    import torch

    step = item["step"]
    if step == "import":
        return {}
    if step.startswith("export"):
        from executorch.backends.cuda.cuda_backend import CudaBackend
        from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
        from executorch.exir import to_edge_transform_and_lower

        d = data[item["model"]]
        if item["model"] == "add":
            class Add(torch.nn.Module):  # type: ignore[misc]  # torch is untyped here
                def forward(self, x: Any, y: Any) -> Any:
                    return x + y

            model: Any = Add().eval()
        else:
            model = _with_weights(torch, torch.nn.Linear(8, 4), d["weights"]).eval()
        ex = tuple(_tensor(torch, t) for t in d["inputs"])
        _flatc()
        # ExecuTorch 1.2 needs the method name in the compile specs (an empty list fails at
        # lowering: "Could not find method name in compile specs: []"), as its own
        # backends/cuda/tests/test_cuda_export.py passes it.
        specs = [CudaBackend.generate_method_name_compile_spec("forward")]
        prog = to_edge_transform_and_lower(torch.export.export(model, ex),
                                           partitioner=[CudaPartitioner(specs)]).to_executorch()
        os.makedirs(item["dir"], exist_ok=True)
        with open(os.path.join(item["dir"], "model.pte"), "wb") as f:
            prog.write_to_file(f)
        prog.write_tensor_data_to_file(item["dir"])
        return {"files": sorted(os.listdir(item["dir"]))}
    if step == "run":
        from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

        held = load_held(_load_for_executorch_from_buffer, item["pte"], item.get("ptd"))
        inputs = [_tensor(torch, t) for t in data[item["inputs"]]["inputs"]]
        out = held.module.forward(inputs)[0]
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        facts = _numbers(out)
        del held
        return facts
    raise ValueError(f"unknown executorch step {step!r}")


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


# ---------------------------------------------------------------------------------------
# jax: a small MLP with real weights, jitted on the GPU; a jax.export artifact through bytes
# ---------------------------------------------------------------------------------------

def task_jax(spec: dict[str, Any]) -> None:
    p = spec["params"]
    data = _data(spec)
    for i in range(spec["start"], len(spec["items"])):
        step = spec["items"][i]
        emit(ev="begin", i=i)
        try:
            import jax
            import numpy as np

            # JAX's default matmul precision on NVIDIA GPUs is TF32 (a max error of 4.8e-3 on
            # this MLP on an H200): the reference is float64, so ask for full float32.
            jax.config.update("jax_default_matmul_precision", "highest")
            devices = jax.devices()
        except Exception as exc:
            observe(i, importable=False, error=_exc(exc))
            continue
        facts: dict[str, Any] = {"importable": True, "jax": str(jax.__version__),
                                 "backend": str(jax.default_backend()),
                                 "devices": [f"{d.platform}:{getattr(d, 'device_kind', '?')}" for d in devices]}
        if facts["backend"] not in ("gpu", "cuda", "rocm"):
            observe(i, **facts)
            continue
        try:
            observe(i, **facts, **_jax_step(jax, np, step, p["workdir"], data))
        except Exception as exc:
            observe(i, **facts, **_error(exc))


def _jax_params(np: Any, d: dict[str, Any], wrong: bool = False) -> Any:
    def arr(t: dict[str, Any]) -> Any:
        return np.asarray(t["values"], dtype=np.float32).reshape(t["shape"])

    w1 = arr(d["w1"])
    if wrong:
        w1 = w1[: w1.shape[0] // 2]  # rows cut in half: (8, 16) becomes (4, 16)
    return (w1, arr(d["b1"]), arr(d["w2"]), arr(d["b2"])), arr(d["x"])


def _jax_out(out: Any, np: Any) -> dict[str, Any]:
    devs = sorted(f"{d.platform}:{d.id}" for d in getattr(out, "devices", lambda: set())())
    host = np.asarray(out, dtype=np.float64)
    return {"device": ",".join(devs), "shape": list(host.shape), "output": [float(v) for v in host.reshape(-1)]}


def _jax_step(jax: Any, np: Any, step: str, work: str, data: dict[str, Any]) -> dict[str, Any]:
    import jax.numpy as jnp

    def mlp(params: Any, x: Any) -> Any:
        w1, b1, w2, b2 = params
        return jnp.tanh(x @ w1 + b1) @ w2 + b2

    artifact = os.path.join(work, "mlp.jax_export")
    params, x = _jax_params(np, data["mlp"])
    gpu = jax.devices()[0]
    if step == "jit":
        out = jax.jit(mlp)(jax.device_put(params, gpu), jax.device_put(x, gpu))
        out.block_until_ready()
        return _jax_out(out, np)
    if step == "export":
        from jax import export

        exported = export.export(jax.jit(mlp))(params, x)
        blob = exported.serialize()
        with open(artifact, "wb") as sink:
            sink.write(blob)
        return {"artifact_bytes": len(blob), "platforms": list(exported.platforms)}
    from jax import export

    with open(artifact, "rb") as source:
        rehydrated = export.deserialize(bytearray(source.read()))
    if step == "roundtrip":
        out = rehydrated.call(jax.device_put(params, gpu), jax.device_put(x, gpu))
        out.block_until_ready()
        return _jax_out(out, np)
    if step == "wrong-shape":
        bad, _ = _jax_params(np, data["mlp"], wrong=True)
        try:
            out = rehydrated.call(bad, x)
            out.block_until_ready()
        except Exception as exc:
            return {"refused": True, "error": _exc(exc), "error_type": type(exc).__name__,
                    "wrong_shape": list(bad[0].shape)}
        return {"refused": False, "wrong_shape": list(bad[0].shape), **_jax_out(out, np)}
    raise ValueError(f"unknown jax step {step!r}")



def task_plugin(spec: dict[str, Any]) -> None:
    """Load one archaudit.probes entry point and run it; its rows go back as one observation.
    A plugin's rows are its own word (PluginProbe names the plugin in each)."""
    import dataclasses
    from importlib.metadata import EntryPoint

    p = spec["params"]
    emit(ev="begin", i=0)
    try:
        obj = EntryPoint(name=p["name"], value=p["value"], group="archaudit.probes").load()
        probe = obj() if isinstance(obj, type) else obj
        if "ctx" not in p:
            observe(0, ok=True, description=str(getattr(probe, "description", "") or "(no description)"))
            return
        from archaudit.smoke.context import ProbeContext

        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) and k != "child_env" else v
                                  for k, v in p["ctx"].items()}
        ctx = ProbeContext(**fields)
        rows = [dataclasses.asdict(r) for r in probe.run(ctx)]
        observe(0, ok=True, rows=rows)
    except BaseException as exc:  # a broken plugin is a row
        observe(0, ok=False, error=_exc(exc), traceback=traceback.format_exc()[-3000:])


# ---------------------------------------------------------------------------------------
# trace-sweep: torch operations that reach the vendor libraries, run under the launch tracer
# ---------------------------------------------------------------------------------------
# Each step reports what it ran (or why it did not: a GPU without fp8, without 2:4 sparsity);
# the launches themselves are what the tracer counted (params["trace_out"]), judged by the parent.

def _sweep_matmul(torch: Any, dtype: str, n: int) -> dict[str, Any]:
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    dt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a = torch.randn(n, n, device="cuda", dtype=dt)
    b = torch.randn(n, n, device="cuda", dtype=dt)
    out = a @ b
    lt = torch.nn.functional.linear(a, b, torch.randn(n, device="cuda", dtype=dt))  # cuBLASLt's epilogue
    torch.backends.cuda.matmul.allow_tf32 = False
    return {"shape": list(out.shape), "linear_shape": list(lt.shape), "dtype": str(dt)}


def _sweep_fp8(torch: Any, n: int) -> dict[str, Any]:
    if tuple(torch.cuda.get_device_capability(0)) < (8, 9):
        return {"not_run": "fp8 matmul (torch._scaled_mm) needs compute capability 8.9 or newer"}
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return {"shape": list(out.shape)}


def _sweep_sparse24(torch: Any, n: int) -> dict[str, Any]:
    if tuple(torch.cuda.get_device_capability(0)) < (8, 0):
        return {"not_run": "2:4 semi-structured sparsity needs compute capability 8.0 or newer"}
    from torch.sparse import to_sparse_semi_structured

    mask = torch.tensor([1, 1, 0, 0], device="cuda", dtype=torch.float16).tile(n, n // 4)
    w = torch.randn(n, n, device="cuda", dtype=torch.float16) * mask
    x = torch.randn(n, n, device="cuda", dtype=torch.float16)
    out = torch.nn.functional.linear(x, to_sparse_semi_structured(w))
    return {"shape": list(out.shape)}


def _sweep_step(torch: Any, step: str, n: int) -> dict[str, Any]:
    if step.startswith("matmul-") and step != "matmul-fp8":
        return _sweep_matmul(torch, step.split("-", 1)[1], n)
    if step == "matmul-fp8":
        return _sweep_fp8(torch, n)
    if step == "conv":
        torch.backends.cudnn.allow_tf32 = False
        x = torch.randn(8, 16, 64, 64, device="cuda")
        out = torch.nn.functional.conv2d(x, torch.randn(32, 16, 3, 3, device="cuda"), padding=1)
        half = torch.nn.functional.conv2d(x.half(), torch.randn(32, 16, 3, 3, device="cuda").half(), padding=1)
        return {"shape": list(out.shape), "half_shape": list(half.shape)}
    if step == "sdpa":
        q, k, v = (torch.randn(4, 8, 256, 64, device="cuda", dtype=torch.float16) for _ in range(3))
        return {"shape": list(torch.nn.functional.scaled_dot_product_attention(q, k, v).shape)}
    if step == "fft":
        return {"shape": list(torch.fft.rfft2(torch.randn(16, 256, 256, device="cuda")).shape)}
    if step == "sparse":
        dense = torch.randn(n, n, device="cuda") * (torch.rand(n, n, device="cuda") < 0.05)
        out = torch.sparse.mm(dense.to_sparse_csr(), torch.randn(n, 64, device="cuda"))
        return {"shape": list(out.shape)}
    if step == "sparse-24":
        return _sweep_sparse24(torch, n)
    raise ValueError(f"unknown sweep step {step!r}")


def task_trace_sweep(spec: dict[str, Any]) -> None:
    n = int(spec["params"].get("size", 512))
    repeat = int(spec["params"].get("repeat", 1))
    for i in range(spec["start"], len(spec["items"])):
        step = spec["items"][i]
        emit(ev="begin", i=i)
        got_torch = _torch_with_cuda(i)
        if got_torch is None:
            continue
        torch, facts = got_torch
        try:
            t0 = time.perf_counter()
            for _ in range(repeat):
                got = _sweep_step(torch, step, n)
            torch.cuda.synchronize()
            observe(i, **facts, **got, seconds=time.perf_counter() - t0)
        except Exception as exc:
            observe(i, **facts, **_error(exc))


TASKS = {"plugin": task_plugin, "inspect": task_inspect, "gpu-info": task_gpu_info, "load": task_load,
         "device-load": task_device_load, "torch": task_torch, "executorch": task_executorch, "jax": task_jax,
         "trace-sweep": task_trace_sweep}


def main(argv: list[str], key: bytes, ack_fd: int | None = None) -> int:
    """Run one task. The caller (child.BOOT) read the key from its own pipe before anything else ran;
    that pipe then carries archaudit's acknowledgements of results (spec["ack"])."""
    global _CHANNEL, _SIGN
    import hashlib
    import hmac

    task, spec_path, fd = argv[0], argv[1], int(argv[2])
    _SIGN = hmac.new(key, digestmod=hashlib.sha256)
    _CHANNEL = os.fdopen(fd, "w", buffering=1)
    with open(spec_path) as f:
        spec = json.load(f)
    if ack_fd is not None:
        if spec.get("ack"):
            _ACK[0] = ack_fd
        else:
            os.close(ack_fd)
    _start_trace(spec)
    TASKS[task](spec)
    _stop_trace()
    emit(ev="end")
    return 0
