"""The rule layer: one function per finding code, each registered beside its definition.

A library rule reads one library's facts (archaudit.judge.facts.LibraryFacts, computed once) and
returns its findings; a target rule reads the facts of a whole target (its libraries'
facts, the claim, the embedded claims). No rule reads a file, a flag of the CLI or how
much will be printed: the same input gives the same findings under every ``--detail``.

Adding a code: its row in archaudit.findings, its rule here (with a docstring saying why
it exists) decorated ``@library_rule(Code.X)`` or ``@target_rule(Code.X)`` where it is defined
(its place in this module is its place in the report), and its tests in tests/judge/.
"""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..claims import Claim
from ..findings import CODES, Code, Finding, make_finding
from ..gpus import amd as gfx, cuda as arch, rocm
from ..gpus.cuda import CC, label
from ..gpus.drivers import driver_at_least
from ..gpus.selection import NvCode, runs
from ..model import PTX, SASS, Library, Problem, TargetInventory
from .facts import Floor, KernelGap, LibraryFacts, library_facts
from .policy import AmdGpu, NvidiaGpu, Policy, arm_linux, library_claim

KERNELS_SHOWN = 3


finding = make_finding


@dataclass(frozen=True)
class TargetFacts:
    """What the target rules need: the target's inventory, the claim that judges it (given,
    or embedded in a binary), and its libraries' facts."""

    inventory: TargetInventory
    claim: Claim | None
    embedded: Claim | None
    embedded_error: Finding | None
    policy: Policy
    libraries: tuple[LibraryFacts, ...]

    @property
    def target(self) -> str:
        return self.inventory.target

    @property
    def links_runtime(self) -> bool:
        return any(lib.links_gpu_runtime for lib in self.inventory.libraries)

    @property
    def has_device_code(self) -> bool:
        return any(lib.has_device_code for lib in self.inventory.libraries)

    @property
    def has_nvidia(self) -> bool:
        return any(e.vendor == "nvidia" for lib in self.inventory.libraries for e in lib.entries)

    @property
    def gpu_wheel(self) -> bool:
        """Whether the target is judged as GPU software at all."""
        return (self.has_device_code or self.links_runtime or self.claim is not None
                or bool(self.policy.amd_claim))


# ---- shared phrasing --------------------------------------------------------------------



# ---- registration: each rule is registered where it is defined, in the order it reports ----

LibraryRule = Callable[[LibraryFacts], list[Finding]]
TargetRule = Callable[[TargetFacts], list[Finding]]
Readers = Literal["E*"]
READERS: Readers = "E*"
"""The rule that passes on what the readers found (every E code) rather than deciding one code."""

_LIBRARY_RULES: list[tuple[Code | Readers, LibraryRule]] = []
_TARGET_RULES: list[tuple[Code | Readers, TargetRule]] = []


def library_rule(code: Code | Readers) -> Callable[[LibraryRule], LibraryRule]:
    """Register a library rule for `code`; rules report in the order this module defines them."""
    def register(rule: LibraryRule) -> LibraryRule:
        _LIBRARY_RULES.append((code, rule))
        return rule
    return register


def target_rule(code: Code | Readers) -> Callable[[TargetRule], TargetRule]:
    """Register a target rule for `code`; rules report in the order this module defines them."""
    def register(rule: TargetRule) -> TargetRule:
        _TARGET_RULES.append((code, rule))
        return rule
    return register


def demangle(name: str) -> str:
    """A short readable name for an Itanium-mangled kernel: its qualified name without
    parameters (`_Z4axpyfPKfPfi` -> `axpy`, `_ZN2ns5scaleIfEEvPT_S1_i` -> `ns::scale`)."""
    if not name.startswith("_Z"):
        return name
    nested = name.startswith("_ZN")
    i = 3 if nested else 2
    while nested and i < len(name) and name[i] in "rVK":
        i += 1
    parts: list[str] = []
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        if j - i > 9:  # no identifier is a gigabyte long: not a name this reading knows
            break
        n = int(name[i:j])
        parts.append(name[j:j + n])
        i = j + n
        if not nested or (i < len(name) and name[i] == "I"):
            break
    return "::".join(p for p in parts if p) or name


def _kernels_phrase(names: Sequence[str] | None, containers: int) -> str:
    if names is None:
        return f"{containers} container{'s' * (containers != 1)} without identifiable kernels"
    shown = sorted({demangle(n) for n in names})
    more = len(shown) - KERNELS_SHOWN
    listed = ", ".join(shown[:KERNELS_SHOWN]) + (", ..." if more > 0 else "")
    return f"{len(names)} kernel{'s' * (len(names) != 1)} ({listed})"


def _count(names: Sequence[str] | None, containers: int) -> str:
    """How many kernels (or unnamed containers) a finding is about, without their names."""
    if names is None:
        return f"{containers} container{'s' * (containers != 1)} without identifiable kernels"
    return f"{len(names)} kernel{'s' * (len(names) != 1)}"


def _verb(names: Sequence[str] | None) -> str:
    return "fails" if names is not None and len(names) == 1 else "fail"


def _its(names: Sequence[str] | None) -> str:
    return "its" if names is not None and len(names) == 1 else "their"


def _label_key(text: str) -> tuple[int, str]:
    digits = "".join(ch for ch in text if ch.isdigit())
    return int(digits or 0), text


def _present(codes: Iterable[NvCode]) -> list[str]:
    """The code a library carries, in one notation: ``sm_XY`` for SASS, ``compute_XY`` for PTX."""
    codes = list(codes)
    sass = sorted({c.effective.sm for c in codes if c.kind == SASS}, key=_label_key)
    ptx = sorted({c.effective for c in codes if c.kind == PTX})
    return sass + [t.compute for t in ptx]


def dotted(labels: Iterable[str]) -> str:
    """Claim labels as compute capabilities, for a person: "90", "100" -> "9.0, 10.0"."""
    return ", ".join(f"{x[:-1]}.{x[-1]}" if x.isdigit() and len(x) >= 2 else x for x in labels)


ENTRY_REASON = "<file:line>"  # where the project's host code gates it


def library_entry(path: str, keep: Iterable[str]) -> str:
    """The exact [[tool.archaudit.library]] entry that records a host gate: the library's file
    name, the architectures it is launched on, and the reason to fill in."""
    base = path.rsplit("!", 1)[-1].rsplit("/", 1)[-1]
    return f'[[tool.archaudit.library]] path = "{base}" arch = "{";".join(keep)}" reason = "{ENTRY_REASON}"'


def _kept(f: LibraryFacts, fails: Iterable[str]) -> list[str]:
    """The claimed GPUs (labels) a library keeps once the failing ones are gated away."""
    gone = set(fails)
    keep = [label(cc) for cc in f.claimed if label(cc) not in gone]
    return keep or [x.removeprefix("sm_") for x in _present(f.codes) if x.startswith("sm_")][:1]


def _g001(subject: str, claimed: Sequence[str], source: str, carried: Sequence[str], missing: Sequence[str],
          kernels: Sequence[str] | None, why: str = "",
          nothing: str = "carries only relocatable device code, which never loads on its own",
          fix: str = "") -> Finding:
    """The one G001 message, for NVIDIA, AMD and relocatable-only code alike: what is missing,
    the claim and where it came from, what the library carries, and the kernels that would fail
    (``kernels`` None: its code names none that could be read)."""
    has = f"carries code only for {', '.join(carried)}" if carried else nothing
    if kernels is None:
        fail = "its kernels cannot be named (its code defines none that could be read)"
    elif not kernels:
        fail = "its code defines no kernel by name"
    else:
        fail = f"{_kernels_phrase(kernels, 0)} would fail there with 'no kernel image is available'"
    if fix:
        return finding(Code.G001, subject,
                       f"{subject} has no code for {dotted(missing)} (claimed). {fix}; it {has}{why} (claimed: "
                       f"{', '.join(claimed)}, from {source}); {fail}",
                       claimed=list(claimed), claim_source=source, carried=list(carried), missing=list(missing),
                       kernels=sorted(kernels) if kernels is not None else None)
    return finding(Code.G001, subject,
                   f"{subject} has no code for {', '.join(missing)} (claimed: {', '.join(claimed)}, from {source}): "
                   f"it {has}{why}; {fail}",
                   claimed=list(claimed), claim_source=source, carried=list(carried), missing=list(missing),
                   kernels=sorted(kernels) if kernels is not None else None)


def _library_kernels(f: LibraryFacts) -> list[str] | None:
    """Every NVIDIA kernel the library defines, or None when a unit's kernels were not read."""
    if not f.units or not all(u.identified for u in f.units):
        return None
    return sorted(f.kernel_homes)


@dataclass(frozen=True, slots=True)
class Group:
    """Kernels (or unnamed containers) that fail the same way, reported as one finding."""

    carried: tuple[str, ...]
    fails: tuple[str, ...]
    names: tuple[str, ...] | None  # None: containers without identifiable kernels
    containers: int


def _groups(items: Iterable[tuple[tuple[str, ...], tuple[str, ...], str | None, frozenset[int]]]) -> list[Group]:
    """Group (carried, fails, kernel or None, units) items by (carried, fails), largest first.

    Items without a kernel name are counted as containers of their own group."""
    names: dict[tuple[tuple[str, ...], tuple[str, ...], bool], set[str]] = defaultdict(set)
    homes: dict[tuple[tuple[str, ...], tuple[str, ...], bool], set[int]] = defaultdict(set)
    for carried, fails, name, units in items:
        key = (carried, fails, name is None)
        if name is not None:
            names[key].add(name)
        homes[key] |= units
    out = [Group(c, f, None if unnamed else tuple(sorted(names[(c, f, unnamed)])), len(homes[(c, f, unnamed)]))
           for (c, f, unnamed) in homes]
    return sorted(out, key=lambda g: (-(len(g.names) if g.names is not None else g.containers), g.carried, g.fails))


# ---- reader problems ------------------------------------------------------------------------


@library_rule(READERS)
def rule_reader_problems(f: LibraryFacts) -> list[Finding]:
    """E0xx: what a reader could not verify, as the reader said it (always an error)."""
    out = []
    for p in f.library.problems:
        where = f" (at 0x{p.offset:x})" if p.offset is not None and "0x" not in p.message else ""
        out.append(_as_folded(finding(p.code, f.path, f"{f.path}: {p.message}{where}"), p, f.path))
    return out


def _as_folded(found: Finding, p: Problem, subject: str) -> Finding:
    """The finding of a problem the reader folded (model.Problem.count): as many, the same examples."""
    if p.count == 1:
        return found
    return found.folded(p.count, tuple(f"{subject}: {m}" for m in p.examples))


# ---- library rules ------------------------------------------------------------------------


@library_rule(Code.G010)
def rule_g010(f: LibraryFacts) -> list[Finding]:
    """G010: device code in which nothing can be launched: every container was read whole and
    defines no kernel (nvlink's device-link stubs, an empty cubin wherever it sits). Anything
    else that holds code, kernels identified or not, is judged."""
    if not f.stubs_only or f.relocatable:
        return []
    return [finding(Code.G010, f.path, f"{f.path} carries device code without kernels "
                                    f"(its containers define no kernel: "
                                    f"{' '.join(sorted({e.target for e in f.library.entries}))})")]


@library_rule(Code.G007)
def rule_g007(f: LibraryFacts) -> list[Finding]:
    """G007: relocatable (-rdc) entries are listed but never count as coverage."""
    if not f.relocatable:
        return []
    return [finding(Code.G007, f.path, f"{f.path}: {len(f.relocatable)} relocatable entries "
                                    f"(-rdc objects) are not loadable coverage")]


@library_rule(Code.G017)
def rule_g017(f: LibraryFacts) -> list[Finding]:
    """G017: kernels only the later containers of a bare container file define, which its loader
    never reads (cuModuleLoad, hipModuleLoad: the first container only)."""
    u = f.unreached
    if u is None:
        return []
    loader = "hipModuleLoad" if f.library.containers[0].vendor == "amd" else "cuModuleLoad"
    where = f"{u.containers} later container{'s' * (u.containers != 1)}, which {loader} never reads"
    if u.kernels:
        what = f"{_kernels_phrase(u.kernels, 0)} {'is' if len(u.kernels) == 1 else 'are'} defined only in {where}"
    else:
        what = f"the kernels of {where}, were not read (--fast), so some may be defined only there"
    return [finding(Code.G017, f.path, f"{f.path}: {what}: reachable from no module",
                    kernels=list(u.kernels), containers=u.containers, loader=loader)]


@library_rule(Code.G001)
def rule_g001(f: LibraryFacts) -> list[Finding]:
    """G001: a claimed architecture on which none of the library's code runs (NVIDIA claims
    against NVIDIA code, AMD claims against AMD code; relocatable code never counts)."""
    out = []
    if f.claim is not None and not f.codes and not f.amd and f.relocatable:
        labels = [label(c) for c in f.claimed]
        out.append(_g001(f.path, labels, f.claim.source, [], labels, None))
    elif f.claim is not None and f.codes:
        absent = [label(cc) for cc in f.missing if not f.paths[cc].dead  # G012's
                  and not all(c.unlinked for c in f.paths[cc].choices)]  # G013's
        if absent:
            fix = (f"Fix: build for {', '.join('sm_' + x for x in absent)}, or record its gate: "
                   f"{library_entry(f.path, _kept(f, absent))}")
            out.append(_g001(f.path, [label(c) for c in f.claimed], f.claim.source, _present(f.codes), absent,
                             _library_kernels(f), fix=fix))
    if f.amd and f.policy.amd_claim:
        missing = [want for want in f.policy.amd_claim if amd_missing(f, want)]
        if missing:
            settings = [m for want in missing for m in amd_missing(f, want)]
            why = "" if all(not _modes_matter(t) for t in missing) else \
                " (a target without xnack/sramecc runs in either mode: it needs code for both)"
            why += _amd_why(f, settings)
            entries = [e for e in f.amd if rocm.hip_reads(e)]
            names = [k for e in entries for k in (e.kernels or ())]
            read = all(e.kernels is not None for e in entries)
            out.append(_g001(f.path, list(f.policy.amd_claim), f.policy.amd_claim_source or "--amd-arch",
                             amd_carried(f), missing, sorted(set(names)) if read else None, why,
                             nothing="carries no AMD code HIP selects"))
    return out


def amd_carried(f: LibraryFacts) -> list[str]:
    """The AMD targets HIP can select in the library, each as its code object runs (the more
    specific of bundle id and e_flags)."""
    return sorted({rocm.judged_target(e) for e in f.amd if rocm.hip_reads(e) and not e.unloadable})


def amd_missing(f: LibraryFacts, want: str) -> list[str]:
    """The concrete GPU settings of a claimed target on which no module of the library loads."""
    return [m for m in rocm.settings(want) if not f.amd_path(m).runs]


def _amd_why(f: LibraryFacts, settings: Sequence[str]) -> str:
    """Why ROCm runs nothing there, where the binary shows more than missing code: an entry it
    selects whose code object the loader refuses, or entries it never reads."""
    out = ""
    old = sorted({e.code_version[0] for m in settings for e in f.amd_path(m).refused if rocm.too_old_alone(e)})
    if old:
        out += (f"; it is a bare code object of version {', '.join(map(str, old))}, and ROCm's comgr looks up "
                f"bare code objects of versions 4 to 6 only (getElfIsaName)")
    unloadable = sorted({e.identifier or e.target for m in settings for e in f.amd_path(m).refused
                         if e.unloadable and not rocm.too_old_alone(e)})
    if unloadable:
        out += (f"; ROCm selects {', '.join(unloadable[:3])}, a code object without a loadable segment (a "
                f"relocatable object never linked), which ROCr's loader refuses on every GPU")
    refused = {e.identifier or e.target: rocm.judged_target(e) for m in settings for e in f.amd_path(m).refused
               if not rocm.too_old_alone(e) and not e.unloadable}
    if refused:
        shown = "; ".join(f"{i} holds a code object built for {t}" for i, t in sorted(refused.items())[:3])
        out += (f"; on {', '.join(settings[:4])} ROCm selects the first bundle entry whose id fits and the "
                f"loader refuses its code object ({shown}), with no fallback to a later entry")
    unread = sorted({e.identifier for e in f.amd if not rocm.hip_reads(e)})
    if unread:
        out += f"; HIP never selects {', '.join(unread[:3])} (not a hip/hipv4/hcc entry as comgr spells it)"
    procs = {m.split(":")[0] for m in settings}
    generic = sorted({e.target for e in f.amd if rocm.hip_reads(e) and gfx.is_generic(e.target)
                      and procs & set(gfx.family(e.target))})
    if generic:
        out += (f"; {', '.join(generic)} code is not selected for {', '.join(sorted(procs))}: ROCm's comgr "
                f"(lookUpCodeObject) compares a bundle entry's processor with the GPU's own, so a generic "
                f"entry fits no GPU; only a run on the GPU (archaudit smoke) can show a ROCm that selects it")
    return out


@library_rule(Code.G012)
def rule_g012(f: LibraryFacts) -> list[Finding]:
    """G012: a claimed GPU whose only code needs a newer CUDA release than the last driver
    of its generation supports (Kepler's R470 stops at CUDA 11.4, PTX ISA 7.4): no driver
    that still runs the GPU can run the code."""
    out: list[Finding] = []
    if f.claim is None:
        return out
    for cc in f.missing:
        dead = f.paths[cc].dead
        if not dead:
            continue
        last = arch.last_cuda(cc) or (0, 0)
        what = ", ".join(sorted({_dead_phrase(c) for c in dead}))
        out.append(finding(Code.G012, f.path, f"{f.path} on {cc[0]}.{cc[1]} (claimed) has only code no driver can run "
                                           f"there: {what}; the last driver for {cc[0]}.{cc[1]} GPUs supports "
                                           f"CUDA {last[0]}.{last[1]}",
                           gpu=label(cc), dead=sorted({c.label for c in dead}), last_cuda=f"{last[0]}.{last[1]}"))
    return out


@library_rule(Code.G013)
def rule_g013(f: LibraryFacts) -> list[Finding]:
    """G013: on a claimed GPU the driver picks a relocatable cubin (-rdc) that calls code it does
    not carry, which cuModuleLoadData refuses alone (CUDA_ERROR_NOT_FOUND on an H200), and nothing
    in the library shows it links device code at run time (nvJitLink), as cuSPARSE does."""
    if f.claim is None:
        return []
    gpus = [cc for cc in f.claimed if f.paths[cc].unlinked]
    if not gpus:
        return []
    chosen = {id(c): c for cc in gpus for c in f.paths[cc].unlinked}.values()
    calls = sorted({s for c in chosen for s in c.entry.unresolved})
    shown = ", ".join(calls[:KERNELS_SHOWN]) + (f" and {len(calls) - KERNELS_SHOWN} more" if len(calls) > KERNELS_SHOWN
                                                 else "")
    units = {i for cc in gpus for i, c in enumerate(f.paths[cc].choices) if c.unlinked}
    kernels = sorted({k for c in chosen for k in c.entry.kernels or ()})
    return [finding(Code.G013, f.path, f"{f.path}: on {', '.join(f'{a}.{b}' for a, b in gpus)} (claimed) the driver "
                                    f"picks, in {len(units)} container{'s' * (len(units) != 1)}, relocatable "
                                    f"cubins (-rdc) that call {shown} without carrying it, and nothing in the "
                                    f"library links device code at run time (no nvJitLink): they do not load "
                                    f"alone (CUDA_ERROR_NOT_FOUND)"
                                    + (f"; {_kernels_phrase(kernels, 0)} cannot run there" if kernels else ""),
                    gpus=[label(cc) for cc in gpus], unresolved=calls, containers=len(units), kernels=kernels)]


def _dead_phrase(c: NvCode) -> str:
    e = c.entry
    if e.kind == PTX:
        return f"{c.label} (PTX ISA {e.code_version[0]}.{e.code_version[1]})"
    if e.toolkit:
        return f"{c.label} (built by CUDA {e.toolkit[0]}.{e.toolkit[1]})"
    return f"{c.label} (linked CUDA runtime)"


@library_rule(Code.G016)
def rule_g016(f: LibraryFacts) -> list[Finding]:
    """G016: claimed GPUs outside the range the library's vendor documents for its release
    (data/vendor.json, a source per row) are not supported by it: it is not judged there, and
    its callers do not use it there. Where no other library runs on the GPU, G019 fails it."""
    if f.vendor is None:
        return []
    out = [x for x in _named_gpus(f) if x.code == Code.G016]
    if not f.outside_vendor_range:
        return out
    gpus = [f"{a}.{b}" for a, b in f.outside_vendor_range]
    return [finding(Code.G016, f.path, f"{f.path} is {f.vendor.library} ({f.vendor.evidence}), which its vendor "
                                       f"documents for {f.vendor.text}: the claimed {', '.join(gpus)} "
                                       f"{'is' if len(gpus) == 1 else 'are'} not supported by it, and not held "
                                       f"against it ({f.vendor.source})",
                    library=f.vendor.library, range=f.vendor.text, gpus=[label(cc) for cc in f.outside_vendor_range]),
            *out]


@library_rule(Code.G020)
def rule_g020(f: LibraryFacts) -> list[Finding]:
    """G020: a vendor library of a release newer than data/vendor.json knows, judged by its
    line's newest row: the row to add."""
    if f.vendor is None or not f.vendor.newer:
        return []
    return [finding(Code.G020, f.path, f"{f.path} is {f.vendor.newer}, newer than data/vendor.json knows: judged by "
                                       f"its line's newest row, {f.vendor.library} ({f.vendor.text}); add a row for "
                                       f"{f.vendor.newer} from its vendor's documentation",
                    library=f.vendor.library, release=f.vendor.newer, range=f.vendor.text)]


@library_rule(Code.G005)
def rule_g005(f: LibraryFacts) -> list[Finding]:
    """G005: all the library's code is arch-specific or family code, so it serves only those
    GPUs. It says so; it excuses nothing: a claimed GPU it does not serve is G001 like any
    other (one wrong CMAKE_CUDA_ARCHITECTURES=100f must not pass "80;90;100")."""
    if not f.specialised:
        return []
    served = sorted({cc for cc in arch.KNOWN_CCS if any(runs(c, cc) != "none" for c in f.codes)})
    return [finding(Code.G005, f.path, f"{f.path} is specialised: serves only "
                                    f"{', '.join(f'{a}.{b}' for a, b in served)} ({' '.join(f.carried)})",
                    serves=[f"{a}.{b}" for a, b in served])]


@library_rule(Code.G002)
def rule_g002(f: LibraryFacts) -> list[Finding]:
    """G002: a claimed GPU that runs the library only through the PTX JIT (slow first load)."""
    if f.claim is None or not f.codes:
        return []
    jit = [label(cc) for cc, how in f.coverage if how == "jit"]
    if not jit:
        return []
    ptx = sorted({c.label for c in f.codes if c.kind == PTX})
    return [finding(Code.G002, f.path, f"{f.path} runs on {', '.join(jit)} only through PTX JIT ({', '.join(ptx)})",
                    jit=jit)]


@library_rule(Code.G003)
def rule_g003(f: LibraryFacts) -> list[Finding]:
    """G003 (--exact): SASS for an architecture the claim does not list."""
    if not f.policy.exact or f.claim is None:
        return []
    claimed = set(f.claimed)
    extra = sorted({c.target.label for c in f.codes if c.kind == SASS
                    and arch.canonical_cc(c.target.cc) not in claimed}, key=_label_key)
    if not extra:
        return []
    return [finding(Code.G003, f.path, f"{f.path} carries {', '.join(extra)} which the claim does not list",
                    extra=extra)]


@library_rule(Code.G004)
def rule_g004(f: LibraryFacts) -> list[Finding]:
    """G004 (--require-ptx newest): no plain PTX for the newest claimed architecture, judged
    by the target its text compiles for (compute_90 whose text says sm_90a is not plain)."""
    if f.policy.require_ptx != "newest" or f.claim is None or not f.claimed or not f.codes:
        return []
    newest = max(f.claimed)
    if any(c.kind == PTX and c.target.cc == newest and c.jit_target is not None
           and c.jit_target.cc == newest and not c.target.suffix and not c.jit_target.suffix for c in f.codes):
        return []
    return [finding(Code.G004, f.path, f"{f.path} carries no PTX for compute_{label(newest)}", newest=label(newest))]


@library_rule(Code.K001)
def rule_k001(f: LibraryFacts) -> list[Finding]:
    """K001: kernels (or unnamed containers) whose own object lacks code for a claimed GPU
    the library as a whole covers, with nothing in the binary saying it was meant that way.
    For AMD code the object is the kernel's own bundle (or bare code object): ROCm looks a
    kernel up in its own module only."""
    gaps = [(g.carried, g.fails, g.name, g.units) for g in f.kernel_gaps if g.verdict == "fails"]
    out = [finding(Code.K001, f.path, f"{f.path}: {_count(g.names, g.containers)} {_verb(g.names)} on "
                                   f"{dotted(g.fails)} (claimed): {_its(g.names)} container lacks it. Fix: build for "
                                   f"{', '.join('sm_' + x for x in g.fails)}, or record its gate: "
                                   f"{library_entry(f.path, _kept(f, g.fails))}. They carry only "
                                   f"{', '.join(g.carried)}: {_kernels_phrase(g.names, g.containers)}",
                   kernels=list(g.names or ()), containers=g.containers, carried=list(g.carried),
                   fails=list(g.fails))
           for g in _groups(gaps)]
    amd = [(g.carried, g.fails, g.name, frozenset({g.module})) for g in amd_kernel_gaps(f)]
    out += [finding(Code.K001, f.path, f"{f.path}: {_kernels_phrase(g.names, g.containers)} carry code only for "
                                    f"{', '.join(g.carried)} in their own bundle; they fail on "
                                    f"{', '.join(g.fails)} (claimed), where the library's other bundles run "
                                    f"(ROCm looks a kernel up in its own module only)",
                    kernels=list(g.names or ()), containers=g.containers, carried=list(g.carried),
                    fails=list(g.fails), vendor="amd")
            for g in _groups(amd)]
    return out


def amd_kernel_gaps(f: LibraryFacts, gpus: Sequence[str] | None = None) -> tuple[rocm.AmdKernelGap, ...]:
    """AMD kernels a claimed (or the given) GPU setting cannot launch from their own module
    although another module of the library runs there."""
    if not f.amd:
        return ()
    if gpus is None:
        gpus = [m for want in f.policy.amd_claim for m in rocm.settings(want)]
    return rocm.kernel_gaps(f.amd_modules, [f.amd_path(m) for m in dict.fromkeys(gpus)])


@library_rule(Code.K002)
def rule_k002(f: LibraryFacts) -> list[Finding]:
    """K002: kernels whose code is all arch-specific or family code: they serve only those
    GPUs by design."""
    gaps = [(g.carried, g.fails, g.name, g.units) for g in f.kernel_gaps if g.verdict == "specialised"]
    return [finding(Code.K002, f.path, f"{f.path}: {_count(g.names, g.containers)} not meant for {dotted(g.fails)} "
                                    f"(claimed), as designed: all their code is arch-specific or family code "
                                    f"({', '.join(g.carried)}), and their names say so or no generic code of the "
                                    f"library runs there: {_kernels_phrase(g.names, g.containers)}",
                    kernels=list(g.names or ()), carried=list(g.carried), fails=list(g.fails))
            for g in _groups(gaps)]


@library_rule(Code.K003)
def rule_k003(f: LibraryFacts) -> list[Finding]:
    """K003: kernels a claimed GPU cannot launch by design, as the binary shows for each kernel in
    its own container: a sourced statement in the library's own bytes speaks for it (data/vendor.json
    ``statements``), its name names the architecture its code there is for, or it was compiled
    out of its own container's code for that GPU."""
    out = _k003_stated(f)
    for why in ("named", "compiled-out", "chosen"):
        gaps = [(g.carried, g.fails, g.name, g.units) for g in f.kernel_gaps if g.verdict == why]
        for g in _groups(gaps):
            if why == "chosen":
                out.append(finding(Code.K003, f.path,
                                   f"{f.path}: {_kernels_phrase(g.names, g.containers)} carry code only for "
                                   f"{', '.join(g.carried)} in whole cubins the library loads itself; on "
                                   f"{', '.join('sm_' + x for x in g.fails)} another of its whole cubins carries "
                                   f"them, and the library loads the image it picks (cuModuleLoadData): nothing "
                                   f"binds a launch to one of them",
                                   kernels=list(g.names or ()), carried=list(g.carried), fails=list(g.fails),
                                   reason=why))
                continue
            if why == "named":
                said = (f"their names mean {_name_floor_text(g.names)} or newer ({_conventions(g.names)}), and "
                        f"their code is for no older GPU (only {', '.join(g.carried)})")
            else:  # the code their containers do give these GPUs, which leaves them out
                said = (f"{dotted(g.fails)} runs {', '.join(_given_labels(f, g))} of their own container, built "
                        f"for it (or newer than all code that carries them), and the source left them out there; "
                        f"they have code only for {', '.join(g.carried)}")
            out.append(finding(Code.K003, f.path,
                               f"{f.path}: {_count(g.names, g.containers)} not meant for {dotted(g.fails)} (claimed), "
                               f"as designed: {said}: {_kernels_phrase(g.names, g.containers)}",
                               kernels=list(g.names or ()), carried=list(g.carried), fails=list(g.fails),
                               reason=why))
    return out


def _name_floor_text(names: Sequence[str] | None) -> str:
    """The oldest architecture the kernels' names allow ("8.0"), over all of them."""
    from .names import name_floor

    floors = [x for n in names or () if (x := name_floor(n)) is not None]
    return f"{min(floors)[0]}.{min(floors)[1]}" if floors else "another architecture"


def _conventions(names: Sequence[str] | None) -> str:
    """The conventions (data/names.json rows) the kernels' names are read by."""
    from .names import conventions_of

    seen = dict.fromkeys(c for n in names or () for c in conventions_of(n))
    return "; ".join(list(seen)[:2]) + ", data/names.json"


def _k003_stated(f: LibraryFacts) -> list[Finding]:
    """K003 for kernels a sourced statement in the library's own bytes speaks for, one finding
    per statement and (carried, fails): the string, what it speaks for, and its source."""
    out = []
    for said in f.statements:
        gaps = [(g.carried, g.fails, g.name, g.units) for g in f.kernel_gaps if g.verdict == "stated"
                and g.name is not None and said.kernels.search(g.name)]
        for g in _groups(gaps):
            text = said.text.decode("utf-8")
            out.append(finding(
                Code.K003, f.path,
                f"{f.path}: {_kernels_phrase(g.names, g.containers)} carry code only for {', '.join(g.carried)}, "
                f"not for {', '.join('sm_' + x for x in g.fails)}: the library carries \"{text}\", so its host code "
                f"launches {said.speaks_for} only from {said.first[0]}.{said.first[1]} on ({said.name}, "
                f"data/vendor.json)",
                kernels=list(g.names or ()), carried=list(g.carried), fails=list(g.fails), reason="stated",
                statement=text, statement_kernels=said.kernels.pattern, statement_source=said.source))
    return out


def _given_labels(f: LibraryFacts, g: Group) -> list[str]:
    """The code the kernels' own containers give the GPUs of a compiled-out group (compute_75 PTX
    through the JIT, or a cubin), each once."""
    names = set(g.names or ())
    fails = {cc for cc in f.claimed if label(cc) in g.fails}
    out: dict[str, None] = {}
    for gap in f.kernel_gaps:
        if gap.verdict == "compiled-out" and gap.name in names and set(gap.fails) <= set(g.fails):
            for u in gap.units:
                for cc in fails:
                    code = f.paths[cc].choices[u].code
                    if code is not None and f.paths[cc].choices[u].runs != "none":
                        out[code.label + (" (JIT)" if f.paths[cc].choices[u].runs == "jit" else "")] = None
    return sorted(out, key=_label_key)


def container_name(f: LibraryFacts, unit: int) -> str:
    """One container of a library as a person can find it: its section and its index among the
    library's containers in that section (``.nv_fatbin[3]``; cuobjdump lists them in this order)."""
    c = f.units[unit].container
    same = [x for x in f.library.containers if x.section == c.section]
    index = next((i for i, x in enumerate(same) if x is c), 0)
    return f"{c.section or 'container'}[{index}]"


@library_rule(Code.K004)
def rule_k004(f: LibraryFacts) -> list[Finding]:
    """K004: a container's kernels lack code for a claimed GPU that only another container gives
    the same names. The runtime launches each container's kernels from its own module, so this
    is a crash unless the host picks the container by architecture; the binary cannot say which
    (onnxruntime's sm_80-only 4-bit GEMM translation unit, curand's single-architecture
    containers: a deliberate dispatch; two objects instantiating one template: a crash). Fail
    closed, naming what to record. One finding per (carried, fails), like K001."""
    names: dict[tuple[tuple[str, ...], tuple[str, ...]], set[str]] = defaultdict(set)
    units: dict[tuple[tuple[str, ...], tuple[str, ...]], set[int]] = defaultdict(set)
    others: dict[tuple[tuple[str, ...], tuple[str, ...]], set[int]] = defaultdict(set)
    for g in f.kernel_gaps:
        if g.verdict == "elsewhere" and g.name is not None:
            key = (g.carried, g.fails)
            names[key].add(g.name)
            units[key] |= g.units
            others[key].update(g.elsewhere)
    out = []
    for key in sorted(names, key=lambda k: (-len(names[k]), k)):
        carried, fails = key
        mine = [container_name(f, i) for i in sorted(units[key])]
        theirs = [container_name(f, j) for j in sorted(others[key] - units[key])] or \
            [container_name(f, j) for j in sorted(others[key])]
        base = f.path.rsplit("!", 1)[-1].rsplit("/", 1)[-1]
        listed = sorted(names[key])
        out.append(finding(
            Code.K004, f.path,
            f"{f.path}: {_count(listed, 0)} {_verb(listed)} on {dotted(fails)} unless the host picks another "
            f"container there. Fix: build for {', '.join('sm_' + x for x in fails)} or record: "
            f"[[tool.archaudit.ignore-library]] code = \"K004\" library = \"{base}\" reason = \"{ENTRY_REASON}\". "
            f"{_first(mine)} (claimed {', '.join(fails)}) carr{'ies' if len(mine) == 1 else 'y'} only "
            f"{', '.join(carried)}; only {_first(theirs)} carr{'ies' if len(theirs) == 1 else 'y'} the same names; "
            f"the runtime launches each container's kernels from its own module: {_kernels_phrase(listed, 0)}",
            kernels=sorted(names[key]), containers=mine, carried=list(carried), fails=list(fails), elsewhere=theirs))
    return out


@library_rule(Code.K005)
def rule_k005(f: LibraryFacts) -> list[Finding]:
    """K005: kernels of a vendor library that a claimed GPU inside its vendor's documented range
    cannot launch from their own container: the vendor's host code picks a container per GPU,
    as its vendor builds and tests it. One finding per library, naming the row."""
    if f.vendor is None:
        return _k005_static(f)
    gaps = [g for g in f.kernel_gaps if g.verdict == "dispatched"]
    if not gaps:
        return []
    names = sorted({g.name for g in gaps if g.name is not None})
    units = {i for g in gaps for i in g.units}
    gpus = sorted({x for g in gaps for x in g.fails}, key=_label_key)
    unnamed = len({i for g in gaps if g.name is None for i in g.units})
    what = _kernels_phrase(names, 0) if names else _kernels_phrase(None, unnamed)
    return [finding(Code.K005, f.path, f"{f.path}: {what} in {len(units)} container{'s' * (len(units) != 1)} have "
                                    f"no code for {', '.join('sm_' + x for x in gpus)} (claimed) in their own "
                                    f"container; {f.path} is {f.vendor.library} ({f.vendor.evidence}), which its "
                                    f"vendor documents for {f.vendor.text}: its host code picks the container for "
                                    f"each GPU (data/vendor.json, {f.vendor.source})",
                    kernels=names[:100], kernel_count=len(names), containers=len(units), fails=gpus,
                    library=f.vendor.library, range=f.vendor.text)]


def _k005_static(f: LibraryFacts) -> list[Finding]:
    """K005 for a vendor's code linked statically into a project's library: one finding per
    vendor row, naming the containers the vendor's kernel-name convention names."""
    rows: dict[str, list[KernelGap]] = defaultdict(list)
    owners = {}
    for g in f.kernel_gaps:
        own = next((x for i in g.units if (x := f.static[i]) is not None), None) if g.verdict == "dispatched" else None
        if own is not None:
            rows[own.library].append(g)
            owners[own.library] = own
    out = []
    for row, gaps in rows.items():
        own = owners[row]
        names = sorted({g.name for g in gaps if g.name is not None})
        units = {i for g in gaps for i in g.units}
        gpus = sorted({x for g in gaps for x in g.fails}, key=_label_key)
        base = f.path.rsplit("/", 1)[-1]
        out.append(finding(Code.K005, f.path, f"{f.path}: {_kernels_phrase(names, 0)} in {len(units)} "
                                           f"container{'s' * (len(units) != 1)} have no code for "
                                           f"{', '.join('sm_' + x for x in gpus)} (claimed) in their own container; "
                                           f"they are {own.library} linked statically into {base} ({own.evidence}, "
                                           f"and {own.row.library}'s kernel-name convention names every kernel of "
                                           f"those containers), which its vendor documents for {own.text}: its host "
                                           f"code picks the container for each GPU (data/vendor.json, {own.source})",
                           kernels=names[:100], kernel_count=len(names), containers=len(units), fails=gpus,
                           library=own.library, range=own.text, linked_into=base))
    return out


def _first(items: list[str]) -> str:
    """The first few of a list, and how many more."""
    more = len(items) - KERNELS_SHOWN
    return ", ".join(items[:KERNELS_SHOWN]) + (f" and {more} more" if more > 0 else "")


@library_rule(Code.D002)
def rule_d002(f: LibraryFacts) -> list[Finding]:
    """D002: the minimum NVIDIA driver for the code the claimed or named GPUs would run."""
    floor = f.floor
    if not f.codes or floor is None:
        return []
    per_gpu = {label(cc): (p.floor.driver or "unknown") for cc in f.floor_gpus
               if (p := f.paths[cc]).floor is not None}
    if floor.driver is None:
        return [finding(Code.D002, f.path, f"{f.path} needs a driver archaudit cannot name ({floor.evidence})",
                        cuda=floor.cuda_text, driver="unknown", gpus=per_gpu)]
    whose, also, more = _floor_scope(f, floor)
    return [finding(Code.D002, f.path, f"{f.path} needs driver >= {floor.driver} ({f.policy.driver_os}, "
                                    f"CUDA {floor.cuda_text}){whose}{also}", cuda=floor.cuda_text,
                    driver=floor.driver, gpus=per_gpu, os=f.policy.driver_os, **more)]


def _floor_scope(f: LibraryFacts, floor: Floor) -> tuple[str, str, dict[str, object]]:
    """Whose floor a D002 states, and the other one: with a claim (or --gpu), the floor of the code
    those GPUs run, which a release publishes; beside it, where it is higher, the floor of all the
    code, which only a GPU outside the claim needs (one that JIT-compiles newer PTX)."""
    every = f.code_floor
    if not f.floor_gpus:
        return (" for all its code, with no claim (a release publishes the floor of its claimed GPUs, which "
                "may be lower: give the claim)", "", {"scope": "all-code"})
    whose = " on its claimed GPUs" if f.claimed else " on the GPUs asked about"
    whose += ", the floor a release publishes" if f.claimed else ""
    if every is None or every.driver is None or every.key <= floor.key:
        return whose, "", {"scope": "claimed" if f.claimed else "asked"}
    return (whose, f"; all its code needs >= {every.driver} (CUDA {every.cuda_text}, {every.evidence}), which "
                   f"no claimed GPU needs",
            {"scope": "claimed" if f.claimed else "asked", "all_code_driver": every.driver,
             "all_code_cuda": every.cuda_text})


@library_rule(Code.D001)
def rule_d001(f: LibraryFacts) -> list[Finding]:
    """D001 (--driver): the driver given is older than the floor of the code some claimed or
    named GPU would run, or that floor is unknown (fail closed)."""
    driver = f.policy.driver
    if driver is None or not f.codes:
        return []
    if f.floor_gpus:
        floors = [(label(cc), p.floor) for cc in f.floor_gpus if (p := f.paths[cc]).floor is not None]
    else:
        floors = [("", f.floor)] if f.floor is not None else []
    unknown = [(g, fl) for g, fl in floors if fl.driver is None]
    if unknown:
        gpus = [g for g, _ in unknown if g]
        why = sorted({fl.evidence for _, fl in unknown})
        return [finding(Code.D001, f.path, f"{f.path} needs a driver archaudit cannot name"
                                        f"{' on ' + ', '.join(gpus) if gpus else ''} ({'; '.join(why[:3])}); "
                                        f"{driver} cannot be verified", driver="unknown", gpus=gpus)]
    low = [(g, fl) for g, fl in floors if fl.driver is not None and not driver_at_least(driver, fl.driver)]
    if not low:
        return []
    top = max((fl for _, fl in low), key=lambda fl: fl.key)
    evidence = sorted({fl.evidence for _, fl in low})
    ptx = any("PTX ISA" in e for e in evidence)
    error = ("the provided PTX was compiled with an unsupported toolchain" if ptx else
             "no CUDA-capable device is detected" if top.kind == "gpu" else
             "CUDA driver version is insufficient for CUDA runtime version")
    gpus = [g for g, _ in low if g]
    scope = _ptx_scope(f, [cc for cc in f.floor_gpus if label(cc) in gpus], driver) \
        if ptx and gpus and all("PTX ISA" in fl.evidence for _, fl in low) else None
    return [finding(Code.D001, f.path, f"{f.path} needs driver >= {top.driver} (CUDA {top.cuda_text})"
                                    f"{' on ' + ', '.join(gpus) if gpus else ''}; {driver} given: '{error}' from "
                                    f"{', '.join(evidence[:4])}{' ...' if len(evidence) > 4 else ''}"
                                    f"{scope.text(driver) if scope else ''}",
                    driver=top.driver, cuda=top.cuda_text, gpus=gpus,
                    **(scope.data() if scope else {}))]


@dataclass(frozen=True, slots=True)
class _PtxScope:
    """Whose floor a PTX floor above the given driver is, where the GPUs run the rest natively:
    the kernels that reach them only through that PTX, with no native code there in any container
    and no evidence that they are not launched there (they set the floor: they fail on that
    driver), and those of the same containers that set no floor (native elsewhere, or K003's
    evidence: named for another architecture, or a sourced statement)."""

    kernels: tuple[str, ...]  # set the floor
    per_gpu: tuple[tuple[str, int], ...]  # how many of them on each GPU
    native_elsewhere: int
    excused: int

    def text(self, driver: str) -> str:
        each = ", ".join(f"{n} on {g[:-1]}.{g[-1]}" for g, n in self.per_gpu)
        out = (f"; it is the floor of {_kernels_phrase(list(self.kernels), 0)} ({each}) that have no native code "
               f"there in any container, only that PTX, and no evidence that they are not launched there (not "
               f"K003): they fail there on {driver}. It is not the floor of the whole library: its other kernels run "
               f"natively there")
        if self.native_elsewhere or self.excused:
            parts = [f"{self.native_elsewhere} more of those containers' kernels have native code there in another "
                     f"container (K004 unless a dispatch is recorded)"] if self.native_elsewhere else []
            parts += [f"{self.excused} are excused there by evidence (K003) and set no floor"] if self.excused else []
            out += f" ({'; '.join(parts)})"
        return out

    def data(self) -> dict[str, object]:
        return {"kernels": list(self.kernels[:100]), "kernel_count": len(self.kernels),
                "per_gpu": dict(self.per_gpu), "native_elsewhere": self.native_elsewhere, "excused": self.excused}


def _ptx_scope(f: LibraryFacts, gpus: list[CC], driver: str) -> _PtxScope | None:
    """The kernels a PTX floor above ``driver`` belongs to on ``gpus`` (``_PtxScope``), or None
    where these GPUs run nothing of the library natively (then the floor is the whole library's)."""
    sets: set[str] = set()
    per_gpu: list[tuple[str, int]] = []
    elsewhere: set[str] = set()
    excused: set[str] = set()
    some_native = False
    for cc in gpus:
        p = f.paths[cc]
        native = f.native_on(cc)
        some_native = some_native or bool(native)
        here: set[str] = set()
        for i, rest, said in f.jit_only(cc):
            floor = _ptx_floor(p.choices[i].code, f)
            if floor is None or driver_at_least(driver, floor):
                continue
            here |= rest
            excused |= said
        for choice, got in zip(p.choices, p.given):  # same-named kernels these containers give natively elsewhere
            if choice.runs == "jit" and choice.code is not None and _above(choice.code, f, driver):
                elsewhere |= got & native
        sets |= here
        per_gpu.append((label(cc), len(here)))
    if not some_native or not sets:
        return None
    return _PtxScope(tuple(sorted(sets)), tuple(per_gpu), len(elsewhere - sets), len(excused - sets))


def _above(code: NvCode, f: LibraryFacts, driver: str) -> bool:
    floor = _ptx_floor(code, f)
    return floor is not None and not driver_at_least(driver, floor)


def _ptx_floor(code: NvCode | None, f: LibraryFacts) -> str | None:
    """The driver a PTX entry's ISA needs, or None when it is not known."""
    if code is None:
        return None
    try:
        release = arch.cuda_release_for_ptx_isa(code.entry.code_version)
        return arch.min_driver(release, f.policy.driver_os)
    except LookupError:
        return None


@library_rule(Code.G008)
def rule_g008(f: LibraryFacts) -> list[Finding]:
    """G008: the answer to --gpu where the library runs on the named GPU."""
    return [x for x in _named_gpus(f) if x.code == Code.G008]


@library_rule(Code.G009)
def rule_g009(f: LibraryFacts) -> list[Finding]:
    """G009: with --gpu, a library carrying device code of which none runs on that GPU, or
    with kernels that cannot run there while nothing in the binary says it is by design."""
    return [x for x in _named_gpus(f) if x.code == Code.G009]


def _named_gpus(f: LibraryFacts) -> list[Finding]:
    out = []
    if f.codes:
        for name, cc in f.policy.gpus:
            if arch.is_tegra(cc) and f.policy.platforms and not arm_linux(f.policy.platforms):
                # a Jetson runs Linux on aarch64: a wheel for another platform is never installed there
                out.append(finding(Code.G009, f.path, f"{f.path} on {name} ({cc[0]}.{cc[1]}): not at all (the wheel "
                                   f"is for {', '.join(f.policy.platforms)}; a {name} runs Linux on aarch64, so "
                                   f"it cannot be installed there)", gpu=name, runs="none",
                                   platforms=list(f.policy.platforms)))
                continue
            if f.vendor is not None and not f.vendor.covers(cc):
                # the same rule as for a claimed GPU: a vendor library is not held against a GPU
                # outside the range its vendor documents (its callers use it only there)
                out.append(finding(Code.G016, f.path, f"{f.path} on {name} ({cc[0]}.{cc[1]}): not held against "
                                   f"the wheel: it is {f.vendor.library}, which its vendor documents for "
                                   f"{f.vendor.text} ({f.vendor.source})", gpu=name, library=f.vendor.library,
                                   range=f.vendor.text, gpus=[label(cc)]))
                continue
            own = library_claim(f.policy, f.path)
            if own is not None and cc not in own.claim.gpus:  # the project records its host gates it away
                out.append(finding(Code.G008, f.path, f"{f.path} on {name} ({cc[0]}.{cc[1]}): not launched there: "
                                   f"its host code gates it to {own.claim.raw} ({own.reason}; [tool.archaudit] "
                                   f"library {own.path})", gpu=name, runs="gated"))
                continue
            p = f.paths[cc]
            word = {"native": "native", "jit": "only through PTX JIT", "none": "not at all"}[p.runs]
            if p.runs == "none" and p.dead:
                word += " (its code needs a newer driver than any for this GPU)"
            elif p.runs == "none" and p.unlinked:
                word += " (its code for this GPU is not loadable alone, and the library links none)"
            failing = [g for g in f.kernel_gaps_on(cc) if g.verdict in ("fails", "elsewhere")]
            if failing:
                names = sorted({g.name for g in failing if g.name is not None})
                keep = [label(c) for c in f.claimed if c != cc] or \
                    [x.removeprefix("sm_") for x in _present(f.codes) if x.startswith("sm_") and x != f"sm_{label(cc)}"]
                word = (f"{_failing_count(failing)} cannot run there ({word} for the rest). "
                        f"Fix: build for sm_{label(cc)}, or record its gate: "
                        f"{library_entry(f.path, keep)}. They carry only "
                        f"{', '.join(sorted({t for g in failing for t in g.carried})[:6])}: "
                        f"{_kernels_phrase(names, 0)}")
            if p.runs == "native":
                word += _jit_part(f, cc)
            out.append(finding(Code.G009 if p.runs == "none" or failing else Code.G008, f.path,
                               f"{f.path} on {name} ({cc[0]}.{cc[1]}): {word}", gpu=name, runs=p.runs))
    if f.amd:
        for g in f.policy.amd_gpus:
            out.append(_on_amd_gpu(f, g))
    return out


def _failing_count(failing: list[KernelGap]) -> str:
    """How many kernels (in how many containers) a GPU cannot run, and the containers whose
    kernels were not read (--fast reads no names): counted as what they are, never '0 kernels'."""
    n = len({g.name for g in failing if g.name is not None})
    named = len({i for g in failing if g.name is not None for i in g.units})
    unread = len({i for g in failing if g.name is None for i in g.units})
    if not unread:
        return f"{n} kernel{'s' * (n != 1)}"
    parts = [f"{n} kernel{'s' * (n != 1)} in {named} container{'s' * (named != 1)}"] if n else []
    parts.append(f"{unread} container{'s' * (unread != 1)} whose kernels were not read")
    return " and ".join(parts)


def _jit_part(f: LibraryFacts, cc: CC) -> str:
    """What of a library a GPU that runs it natively still reaches only through the JIT (kernels
    with no native code there in any unit, and no evidence they are not launched there), and the
    driver that PTX needs: so "native" and the driver floor of the same run agree."""
    jit = [(i, rest) for i, rest, _ in f.jit_only(cc) if rest]
    if not jit:
        return ""
    names = sorted(frozenset().union(*(r for _, r in jit)))
    codes = [f.paths[cc].choices[i].code for i, _ in jit]
    ptx = sorted({f"{c.label}, PTX ISA {c.entry.code_version[0]}.{c.entry.code_version[1]}" for c in codes
                  if c is not None})
    floors = sorted({d for c in codes if (d := _ptx_floor(c, f)) is not None}, key=lambda d: Floor(None, d, "").key)
    need = f": driver >= {floors[-1]}" if floors else ""
    return (f"; {_kernels_phrase(names, 0)} in {len(jit)} container{'s' * (len(jit) != 1)} reach it only through "
            f"PTX JIT ({'; '.join(ptx)}{need})")


def _on_amd_gpu(f: LibraryFacts, g: AmdGpu) -> Finding:
    """--gpu for an AMD GPU: judged in the setting it ships with (or the target ID given names);
    where archaudit does not know that setting, in every setting the GPU can run (fail closed)."""
    asked = [g.ships] if g.ships else rocm.settings(g.target)
    ok = [m for m in asked if f.amd_path(m).runs]
    gaps = amd_kernel_gaps(f, ok)
    where = f"{g.ships}, as it ships" if g.ships else g.target
    if len(ok) == len(asked) and not gaps:
        return finding(Code.G008, f.path, f"{f.path} on {g.name} ({where}): native", gpu=g.name, runs="native",
                       setting=g.ships or None)
    others = [m for m in rocm.settings(g.target.split(":")[0]) if m not in asked and f.amd_path(m).runs]
    if gaps:
        names = sorted({x.name for x in gaps if x.name is not None})
        word = (f"native for part of it; {_kernels_phrase(names, sum(1 for x in gaps if x.name is None))} cannot "
                f"run there (their own bundles carry only {', '.join(sorted({t for x in gaps for t in x.carried}))})")
    elif not ok:
        word = "not at all" + _amd_why(f, asked)
    else:
        word = f"only as {', '.join(ok)}, not as {', '.join(m for m in asked if m not in ok)}"
    if not g.ships and ok != asked:
        word += (f"; how {g.name} is set up is not recorded, so every setting must run (name one: "
                 f"--gpu {asked[0]})")
    elif others and not ok:
        changes = [f"{n} ({how})" for n, how in g.switch]
        word += (f"; it runs only as {', '.join(others)}, which is not how {g.name} ships"
                 + (f": that takes {', '.join(changes)}" if changes else ""))
    return finding(Code.G009, f.path, f"{f.path} on {g.name} ({where}): {word}", gpu=g.name,
                   runs="native" if ok else "none", setting=g.ships or None)


def on_gpu(lib: Library, name: str, cc: CC, policy: Policy | None = None) -> Finding | None:
    """check's answer to ``--gpu`` for one library and one NVIDIA GPU: G008 (it runs there) or
    G009 (it does not, or kernels that are not by design cannot), None without NVIDIA code.
    smoke's device-load judges a library on the GPU it ran on with this same rule."""
    base = policy if policy is not None else Policy()
    f = library_facts(lib, None, replace(base, gpus=(NvidiaGpu(name, cc),), amd_gpus=()))
    return next(iter(_named_gpus(f)), None)


# ---- AMD coverage -----------------------------------------------------------------------------


@library_rule(Code.G014)
def rule_g014(f: LibraryFacts) -> list[Finding]:
    """G014: a code object whose own xnack/sramecc setting (ELF e_flags) is more specific than
    its bundle id. ROCm selects the entry by its id and the loader then refuses the code object
    on a GPU of the other setting, so it is judged by its e_flags; the id misdescribes it."""
    bad = sorted({(e.identifier or e.target, e.own_target or "") for e in f.amd
                  if rocm.hip_reads(e) and rocm.disagrees(e)})
    if not bad:
        return []
    shown = "; ".join(f"{i} holds a code object built for {t}" for i, t in bad[:3])
    return [finding(Code.G014, f.path, f"{f.path}: {len(bad)} bundle entr{'y' if len(bad) == 1 else 'ies'} "
                                    f"say{'s' * (len(bad) == 1)} less than {'its' if len(bad) == 1 else 'their'} "
                                    f"code object: {shown}{' ...' if len(bad) > 3 else ''}; judged as built",
                    entries=[i for i, _ in bad], built=[t for _, t in bad])]


@library_rule(Code.G015)
def rule_g015(f: LibraryFacts) -> list[Finding]:
    """G015: AMD bundle entries HIP never selects: an offload kind other than hip/hipv4/hcc (an
    OpenMP entry), or an id comgr does not match as written (upper case; the four-field triple of
    clang 11 and older; HCC's amdgcn--amdhsa). They count for no GPU."""
    unread = sorted({e.identifier for e in f.amd if not rocm.hip_reads(e)})
    if not unread:
        return []
    return [finding(Code.G015, f.path, f"{f.path}: HIP never selects {len(unread)} bundle entr"
                                    f"{'y' if len(unread) == 1 else 'ies'} ({', '.join(unread[:3])}"
                                    f"{' ...' if len(unread) > 3 else ''}): comgr reads only hip, hipv4 and hcc "
                                    f"entries whose triple is amdgcn-amd-amdhsa-- (five fields), spelt in lower "
                                    f"case; they count for no GPU", entries=unread)]


@library_rule(Code.G018)
def rule_g018(f: LibraryFacts) -> list[Finding]:
    """G018: AMD code objects ROCr's loader refuses on every GPU (no PT_LOAD segment: a relocatable
    object never linked, a bare ELF header). They count for no GPU, as NVIDIA's relocatable code."""
    refused = sorted({e.identifier or e.target for e in f.amd if e.unloadable})
    if not refused:
        return []
    return [finding(Code.G018, f.path, f"{f.path}: {len(refused)} AMD code object{'s' * (len(refused) != 1)} "
                                    f"without a loadable segment ({', '.join(refused[:3])}"
                                    f"{' ...' if len(refused) > 3 else ''}), as a relocatable object never linked "
                                    f"is: ROCr's loader refuses it on every GPU, so it counts for no GPU",
                    entries=refused)]


def _modes_matter(target: str) -> bool:
    t = gfx.parse_target(target)
    return any(gfx.processors()[p].supports(n) and t.feature(n) is None
               for p in gfx.family(target) for n in gfx.FEATURES)


# ---- target rules ---------------------------------------------------------------------------


@target_rule(READERS)
def rule_target_problems(t: TargetFacts) -> list[Finding]:
    """E0xx of the target itself (an unreadable wheel, a malformed archive)."""
    return [_as_folded(finding(p.code, t.target, f"{t.target}: {p.message}"), p, t.target)
            for p in t.inventory.problems]


@target_rule(Code.C002)
def rule_c002(t: TargetFacts) -> list[Finding]:
    """C002: an arch list embedded in a binary that cannot be parsed."""
    return [t.embedded_error] if t.embedded_error is not None else []


@target_rule(Code.C003)
def rule_c003(t: TargetFacts) -> list[Finding]:
    """C003: a binary embeds an architecture list other than the claim given to the check."""
    e, c = t.embedded, t.claim
    if e is None or c is None or e is c or e.gpus == c.gpus:
        return []
    return [finding(Code.C003, t.target, f"{e.source[12:]} embeds {', '.join(label(x) for x in e.gpus)} but "
                                      f"{c.source} says {', '.join(label(x) for x in c.gpus)}")]


@target_rule(Code.C001)
def rule_c001(t: TargetFacts) -> list[Finding]:
    """C001: GPU code (or a linked GPU runtime) with no claim to judge it by: per target for
    NVIDIA code, per library for AMD code without --amd-arch."""
    out = []
    asked = bool(t.policy.gpus or t.policy.amd_gpus)  # a --gpu question needs no claim: G008/G009 answer it
    for f in t.libraries:
        # a question about NVIDIA GPUs alone is not failed by the AMD libraries: they never load there
        if f.amd and not t.policy.amd_claim and not t.policy.amd_gpus and not t.policy.gpus:
            targets = sorted({e.target for e in f.amd})
            out.append(finding(Code.C001, f.path, f"{f.path}: no claimed gfx target reached the check. Fix: give "
                                               f"its targets (--amd-arch 'gfx90a;gfx942') or ask about a GPU "
                                               f"(--gpu MI300X). It carries AMD device code ({', '.join(targets)})"))
    if t.gpu_wheel and not t.inventory.unusable and t.claim is None and not asked and (
            t.has_nvidia or (t.links_runtime and not t.policy.amd_claim)):
        out.append(finding(Code.C001, t.target,
                           f"{t.target}: GPU wheel, no claimed architectures. Fix: give them (--arch '80;90', "
                           f"cuda-archs in [tool.archaudit]) or ask about GPUs (--gpu T4 --gpu H100)"))
    return out


@target_rule(Code.G006)
def rule_g006(t: TargetFacts) -> list[Finding]:
    """G006: a GPU wheel (a runtime linked, or a claim given) with no loadable device code, or a
    required library that is missing or carries none."""
    out = []
    libs = t.inventory.libraries
    if t.gpu_wheel and not t.inventory.unusable:
        loadable = any(c.entries for lib in libs for c in lib.containers if c.loadable)
        if not loadable:
            why = "links a GPU runtime" if t.links_runtime else "a claim was given"
            out.append(finding(Code.G006, t.target, f"{t.target}: GPU wheel ({why}) but no library "
                                                 f"carries loadable device code"))
    for pattern in t.policy.require_device_code:
        hits = [lib for lib in libs if fnmatch.fnmatch(lib.path, pattern)
                or fnmatch.fnmatch(lib.path.rsplit("/", 1)[-1], pattern)]
        if not any(lib.has_device_code for lib in hits):
            out.append(finding(Code.G006, t.target, f"{t.target}: required library {pattern!r} "
                                                 f"{'carries no device code' if hits else 'is not shipped'}"))
    return out


@target_rule(Code.G011)
def rule_g011(t: TargetFacts) -> list[Finding]:
    """G011: architectures claimed for a vendor the target carries no loadable code for (a
    CUDA claim on AMD-only code, an AMD claim on NVIDIA-only code). Nothing runs there."""
    if t.inventory.unusable:
        return []
    nvidia = any(f.codes for f in t.libraries)
    amd = any(f.amd for f in t.libraries)
    if not nvidia and not amd:
        return []  # no loadable code at all: G006
    out = []
    if t.claim is not None and not nvidia:
        out.append(finding(Code.G011, t.target, f"{t.target}: claims CUDA architectures "
                                             f"{', '.join(label(c) for c in t.claim.gpus)} ({t.claim.source}) but no "
                                             f"library carries NVIDIA device code", vendor="nvidia",
                           missing=[label(c) for c in t.claim.gpus]))
    # a --gpu question about the other vendor's GPU: nothing of the wheel runs there (no, never a pass)
    if t.policy.gpus and not nvidia:
        names = [g.name for g in t.policy.gpus]
        out.append(finding(Code.G011, t.target, f"{t.target}: asked about {', '.join(names)} (NVIDIA) but no "
                                             f"library carries NVIDIA device code: it does not run there",
                           vendor="nvidia", gpus=names, missing=[label(g.cc) for g in t.policy.gpus]))
    if t.policy.amd_gpus and not amd:
        names = [g.name for g in t.policy.amd_gpus]
        out.append(finding(Code.G011, t.target, f"{t.target}: asked about {', '.join(names)} (AMD) but no "
                                             f"library carries AMD device code: it does not run there",
                           vendor="amd", gpus=names, missing=[g.target for g in t.policy.amd_gpus]))
    if t.policy.amd_claim and not amd:
        out.append(finding(Code.G011, t.target, f"{t.target}: claims AMD targets {', '.join(t.policy.amd_claim)} "
                                             f"({t.policy.amd_claim_source or '--amd-arch'}) but no library "
                                             f"carries AMD device code", vendor="amd",
                           missing=list(t.policy.amd_claim)))
    return out


@target_rule(Code.G019)
def rule_g019(t: TargetFacts) -> list[Finding]:
    """G019: a claimed or --gpu NVIDIA GPU on which every library carrying NVIDIA device code is
    a vendor library outside the range its vendor documents for its release (G016): nothing of
    the target runs there."""
    if t.inventory.unusable:
        return []
    nvidia = [f for f in t.libraries if f.codes]
    if not nvidia or any(f.vendor is None for f in nvidia):
        return []
    claimed = t.claim.gpus if t.claim is not None else ()
    asked = [(f"{cc[0]}.{cc[1]}", cc, "claimed") for cc in claimed]
    asked += [(f"{name} ({cc[0]}.{cc[1]})", cc, "asked") for name, cc in t.policy.gpus]
    out = []
    for what, cc, how in asked:
        outside = [f for f in nvidia if f.vendor is not None and not f.vendor.covers(cc)]
        if len(outside) != len(nvidia):
            continue
        rows = sorted({f"{f.vendor.library}: {f.vendor.text}" for f in outside if f.vendor is not None})
        out.append(finding(Code.G019, t.target, f"{t.target} does not run on {what} ({how}): its only device code "
                                             f"is vendor libraries whose vendor does not support that GPU "
                                             f"({'; '.join(rows)})",
                           gpu=label(cc), rows=rows, asked=how))
    return out


# ---- the registry ---------------------------------------------------------------------------

READER_CODES = tuple(c for c in CODES if c.startswith("E"))
"""Codes the readers produce (archaudit.model.Problem); the rule layer passes them through."""

OTHER_CODES = (Code.X001, Code.X002)
"""Codes produced by the configuration around judgement: the filters' stale entries
(archaudit.judge.audit.apply_filters) and the data members left out (archaudit.judge.audit.judge)."""

LIBRARY_RULES: tuple[tuple[Code | Readers, LibraryRule], ...] = tuple(_LIBRARY_RULES)
"""Library rules, in the order their findings are reported (the order of their definitions)."""

TARGET_RULES: tuple[tuple[Code | Readers, TargetRule], ...] = tuple(_TARGET_RULES)
"""Target rules, in the order their findings are reported (the order of their definitions)."""

REGISTRY: dict[Code, LibraryRule | TargetRule] = {
    **{code: rule for code, rule in LIBRARY_RULES if code != READERS},
    **{code: rule for code, rule in TARGET_RULES if code != READERS},
}
"""Every finding code the rule layer decides, with its one rule."""


def judge_library_rules(f: LibraryFacts) -> list[Finding]:
    """Every library rule's findings for one library, in registry order."""
    return [x for _, rule in LIBRARY_RULES for x in rule(f)]


def judge_target_rules(t: TargetFacts) -> list[Finding]:
    """Every target rule's findings, in registry order."""
    return [x for _, rule in TARGET_RULES for x in rule(t)]


__all__ = [
    "LIBRARY_RULES",
    "OTHER_CODES",
    "READER_CODES",
    "REGISTRY",
    "TARGET_RULES",
    "TargetFacts",
    "amd_kernel_gaps",
    "amd_missing",
    "demangle",
    "finding",
    "judge_library_rules",
    "judge_target_rules",
    "on_gpu",
]
