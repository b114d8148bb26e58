"""What the framework tasks of a smoke child compute: the torch model steps, the ExecuTorch
export and run steps, the JAX steps and the trace sweep's torch operations.

Loaded by worker.py from beside itself (by path, in the interpreter of the environment under
test, which need not have archaudit installed): standard library only at the top, each framework
imported by the step that uses it. A step takes the task's inputs and returns what it observed as
a dict of plain values, or raises; worker.py reports it (an observation) and archaudit's process
judges it (model_torch.py, model_executorch.py, model_jax.py, trace.py).
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any


def exc_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) < 2000 else text[:2000] + " ..."


# ---------------------------------------------------------------------------------------
# torch: nn.Linear and nn.Conv2d with weights from a file; an AOTInductor package
# ---------------------------------------------------------------------------------------


def _tensor(torch: Any, t: dict[str, Any]) -> Any:
    return torch.tensor(t["values"], dtype=torch.float32).reshape(t["shape"])


def _numbers(out: Any) -> dict[str, Any]:
    """An output tensor as raw numbers, with where it lived."""
    return {
        "device": str(out.device),
        "shape": list(out.shape),
        "output": [float(v) for v in out.detach().to("cpu").reshape(-1).tolist()],
    }


def _with_weights(torch: Any, module: Any, tensors: dict[str, Any]) -> Any:
    with torch.no_grad():
        for name, t in tensors.items():
            getattr(module, name).copy_(_tensor(torch, t))
    return module


_TORCH_MAKE = {
    "linear": lambda torch: torch.nn.Linear(64, 32),
    "conv": lambda torch: torch.nn.Conv2d(3, 8, 3, padding=1),
}


def torch_step(torch: Any, step: str, work: str, data: dict[str, Any]) -> dict[str, Any]:
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
            pkg = inductor.aoti_compile_and_package(
                torch.export.export(model, (x,)), package_path=os.path.join(work, "linear_aoti.pt2")
            )
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


def executorch_setup(backend_library: str | None) -> dict[str, Any]:
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
    facts: dict[str, Any] = {"importable": True, "version": version, "cuda_available": bool(torch.cuda.is_available())}
    try:
        from executorch.extension.pybindings import portable_lib

        facts["backends_before"] = sorted(portable_lib._get_registered_backend_names())
        facts["pybindings_error"] = None
    except Exception as exc:
        facts["backends_before"] = []
        facts["pybindings_error"] = exc_text(exc)
        return facts
    facts["backends"] = facts["backends_before"]
    if backend_library and "CudaBackend" not in facts["backends_before"]:
        try:  # global: the delegate's compiled object binds its aoti_torch_* calls to these shims
            ctypes.CDLL(backend_library, mode=os.RTLD_NOW | os.RTLD_GLOBAL)
            facts["backend_library_error"] = None
        except OSError as exc:
            facts["backend_library_error"] = exc_text(exc)
        facts["backends"] = sorted(portable_lib._get_registered_backend_names())
    return facts


def executorch_step(item: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
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
        flatc()
        # ExecuTorch 1.2 needs the method name in the compile specs (an empty list fails at
        # lowering: "Could not find method name in compile specs: []"), as its own
        # backends/cuda/tests/test_cuda_export.py passes it.
        specs = [CudaBackend.generate_method_name_compile_spec("forward")]
        prog = to_edge_transform_and_lower(
            torch.export.export(model, ex), partitioner=[CudaPartitioner(specs)]
        ).to_executorch()
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


def flatc() -> None:
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


def jax_step(jax: Any, np: Any, step: str, work: str, data: dict[str, Any]) -> dict[str, Any]:
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
            return {
                "refused": True,
                "error": exc_text(exc),
                "error_type": type(exc).__name__,
                "wrong_shape": list(bad[0].shape),
            }
        return {"refused": False, "wrong_shape": list(bad[0].shape), **_jax_out(out, np)}
    raise ValueError(f"unknown jax step {step!r}")


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


def sweep_step(torch: Any, step: str, n: int) -> dict[str, Any]:
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


__all__ = [
    "executorch_setup",
    "executorch_step",
    "exc_text",
    "flatc",
    "HeldProgram",
    "jax_step",
    "load_held",
    "sweep_step",
    "torch_step",
]
