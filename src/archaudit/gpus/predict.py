"""What the CUDA driver does with one fatbin container on one GPU, predicted from the inventory.

``archaudit smoke``'s device-load hands every container to ``cuModuleLoadData`` and compares
the driver's answer with this prediction, so a rule here is a claim about the driver that
an H200 checks (records/smoke-h200/referee/*.txt). The rules follow what the driver was
seen to do: it picks the cubin that runs natively on the GPU (an exact match before a
compatible older minor); without one, the PTX of the highest architecture the GPU can
take, compiled by its JIT; LTO IR is never loaded. A relocatable cubin (``-rdc``) that calls
code it does not carry (cuSPARSE's kernels for user-supplied operators, NCCL's and NVSHMEM's
device libraries) is refused on its own: CUDA_ERROR_NOT_FOUND or CUDA_ERROR_INVALID_IMAGE,
and once, in NCCL, a crash of the loading process. One whose only undefined symbols are
nvlink's own tables loads like an executable cubin.

Pure: no file is read, nothing is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from ..model import LTO, PTX, SASS, Container, Entry
from . import cuda as arch
from .cuda import CC
from .drivers import driver_at_least

# cuModuleLoadData results the predictions name (CUresult values).
SUCCESS = 0
INVALID_IMAGE = 200
NO_BINARY_FOR_GPU = 209
INVALID_PTX = 218
UNSUPPORTED_PTX_VERSION = 222
JIT_COMPILATION_DISABLED = 223
NOT_FOUND = 500


class Outcome(str, Enum):
    """How a GPU runs one container, as the driver decides at load time."""

    NATIVE = "native"  # a cubin for this GPU loads as it is
    JIT = "jit"  # only PTX serves this GPU: the driver compiles it at load (refused with the JIT off)
    NONE = "none"  # nothing in the container runs on this GPU
    NOT_LOADABLE = "not-loadable-alone"  # the code for this GPU is a relocatable object: it needs linking


@dataclass(frozen=True)
class Gpu:
    """One GPU as the driver sees it: compute capability, the CUDA version of its driver, the JIT switch."""

    cc: CC
    cuda: CC  # what cuDriverGetVersion reports: 13000 is (13, 0)
    jit: bool = True  # False: the process runs with CUDA_DISABLE_PTX_JIT=1

    @classmethod
    def from_driver(cls, cc: CC, driver: str, jit: bool = True, os: str = "linux") -> Gpu:
        """From a driver version such as "580.159.04": the newest CUDA release whose own driver it is at least."""
        releases = arch.cuda_data()["drivers"]["toolkit"]["releases"]
        best: CC | None = None
        for release, row in releases.items():
            need = row.get(os)
            major, minor = (int(p) for p in release.split("."))
            if need and driver_at_least(driver, need) and (best is None or (major, minor) > best):
                best = (major, minor)
        if best is None:
            raise LookupError(f"driver {driver} is older than every CUDA release archaudit knows")
        return cls(tuple(cc), best, jit)  # type: ignore[arg-type]

    def with_jit(self, jit: bool) -> Gpu:
        return Gpu(self.cc, self.cuda, jit)


@dataclass(frozen=True)
class Prediction:
    """The predicted outcome, the entry the driver uses (if any), and the answers that agree with it."""

    outcome: Outcome
    entry: Entry | None
    reason: str
    codes: frozenset[int]  # cuModuleLoadData results that agree; NOT_LOADABLE also agrees with a crash

    def agrees(self, code: int | None) -> bool:
        """Whether the driver's answer (None: the loading process died) agrees with this prediction."""
        if code is None:
            return self.outcome is Outcome.NOT_LOADABLE
        return code in self.codes


def _target(entry: Entry, text: bool = False) -> arch.CudaTarget | None:
    name = (getattr(entry, "ptx_target", None) or entry.target) if text else entry.target
    try:
        return arch.CudaTarget.parse(name)
    except ValueError:
        return None


def _sass_rank(target: arch.CudaTarget, cc: CC) -> tuple[int, int]:
    """The driver's preference among cubins that run: the GPU's own CC first, then the newest minor."""
    return (1 if arch.canonical_cc(target.cc) == arch.canonical_cc(cc) else 0, target.minor)


def _best_sass(entries: Iterable[Entry], cc: CC) -> Entry | None:
    best: tuple[tuple[int, int], Entry] | None = None
    for e in entries:
        t = _target(e)
        if e.kind != SASS or t is None or not arch.sass_runs_on(t, cc):
            continue
        rank = _sass_rank(t, cc)
        if best is None or rank > best[0]:
            best = (rank, e)
    return best[1] if best else None


def _header_target(entry: Entry) -> arch.CudaTarget | None:
    """The architecture the entry header declares (what the driver selects PTX by)."""
    t = _target(entry)
    return arch.CudaTarget(t.major, t.minor) if t is not None else None


def _best_ptx(entries: Iterable[Entry], cc: CC) -> Entry | None:
    """The PTX the driver selects: the highest header architecture not above the GPU's."""
    best: tuple[int, Entry] | None = None
    for e in entries:
        if e.kind != PTX:
            continue
        t = _header_target(e)
        if t is None or not arch.ptx_runs_on(t, cc):
            continue
        if best is None or t.number > best[0]:
            best = (t.number, e)
    return best[1] if best else None


def _ptx_isa_supported(entry: Entry, cuda: CC) -> bool | None:
    """Whether a driver of CUDA `cuda` JIT-compiles this PTX's ISA version (None: unknown ISA)."""
    if entry.code_version == (0, 0):
        return None
    try:
        return arch.cuda_release_for_ptx_isa(entry.code_version) <= cuda
    except LookupError:
        return None


def unresolved(entry: Entry) -> tuple[str, ...]:
    """What a relocatable cubin calls without carrying it (empty: it loads on its own)."""
    return tuple(getattr(entry, "unresolved", ()) or ())


def predict(container: Container, gpu: Gpu) -> Prediction:
    """What the driver does when this container is handed to cuModuleLoadData on `gpu`."""
    if container.vendor != "nvidia":
        raise ValueError(f"predict judges NVIDIA fatbin containers, not {container.vendor} code")
    label = f"GPU {gpu.cc[0]}.{gpu.cc[1]}"
    entries = [e for e in container.entries if e.vendor == "nvidia"]
    sass = _best_sass(entries, gpu.cc)
    if sass is not None:
        missing = unresolved(sass)
        if missing:
            shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
            return Prediction(
                Outcome.NOT_LOADABLE,
                sass,
                f"its {sass.target} cubin for {label} is a relocatable object (-rdc) that "
                f"calls {shown} without carrying it: it loads only once linked with that code",
                frozenset({INVALID_IMAGE, NOT_FOUND}),
            )
        return Prediction(Outcome.NATIVE, sass, f"{sass.target} SASS runs natively on {label}", frozenset({SUCCESS}))
    ptx = _best_ptx(entries, gpu.cc)
    if ptx is not None:
        text = _target(ptx, text=True)
        off = frozenset({JIT_COMPILATION_DISABLED})
        if text is None or not arch.ptx_runs_on(text, gpu.cc):
            written = getattr(ptx, "ptx_target", None) or ptx.target
            return Prediction(
                Outcome.NONE,
                ptx,
                f"the driver picks the {ptx.target} PTX, but its text targets {written}, which {label} cannot compile",
                frozenset({INVALID_PTX}) if gpu.jit else off,
            )
        supported = _ptx_isa_supported(ptx, gpu.cuda)
        if supported is False:
            v = ptx.code_version
            return Prediction(
                Outcome.NONE,
                ptx,
                f"its {ptx.target} PTX is ISA {v[0]}.{v[1]}, newer than a CUDA "
                f"{gpu.cuda[0]}.{gpu.cuda[1]} driver compiles",
                frozenset({UNSUPPORTED_PTX_VERSION}) if gpu.jit else off,
            )
        if gpu.jit:
            return Prediction(
                Outcome.JIT,
                ptx,
                f"only {ptx.target} PTX serves {label}: the driver JIT-compiles it",
                frozenset({SUCCESS}),
            )
        return Prediction(Outcome.JIT, ptx, f"only {ptx.target} PTX serves {label}, and the JIT is disabled", off)
    kinds = sorted({e.kind for e in entries})
    if not entries:
        why = "the container holds no entry"
    elif kinds == [LTO]:
        why = "it holds only LTO IR, which the driver never loads"
    else:
        carried = ", ".join(sorted({e.target for e in entries if e.kind in (SASS, PTX)}))
        why = f"it carries code only for {carried}"
    return Prediction(Outcome.NONE, None, f"nothing in it runs on {label}: {why}", frozenset({NO_BINARY_FOR_GPU}))


__all__ = [
    "Gpu",
    "INVALID_IMAGE",
    "INVALID_PTX",
    "JIT_COMPILATION_DISABLED",
    "NO_BINARY_FOR_GPU",
    "NOT_FOUND",
    "Outcome",
    "predict",
    "SUCCESS",
    "unresolved",
    "UNSUPPORTED_PTX_VERSION",
]
