"""The facts the rules judge a library by, computed once per library as one typed record.

A library's device code is reduced here to what the rules need: which containers hold
code of their own (``Unit``), what each claimed or named GPU runs from each of them
(``GpuPath``; both archaudit.judge.paths), which kernels exist where and which a claimed GPU
cannot launch (``KernelGap``, here), and the driver floor of the code each GPU would run
(archaudit.judge.floors). Rules (archaudit.judge.rules) only read these records, so two
rules can never disagree about a fact, and nothing depends on how much was printed.

Pure: no file is read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Literal

from ..claims import Claim
from ..gpus import cuda as arch, rocm, vendor as vendors
from ..gpus.cuda import CC, label
from ..gpus.selection import Choice, NvCode, Runs, nv_codes
from ..model import CODE_OBJECT, CUBIN, PTX, RELOCATABLE, SASS, Container, Entry, Library
from .floors import (
    Floor,
    built_by,
    entry_floor,
    highest,
    noted_release,
    own_floor,
    runtime_floor,
    undated_floor,
    unit_release,
    vendor_floor,
)
from .names import excludes, named_architectures
from .paths import GpuPath, Unit, excused_on, gpu_path, judged_containers, named_for, shape_of, specialised_only
from .policy import Policy, kernel_claim

Verdict = Literal[
    "fails", "specialised", "stated", "named", "compiled-out", "elsewhere", "chosen", "dispatched", "gated"
]


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
    return gaps + tuple(
        g
        for i, u in enumerate(f.units)
        if u.identified and u.kernels
        for g in _unit_kernel_gaps(f, i, judged, carriers)
    )


def _whole_unit_gaps(f: LibraryFacts, judged: list[CC], strict: bool) -> tuple[KernelGap, ...]:
    """The gaps of units judged whole, by their targets: those whose kernels were not read, and
    under --strict-kernels every unit that defines a kernel."""
    gaps: list[KernelGap] = []
    for i, u in enumerate(f.units):
        if u.identified and (not strict or not u.kernels):
            continue  # judged per kernel; a unit read whole that defines none launches nothing
        missed = [
            cc
            for cc in judged  # code the driver refuses alone is G013's
            if f.paths[cc].choices[i].runs == "none" and not f.paths[cc].choices[i].unlinked
        ]
        by: dict[tuple[str | None, Verdict], list[str]] = defaultdict(list)
        names = tuple(sorted(u.kernels)) if u.identified else None
        # the project's record of where its host launches each kernel ([[tool.archaudit.library]] kernels)
        gates = {n: kernel_claim(f.policy, f.path, n) for n in names or ()}
        for cc in missed:  # arch-specific code excuses a GPU only where no generic code runs beside it
            verdict = _whole_unit_verdict(f, u, cc, strict)
            for name in names or (None,):
                gate = gates.get(name) if name is not None else None
                by[(name, "gated" if gate is not None and cc not in gate.claim.gpus else verdict)].append(label(cc))
        for (name, verdict), fails in by.items():
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


def _unit_kernel_gaps(
    f: LibraryFacts, i: int, judged: list[CC], carriers: dict[CC, dict[str, list[int]]]
) -> list[KernelGap]:
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
    return [
        KernelGap(verdict, seen[tuple(map(id, u.codes_defining(name)))][0], tuple(at), name, frozenset([i]), others)
        for (name, verdict, others), at in where.items()
    ]


def _kernel_verdict(
    f: LibraryFacts,
    i: int,
    name: str,
    codes: tuple[NvCode, ...],
    specialised: bool,
    cc: CC,
    carriers: dict[CC, dict[str, list[int]]],
) -> tuple[Verdict, tuple[int, ...]]:
    """What the binary says about kernel ``name`` of unit ``i`` missing GPU ``cc``, and the other
    units that give ``cc`` a kernel of that name (for "elsewhere")."""
    said = _own_verdict(f, i, f.paths[cc].choices[i], name, codes, specialised, cc)
    if said is not None:
        return said, ()
    if cc not in carriers:
        carriers[cc] = _carriers(f, cc)
    others = tuple(j for j in carriers[cc].get(name, ()) if j != i)
    if others and f.units[i].container.role == CUBIN and all(f.units[j].container.role == CUBIN for j in others):
        # whole cubins the library loads itself: nothing binds a launch to one of them, the
        # library loads the image it picks, and only one whose SASS runs on the GPU loads there
        return "chosen", others
    return ("elsewhere" if others else "fails"), others


def _own_verdict(
    f: LibraryFacts, i: int, choice: Choice, name: str, codes: tuple[NvCode, ...], specialised: bool, cc: CC
) -> Verdict | None:
    """What the kernel's own container, name and library say of its gap on ``cc``, before any
    other container is looked at; None where they say nothing. A project's record of the GPUs
    its host launches the kernel on ([[tool.archaudit.library]] with kernels) outweighs what the
    kernel's name suggests: a name never excuses a GPU the project says it is launched on."""
    gate = kernel_claim(f.policy, f.path, name)
    if specialised and ((gate is None and excludes(name, cc)) or not f.generic_runs(cc)):
        return "specialised"
    vendor = _vendor_verdict(f, i, name, cc)
    if vendor is not None:
        return vendor
    if gate is not None and cc not in gate.claim.gpus:
        return "gated"  # the project records that its host code never launches it on this GPU
    if choice.runs == "none" and choice.code is not None:
        return "fails"  # the driver picks its PTX and cannot compile it
    if any(s.excuses(name, cc) for s in f.statements):
        return "stated"
    if gate is None and named_for(name, codes, cc):
        return "named"
    return "compiled-out" if compiled_out(choice, codes, cc) else None


def _vendor_verdict(f: LibraryFacts, i: int, name: str, cc: CC) -> Verdict | None:
    """A vendor library in its documented range, or a vendor's code linked statically in its
    range: its host picks the container ("dispatched", or "stated" where its own string says so)."""
    if f.vendor is not None and f.vendor.dispatches:
        return "stated" if any(s.excuses(name, cc) for s in f.statements) else "dispatched"
    if f.static and (static := f.static[i]) is not None and static.covers(cc):
        return "dispatched"
    return None


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
    undated: Floor | None = None  # the floor of a cubin that records no toolkit (undated_floor)
    # aligned with ``units`` (empty where none is): the vendor whose code a unit is, linked
    # statically into this library (``_static_units``), judged by that vendor's row in its range
    static: tuple[vendors.Identified | None, ...] = ()
    rocm_release: str | None = None  # the ROCm release its package is named for (package_rocm)

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
    def amd_lookup(self) -> rocm.Lookup:
        """How the HIP runtime the library links (NEEDED libamdhip64.so.N) selects bundle entries;
        today's rule where it links none; a release of its own where its package names one."""
        return rocm.lookup_for(self.library.needed, self.rocm_release)

    @cached_property
    def _amd_paths(self) -> dict[str, rocm.AmdPath]:
        return {}

    def amd_path(self, gpu: str) -> rocm.AmdPath:
        """What a concrete AMD GPU setting (gfx90a:sramecc+:xnack-) runs of the library."""
        known = self._amd_paths.get(gpu)
        if known is None:
            known = self._amd_paths[gpu] = rocm.path(self.amd_modules, gpu, self.amd_lookup)
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
        return any(
            c.code is not None and c.runs != "none" and c.code.effective.suffix not in ("a", "f")
            for c in self.paths[gpu].choices
        )

    @cached_property
    def carried(self) -> tuple[str, ...]:
        sass = sorted({c.effective for c in self.codes if c.kind == SASS})
        ptx = sorted({c.effective for c in self.codes if c.kind == PTX})
        return tuple(
            [t.sm for t in sass]
            + [t.compute for t in ptx]
            + sorted({rocm.judged_target(e) for e in self.amd if not e.unloadable})
        )

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
        return tuple(
            c
            for i in self.kernel_homes[kernel]
            for c, ks in zip(self.units[i].codes, self.units[i].code_kernels)
            if kernel in ks
        )

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
        built = unit_release(self.codes)
        floors = [
            entry_floor(c, self.undated, self.policy.driver_os, u.release or built) for u in self.units for c in u.codes
        ]
        if self.runtime is not None and floors:
            floors.append(self.runtime)
        return highest(floors)


def library_facts(
    lib: Library, claim: Claim | None, policy: Policy, package: int | None = None, rocm_release: str | None = None
) -> LibraryFacts:
    """Compute the facts of one library once, for every rule. ``package``: the CUDA major the
    library's package is named for (arch.package_cuda), which dates cubins nothing else dates;
    ``rocm_release``: the ROCm release it is named for (gfx.package_rocm), whose HIP may judge
    its AMD bundles (rocm.lookup_for)."""
    judged = judged_containers(lib)
    units = _units(judged)
    loadable = [e for c in lib.reachable if c.role != RELOCATABLE for e in c.entries]
    amd = tuple(e for e in loadable if e.kind == CODE_OBJECT)
    reloc = tuple(e for c in lib.containers if c.role == RELOCATABLE for e in c.entries)
    stubs_only = bool(loadable) and not judged and not amd
    runtime = runtime_floor(lib, policy.driver_os)
    undated = undated_floor(lib, runtime, package, policy.driver_os)
    gpus = dict.fromkeys([*(claim.gpus if claim else ()), *(cc for _, cc in policy.gpus)])
    built = unit_release(tuple(c for u in units for c in u.codes))
    linker = lib.device_linker is not None
    said = arch.library_statements(lib.path.rsplit("/", 1)[-1], lib.statements)
    paths = {cc: gpu_path(cc, units, runtime, policy.driver_os, built, linker, said, undated) for cc in gpus}
    codes = tuple(c for u in units for c in u.codes)
    contract, static = _vendor_code(lib, units, codes, runtime, package)
    if contract is not None:
        paths = _vendor_floored(paths, contract, policy.driver_os)
    return LibraryFacts(
        lib,
        claim,
        policy,
        tuple(units),
        codes,
        reloc,
        amd,
        stubs_only,
        runtime,
        paths,
        contract,
        undated,
        static,
        rocm_release,
    )


def _vendor_code(
    lib: Library, units: list[Unit], codes: tuple[NvCode, ...], runtime: Floor | None, package: int | None = None
) -> tuple[vendors.Identified | None, tuple[vendors.Identified | None, ...]]:
    """The vendor library it is (its contract), else which of its units are a vendor's code
    linked in statically (``_static_units``); neither without NVIDIA code. The row is chosen by
    the release that built its code (``built_by``, the package's CUDA major last)."""
    if not codes:
        return None, ()
    built = built_by(codes, runtime, package)
    noted = noted_release(codes)
    contract = vendors.identify(lib.path.rsplit("/", 1)[-1], lib.statements, built, noted)
    if contract is not None:
        return contract, ()
    return None, _static_units(units, lib.statements, built, noted)


def _static_units(
    units: list[Unit], carried: tuple[str, ...], built: CC | None, noted: CC | None = None
) -> tuple[vendors.Identified | None, ...]:
    """Which units of a library that is no vendor library are a vendor's code linked in
    statically (vendors.identify_static): the library's own bytes hold the vendor's identity or
    version string, and every kernel of the unit is named by the vendor's convention
    (data/vendor.json 'static_kernels'). A unit whose kernels were not read, that defines none,
    or that holds one kernel the convention does not name stays the project's own (fail closed).
    Empty where no unit is."""
    found = vendors.identify_static(carried, built, noted)
    if not found:
        return ()
    out: list[vendors.Identified | None] = []
    for u in units:
        names = u.kernels if u.identified else frozenset()
        out.append(
            next(
                (
                    ident
                    for lib, ident in found
                    if names and lib.static_kernels is not None and all(lib.static_kernels.match(k) for k in names)
                ),
                None,
            )
        )
    return tuple(out) if any(x is not None for x in out) else ()


def _units(judged: list[tuple[int, Container]]) -> list[Unit]:
    """The judged containers that hold NVIDIA code, as units; units of one shape share a number."""
    units = []
    shapes: dict[object, int] = {}
    for i, c in judged:
        codes = nv_codes(c.entries)
        if not codes:
            continue
        identified = all(x.entry.kernels is not None for x in codes)
        units.append(Unit(i, c, codes, identified, shapes.setdefault(shape_of(codes), len(shapes))))
    return units


def _vendor_floored(paths: dict[CC, GpuPath], contract: vendors.Identified, os_name: str) -> dict[CC, GpuPath]:
    """A vendor library's paths with its vendor's documented minimum driver as the floor of
    whatever code a GPU runs, never below the GPU's own first driver (a B200 needs R570 whatever
    cuBLAS 12.9 documents); as they are where the row names no driver for ``os_name``."""
    floor = vendor_floor(contract, os_name)
    if floor is None:
        return paths
    return {
        cc: p if p.floor is None else replace(p, floor=highest([floor, *own_floor(cc, os_name)]))
        for cc, p in paths.items()
    }


__all__ = [
    "Floor",
    "GpuPath",
    "highest",
    "KernelGap",
    "labels_of",
    "library_facts",
    "LibraryFacts",
    "named_architectures",
    "Unit",
    "Unreached",
    "vendor_floor",
]
