"""Which AMD code a GPU runs: the bundle entry ROCm selects for it, and whether that entry loads.

The rules are ROCm's own, read from its sources (docs/amd.md cites each):

- **Selection** (comgr ``amd_comgr_lookup_code_object`` -> ``lookUpCodeObject`` in
  amd/comgr/src/comgr-metadata.cpp, called by CLR's ``FatBinaryInfo::ExtractFatBinaryUsingCOMGR``;
  a compressed bundle goes through comgr's unbundle action, clang's
  ``OffloadBundler::UnbundleFiles``): a bundle's entries are walked in file order, entries whose
  offload kind is not ``hip``/``hipv4`` are skipped (``host``, ``openmp``), and the **first**
  entry whose id is compatible with the GPU's ISA name wins. No later entry is tried, even when
  the one selected does not load.
- **Id comparison** (comgr ``isCompatibleIsaName``; clang ``isCodeObjectCompatible``): the
  processors must be equal as written (``gfx90a``, never ``GFX90A``; a ``gfx*-generic`` id is
  not the GPU's processor), and each xnack/sramecc setting the id names must equal the GPU's.
  A GPU's ISA name always states both settings where the processor has them (ROCr ``Isa``:
  ``agent_isa.GetXnack() != IsaFeature::Any``).
- **Loading** (ROCr ``Isa::IsCompatible`` in runtime/hsa-runtime/core/runtime/isa.cpp, called
  by ``ExecutableImpl::LoadCodeObject`` in loader/executable.cpp): the code object's own target,
  from its ELF ``e_flags``, must match the GPU the same way; a code object whose id says less
  than its ``e_flags`` (id ``gfx90a``, object built ``xnack+``) is selected for both settings
  and refused on the other. A code object without a PT_LOAD segment (a relocatable object
  never linked, a bare ELF header) is refused on every GPU (``LoadSegmentsV2``:
  HSA_STATUS_ERROR_INVALID_CODE_OBJECT; ``Entry.unloadable``), and it too is selected first.
- **Kernels** are looked up in the module (the selected code object) of their own bundle only
  (CLR ``hipModuleGetFunction`` / ``DynCO::getDynFunc``; a static kernel's stub is registered
  with its own translation unit's fat binary).
- **Release** (data/amd.json ``hip_runtimes``, ``hip_lookups``): the selection above is comgr's,
  ROCm 5.5 and later. A library that links an older HIP (NEEDED ``libamdhip64.so.3`` or ``.so.4``)
  is judged by the lookup of the newest release that shipped that SONAME, the one every library
  linking it runs on: ROCm 4.5's runtime unbundler (``getTripleTargetID``: a hip or hcc entry by
  its code object's own ELF header, a hipv4 entry by its id), ROCm 3.10's prefix match. What
  links none (a module another library loads) is judged by today's rule.

Pure functions over model records; the rules (judge/rules/) and the verdicts (audit.py) use them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..model import CODE_OBJECT, Container, Entry, Library
from . import amd as gfx

HIP_KINDS: tuple[str, ...] = tuple(gfx.rocm_rule("hip-kinds"))  # data/amd.json rocm_rules, with sources
# What comgr compares an entry's id with: the GPU's ISA name, "amdgcn-amd-amdhsa--" + processor and
# settings; parseTargetIdentifier wants its five dash-separated fields (data/amd.json rocm_rules).
ISA_TRIPLE: str = gfx.rocm_rule("bundle-id-triple")


def kind(e: Entry) -> str:
    """An entry's offload kind ("hipv4", "openmp"; "" for a bare code object)."""
    return e.identifier.split("-", 1)[0] if e.identifier else ""


@dataclass(frozen=True, slots=True)
class Lookup:
    """How the HIP runtime a library links picks a bundle entry (data/amd.json ``hip_lookups``),
    how its loader accepts the code object selected (``hip_loadings``; empty: today's rule), and
    that runtime (``hip_runtimes``, ``hip_releases``; empty for today's rule, the comgr lookup)."""

    name: str  # "comgr", "runtime-unbundler" (ROCm 4.1 to 5.4), "prefix" (ROCm 3.5 to 4.0)
    runtime: str = ""  # the NEEDED SONAME it was chosen by: "libamdhip64.so.4"
    releases: str = ""  # "ROCm 4.0 to 4.5"
    judged_as: str = ""  # the release whose code is applied: "4.5"
    loading: str = ""  # a hip_loadings row ("rocm-4.0"); "": ROCr's e_flags match (rocm_rules)
    named: str = ""  # a release the package names that ships another HIP (not applied): "4.0"

    @property
    def rule(self) -> dict[str, Any]:
        return gfx.hip_lookup(self.name)

    @property
    def reads(self) -> str:
        """What the runtime reads, in words (for G015 and G001)."""
        return str(self.rule["reads"])

    @property
    def today(self) -> bool:
        return self.name == "comgr"


TODAY = Lookup("comgr")


def lookup_for(needed: Iterable[str], release: str | None = None) -> Lookup:
    """The lookup of the HIP runtime a library links (its NEEDED ``libamdhip64.so.N``), judged as
    the newest release of that SONAME selects; today's rule where it links none or one not listed.
    ``release``: the ROCm release the library's package is named for (``package_rocm``); where
    that release ships the SONAME linked and has rules of its own (``hip_releases``), they judge
    it. A release of another HIP major contradicts the SONAME: the SONAME's rule stays."""
    rows = gfx.hip_runtimes()
    for name in needed:
        row = rows.get(name)
        if row is None:
            continue
        own = gfx.hip_releases().get(release or "")
        if own is not None and own["runtime"] == name:
            named = f"ROCm {release}, the release its package is named for"
            return Lookup(own["lookup"], name, named, str(release), own["loading"])
        other = release is not None and release.split(".")[0] != name.rsplit(".", 1)[1]
        return Lookup(row["lookup"], name, row["releases"], row["judged_as"], named=str(release) if other else "")
    return TODAY


# ROCm 4.1 to 5.4's isCodeObjectCompatibleWithDevice parses the target after amdgcn-amd-amdhsa--:
# the processor, then sramecc, then xnack, and nothing more (getTargetIDValue).
_UNBUNDLER_ID = re.compile(r"([^:]+)(:sramecc[+-])?(:xnack[+-])?")


def read_target(e: Entry, lookup: Lookup = TODAY) -> str | None:
    """The target the runtime compares with the GPU's to select ``e`` (None: it never selects it).
    A bare code object is matched by its own target under every rule (``too_old_alone``)."""
    if e.kind != CODE_OBJECT:
        return None
    if not e.identifier:
        return e.target
    if lookup.today:
        return e.target if _comgr_reads(e) else None
    if e.compression != "none":  # a compressed bundle is comgr's (ROCm 5.5 and later) only
        return None
    if lookup.name == "prefix":
        return _prefix_target(e)
    return _unbundler_target(e, lookup.rule)


def _comgr_reads(e: Entry) -> bool:
    """comgr's lookUpCodeObject: the kind is hip, hipv4 or hcc, and the id is spelt as comgr
    compares it, the triple ``amdgcn-amd-amdhsa--`` (five fields; the ids of clang 11 and older,
    ``hip-amdgcn-amd-amdhsa-gfx906``, and HCC's ``hcc-amdgcn--amdhsa-gfx900`` fail
    parseTargetIdentifier), in lower case (processor and feature names are compared as written)."""
    rest = e.identifier.split("-", 1)[1] if "-" in e.identifier else ""
    return kind(e) in HIP_KINDS and e.identifier == e.identifier.lower() and rest.startswith(ISA_TRIPLE)


def _prefix_target(e: Entry) -> str | None:
    """ROCm 3.5 to 4.0: after the prefix and one more character, a processor as the device names
    it without features (the id ``hip-amdgcn-amd-amdhsa-gfx906``)."""
    for prefix in gfx.hip_lookup("prefix")["prefixes"]:
        if e.identifier.startswith(prefix):
            target = e.identifier[len(prefix) + 1 :]
            return target if target in gfx.processors() else None
    return None


def _unbundler_target(e: Entry, rule: dict[str, Any]) -> str | None:
    """ROCm 4.1 to 5.4 (getTripleTargetID): a hip or hcc entry by its code object's own target (a
    processor getProcName knows, code object v3 or v4), a hipv4 entry by its id."""
    k = kind(e)
    if k not in rule["kinds"]:
        return None
    if k in rule["by_code_object"]:
        own = e.own_target
        if own is None or e.code_version[0] not in rule["code_object_versions"]:
            return None
        return own if gfx.parse_target(own).processor in rule["processors"] else None
    rest = e.identifier[len(k) + 1 :]
    if not rest.startswith(ISA_TRIPLE):
        return None
    m = _UNBUNDLER_ID.fullmatch(rest[len(ISA_TRIPLE) :])
    return e.target if m and m.group(1) == gfx.parse_target(e.target).processor else None


def hip_reads(e: Entry, lookup: Lookup = TODAY) -> bool:
    """Whether the HIP runtime considers the entry at all (a bare code object always): today
    comgr's rule (``_comgr_reads``), for a library linking an older HIP that release's."""
    return read_target(e, lookup) is not None


def judged_target(e: Entry) -> str:
    """The more specific of the bundle id's target and the code object's own (e_flags) target:
    what the entry can run on once selected."""
    own = e.own_target
    if own is None or own == e.target:
        return e.target
    return own if len(gfx.parse_target(own).features) >= len(gfx.parse_target(e.target).features) else e.target


def disagrees(e: Entry) -> bool:
    """The code object's e_flags name a setting its bundle id leaves open."""
    return e.own_target is not None and judged_target(e) != e.target


def compatible(code: str, gpu: str) -> bool:
    """comgr isCompatibleIsaName / ROCr Isa::IsCompatible for target IDs in archaudit's canonical
    spelling: the same processor (a generic one is not the GPU's), and each setting the code
    names equal to the GPU's (a GPU setting left open matches nothing the code pins)."""
    c, g = gfx.parse_target(code), gfx.parse_target(gpu)
    if c.processor != g.processor:
        return False
    return all(g.feature(n) == v for n, v in c.features)


Outcome = Literal["native", "refused", "none"]


@dataclass(frozen=True, slots=True)
class Selection:
    """What one GPU setting gets from one module (a bundle, or a bare code object)."""

    outcome: Outcome  # native: selected and loads; refused: selected, the loader refuses it; none
    entry: Entry | None = None  # the entry selected (None: no entry's id fits)

    @property
    def kernels(self) -> frozenset[str] | None:
        """The kernels the GPU can launch from this module (None: not read)."""
        if self.outcome != "native" or self.entry is None:
            return frozenset()
        return None if self.entry.kernels is None else frozenset(self.entry.kernels)


NOTHING = Selection("none")


def select(container: Container, gpu: str, lookup: Lookup = TODAY) -> Selection:
    """The entry ROCm selects from ``container`` for ``gpu`` (a concrete setting such as
    ``gfx90a:sramecc+:xnack-``) and whether it loads: the first entry HIP reads whose id fits
    (ROCm 3.5 to 4.0: the only one; a second is hipErrorNoBinaryForGpu)."""
    first = lookup.rule["fits"] == "first"
    chosen = None
    for e in container.entries:
        target = read_target(e, lookup)
        if target is None or not compatible(target, gpu):
            continue
        if chosen is not None:
            return NOTHING
        chosen = e
        if first:
            break
    if chosen is None:
        return NOTHING
    if too_old_alone(chosen) or chosen.unloadable:
        return Selection("refused", chosen)
    return Selection("native" if loads(chosen, gpu, lookup) else "refused", chosen)


def loads(e: Entry, gpu: str, lookup: Lookup = TODAY) -> bool:
    """Whether the loader of the lookup's release accepts the selected code object on ``gpu``:
    today ROCr's ``Isa::IsCompatible`` (each setting the code object names equals the GPU's);
    ROCm 4.0 (``hip_loadings`` "rocm-4.0") compares the processor, and sram-ecc only where the
    GPU has it on (code without it is refused there), never xnack."""
    if not lookup.loading:
        return compatible(judged_target(e), gpu)
    rule = gfx.hip_loading(lookup.loading)
    if e.own_target is None or e.code_version[0] not in rule["code_object_versions"]:
        return False
    c, g = gfx.parse_target(e.own_target), gfx.parse_target(gpu)
    isa = ("+xnack" if c.feature("xnack") else "") + ("+sram-ecc" if c.feature("sramecc") else "")
    if c.processor != g.processor or isa not in rule["isas"].get(c.processor, ()):
        return False
    return not (g.feature("sramecc") and not c.feature("sramecc"))


# A bare code object (hipModuleLoad of an .hsaco) is matched by comgr's getElfIsaName, which names
# the ISA of code object v4 to v6 only (ELFABIVERSION_AMDGPU_HSA_V4..V6; anything else is
# AMD_COMGR_STATUS_ERROR_INVALID_ARGUMENT): a bare v3 object is never looked up.
BARE_MIN_VERSION: int = gfx.rocm_rule("bare-code-object-versions")[0]


def too_old_alone(e: Entry) -> bool:
    """A bare code object whose recorded version comgr does not look up (0: not recorded, as in
    records built by hand; the reader records every bare code object's version)."""
    return not e.identifier and 0 < e.code_version[0] < BARE_MIN_VERSION


def modules(lib: Library) -> tuple[Container, ...]:
    """The library's AMD modules: every loadable container holding AMD code objects that its loader
    reads (of a bare bundle file the first only: hipModuleLoad reads no further)."""
    return tuple(c for c in lib.reachable if c.loadable and any(e.kind == CODE_OBJECT for e in c.entries))


def settings(target: str) -> list[str]:
    """Every concrete GPU setting a target stands for: each processor of it (a generic target:
    its family) with each xnack/sramecc setting the target leaves open."""
    t = gfx.parse_target(target)
    out = []
    for proc in gfx.family(target):
        p = gfx.processors()[proc]
        options = [
            [(n, v)] if (v := t.feature(n)) is not None else [(n, True), (n, False)]
            for n in gfx.FEATURES
            if p.supports(n)
        ]
        for combo in itertools.product(*options):
            out.append(proc + "".join(f":{n}{'+' if v else '-'}" for n, v in combo))
    return out


@dataclass(frozen=True, slots=True)
class AmdPath:
    """What one concrete GPU setting runs of a library: one selection per module."""

    gpu: str
    selections: tuple[Selection, ...]

    @property
    def runs(self) -> bool:
        return any(s.outcome == "native" for s in self.selections)

    @property
    def refused(self) -> tuple[Entry, ...]:
        return tuple(s.entry for s in self.selections if s.outcome == "refused" and s.entry is not None)


def path(mods: Sequence[Container], gpu: str, lookup: Lookup = TODAY) -> AmdPath:
    return AmdPath(gpu, tuple(select(c, gpu, lookup) for c in mods))


@dataclass(frozen=True, slots=True)
class AmdKernelGap:
    """A kernel (or a module whose kernels were not read) a GPU setting the library runs on
    cannot launch: no module defining it has a loadable entry there."""

    name: str | None  # None: a module whose kernels could not be read
    carried: tuple[str, ...]  # the targets of the modules defining it
    fails: tuple[str, ...]  # the GPU settings
    module: int  # first module defining it


def _module_kernels(
    mods: Sequence[Container], lookup: Lookup
) -> tuple[list[frozenset[str] | None], list[bool], dict[str, list[int]]]:
    """Per module: the kernels it defines (None: some entry unread) and whether every entry
    defines the same ones (the usual bundle); per kernel: the modules that define it."""
    defined: list[frozenset[str] | None] = []
    uniform: list[bool] = []
    homes: dict[str, list[int]] = {}
    for i, c in enumerate(mods):
        lists = [e.kernels for e in c.entries if hip_reads(e, lookup)]
        read = [k for k in lists if k is not None]
        same = bool(read) and all(k == read[0] for k in read[1:])  # tuples: one C comparison each
        names = frozenset(read[0]) if same else frozenset().union(*map(frozenset, read))
        defined.append(names if len(read) == len(lists) else None)
        uniform.append(same and len(read) == len(lists))
        for k in names:
            homes.setdefault(k, []).append(i)
    return defined, uniform, homes


def kernel_gaps(
    mods: Sequence[Container], paths: Iterable[AmdPath], lookup: Lookup = TODAY
) -> tuple[AmdKernelGap, ...]:
    """Kernels defined in some module that a GPU setting cannot launch although another module of
    the library runs there (the runtime looks a kernel up in its own module only).

    Linear in the kernels: per setting, only the kernels a module defines but its selection
    does not launch are candidates, and each is checked against its other modules."""
    defined, uniform, homes = _module_kernels(mods, lookup)
    launch: dict[int, frozenset[str]] = {}  # id(entry) -> its kernels, built when first needed

    def launchable(sel: Selection) -> frozenset[str] | None:
        if sel.outcome != "native" or sel.entry is None:
            return frozenset()
        if sel.entry.kernels is None:
            return None
        got = launch.get(id(sel.entry))
        if got is None:
            got = launch[id(sel.entry)] = frozenset(sel.entry.kernels)
        return got

    fails: dict[tuple[str | None, int], list[str]] = {}  # (kernel or None, its module) -> settings
    for p in paths:
        if p.runs:
            _path_fails(p, [launchable(sel) for sel in p.selections], defined, uniform, homes, fails)
    out = []
    for (name, first), gpus in fails.items():
        where = homes.get(name, [first]) if name is not None else [first]
        carried = sorted({judged_target(e) for i in where for e in mods[i].entries if hip_reads(e, lookup)})
        out.append(AmdKernelGap(name, tuple(carried), tuple(gpus), first))
    return tuple(out)


def _path_fails(
    p: AmdPath,
    here: list[frozenset[str] | None],
    defined: list[frozenset[str] | None],
    uniform: list[bool],
    homes: dict[str, list[int]],
    fails: dict[tuple[str | None, int], list[str]],
) -> None:
    """Add to ``fails`` what one GPU setting cannot launch from its own module: the kernels of a
    module its selection does not launch and no other module launches there either (``here``:
    what each module's selection launches, None where unread), and each unread module it does
    not run natively."""
    for i, mine in enumerate(defined):
        if uniform[i] and p.selections[i].outcome == "native":
            continue  # its selection launches every kernel it defines
        if mine is None and p.selections[i].outcome != "native":
            fails.setdefault((None, i), []).append(p.gpu)
        got = here[i]
        if got is None or mine is None:
            continue
        for k in mine - got:
            where = homes[k]
            if where[0] == i and not any((h := here[j]) is None or k in h for j in where):
                fails.setdefault((k, i), []).append(p.gpu)


__all__ = [
    "AmdKernelGap",
    "AmdPath",
    "BARE_MIN_VERSION",
    "HIP_KINDS",
    "NOTHING",
    "Selection",
    "compatible",
    "disagrees",
    "hip_reads",
    "judged_target",
    "kernel_gaps",
    "kind",
    "loads",
    "Lookup",
    "lookup_for",
    "modules",
    "path",
    "read_target",
    "select",
    "settings",
    "TODAY",
    "too_old_alone",
]
