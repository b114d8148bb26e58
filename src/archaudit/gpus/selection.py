"""Which code a GPU runs: for one NVIDIA GPU and one container, the entry the driver picks.

The choice is archaudit.gpus.predict's (a cubin that runs natively, else the PTX the JIT takes,
else nothing), the prediction smoke's device-load checks against the driver on a GPU.
Every rule that asks "does this run on that GPU" (coverage, kernels, the driver floor) asks
it here, so they cannot disagree with each other or with that prediction.

PTX is judged by what the JIT compiles: the `.target` of its text (``Entry.ptx_target``)
as well as its header. Arch-specific PTX (``.target sm_90a``) only compiles for its own
GPU, whatever the header says (measured on an H200, driver 580.159: ``sm_90a`` loads,
``sm_100a`` gives CUDA_ERROR_INVALID_PTX).

Pure: no file is read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from ..model import PTX, SASS, Container, Coverage, Entry
from . import cuda as arch
from .cuda import CC
from .predict import Gpu, Outcome, predict

Runs = Coverage  # "native" | "jit" | "none"


@dataclass(frozen=True, slots=True)
class NvCode:
    """One loadable NVIDIA entry, with the targets it is judged by.

    ``target`` is the entry header's (what the driver selects by); ``jit_target`` is the
    `.target` the PTX text names (what the JIT compiles for), equal to ``target`` for SASS
    and for PTX whose text was not read, None when the text names no CUDA architecture."""

    entry: Entry
    target: arch.CudaTarget
    jit_target: arch.CudaTarget | None

    @property
    def kind(self) -> str:
        return self.entry.kind

    @property
    def effective(self) -> arch.CudaTarget:
        """The target that bounds where the code runs: the PTX text's, when it says more."""
        return self.jit_target if self.jit_target is not None else self.target

    @property
    def label(self) -> str:
        """``sm_90a`` for SASS, ``compute_90a`` for PTX (by its effective target)."""
        return self.effective.sm if self.kind == SASS else self.effective.compute


@lru_cache(maxsize=1024)
def parse_target(text: str) -> arch.CudaTarget:
    """``arch.CudaTarget.parse``, cached: a library names a few targets thousands of times (the
    targets are frozen, so one may serve them all; a text that is none raises every time)."""
    return arch.CudaTarget.parse(text)


def nv_code(entry: Entry) -> NvCode | None:
    """The judged form of an NVIDIA SASS or PTX entry; None for anything else.

    A PTX `.target` that is no CUDA architecture leaves ``jit_target`` None: the entry
    runs on no GPU (fail closed)."""
    if entry.vendor != "nvidia" or entry.kind not in (SASS, PTX):
        return None
    target = parse_target(entry.target)
    jit: arch.CudaTarget | None = target
    if entry.kind == PTX and entry.ptx_target:
        try:
            jit = parse_target(entry.ptx_target)
        except ValueError:
            jit = None
    return NvCode(entry, target, jit)


def nv_codes(entries: Iterable[Entry]) -> tuple[NvCode, ...]:
    return tuple(c for c in (nv_code(e) for e in entries) if c is not None)


def runs(code: NvCode, gpu: CC) -> Runs:
    """How one entry runs on a GPU: natively, through the JIT, or not at all."""
    if code.kind == SASS:
        return "native" if arch.sass_runs_on(code.target, gpu) else "none"
    if arch.ptx_runs_on(code.target, gpu) and code.jit_target is not None and arch.ptx_runs_on(code.jit_target, gpu):
        return "jit"
    return "none"


@dataclass(frozen=True, slots=True)
class Choice:
    """What the driver does with one container on one GPU."""

    runs: Runs
    code: NvCode | None  # the entry it loads; None when nothing runs

    @property
    def unlinked(self) -> bool:
        """The driver picks a cubin here that it refuses alone (a relocatable object calling code
        it does not carry), and nothing links it first: the only other "none" with code is PTX."""
        return self.runs == "none" and self.code is not None and self.code.kind == SASS

    @property
    def kernels(self) -> tuple[str, ...] | None:
        """The kernels this GPU gets from the container: none when nothing loads."""
        return None if self.code is None or self.runs == "none" else self.code.entry.kernels


NOTHING = Choice("none", None)


# The CUDA release of a driver new enough for any PTX ISA: the floor is judged apart (facts.py).
_ANY_DRIVER = (99, 9)
_RUNS: dict[Outcome, Runs] = {
    Outcome.NATIVE: "native",
    Outcome.NOT_LOADABLE: "none",
    Outcome.JIT: "jit",
    Outcome.NONE: "none",
}


def choose(container: Container, codes: tuple[NvCode, ...], gpu: CC, linker: bool = False) -> Choice:
    """The entry of one container the driver loads on ``gpu``, by archaudit.gpus.predict (the same
    prediction smoke's device-load checks against the driver).

    A relocatable cubin that is not loadable alone (CUDA_ERROR_NOT_FOUND on an H200) runs
    only where its library links it first (``linker``: cuSPARSE links its kernels for user
    operators with nvJitLink); otherwise the driver picks it and refuses it (``Choice.unlinked``)."""
    p = predict(container, Gpu(gpu, _ANY_DRIVER, True))
    code = next((c for c in codes if c.entry is p.entry), None)
    runs = "native" if p.outcome is Outcome.NOT_LOADABLE and linker else _RUNS[p.outcome]
    return Choice(runs, code) if code is not None or runs == "none" else NOTHING


def best(codes: Iterable[NvCode], gpu: CC) -> Runs:
    """The best any of the entries does on ``gpu`` (a library-wide union)."""
    how: Runs = "none"
    for c in codes:
        r = runs(c, gpu)
        if r == "native":
            return "native"
        if r == "jit":
            how = "jit"
    return how


__all__ = ["best", "Choice", "choose", "NOTHING", "nv_codes", "NvCode", "parse_target", "Runs", "runs"]
