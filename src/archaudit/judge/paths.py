"""What each GPU runs of a library: its units (containers holding code of their own, judged
each on its own) and, per GPU, the driver's choice in each unit (GpuPath, through
archaudit.gpus.selection), the kernels each unit gives it, and the driver floor of that code.

Which units a GPU loads code from counts the evidence that a kernel is not launched there
(``excused_on``: its name, by its author's convention, or a sourced statement). Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

from ..gpus import cuda as arch
from ..gpus.cuda import CC
from ..gpus.selection import NOTHING, Choice, NvCode, Runs, choose
from ..model import DEVICE_LINK, PTX, RELOCATABLE, SASS, Container, Library
from .floors import Floor, entry_floor, gpu_floor, highest, is_dead, unit_release
from .names import excludes, name_floor


@dataclass(frozen=True)
class Unit:
    """A container holding code of its own, judged on its own (one translation unit)."""

    index: int  # position in Library.containers
    container: Container
    codes: tuple[NvCode, ...]
    identified: bool  # every code entry was read, so its kernels (perhaps none) are known
    shape: int  # units of one shape (``shape_of``) get the entry at the same position on a GPU

    @cached_property
    def specialised(self) -> bool:
        """All its code is arch-specific or family code (by the target it compiles for)."""
        return specialised_only(self.codes)

    @cached_property
    def code_kernels(self) -> tuple[frozenset[str], ...]:
        """The kernels of each code entry, aligned with ``codes`` (one set for entries that list
        the same kernels, as a unit's cubins mostly do)."""
        made: dict[tuple[str, ...], frozenset[str]] = {}
        for c in self.codes:
            names = c.entry.kernels or ()
            if names not in made:
                made[names] = frozenset(names)
        return tuple(made[c.entry.kernels or ()] for c in self.codes)

    @cached_property
    def kernels(self) -> frozenset[str]:
        return frozenset().union(*dict.fromkeys(self.code_kernels))

    @cached_property
    def _uniform(self) -> bool:
        """Every code entry lists the same kernels (the usual translation unit)."""
        return len({id(k) for k in self.code_kernels}) <= 1

    def codes_defining(self, kernel: str) -> tuple[NvCode, ...]:
        """The unit's code entries that define ``kernel``."""
        if self._uniform:
            return self.codes
        return tuple(c for c, ks in zip(self.codes, self.code_kernels) if kernel in ks)

    @cached_property
    def release(self) -> CC | None:
        """The CUDA release its PTX shows (``unit_release``)."""
        return unit_release(self.codes)


def specialised_only(codes: tuple[NvCode, ...]) -> bool:
    """Some code, and all of it arch-specific or family code (by the target it compiles for):
    it serves only the GPUs of its own architecture or family."""
    return bool(codes) and all(c.effective.suffix in ("a", "f") for c in codes)


def shape_of(codes: tuple[NvCode, ...]) -> tuple[tuple[str, arch.CudaTarget, arch.CudaTarget | None, bool], ...]:
    """What the driver's choice in a unit depends on besides the GPU (a library repeats a few)."""
    return tuple((c.kind, c.target, c.jit_target, bool(c.entry.unresolved)) for c in codes)


@dataclass(frozen=True, slots=True)
class GpuPath:
    """What one GPU runs from the library: the driver's choice in each unit."""

    gpu: CC
    choices: tuple[Choice, ...]  # aligned with LibraryFacts.units; a dead choice is NOTHING
    given: tuple[frozenset[str], ...]  # aligned with choices: the kernels each unit gives it
    runs: Runs  # the best any unit does
    dead: tuple[NvCode, ...]  # chosen code that no driver still running this GPU can run
    floor: Floor | None  # the driver floor of what it runs; None when it runs nothing

    @property
    def unlinked(self) -> tuple[NvCode, ...]:
        """Chosen cubins the driver refuses alone, in a library that links no device code."""
        return tuple(c.code for c in self.choices if c.unlinked and c.code is not None)


# What a word in a kernel's name says is read by its author's convention (judge/names.py,
# data/names.json): every convention there means "this architecture or newer".


def judged_containers(lib: Library) -> list[tuple[int, Container]]:
    """Containers that may hold kernels of their own: all but relocatable ones and those read
    whole and found to define no kernel, wherever they sit (nvlink's per-link stubs, an empty
    cubin with no .text and no symbols in an ordinary .nv_fatbin): code that defines no kernel
    leaves no kernel to fail, so it is not judged (a library of nothing else is G010). A
    device-link container whose kernels were not read is judged (an -rdc build keeps its
    kernels there): fail closed until it is read. Of a bare ``.fatbin`` data file only the
    first container counts (``Library.reachable``): cuModuleLoad reads no further (a file of two
    concatenated fatbins gives 209 on an H200 when the first lacks sm_90, and loads when they
    are swapped); what the later ones hold is G017's."""
    out = []
    reached = lib.reachable
    loaded = (
        lib.containers
        if reached == lib.containers
        else tuple(c if c in reached else replace(c, entries=()) for c in lib.containers)
    )
    for i, c in enumerate(loaded):
        if c.role == RELOCATABLE or not c.entries:
            continue
        if c.role == DEVICE_LINK:
            kernels = [e.kernels for e in c.entries if e.kind == SASS]
            if all(k is not None for k in kernels) and not any(kernels):
                continue
        elif all(e.vendor == "nvidia" and e.kernels == () and (e.defines_nothing or e.kind == PTX) for e in c.entries):
            continue  # it defines nothing (NPP 13.2's libnppc: one sm_75 cubin, no .text, no symbols)
        out.append((i, c))
    return out


def named_for(kernel: str, codes: tuple[NvCode, ...], gpu: CC) -> bool:
    """Whether the kernel's own name excuses its gap on ``gpu``: read by its author's convention
    (data/names.json), the name says the kernel is for its first architecture and newer ones
    (CUTLASS's ``cutlass::arch::Sm80`` is kMinComputeCapability 80; ``sm80_xmma_*``, ``SM80_*``
    atoms, ``ampere_*`` likewise), so it excludes only a GPU older than that, and none of the
    kernel's code in this container is for an older one (cuSPARSELt's ``sm86_xmma_*`` with
    sm_86, sm_87 and sm_90a code is for 8.6 on, never for 8.0). A name never excuses a GPU at
    or above what it names: ``GemmKernel<cutlass::arch::Sm80>`` built for sm_80 only fails on 9.0
    (209 on an H100)."""
    if not excludes(kernel, gpu):
        return False
    floor = name_floor(kernel)
    return floor is not None and all(arch.canonical_cc(c.effective.cc) >= floor for c in codes)


def gpu_path(
    gpu: CC,
    units: list[Unit],
    runtime: Floor | None,
    os_name: str,
    built: CC | None,
    linker: bool = False,
    said: tuple[arch.Statement, ...] = (),
    undated: Floor | None = None,
) -> GpuPath:
    """What ``gpu`` runs from each unit, and the driver floor of the code it uses. ``built``: the
    newest CUDA release the library's PTX shows, dating cubins that record no toolkit; ``linker``:
    the library links device code at run time, so a cubin not loadable alone runs; ``said``: the
    sourced statements the library makes (a kernel they speak for sets no floor there);
    ``undated``: the floor of a cubin nothing else dates (undated_floor). Where the GPU runs
    anything, its own floor (the first driver of its generation) joins the floors."""
    last = arch.last_cuda(gpu)
    memo: dict[int, tuple[Runs, int | None]] = {}  # Unit.shape -> (runs, chosen position)
    choices: list[Choice] = []
    given: list[frozenset[str]] = []
    dead: list[NvCode] = []
    runs: Runs = "none"
    for u in units:
        shape = _shape_choice(u, gpu, linker, memo)
        choice = NOTHING if shape[1] is None else Choice(shape[0], u.codes[shape[1]])
        if (
            choice.code is not None
            and choice.runs != "none"
            and last is not None
            and is_dead(choice.code, runtime, last)
        ):
            dead.append(choice.code)
            choice = NOTHING
        choices.append(choice)
        given.append(_NONE if choice.kernels is None or shape[1] is None else u.code_kernels[shape[1]])
        if choice.runs == "native" or (choice.runs == "jit" and runs == "none"):
            runs = choice.runs
    needed = _needed(units, choices, given, excused_on(gpu, said))
    floors = _code_floors(units, choices, needed, memo, undated, os_name, built)
    return GpuPath(gpu, tuple(choices), tuple(given), runs, tuple(dead), _path_floor(floors, gpu, runtime, os_name))


def _shape_choice(u: Unit, gpu: CC, linker: bool, memo: dict[int, tuple[Runs, int | None]]) -> tuple[Runs, int | None]:
    """The driver's choice in a unit as (how it runs, the chosen code's position), once per shape
    (units of one shape get the entry at the same position)."""
    shape = memo.get(u.shape)
    if shape is None:
        first = choose(u.container, u.codes, gpu, linker)
        at = None if first.code is None else next(i for i, c in enumerate(u.codes) if c is first.code)
        shape = memo[u.shape] = (first.runs, at)
    return shape


def _code_floors(
    units: list[Unit],
    choices: list[Choice],
    needed: list[bool],
    memo: dict[int, tuple[Runs, int | None]],
    undated: Floor | None,
    os_name: str,
    built: CC | None,
) -> list[Floor]:
    """The floor of the code chosen in each unit the GPU loads code from, each computed once."""
    floors: list[Floor] = []
    known: dict[tuple[object, ...], Floor] = {}  # what a floor depends on beyond runtime and os_name
    for u, choice, used in zip(units, choices, needed):
        if used and choice.code is not None:
            e = choice.code.entry
            key = (u.shape, memo[u.shape][1], e.code_version, e.toolkit, u.release or built)
            floor = known.get(key)
            if floor is None:
                floor = known[key] = entry_floor(choice.code, undated, os_name, u.release or built)
            floors.append(floor)
    return floors


def _path_floor(floors: list[Floor], gpu: CC, runtime: Floor | None, os_name: str) -> Floor | None:
    """The floor of what the GPU runs: its code's, the runtime's and, where it runs anything, the
    GPU's own (the first driver of its generation)."""
    if not floors:
        return None
    floors = list(floors)
    if runtime is not None:
        floors.append(runtime)
    own = gpu_floor(gpu, os_name)
    if own is not None:
        floors.append(own)
    return highest(floors)


_NONE: frozenset[str] = frozenset()


def excused_on(gpu: CC, said: tuple[arch.Statement, ...]) -> Callable[[Unit, str], bool]:
    """Whether the binary shows a kernel of a unit is not launched on ``gpu`` (K003's evidence,
    which holds whatever code reaches the GPU): its own name names the architecture its code in
    the unit is for and that is not ``gpu``'s, or a sourced statement speaks for it there."""

    def excused(u: Unit, kernel: str) -> bool:
        if any(s.excuses(kernel, gpu) for s in said):
            return True
        return named_for(kernel, u.codes_defining(kernel), gpu)

    return excused


def _needed(
    units: list[Unit],
    choices: list[Choice],
    given: list[frozenset[str]],
    excused: Callable[[Unit, str], bool] | None = None,
) -> list[bool]:
    """Which units a GPU loads code from. A kernel compiled into several units (a library that
    dispatches by container: curand's single-architecture containers beside PTX-only ones) is
    launched from the unit that serves the GPU best, natively before through the JIT; a unit
    none of whose kernels it is the best for is not used there. A unit whose kernels were not
    read is always counted (fail closed); one read whole without kernels launches nothing.

    Native is the best there is, so a unit run natively is used for each of its kernels; one run
    through the JIT is used unless every kernel of it runs natively from another unit or is
    excused there by evidence about that kernel (``excused``: named for another architecture, or
    a sourced statement), as K003 excuses a gap: such a kernel's PTX sets no floor (the kernels
    run natively are gathered only when some unit is run through the JIT)."""
    native: frozenset[str] | None = None
    out = []
    for u, c, ks in zip(units, choices, given):
        if c.runs == "none":
            out.append(False)
        elif not u.identified:
            out.append(True)
        elif c.runs == "native":
            out.append(bool(ks))
        else:
            if native is None:
                native = frozenset().union(
                    *(g for v, x, g in zip(units, choices, given) if v.identified and x.runs == "native")
                )
            rest = ks - native
            out.append(bool(rest) and (excused is None or not all(excused(u, k) for k in rest)))
    return out


__all__ = [
    "GpuPath",
    "Unit",
    "excused_on",
    "gpu_path",
    "judged_containers",
    "named_for",
    "shape_of",
    "specialised_only",
]
