"""AMD code as ROCm selects and loads it: the claimed settings a library misses and why (used by
G001 and the --gpu answers), AMD kernel gaps (K001), and bundle entries that count for no GPU
(G014, G015, G018)."""

from __future__ import annotations

from collections.abc import Sequence

from ...findings import Code, Finding
from ...gpus import amd as gfx, rocm
from ...model import Entry
from ..facts import LibraryFacts
from .common import finding, g001_finding, library_rule


def amd_g001(f: LibraryFacts) -> list[Finding]:
    """G001 of an AMD claim: claimed targets on a setting of which no module of the library loads."""
    if not f.amd or not f.policy.amd_claim:
        return []
    missing = [want for want in f.policy.amd_claim if amd_missing(f, want)]
    if not missing:
        return []
    settings = [m for want in missing for m in amd_missing(f, want)]
    why = ""
    if any(modes_matter(t) for t in missing):
        why = " (a target without xnack/sramecc runs in either mode: it needs code for both)"
    why += amd_why(f, settings)
    entries = [e for e in f.amd if rocm.hip_reads(e, f.amd_lookup)]
    names = [k for e in entries for k in (e.kernels or ())]
    read = all(e.kernels is not None for e in entries)
    return [
        g001_finding(
            f.path,
            list(f.policy.amd_claim),
            f.policy.amd_claim_source or "--amd-arch",
            amd_carried(f),
            missing,
            sorted(set(names)) if read else None,
            why,
            nothing="carries no AMD code HIP selects",
            fix=f"Fix: build for {', '.join(missing)} (--offload-arch={missing[0]})",
        )
    ]


def amd_carried(f: LibraryFacts) -> list[str]:
    """The AMD targets HIP can select in the library, each as its code object runs (the more
    specific of bundle id and e_flags)."""
    return sorted({rocm.judged_target(e) for e in f.amd if rocm.hip_reads(e, f.amd_lookup) and not e.unloadable})


def amd_missing(f: LibraryFacts, want: str) -> list[str]:
    """The concrete GPU settings of a claimed target on which no module of the library loads."""
    return [m for m in rocm.settings(want) if not f.amd_path(m).runs]


def amd_why(f: LibraryFacts, settings: Sequence[str]) -> str:
    """Why ROCm runs nothing there, where the binary shows more than missing code: an entry it
    selects whose code object the loader refuses, or entries it never reads."""
    refused = [e for m in settings for e in f.amd_path(m).refused]
    return (
        _too_old_why(refused)
        + _unloadable_why(refused)
        + _refused_why(refused, settings)
        + _unread_why(f)
        + _generic_why(f, settings)
    )


def _too_old_why(refused: list[Entry]) -> str:
    """Bare code objects of a version comgr does not look up."""
    old = sorted({e.code_version[0] for e in refused if rocm.too_old_alone(e)})
    if not old:
        return ""
    return (
        f"; it is a bare code object of version {', '.join(map(str, old))}, and ROCm's comgr looks up "
        f"bare code objects of versions 4 to 6 only (getElfIsaName)"
    )


def _unloadable_why(refused: list[Entry]) -> str:
    """Selected code objects without a loadable segment."""
    unloadable = sorted({e.identifier or e.target for e in refused if e.unloadable and not rocm.too_old_alone(e)})
    if not unloadable:
        return ""
    return (
        f"; ROCm selects {', '.join(unloadable[:3])}, a code object without a loadable segment (a "
        f"relocatable object never linked), which ROCr's loader refuses on every GPU"
    )


def _refused_why(refused: list[Entry], settings: Sequence[str]) -> str:
    """Selected entries whose code object is built for another setting than their id says."""
    built = {
        e.identifier or e.target: rocm.judged_target(e)
        for e in refused
        if not rocm.too_old_alone(e) and not e.unloadable
    }
    if not built:
        return ""
    shown = "; ".join(f"{i} holds a code object built for {t}" for i, t in sorted(built.items())[:3])
    return (
        f"; on {', '.join(settings[:4])} ROCm selects the first bundle entry whose id fits and the "
        f"loader refuses its code object ({shown}), with no fallback to a later entry"
    )


def _unread_why(f: LibraryFacts) -> str:
    """Bundle entries HIP never selects (G015's), and which HIP judges them."""
    unread = sorted({e.identifier for e in f.amd if not rocm.hip_reads(e, f.amd_lookup)})
    why = _runtime_why(f.amd_lookup)
    if not unread:
        return why
    if f.amd_lookup.today:
        return f"{why}; HIP never selects {', '.join(unread[:3])} (not a hip/hipv4/hcc entry as comgr spells it)"
    return f"{why}; it never selects {', '.join(unread[:3])}"


def _runtime_why(lookup: rocm.Lookup) -> str:
    """The HIP release a library's bundles are judged by, where it is not today's."""
    named = f"; its package names ROCm {lookup.named}, which ships another HIP" if lookup.named else ""
    if lookup.today:
        return f"; it links {lookup.runtime}{named}, judged as today's comgr selects" if named else ""
    return (
        f"; it links {lookup.runtime} ({lookup.releases}){named}, judged as the HIP of ROCm {lookup.judged_as} "
        f"selects: {lookup.reads}"
    )


def _generic_why(f: LibraryFacts, settings: Sequence[str]) -> str:
    """Generic entries (gfx9-generic) of the GPUs' family, which comgr selects for no GPU."""
    procs = {m.split(":")[0] for m in settings}
    generic = sorted(
        {
            e.target
            for e in f.amd
            if rocm.hip_reads(e, f.amd_lookup) and gfx.is_generic(e.target) and procs & set(gfx.family(e.target))
        }
    )
    if not generic:
        return ""
    return (
        f"; {', '.join(generic)} code is not selected for {', '.join(sorted(procs))}: ROCm's comgr "
        f"(lookUpCodeObject) compares a bundle entry's processor with the GPU's own, so a generic "
        f"entry fits no GPU; only a run on the GPU (archaudit smoke) can show a ROCm that selects it"
    )


def amd_kernel_gaps(f: LibraryFacts, gpus: Sequence[str] | None = None) -> tuple[rocm.AmdKernelGap, ...]:
    """AMD kernels a claimed (or the given) GPU setting cannot launch from their own module
    although another module of the library runs there."""
    if not f.amd:
        return ()
    if gpus is None:
        gpus = [m for want in f.policy.amd_claim for m in rocm.settings(want)]
    return rocm.kernel_gaps(f.amd_modules, [f.amd_path(m) for m in dict.fromkeys(gpus)], f.amd_lookup)


def _refused_somewhere(e: Entry, lookup: rocm.Lookup) -> bool:
    """Whether a setting of the entry's processor has its loader refuse it: under today's rule
    every setting its e_flags leave out; ROCm 4.0's loader compares sram-ecc only where the GPU
    has it on, and never xnack (data/amd.json "hip_loadings")."""
    if not lookup.loading:
        return True
    return any(not rocm.loads(e, gpu, lookup) for gpu in rocm.settings(e.target))


@library_rule(Code.G014)
def rule_g014(f: LibraryFacts) -> list[Finding]:
    """G014: a code object whose own xnack/sramecc setting (ELF e_flags) is more specific than
    its bundle id. ROCm selects the entry by its id and the loader then refuses the code object
    on a GPU of the other setting, so it is judged by its e_flags; the id misdescribes it."""
    lk = f.amd_lookup
    bad = sorted(  # only where the id is what selects (the HIP of ROCm 4 reads a hip entry's e_flags)
        {
            (e.identifier or e.target, e.own_target or "")
            for e in f.amd
            if rocm.disagrees(e) and rocm.read_target(e, lk) == e.target and _refused_somewhere(e, lk)
        }
    )
    if not bad:
        return []
    shown = "; ".join(f"{i} holds a code object built for {t}" for i, t in bad[:3])
    return [
        finding(
            Code.G014,
            f.path,
            f"{f.path}: {len(bad)} bundle entr{'y' if len(bad) == 1 else 'ies'} "
            f"say{'s' * (len(bad) == 1)} less than {'its' if len(bad) == 1 else 'their'} "
            f"code object, judged as built. Fix: bundle "
            f"{'it' if len(bad) == 1 else 'each'} under the id it was built for "
            f"(--offload-arch={bad[0][1]}). Its id: {shown}"
            f"{' ...' if len(bad) > 3 else ''}",
            entries=[i for i, _ in bad],
            built=[t for _, t in bad],
        )
    ]


@library_rule(Code.G015)
def rule_g015(f: LibraryFacts) -> list[Finding]:
    """G015: AMD bundle entries HIP never selects: an offload kind other than hip/hipv4/hcc (an
    OpenMP entry), or an id comgr does not match as written (upper case; the four-field triple of
    clang 11 and older; HCC's amdgcn--amdhsa). A library linking an older HIP (libamdhip64.so.3,
    .so.4) is judged by that release's lookup instead. They count for no GPU."""
    unread = sorted({e.identifier for e in f.amd if not rocm.hip_reads(e, f.amd_lookup)})
    if not unread:
        return []
    lk = f.amd_lookup
    who = "comgr" if lk.today else f"the HIP of ROCm {lk.judged_as} ({lk.runtime}, which it links)"
    return [
        finding(
            Code.G015,
            f.path,
            f"{f.path}: HIP never selects {len(unread)} bundle entr"
            f"{'y' if len(unread) == 1 else 'ies'}, which count for no GPU. Fix: bundle HIP "
            f"code as hipv4-amdgcn-amd-amdhsa--<target> (a current clang). "
            f"{', '.join(unread[:3])}{' ...' if len(unread) > 3 else ''}: {who} reads only {lk.reads}",
            entries=unread,
        )
    ]


@library_rule(Code.G018)
def rule_g018(f: LibraryFacts) -> list[Finding]:
    """G018: AMD code objects ROCr's loader refuses on every GPU (no PT_LOAD segment: a relocatable
    object never linked, a bare ELF header). They count for no GPU, as NVIDIA's relocatable code."""
    refused = sorted({e.identifier or e.target for e in f.amd if e.unloadable})
    if not refused:
        return []
    return [
        finding(
            Code.G018,
            f.path,
            f"{f.path}: {len(refused)} AMD code object{'s' * (len(refused) != 1)} "
            f"without a loadable segment, which ROCr's loader refuses on every GPU: "
            f"{'it counts' if len(refused) == 1 else 'they count'} for no GPU. Fix: link "
            f"the device code (lld -shared, as clang's HIP driver does) before bundling. "
            f"{', '.join(refused[:3])}{' ...' if len(refused) > 3 else ''}, as a "
            f"relocatable object never linked is",
            entries=refused,
        )
    ]


def modes_matter(target: str) -> bool:
    t = gfx.parse_target(target)
    return any(
        gfx.processors()[p].supports(n) and t.feature(n) is None for p in gfx.family(target) for n in gfx.FEATURES
    )


__all__ = [
    "amd_carried",
    "amd_g001",
    "amd_kernel_gaps",
    "amd_missing",
    "amd_why",
    "modes_matter",
    "rule_g014",
    "rule_g015",
    "rule_g018",
]
