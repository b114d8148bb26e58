"""The facts the rules judge a library by, computed once per library as one typed record.

A library's device code is reduced here to what the rules need: which containers hold
code of their own (``Unit``), what each claimed or named GPU runs from each of them
(``GpuPath``, through archaudit.gpus.selection), which kernels exist where, and the driver floor
of the code each GPU would run. Rules (archaudit.judge.rules) only read these records, so two
rules can never disagree about a fact, and nothing depends on how much was printed.

Pure: no file is read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Literal

from ..claims import Claim
from ..gpus import cuda as arch, rocm, vendor as vendors
from ..gpus.cuda import CC, label
from ..gpus.selection import NOTHING, Choice, NvCode, Runs, choose, nv_codes
from ..model import CODE_OBJECT, CUBIN, DEVICE_LINK, PTX, RELOCATABLE, SASS, Container, Entry, Library
from .names import excludes, name_floor, named_architectures
from .policy import Policy

UNKNOWN_KEY = (1 << 30,)


@dataclass(frozen=True, slots=True)
class Floor:
    """The minimum driver some code needs, the CUDA release that sets it, and why.

    ``driver`` None: the floor is unknown (no evidence, or a release newer than the tables)."""

    cuda: CC | None
    driver: str | None
    evidence: str
    # what sets it: the code ("code"), the CUDA runtime the library links or carries ("runtime"),
    # or the GPU itself, which no older driver drives ("gpu")
    kind: Literal["code", "runtime", "gpu"] = "code"

    @property
    def key(self) -> tuple[int, ...]:
        if self.driver is None:
            return UNKNOWN_KEY
        return tuple(int(p) for p in self.driver.split("."))

    @property
    def cuda_text(self) -> str:
        return f"{self.cuda[0]}.{self.cuda[1]}" if self.cuda else "unknown"


def highest(floors: list[Floor]) -> Floor | None:
    """The floor that asks most; an unknown floor asks most of all (fail closed). The first of
    equals wins; one floor object repeats (``_floor`` is cached), so each is weighed once."""
    distinct = list({id(f): f for f in floors}.values())
    return max(distinct, key=lambda f: f.key) if distinct else None


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
        """The CUDA release its PTX shows (``_unit_release``)."""
        return _unit_release(self.codes)


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


def _judged_containers(lib: Library) -> list[tuple[int, Container]]:
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
    loaded = lib.containers if reached == lib.containers else \
        tuple(c if c in reached else replace(c, entries=()) for c in lib.containers)
    for i, c in enumerate(loaded):
        if c.role == RELOCATABLE or not c.entries:
            continue
        if c.role == DEVICE_LINK:
            kernels = [e.kernels for e in c.entries if e.kind == SASS]
            if all(k is not None for k in kernels) and not any(kernels):
                continue
        elif all(e.vendor == "nvidia" and e.kernels == () and (e.defines_nothing or e.kind == PTX)
                 for e in c.entries):
            continue  # it defines nothing (NPP 13.2's libnppc: one sm_75 cubin, no .text, no symbols)
        out.append((i, c))
    return out


def _unit_release(codes: tuple[NvCode, ...]) -> CC | None:
    """The CUDA release whose nvcc built these codes, as their PTX shows: one container is one
    nvcc compilation, so its cubins come from the toolkit of its PTX's ISA (or a later one of
    the same major); a library's containers come from one toolkit, so its PTX dates the
    cubins of containers that carry none."""
    releases = []
    for c in codes:
        if c.kind == PTX and c.entry.code_version != (0, 0):
            try:
                releases.append(arch.cuda_release_for_ptx_isa(c.entry.code_version))
            except LookupError:
                continue
    return max(releases) if releases else None


def _code_floor(code: NvCode, runtime: Floor | None, os_name: str, built: CC | None = None) -> Floor:
    """The driver floor of one entry: PTX by its ISA; a cubin by the CUDA major that built it
    (its toolkit note, else its container's PTX, else the CUDA libraries linked)."""
    e = code.entry
    return _floor(e.kind, e.code_version, e.toolkit, code.label, runtime, os_name, built)


@lru_cache(maxsize=4096)
def _floor(kind: str, isa: CC, toolkit: CC | None, name: str, runtime: Floor | None, os_name: str,
           built: CC | None) -> Floor:
    """_code_floor on an entry's versions alone (cached: a library repeats a few thousand times)."""
    try:
        if kind == PTX:
            if isa == (0, 0):
                return Floor(None, None, f"{name}: PTX ISA version not read")
            release = arch.cuda_release_for_ptx_isa(isa)
            return Floor(release, arch.min_driver(release, os_name), f"{name} (PTX ISA {isa[0]}.{isa[1]})")
        if toolkit:
            return Floor(toolkit, arch.min_driver(toolkit, os_name, kind="minor"),
                         f"{name} (built by CUDA {toolkit[0]}.{toolkit[1]})")
        if built is not None:
            return Floor(built, arch.min_driver(built, os_name, kind="minor"),
                         f"{name} (built beside PTX of CUDA {built[0]}.{built[1]})")
    except LookupError as err:
        return Floor(None, None, f"{name}: {err}")
    if runtime is not None:
        return runtime
    return Floor(None, None, f"{name}: its cubin records no toolkit, and neither the library (its CUDA "
                             f"runtime, its other cubins) nor its package names the CUDA release that built it")


def _runtime_floor(lib: Library, os_name: str) -> Floor | None:
    """The floor a linked CUDA library proves (libcudart.so.12: CUDA 12.x, minor version
    compatibility), the highest over every NEEDED name that says one and every CUDA runtime the
    library carries linked in statically (its own version record: a CUDA 13.0 runtime refuses
    a 550 driver with 35, cudaErrorInsufficientDriver, whatever its kernels need)."""
    floors = []
    for soname in lib.needed:
        major = arch.runtime_major(soname)
        if major is None:
            continue
        try:
            floors.append(Floor((major, 0), arch.min_driver((major, 0), os_name, kind="minor"),
                                f"links {soname} (CUDA {major}.x)", "runtime"))
        except LookupError:
            floors.append(Floor((major, 0), None, f"links {soname}: no driver floor is known for CUDA {major}",
                                "runtime"))
    for text in lib.runtimes:
        major, minor = (int(p) for p in text.split("."))
        floors.append(_family_floor((major, minor), f"the CUDA {text} runtime it links in statically",
                                    os_name, "runtime"))
    return highest(floors)


def _family_floor(release: CC, evidence: str, os_name: str, kind: Literal["code", "runtime"] = "code") -> Floor:
    """The floor of code or a runtime of CUDA ``release``'s major family (minor version
    compatibility); unknown where the tables name none (fail closed)."""
    try:
        return Floor(release, arch.min_driver(release, os_name, kind="minor"), evidence, kind)
    except LookupError:
        return Floor(release, None, f"{evidence}: no driver floor is known for CUDA {release[0]}", kind)


def _undated_floor(lib: Library, runtime: Floor | None, package: int | None, os_name: str) -> Floor | None:
    """The floor of a cubin that records no toolkit and has no PTX beside it: what the library
    says of the CUDA release that built it. The CUDA runtime it links or carries; else the
    newest toolkit another of its cubins records (CUPTI's tool cubins: the sm_100 ones record
    12.9, the sm_90 ones nothing); else the CUDA major its package is named for (-cu12).
    None where nothing says (its floor stays unknown: fail closed)."""
    if runtime is not None:
        return runtime
    recorded = max((e.toolkit for e in lib.entries if e.vendor == "nvidia" and e.toolkit), default=None)
    if recorded is not None:
        return _family_floor(recorded, f"cubins that record no toolkit, dated by another cubin of the library "
                                       f"(CUDA {recorded[0]}.{recorded[1]})", os_name)
    if package is not None:
        return _family_floor((package, 0), f"cubins that record no toolkit, dated by the package's name "
                                           f"(CUDA {package}.x)", os_name)
    return None


@lru_cache(maxsize=256)
def _gpu_floor(gpu: CC, os_name: str) -> Floor | None:
    """The GPU's own floor: the driver of the CUDA release that first supports its generation
    (data/cuda.json first_driver); None where no row says (Tegra, older generations)."""
    row = arch.first_driver(gpu)
    if row is None:
        return None
    try:
        driver = row.driver(os_name)
    except LookupError:
        return Floor(row.cuda, None, f"{row.generation} ({label(gpu)}): no {os_name} driver is known for "
                                     f"CUDA {row.cuda[0]}.{row.cuda[1]}, its first release", "gpu")
    return Floor(row.cuda, driver, f"the GPU itself: {row.generation} ({gpu[0]}.{gpu[1]}) is first supported by "
                                   f"CUDA {row.cuda[0]}.{row.cuda[1]}, no older driver drives it", "gpu")


def _dead(code: NvCode, runtime: Floor | None, last: CC) -> bool:
    """Whether no driver that still runs a GPU whose support ended with CUDA ``last`` can run it."""
    e = code.entry
    if runtime is not None and runtime.cuda is not None and runtime.cuda[0] > last[0]:
        return True
    if e.kind == PTX:
        if e.code_version == (0, 0):
            return False
        try:
            return arch.cuda_release_for_ptx_isa(e.code_version) > last
        except LookupError:
            return True  # newer than every release the table knows
    if e.toolkit:
        return e.toolkit[0] > last[0]
    return False


Verdict = Literal["fails", "specialised", "stated", "named", "compiled-out", "elsewhere", "chosen", "dispatched"]


@dataclass(frozen=True, slots=True)
class KernelGap:
    """A kernel of one container (or an unnamed container) that claimed GPUs cannot launch from
    it, and why. A kernel is its container and its name: the runtime launches each container's
    kernels from that container's own module, whatever another container defines."""

    verdict: Verdict
    carried: tuple[str, ...]  # the code the kernel has in its container
    fails: tuple[str, ...]
    name: str | None
    units: frozenset[int]  # the container (position in LibraryFacts.units)
    elsewhere: tuple[int, ...] = ()  # "elsewhere": other containers giving these GPUs the same name


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


def compiled_out(choice: Choice, codes: tuple[NvCode, ...], gpu: CC) -> bool:
    """Whether a kernel absent from the code its own container gives ``gpu`` was left out of
    that code by the source, as a ``__CUDA_ARCH__`` guard does, for ``gpu`` as well.

    With A the architecture the code ``gpu`` runs was compiled for (its SASS, or the PTX it
    JIT-compiles) and C the architectures of the container's code that carries the kernel:
    the source saw A's ``__CUDA_ARCH__`` and left the kernel out. That says the kernel is not
    meant for ``gpu`` only when A is ``gpu`` itself, or when every carrier is older than A (a
    ``< X`` guard, which ``gpu`` >= A fails too). A carrier newer than A shows a ``>= X`` guard
    that ``gpu`` may pass: ``bf16_scale`` under ``__CUDA_ARCH__ >= 800`` built 7.5+PTX;8.0 is
    left out of the compute_75 PTX that 9.0 JIT-compiles, and its launch fails there with 500."""
    if choice.code is None or choice.runs == "none":
        return False
    built = arch.canonical_cc(choice.code.effective.cc)
    if built == gpu:
        return True
    return all(arch.canonical_cc(c.effective.cc) < built for c in codes)


def _kernel_gaps(f: LibraryFacts, gpus: tuple[CC, ...]) -> tuple[KernelGap, ...]:
    """Every kernel of a container that some claimed GPU cannot launch from that container, with
    what the binary says about that kernel in that container.

    The runtime registers each container as a module and launches a kernel from the module its
    host stub belongs to, so a kernel is judged in its own container: a same-named kernel in
    another container never covers it. A gap is by design only where the binary shows it for
    that kernel: all its code there is arch-specific or family code ("specialised"); the
    library's own bytes carry a sourced statement that its host code never launches a kernel of
    that name below an architecture newer than the GPU (NCCL's "FP8 reduction support begins
    with sm90 capable devices.": "stated"); its own name names the architecture it was built
    for and its code there covers exactly that ("named"); or its container gives that GPU code
    in which the kernel was compiled out (the same translation unit was built for the GPU, so
    the source left it out there, as a
    __CUDA_ARCH__ guard does: "compiled-out"). A container whose code the driver picks for the
    GPU and cannot compile (PTX whose text targets sm_90a, on 10.0: CUDA_ERROR_INVALID_PTX) is
    never by design: its kernels "fail"; one whose cubin for the GPU does not load alone and is
    linked by nothing (``Choice.unlinked``) is G013's. Where another container gives the GPU
    the same name ("elsewhere"), the binary cannot say whether the host picks that container
    by architecture (a deliberate dispatch) or launches this one (a crash): an error that names
    both, until a config entry records the dispatch. Otherwise the kernel's object was built
    for fewer architectures than the claim: "fails".
    Units whose kernels were not read are judged whole, by their targets; a unit read whole
    that defines no kernel launches nothing (it still counts for library coverage, G001).
    Under --strict-kernels every unit is judged whole, with no design exemption."""
    judged = list(gpus)
    if not judged:
        return ()
    strict = f.policy.strict_kernels
    gaps = _whole_unit_gaps(f, judged, strict)
    if strict:
        return gaps
    carriers: dict[CC, dict[str, list[int]]] = {}  # filled per GPU on first need
    return gaps + tuple(g for i, u in enumerate(f.units) if u.identified and u.kernels
                        for g in _unit_kernel_gaps(f, i, judged, carriers))


def _whole_unit_gaps(f: LibraryFacts, judged: list[CC], strict: bool) -> tuple[KernelGap, ...]:
    """The gaps of units judged whole, by their targets: those whose kernels were not read, and
    under --strict-kernels every unit that defines a kernel."""
    gaps: list[KernelGap] = []
    for i, u in enumerate(f.units):
        if u.identified and (not strict or not u.kernels):
            continue  # judged per kernel; a unit read whole that defines none launches nothing
        missed = [cc for cc in judged  # code the driver refuses alone is G013's
                  if f.paths[cc].choices[i].runs == "none" and not f.paths[cc].choices[i].unlinked]
        by: dict[Verdict, list[str]] = defaultdict(list)
        for cc in missed:  # arch-specific code excuses a GPU only where no generic code runs beside it
            by[_whole_unit_verdict(f, u, cc, strict)].append(label(cc))
        names = tuple(sorted(u.kernels)) if u.identified else None
        for verdict, fails in by.items():
            for name in names or (None,):
                gaps.append(KernelGap(verdict, labels_of(u.codes), tuple(fails), name, frozenset([i])))
    return tuple(gaps)


def _whole_unit_verdict(f: LibraryFacts, u: Unit, cc: CC, strict: bool) -> Verdict:
    """Why a unit judged whole misses GPU ``cc``: a vendor library in its documented range
    dispatches by its host; arch-specific code with no generic code of the library running
    there is specialised; anything else fails."""
    if strict:
        return "fails"
    if f.vendor is not None and f.vendor.dispatches:
        return "dispatched"  # a vendor library in its documented range: its host picks
    return "specialised" if u.specialised and not f.generic_runs(cc) else "fails"


def _unit_kernel_gaps(f: LibraryFacts, i: int, judged: list[CC],
                      carriers: dict[CC, dict[str, list[int]]]) -> list[KernelGap]:
    """The gaps of identified unit ``i``, kernel by kernel, each with its verdict and the GPUs
    it misses (one gap per kernel, verdict and other carriers)."""
    u = f.units[i]
    seen: dict[tuple[int, ...], tuple[tuple[str, ...], bool]] = {}  # code entries -> (carried, specialised)
    where: dict[tuple[str, Verdict, tuple[int, ...]], list[str]] = defaultdict(list)
    for cc in judged:
        choice, got = f.paths[cc].choices[i], f.paths[cc].given[i]
        if len(got) == len(u.kernels) or choice.unlinked:  # got is a subset; unlinked: G013's
            continue
        for name in u.kernels - got:
            codes = u.codes_defining(name)
            key = tuple(map(id, codes))
            if key not in seen:
                seen[key] = (labels_of(codes), specialised_only(codes))
            verdict, others = _kernel_verdict(f, i, name, codes, seen[key][1], cc, carriers)
            where[(name, verdict, others)].append(label(cc))
    return [KernelGap(verdict, seen[tuple(map(id, u.codes_defining(name)))][0], tuple(at), name,
                      frozenset([i]), others)
            for (name, verdict, others), at in where.items()]


def _kernel_verdict(f: LibraryFacts, i: int, name: str, codes: tuple[NvCode, ...], specialised: bool, cc: CC,
                    carriers: dict[CC, dict[str, list[int]]]) -> tuple[Verdict, tuple[int, ...]]:
    """What the binary says about kernel ``name`` of unit ``i`` missing GPU ``cc``, and the other
    units that give ``cc`` a kernel of that name (for "elsewhere")."""
    choice = f.paths[cc].choices[i]
    if specialised and (excludes(name, cc) or not f.generic_runs(cc)):
        return "specialised", ()
    if f.vendor is not None and f.vendor.dispatches:  # in its documented range: its host picks the container
        return ("stated" if any(s.excuses(name, cc) for s in f.statements) else "dispatched"), ()
    if f.static and (own := f.static[i]) is not None and own.covers(cc):
        return "dispatched", ()  # a vendor's code linked statically, in its documented range: its host picks
    if choice.runs == "none" and choice.code is not None:
        return "fails", ()  # the driver picks its PTX and cannot compile it
    if any(s.excuses(name, cc) for s in f.statements):
        return "stated", ()
    if named_for(name, codes, cc):
        return "named", ()
    if compiled_out(choice, codes, cc):
        return "compiled-out", ()
    if cc not in carriers:
        carriers[cc] = _carriers(f, cc)
    others = tuple(j for j in carriers[cc].get(name, ()) if j != i)
    if others and f.units[i].container.role == CUBIN and all(f.units[j].container.role == CUBIN for j in others):
        # whole cubins the library loads itself: nothing binds a launch to one of them, the
        # library loads the image it picks, and only one whose SASS runs on the GPU loads there
        return "chosen", others
    return ("elsewhere" if others else "fails"), others


def _carriers(f: LibraryFacts, gpu: CC) -> dict[str, list[int]]:
    """For each kernel ``gpu`` gets from some identified unit, the units giving it there."""
    out: dict[str, list[int]] = defaultdict(list)
    for i, (u, got) in enumerate(zip(f.units, f.paths[gpu].given)):
        if u.identified:
            for name in got:
                out[name].append(i)
    return out


def labels_of(codes: Iterable[NvCode]) -> tuple[str, ...]:
    """``sm_XX`` labels of SASS then ``compute_XX`` of PTX, by the targets they compile for."""
    codes = list(codes)
    sass = sorted({c.effective for c in codes if c.kind == SASS})
    ptx = sorted({c.effective for c in codes if c.kind == PTX})
    return tuple([t.sm for t in sass] + [t.compute for t in ptx])


@dataclass(frozen=True, slots=True)
class Unreached:
    """Code in the later containers of a bare container file, which its loader never reads."""

    containers: int  # later containers holding entries
    kernels: tuple[str, ...]  # kernels only they define
    unread: bool  # some of their code's kernels were not read (--fast): they may define more


@dataclass(frozen=True)
class LibraryFacts:
    """Everything the library rules need to know about one library, computed once."""

    library: Library
    claim: Claim | None
    policy: Policy
    units: tuple[Unit, ...]
    codes: tuple[NvCode, ...]  # the NVIDIA code of every unit
    relocatable: tuple[Entry, ...]
    amd: tuple[Entry, ...]
    stubs_only: bool  # device code, but only kernel-less device-link stubs
    runtime: Floor | None
    paths: dict[CC, GpuPath]  # claimed and named GPUs
    # The vendor library it is, by its file name and its own bytes, and the row of its release
    # (data/vendor.json): judged by that contract, not kernel by kernel (K005, G016, G019).
    vendor: vendors.Identified | None = None
    undated: Floor | None = None  # the floor of a cubin that records no toolkit (_undated_floor)
    # aligned with ``units`` (empty where none is): the vendor whose code a unit is, linked
    # statically into this library (``_static_units``), judged by that vendor's row in its range
    static: tuple[vendors.Identified | None, ...] = ()

    @property
    def path(self) -> str:
        return self.library.path

    @cached_property
    def linker(self) -> str | None:
        """What shows the library links device code at run time (Library.device_linker)."""
        return self.library.device_linker

    @cached_property
    def amd_modules(self) -> tuple[Container, ...]:
        """The library's AMD modules (bundles, bare code objects), each looked up on its own."""
        return rocm.modules(self.library)

    @cached_property
    def _amd_paths(self) -> dict[str, rocm.AmdPath]:
        return {}

    def amd_path(self, gpu: str) -> rocm.AmdPath:
        """What a concrete AMD GPU setting (gfx90a:sramecc+:xnack-) runs of the library."""
        known = self._amd_paths.get(gpu)
        if known is None:
            known = self._amd_paths[gpu] = rocm.path(self.amd_modules, gpu)
        return known

    @cached_property
    def statements(self) -> tuple[arch.Statement, ...]:
        """The sourced statements the library makes about some of its kernels: its file name is
        a row's, and its own bytes hold the row's exact string (Library.statements)."""
        return arch.library_statements(self.path.rsplit("/", 1)[-1], self.library.statements)

    @cached_property
    def claimed(self) -> tuple[CC, ...]:
        """The claimed GPUs the library is judged on: all of them, but for a listed vendor
        library only those in the range its vendor documents (``outside_vendor_range``)."""
        gpus = self.claim.gpus if self.claim is not None else ()
        return tuple(cc for cc in gpus if self.vendor is None or self.vendor.covers(cc))

    @cached_property
    def outside_vendor_range(self) -> tuple[CC, ...]:
        """Claimed GPUs outside the range the library's vendor documents (G016)."""
        gpus = self.claim.gpus if self.claim is not None else ()
        return tuple(cc for cc in gpus if self.vendor is not None and not self.vendor.covers(cc))

    @cached_property
    def specialised(self) -> bool:
        """All the library's code serves only arch-specific or family GPUs (G005 says so; it
        excuses no claimed GPU)."""
        return specialised_only(self.codes)

    def generic_runs(self, gpu: CC) -> bool:
        """Whether ``gpu`` runs some of the library's generic code (not arch-specific or family
        code): then a generic kernel left only in arch-specific code beside it may be meant for
        ``gpu`` too, and its container's target excuses nothing there (K001, not K002)."""
        return any(c.code is not None and c.runs != "none" and c.code.effective.suffix not in ("a", "f")
                   for c in self.paths[gpu].choices)

    @cached_property
    def carried(self) -> tuple[str, ...]:
        sass = sorted({c.effective for c in self.codes if c.kind == SASS})
        ptx = sorted({c.effective for c in self.codes if c.kind == PTX})
        return tuple([t.sm for t in sass] + [t.compute for t in ptx]
                     + sorted({rocm.judged_target(e) for e in self.amd if not e.unloadable}))

    @cached_property
    def unreached(self) -> Unreached | None:
        """What the later containers of a bare container file hold that its loader never reads
        (``Library.reachable``): the kernels only they define; None when there are none, or
        when all they define the first container defines too."""
        later = self.library.unreachable
        if not later:
            return None
        def kernels(cs: Iterable[Container]) -> tuple[set[str], bool]:
            names: set[str] = set()
            unread = False
            for c in cs:
                for e in c.entries:
                    if e.kind in (SASS, PTX, CODE_OBJECT):
                        unread |= e.kernels is None
                        names.update(e.kernels or ())
            return names, unread
        reached, _ = kernels(self.library.reachable)
        names, unread = kernels(later)
        only = tuple(sorted(names - reached))
        if not only and not unread:
            return None
        return Unreached(sum(1 for c in later if c.entries), only, unread)

    @cached_property
    def coverage(self) -> tuple[tuple[CC, Runs], ...]:
        """How each claimed GPU runs the library (the best any of its units does)."""
        return tuple((cc, self.paths[cc].runs) for cc in self.claimed)

    @cached_property
    def missing(self) -> tuple[CC, ...]:
        """Claimed GPUs the library runs on not at all."""
        return tuple(cc for cc, how in self.coverage if how == "none")

    @cached_property
    def kernel_homes(self) -> dict[str, tuple[int, ...]]:
        """For each kernel of an identified unit, the units (positions in ``units``) defining it."""
        homes: dict[str, tuple[int, ...]] = {}
        for i, u in enumerate(self.units):
            if u.identified:
                again = {k: homes[k] + (i,) for k in u.kernels & homes.keys()}  # defined by an earlier unit
                homes.update(dict.fromkeys(u.kernels, (i,)))
                homes.update(again)
        return homes

    def kernel_codes(self, kernel: str) -> tuple[NvCode, ...]:
        """Every code entry (of identified units) that defines ``kernel``."""
        return tuple(c for i in self.kernel_homes[kernel]
                     for c, ks in zip(self.units[i].codes, self.units[i].code_kernels) if kernel in ks)

    @cached_property
    def kernel_count(self) -> int | None:
        entries = [e for u in self.units for c in u.codes for e in (c.entry,)]
        if not entries or any(e.kernels is None for e in entries):
            return None if entries else (0 if self.stubs_only else None)
        return len(frozenset().union(*(u.kernels for u in self.units)))

    @cached_property
    def kernel_gaps(self) -> tuple[KernelGap, ...]:
        """Every kernel (or unnamed unit) some claimed GPU cannot launch, and why (claimed GPUs
        the library does not run on at all are G001's, not the kernels')."""
        return _kernel_gaps(self, tuple(cc for cc in self.claimed if cc not in self.missing))

    def kernel_gaps_on(self, gpu: CC) -> tuple[KernelGap, ...]:
        """The same question for one GPU (a --gpu question)."""
        return _kernel_gaps(self, (gpu,)) if gpu in self.paths and self.paths[gpu].runs != "none" else ()

    def native_on(self, gpu: CC) -> frozenset[str]:
        """The kernels some unit gives ``gpu`` natively."""
        p = self.paths[gpu]
        return frozenset().union(*(g for c, g in zip(p.choices, p.given) if c.runs == "native"))

    def jit_only(self, gpu: CC) -> tuple[tuple[int, frozenset[str], frozenset[str]], ...]:
        """The units ``gpu`` runs through the JIT for kernels it has no native code for in any unit:
        (unit, the kernels nothing excuses there, the kernels K003's evidence excuses there), the
        code that sets a PTX floor and the code that does not."""
        p = self.paths[gpu]
        native = self.native_on(gpu)
        excused = excused_on(gpu, self.statements)
        out = []
        for i, (c, got) in enumerate(zip(p.choices, p.given)):
            rest = got - native if c.runs == "jit" else frozenset()
            if rest:
                said = frozenset(k for k in rest if excused(self.units[i], k))
                out.append((i, rest - said, said))
        return tuple(out)

    @cached_property
    def floor_gpus(self) -> tuple[CC, ...]:
        """The GPUs whose driver floor is reported: claimed and named ones."""
        return tuple(dict.fromkeys([*self.claimed, *(cc for _, cc in self.policy.gpus)]))

    @cached_property
    def floor(self) -> Floor | None:
        """The library's driver floor: the highest floor of what any claimed or named GPU runs;
        with neither, of all its code."""
        if self.floor_gpus:
            return highest([p.floor for cc in self.floor_gpus if (p := self.paths[cc]).floor is not None])
        return self.code_floor

    @cached_property
    def code_floor(self) -> Floor | None:
        """The floor of all the library's code, whichever GPU runs it: what a GPU outside the claim
        that JIT-compiles its newest PTX would need (the floor without a claim). A vendor
        library's is its vendor's documented minimum driver for its release."""
        if self.vendor is not None and (vf := vendor_floor(self.vendor, self.policy.driver_os)) is not None:
            return vf
        built = _unit_release(self.codes)
        floors = [_code_floor(c, self.undated, self.policy.driver_os, u.release or built)
                  for u in self.units for c in u.codes]
        if self.runtime is not None and floors:
            floors.append(self.runtime)
        return highest(floors)


def library_facts(lib: Library, claim: Claim | None, policy: Policy, package: int | None = None) -> LibraryFacts:
    """Compute the facts of one library once, for every rule. ``package``: the CUDA major the
    library's package is named for (arch.package_cuda), which dates cubins nothing else dates."""
    judged = _judged_containers(lib)
    units = []
    shapes: dict[object, int] = {}
    for i, c in judged:
        codes = nv_codes(c.entries)
        if not codes:
            continue
        identified = all(x.entry.kernels is not None for x in codes)
        units.append(Unit(i, c, codes, identified, shapes.setdefault(shape_of(codes), len(shapes))))
    loadable = [e for c in lib.reachable if c.role != RELOCATABLE for e in c.entries]
    amd = tuple(e for e in loadable if e.kind == CODE_OBJECT)
    reloc = tuple(e for c in lib.containers if c.role == RELOCATABLE for e in c.entries)
    stubs_only = bool(loadable) and not judged and not amd
    runtime = _runtime_floor(lib, policy.driver_os)
    undated = _undated_floor(lib, runtime, package, policy.driver_os)
    gpus = dict.fromkeys([*(claim.gpus if claim else ()), *(cc for _, cc in policy.gpus)])
    built = _unit_release(tuple(c for u in units for c in u.codes))
    linker = lib.device_linker is not None
    said = arch.library_statements(lib.path.rsplit("/", 1)[-1], lib.statements)
    paths = {cc: _gpu_path(cc, units, runtime, policy.driver_os, built, linker, said, undated) for cc in gpus}
    codes = tuple(c for u in units for c in u.codes)
    contract = vendors.identify(lib.path.rsplit("/", 1)[-1], lib.statements, _built_by(codes, runtime)) \
        if codes else None
    floor = vendor_floor(contract, policy.driver_os) if contract is not None else None
    if floor is not None:  # the vendor's documented minimum driver, for whatever code a GPU runs,
        # never below the GPU's own first driver (a B200 needs R570 whatever cuBLAS 12.9 documents)
        paths = {cc: p if p.floor is None else replace(p, floor=highest([floor, *_own(cc, policy.driver_os)]))
                 for cc, p in paths.items()}
    static = _static_units(units, lib.statements, _built_by(codes, runtime)) if contract is None and codes else ()
    return LibraryFacts(lib, claim, policy, tuple(units), codes, reloc, amd, stubs_only, runtime, paths, contract,
                        undated, static)


def _static_units(units: list[Unit], carried: tuple[str, ...],
                  built: CC | None) -> tuple[vendors.Identified | None, ...]:
    """Which units of a library that is no vendor library are a vendor's code linked in
    statically (vendors.identify_static): the library's own bytes hold the vendor's identity or
    version string, and every kernel of the unit is named by the vendor's convention
    (data/vendor.json 'static_kernels'). A unit whose kernels were not read, that defines none,
    or that holds one kernel the convention does not name stays the project's own (fail closed).
    Empty where no unit is."""
    found = vendors.identify_static(carried, built)
    if not found:
        return ()
    out: list[vendors.Identified | None] = []
    for u in units:
        names = u.kernels if u.identified else frozenset()
        out.append(next((ident for lib, ident in found if names and lib.static_kernels is not None
                         and all(lib.static_kernels.match(k) for k in names)), None))
    return tuple(out) if any(x is not None for x in out) else ()


def _own(gpu: CC, os_name: str) -> list[Floor]:
    own = _gpu_floor(gpu, os_name)
    return [own] if own is not None else []


def _built_by(codes: tuple[NvCode, ...], runtime: Floor | None) -> CC | None:
    """The CUDA release that built a library's code: the newest toolkit its cubins record,
    else the release its PTX shows, else the CUDA major of the runtime it links."""
    noted = [c.entry.toolkit for c in codes if c.entry.toolkit]
    if noted:
        return max(noted)
    return _unit_release(codes) or (runtime.cuda if runtime is not None else None)


def vendor_floor(identified: vendors.Identified, os_name: str) -> Floor | None:
    """A vendor library's driver floor: the minimum driver its vendor documents for its release
    on ``os_name`` (None where the row names none for that OS)."""
    driver = identified.row.driver(os_name)
    if driver is None:
        return None
    cuda = (identified.row.cuda, 0) if identified.row.cuda is not None else identified.built
    return Floor(cuda, driver, f"{identified.library}: its vendor's documented minimum driver ({identified.source})")


def _gpu_path(gpu: CC, units: list[Unit], runtime: Floor | None, os_name: str, built: CC | None,
              linker: bool = False, said: tuple[arch.Statement, ...] = (), undated: Floor | None = None) -> GpuPath:
    """What ``gpu`` runs from each unit, and the driver floor of the code it uses. ``built``: the
    newest CUDA release the library's PTX shows, dating cubins that record no toolkit; ``linker``:
    the library links device code at run time, so a cubin not loadable alone runs; ``said``: the
    sourced statements the library makes (a kernel they speak for sets no floor there);
    ``undated``: the floor of a cubin nothing else dates (_undated_floor). Where the GPU runs
    anything, its own floor (the first driver of its generation) joins the floors."""
    last = arch.last_cuda(gpu)
    memo: dict[int, tuple[Runs, int | None]] = {}  # Unit.shape -> (runs, chosen position)
    choices: list[Choice] = []
    given: list[frozenset[str]] = []
    dead: list[NvCode] = []
    floors: list[Floor] = []
    runs: Runs = "none"
    for u in units:
        shape = memo.get(u.shape)
        if shape is None:
            first = choose(u.container, u.codes, gpu, linker)
            at = None if first.code is None else next(i for i, c in enumerate(u.codes) if c is first.code)
            shape = memo[u.shape] = (first.runs, at)
        choice = NOTHING if shape[1] is None else Choice(shape[0], u.codes[shape[1]])
        if choice.code is not None and choice.runs != "none" and last is not None \
                and _dead(choice.code, runtime, last):
            dead.append(choice.code)
            choice = NOTHING
        choices.append(choice)
        given.append(_NONE if choice.kernels is None or shape[1] is None else u.code_kernels[shape[1]])
        if choice.runs == "native" or (choice.runs == "jit" and runs == "none"):
            runs = choice.runs
    known: dict[tuple[object, ...], Floor] = {}  # what a floor depends on beyond runtime and os_name
    for u, choice, needed in zip(units, choices, _needed(units, choices, given, excused_on(gpu, said))):
        if needed and choice.code is not None:
            e = choice.code.entry
            key = (u.shape, memo[u.shape][1], e.code_version, e.toolkit, u.release or built)
            floor = known.get(key)
            if floor is None:
                floor = known[key] = _code_floor(choice.code, undated, os_name, u.release or built)
            floors.append(floor)
    if floors and runtime is not None:
        floors.append(runtime)
    own = _gpu_floor(gpu, os_name) if floors else None
    if own is not None:
        floors.append(own)
    return GpuPath(gpu, tuple(choices), tuple(given), runs, tuple(dead), highest(floors))


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


def _needed(units: list[Unit], choices: list[Choice], given: list[frozenset[str]],
            excused: Callable[[Unit, str], bool] | None = None) -> list[bool]:
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
                native = frozenset().union(*(g for v, x, g in zip(units, choices, given)
                                             if v.identified and x.runs == "native"))
            rest = ks - native
            out.append(bool(rest) and (excused is None or not all(excused(u, k) for k in rest)))
    return out


__all__ = ["Floor", "highest", "KernelGap", "labels_of", "library_facts", "LibraryFacts", "named_architectures",
           "Unit", "Unreached", "vendor_floor"]
