"""NVIDIA coverage: which claimed GPUs a library's code serves at all (G001, with the AMD claim's
part from archaudit.judge.rules.amd), code that cannot be coverage (G007, G010, G012, G013, G017),
and what the coverage says beside the verdict (G002, G003, G004, G005)."""

from __future__ import annotations

from ...findings import Code, Finding
from ...gpus import cuda as arch
from ...gpus.cuda import label
from ...gpus.selection import NvCode, runs
from ...model import PTX, SASS
from ..facts import LibraryFacts
from .amd import amd_g001
from .common import (
    KERNELS_SHOWN,
    count_phrase,
    dotted,
    finding,
    g001_finding,
    kept,
    kernels_phrase,
    label_key,
    library_entry,
    library_kernels,
    library_rule,
    present_codes,
)


@library_rule(Code.G010)
def rule_g010(f: LibraryFacts) -> list[Finding]:
    """G010: device code in which nothing can be launched: every container was read whole and
    defines no kernel (nvlink's device-link stubs, an empty cubin wherever it sits). Anything
    else that holds code, kernels identified or not, is judged."""
    if not f.stubs_only or f.relocatable:
        return []
    return [
        finding(
            Code.G010,
            f.path,
            f"{f.path} carries device code without kernels "
            f"(its containers define no kernel: "
            f"{' '.join(sorted({e.target for e in f.library.entries}))})",
        )
    ]


@library_rule(Code.G007)
def rule_g007(f: LibraryFacts) -> list[Finding]:
    """G007: relocatable (-rdc) entries are listed but never count as coverage."""
    if not f.relocatable:
        return []
    return [
        finding(
            Code.G007,
            f.path,
            f"{f.path}: {len(f.relocatable)} relocatable entries (-rdc objects) are not loadable coverage",
        )
    ]


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
        what = f"{count_phrase(u.kernels, 0)} {'is' if len(u.kernels) == 1 else 'are'} defined only in {where}"
    else:
        what = f"the kernels of {where}, were not read (--fast), so some may be defined only there"
    return [
        finding(
            Code.G017,
            f.path,
            f"{f.path}: {what}: reachable from no module. Fix: write one container "
            f"per file (nvcc -fatbin of all the sources at once)"
            + (f". Unreached: {kernels_phrase(u.kernels, 0)}" if u.kernels else ""),
            kernels=list(u.kernels),
            containers=u.containers,
            loader=loader,
        )
    ]


@library_rule(Code.G001)
def rule_g001(f: LibraryFacts) -> list[Finding]:
    """G001: a claimed architecture on which none of the library's code runs (NVIDIA claims
    against NVIDIA code, AMD claims against AMD code; relocatable code never counts)."""
    return [*_g001_nvidia(f), *amd_g001(f)]


def _g001_nvidia(f: LibraryFacts) -> list[Finding]:
    """G001 of a CUDA claim: relocatable code alone, or claimed GPUs none of the code runs on (but
    those G012 and G013 explain)."""
    if f.claim is None:
        return []
    if not f.codes and not f.amd and f.relocatable:
        labels = [label(c) for c in f.claimed]
        return [g001_finding(f.path, labels, f.claim.source, [], labels, None)]
    if not f.codes:
        return []
    absent = [
        label(cc)
        for cc in f.missing
        if not f.paths[cc].dead  # G012's
        and not all(c.unlinked for c in f.paths[cc].choices)
    ]  # G013's
    if not absent:
        return []
    fix = (
        f"Fix: build for {', '.join('sm_' + x for x in absent)}, or record its gate: "
        f"{library_entry(f.path, kept(f, absent))}"
    )
    return [
        g001_finding(
            f.path,
            [label(c) for c in f.claimed],
            f.claim.source,
            present_codes(f.codes),
            absent,
            library_kernels(f),
            fix=fix,
        )
    ]


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
        out.append(
            finding(
                Code.G012,
                f.path,
                f"{f.path} on {cc[0]}.{cc[1]} (claimed) has only code no driver can run "
                f"there: the last driver for {cc[0]}.{cc[1]} GPUs supports CUDA "
                f"{last[0]}.{last[1]}. Fix: build {cc[0]}.{cc[1]}'s code with CUDA "
                f"{last[0]}.{last[1]} or older, or stop claiming it. It has only {what}",
                gpu=label(cc),
                dead=sorted({c.label for c in dead}),
                last_cuda=f"{last[0]}.{last[1]}",
            )
        )
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
    shown = ", ".join(calls[:KERNELS_SHOWN]) + (
        f" and {len(calls) - KERNELS_SHOWN} more" if len(calls) > KERNELS_SHOWN else ""
    )
    units = {i for cc in gpus for i, c in enumerate(f.paths[cc].choices) if c.unlinked}
    kernels = sorted({k for c in chosen for k in c.entry.kernels or ()})
    return [
        finding(
            Code.G013,
            f.path,
            f"{f.path}: on {', '.join(f'{a}.{b}' for a, b in gpus)} (claimed) the driver "
            f"picks relocatable cubins (-rdc) that do not load alone, and nothing links them "
            f"at run time. Fix: link the device code at build time (nvcc -dlink, or without "
            f"-rdc). In {len(units)} container{'s' * (len(units) != 1)} they call {shown} "
            f"without carrying it, and the library has no nvJitLink (CUDA_ERROR_NOT_FOUND)"
            + (f"; {kernels_phrase(kernels, 0)} cannot run there" if kernels else ""),
            gpus=[label(cc) for cc in gpus],
            unresolved=calls,
            containers=len(units),
            kernels=kernels,
        )
    ]


def _dead_phrase(c: NvCode) -> str:
    e = c.entry
    if e.kind == PTX:
        return f"{c.label} (PTX ISA {e.code_version[0]}.{e.code_version[1]})"
    if e.toolkit:
        return f"{c.label} (built by CUDA {e.toolkit[0]}.{e.toolkit[1]})"
    return f"{c.label} (linked CUDA runtime)"


@library_rule(Code.G005)
def rule_g005(f: LibraryFacts) -> list[Finding]:
    """G005: all the library's code is arch-specific or family code, so it serves only those
    GPUs. It says so; it excuses nothing: a claimed GPU it does not serve is G001 like any
    other (one wrong CMAKE_CUDA_ARCHITECTURES=100f must not pass "80;90;100")."""
    if not f.specialised:
        return []
    served = sorted({cc for cc in arch.KNOWN_CCS if any(runs(c, cc) != "none" for c in f.codes)})
    return [
        finding(
            Code.G005,
            f.path,
            f"{f.path} is specialised: serves only {', '.join(f'{a}.{b}' for a, b in served)} ({' '.join(f.carried)})",
            serves=[f"{a}.{b}" for a, b in served],
        )
    ]


@library_rule(Code.G002)
def rule_g002(f: LibraryFacts) -> list[Finding]:
    """G002: a claimed GPU that runs the library only through the PTX JIT (slow first load)."""
    if f.claim is None or not f.codes:
        return []
    jit = [label(cc) for cc, how in f.coverage if how == "jit"]
    if not jit:
        return []
    ptx = sorted({c.label for c in f.codes if c.kind == PTX})
    return [
        finding(Code.G002, f.path, f"{f.path} runs on {dotted(jit)} only through PTX JIT ({', '.join(ptx)})", jit=jit)
    ]


@library_rule(Code.G003)
def rule_g003(f: LibraryFacts) -> list[Finding]:
    """G003 (--exact): SASS for an architecture the claim does not list."""
    if not f.policy.exact or f.claim is None:
        return []
    claimed = set(f.claimed)
    extra = sorted(
        {c.target.label for c in f.codes if c.kind == SASS and arch.canonical_cc(c.target.cc) not in claimed},
        key=label_key,
    )
    if not extra:
        return []
    return [
        finding(
            Code.G003,
            f.path,
            f"{f.path} carries {dotted(extra)}, which the claim does not list (--exact). "
            f"Fix: build with the release's list, or claim "
            f"{'it' if len(extra) == 1 else 'them'}",
            extra=extra,
        )
    ]


@library_rule(Code.G004)
def rule_g004(f: LibraryFacts) -> list[Finding]:
    """G004 (--require-ptx newest): no plain PTX for the newest claimed architecture, judged
    by the target its text compiles for (compute_90 whose text says sm_90a is not plain)."""
    if f.policy.require_ptx != "newest" or f.claim is None or not f.claimed or not f.codes:
        return []
    newest = max(f.claimed)
    if any(
        c.kind == PTX
        and c.target.cc == newest
        and c.jit_target is not None
        and c.jit_target.cc == newest
        and not c.target.suffix
        and not c.jit_target.suffix
        for c in f.codes
    ):
        return []
    return [
        finding(
            Code.G004,
            f.path,
            f"{f.path} carries no PTX for compute_{label(newest)}, the newest claimed "
            f"(--require-ptx newest). Fix: add it ('{label(newest)}' or "
            f"'{dotted([label(newest)])}+PTX')",
            newest=label(newest),
        )
    ]


__all__ = [
    "rule_g001",
    "rule_g002",
    "rule_g003",
    "rule_g004",
    "rule_g005",
    "rule_g007",
    "rule_g010",
    "rule_g012",
    "rule_g013",
    "rule_g017",
]
