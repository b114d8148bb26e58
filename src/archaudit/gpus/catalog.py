"""The GPU catalogue behind --gpu: a name, alias, sm_XX, gfx target or 'local' into the GPUs a
check is asked about (NvidiaGpu, AmdGpu), from the NVIDIA and AMD catalogs (data/gpus.json,
data/amd.json). Every name it cannot resolve is a UsageError that names the flag."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..errors import UsageError
from ..suggest import did_you_mean
from . import amd as gfx, cuda as arch
from .cuda import CC


class NvidiaGpu(NamedTuple):
    """A --gpu question about an NVIDIA GPU."""

    name: str  # as displayed: the catalog name, or what the user typed
    cc: CC  # compute capability


class AmdGpu(NamedTuple):
    """A --gpu question about an AMD GPU."""

    name: str
    target: str  # gfx target ID
    # The concrete setting the GPU is judged in (gfx90a:sramecc+:xnack-): a catalog GPU as it
    # ships, or a target ID that names every setting; "" when archaudit cannot tell.
    ships: str = ""
    switch: tuple[tuple[str, str], ...] = ()  # what changes a setting ("xnack", "HSA_XNACK=1")


def is_gfx_name(token: str) -> bool:
    """A token spelled as an AMD target (gfx942, GFX90a:xnack-): AMD's, never CUDA's."""
    return token.lower().startswith("gfx")


def resolve(
    names: Sequence[str], release: tuple[int, int] | None = None
) -> tuple[tuple[NvidiaGpu, ...], tuple[AmdGpu, ...]]:
    """--gpu names: catalog names or aliases, sm_XX, gfx targets, AMD catalog names, or 'local'."""
    nvidia: list[NvidiaGpu] = []
    amd: list[AmdGpu] = []
    for name in names:
        if name == "local":
            nvidia.extend(_local_gpus())
            continue
        named = _gpu_target(name)
        if named is not None:
            refused = arch.nvcc_refusal(named, release, name)
            if refused is not None:
                raise UsageError(f"--gpu {name!r}: {refused}")
        found = arch.lookup_gpu(name)
        if named is not None and not found:
            raise UsageError(
                f"--gpu {name!r}: no GPU in the catalog has compute capability "
                f"{named.major}.{named.minor} (see 'archaudit gpus')"
            )
        if found:
            g = found[0]
            nvidia.append(NvidiaGpu(g.name if len(found) == 1 else name, g.cc))
            continue
        amd_found = gfx.lookup_gpu(name)
        if amd_found:
            a = amd_found[0]
            one = len(amd_found) == 1  # a bare processor names several GPUs: no one shipped setting
            amd.append(AmdGpu(name, a.target, (a.shipped or "") if one else "", a.switch if one else ()))
            continue
        if is_gfx_name(name):
            try:
                target = gfx.normalise(name)
            except ValueError as e:
                raise UsageError(f"--gpu {name!r}: {e}") from None
            if gfx.is_generic(target):
                raise UsageError(f"--gpu {name!r} is a generic code target, not a GPU")
            p = gfx.parse_target(target)
            whole = all(p.feature(n) is not None for n in gfx.FEATURES if gfx.processors()[p.processor].supports(n))
            amd.append(AmdGpu(name, target, target if whole else ""))
            continue
        raise UsageError(
            f"--gpu {name!r}: not in the GPU catalog (see 'archaudit gpus') and not sm_XX"
            f"{did_you_mean(name, _gpu_names())}"
        )
    return tuple(nvidia), tuple(amd)


def _gpu_target(name: str) -> arch.CudaTarget | None:
    """The architecture a --gpu spelled as one (sm_90, 9.0, 90) names, else None (a catalog name)."""
    try:
        return arch.CudaTarget.parse(name)
    except ValueError:
        return None


def _gpu_names() -> list[str]:
    """Every name and alias of the NVIDIA and AMD catalogs, for 'did you mean'."""
    return [n for g in arch.gpu_catalog() for n in (g.name, *g.aliases)] + [
        n for a in gfx.gpus() for n in (a.name, *a.aliases)
    ]


def _local_gpus() -> list[NvidiaGpu]:
    try:
        import pynvml
    except ImportError:
        raise UsageError("--gpu local needs NVML: install archaudit with its 'gpu' extra (nvidia-ml-py)") from None
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVML raises its own error types
        raise UsageError(f"--gpu local: no NVIDIA GPU or driver on this machine ({e})") from None
    try:
        out: list[NvidiaGpu] = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else str(name)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            out.append(NvidiaGpu(f"GPU {i} {name}", (int(major), int(minor))))
        if not out:
            raise UsageError("--gpu local: NVML sees no GPU on this machine")
        return out
    finally:
        pynvml.nvmlShutdown()


__all__ = ["AmdGpu", "is_gfx_name", "NvidiaGpu", "resolve"]
