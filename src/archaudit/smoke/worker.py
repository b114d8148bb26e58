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
_STEPS: list[Any] = [None]  # worker_steps.py, once a task needs it


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
    emit(
        ev="result",
        i=i,
        status=status,
        reason=reason,
        gpu=gpu,
        elapsed=time.perf_counter() - _BEGUN[0],
        details=details,
    )


def observe(i: int, **obs: Any) -> None:
    """One item's observation (the parent replaces any status an untrusted child writes)."""
    emit(ev="result", i=i, status="OBS", reason="", gpu=False, elapsed=time.perf_counter() - _BEGUN[0], details=obs)


def _load_sibling(name: str) -> Any:
    """A module beside this file (cuda_driver.py, cupti.py, worker_steps.py), loaded by path: archaudit need
    not be installed."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_archaudit_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _steps() -> Any:
    """worker_steps.py, what the framework tasks compute, loaded once by path."""
    if _STEPS[0] is None:
        _STEPS[0] = _load_sibling("worker_steps")
    return _STEPS[0]


def _exc(exc: BaseException) -> str:
    """An exception as an observation tells it (worker_steps.exc_text)."""
    return str(_steps().exc_text(exc))


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


# ---------------------------------------------------------------------------------------
# inspect: the distribution's metadata and files, as this interpreter sees them
# ---------------------------------------------------------------------------------------


def task_inspect(spec: dict[str, Any]) -> None:
    import importlib.metadata as md
    import platform

    name = spec["params"]["distribution"]
    info = {"python": platform.python_version(), "executable": sys.executable, "machine": platform.machine()}
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
    emit(
        ev="info",
        found=True,
        name=dist.metadata["Name"],
        version=dist.version,
        requires=list(dist.requires or ()),
        files=files,
        location=os.path.realpath(str(dist.locate_file(""))),
        **info,
    )


# ---------------------------------------------------------------------------------------
# gpu-info: the driver and the visible devices
# ---------------------------------------------------------------------------------------


def task_gpu_info(spec: dict[str, Any]) -> None:
    cd = _load_sibling("cuda_driver")
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
    cd = _load_sibling("cuda_driver")
    try:
        drv = cd.Driver()
        drv.init()
        devices = drv.devices()
    except cd.DriverUnavailable as exc:
        emit(ev="info", devices=[], error=str(exc))
        return
    emit(
        ev="info",
        devices=devices,
        error=None,
        driver=drv.version(),
        jit_disabled=os.environ.get("CUDA_DISABLE_PTX_JIT") == "1",
    )
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
            per_device.append(
                {
                    "gpu": d["ordinal"],
                    "sm": d["sm"],
                    "code": code,
                    "error": None if code == 0 else drv.error_name(code),
                    "text": None if code == 0 else drv.error_text(code),
                    "seconds": seconds,
                }
            )
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


def _error(exc: BaseException) -> dict[str, Any]:
    return {"error": _exc(exc), "error_type": type(exc).__name__, "traceback": traceback.format_exc()[-3000:]}


def _torch_facts(torch: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {
        "importable": True,
        "torch": str(torch.__version__),
        "torch_cuda": str(torch.version.cuda),
        "cuda_available": bool(torch.cuda.is_available()),
    }
    if facts["cuda_available"]:
        facts["arch_list"] = list(torch.cuda.get_arch_list())
        facts["capability"] = list(torch.cuda.get_device_capability(0))
        facts["device_name"] = str(torch.cuda.get_device_name(0))
    return facts


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
            observe(i, **facts, **_steps().torch_step(torch, step, work, data))
        except Exception as exc:
            observe(i, **facts, **_error(exc))


# ---------------------------------------------------------------------------------------
# executorch: the CUDA delegate with and without weights (pytorch/executorch#22089)
# ---------------------------------------------------------------------------------------


def task_executorch(spec: dict[str, Any]) -> None:
    p = spec["params"]
    data = _data(spec)
    setup = None
    for i in range(spec["start"], len(spec["items"])):
        item = spec["items"][i]
        emit(ev="begin", i=i)
        if setup is None:
            try:
                setup = _steps().executorch_setup(p.get("backend_library"))
            except Exception as exc:
                observe(i, importable=False, error=_exc(exc))
                setup = {"importable": False, "error": _exc(exc)}
                continue
        if not setup.get("importable"):
            observe(i, **setup)
            continue
        try:
            observe(i, **setup, **_steps().executorch_step(item, data))
        except Exception as exc:
            observe(i, **setup, **_error(exc))


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
        facts: dict[str, Any] = {
            "importable": True,
            "jax": str(jax.__version__),
            "backend": str(jax.default_backend()),
            "devices": [f"{d.platform}:{getattr(d, 'device_kind', '?')}" for d in devices],
        }
        if facts["backend"] not in ("gpu", "cuda", "rocm"):
            observe(i, **facts)
            continue
        try:
            observe(i, **facts, **_steps().jax_step(jax, np, step, p["workdir"], data))
        except Exception as exc:
            observe(i, **facts, **_error(exc))


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

        fields: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) and k != "child_env" else v for k, v in p["ctx"].items()
        }
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
                got = _steps().sweep_step(torch, step, n)
            torch.cuda.synchronize()
            observe(i, **facts, **got, seconds=time.perf_counter() - t0)
        except Exception as exc:
            observe(i, **facts, **_error(exc))


TASKS = {
    "plugin": task_plugin,
    "inspect": task_inspect,
    "gpu-info": task_gpu_info,
    "load": task_load,
    "device-load": task_device_load,
    "torch": task_torch,
    "executorch": task_executorch,
    "jax": task_jax,
    "trace-sweep": task_trace_sweep,
}


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
    _steps()  # read from its staged copy before anything of the wheel runs, as cupti.py is
    _start_trace(spec)
    TASKS[task](spec)
    _stop_trace()
    emit(ev="end")
    return 0
