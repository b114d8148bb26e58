"""Target rules: the claim (C001, C002, C003) and the whole target's device code (G006, G011,
G019), judged over all its libraries' facts."""

from __future__ import annotations

import fnmatch

from ...findings import Code, Finding
from ...gpus.cuda import label
from .common import TargetFacts, dotted, finding, target_rule


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
    return [
        finding(
            Code.C003,
            t.target,
            f"{e.source[12:]} embeds {dotted(label(x) for x in e.gpus)} but "
            f"{c.source} says {dotted(label(x) for x in c.gpus)}. Fix: make the build's "
            f"arch list and the release's claim the same list",
        )
    ]


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
            out.append(
                finding(
                    Code.C001,
                    f.path,
                    f"{f.path}: no claimed gfx target reached the check. Fix: give "
                    f"its targets (--amd-arch 'gfx90a;gfx942') or ask about a GPU "
                    f"(--gpu MI300X). It carries AMD device code ({', '.join(targets)})",
                )
            )
    if (
        t.gpu_wheel
        and not t.inventory.unusable
        and t.claim is None
        and not asked
        and (t.has_nvidia or (t.links_runtime and not t.policy.amd_claim))
    ):
        out.append(
            finding(
                Code.C001,
                t.target,
                f"{t.target}: GPU wheel, no claimed architectures. Fix: give them (--arch '80;90', "
                f"cuda-archs in [tool.archaudit]) or ask about GPUs (--gpu T4 --gpu H100)",
            )
        )
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
            out.append(
                finding(
                    Code.G006,
                    t.target,
                    f"{t.target}: GPU wheel ({why}) but no library "
                    f"carries loadable device code. Fix: check the build compiled "
                    f"device code (CUDA or HIP enabled) and the wheel ships it",
                )
            )
    for pattern in t.policy.require_device_code:
        hits = [
            lib
            for lib in libs
            if fnmatch.fnmatch(lib.path, pattern) or fnmatch.fnmatch(lib.path.rsplit("/", 1)[-1], pattern)
        ]
        if not any(lib.has_device_code for lib in hits):
            out.append(
                finding(
                    Code.G006,
                    t.target,
                    f"{t.target}: required library {pattern!r} "
                    f"{'carries no device code' if hits else 'is not shipped'}. Fix: "
                    f"check the build compiled it and the wheel ships it",
                )
            )
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
    return (_no_nvidia_code(t) if not nvidia else []) + (_no_amd_code(t) if not amd else [])


def _no_nvidia_code(t: TargetFacts) -> list[Finding]:
    """G011 of a CUDA claim, and of a --gpu question about an NVIDIA GPU (nothing of the wheel
    runs there: no, never a pass), on a target without NVIDIA code."""
    out = []
    if t.claim is not None:
        out.append(
            finding(
                Code.G011,
                t.target,
                f"{t.target}: claims CUDA architectures "
                f"{dotted(label(c) for c in t.claim.gpus)} ({t.claim.source}) but no "
                f"library carries NVIDIA device code. Fix: ship the CUDA build, or stop "
                f"claiming CUDA architectures",
                vendor="nvidia",
                missing=[label(c) for c in t.claim.gpus],
            )
        )
    if t.policy.gpus:
        names = [g.name for g in t.policy.gpus]
        shown = ", ".join(f"{g.name} ({g.cc[0]}.{g.cc[1]})" for g in t.policy.gpus)
        out.append(
            finding(
                Code.G011,
                t.target,
                f"{t.target}: asked about {shown} (NVIDIA) but no "
                f"library carries NVIDIA device code: it does not run there. Fix: ship "
                f"the CUDA build for those GPUs",
                vendor="nvidia",
                gpus=names,
                missing=[label(g.cc) for g in t.policy.gpus],
            )
        )
    return out


def _no_amd_code(t: TargetFacts) -> list[Finding]:
    """G011 of a --gpu question about an AMD GPU, and of an AMD claim, on a target without AMD code."""
    out = []
    if t.policy.amd_gpus:
        names = [g.name for g in t.policy.amd_gpus]
        shown = ", ".join(f"{g.name} ({g.target})" for g in t.policy.amd_gpus)
        out.append(
            finding(
                Code.G011,
                t.target,
                f"{t.target}: asked about {shown} (AMD) but no "
                f"library carries AMD device code: it does not run there. Fix: ship "
                f"the ROCm build for those GPUs",
                vendor="amd",
                gpus=names,
                missing=[g.target for g in t.policy.amd_gpus],
            )
        )
    if t.policy.amd_claim:
        out.append(
            finding(
                Code.G011,
                t.target,
                f"{t.target}: claims AMD targets {', '.join(t.policy.amd_claim)} "
                f"({t.policy.amd_claim_source or '--amd-arch'}) but no library "
                f"carries AMD device code. Fix: ship the ROCm build, or stop claiming "
                f"AMD targets",
                vendor="amd",
                missing=list(t.policy.amd_claim),
            )
        )
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
    asked = [(f"{cc[0]}.{cc[1]} (claimed)", cc, "claimed") for cc in claimed]
    asked += [(f"{name} ({cc[0]}.{cc[1]})", cc, "asked") for name, cc in t.policy.gpus]
    # a GPU asked about is named; a claimed one says it is claimed
    out = []
    for what, cc, how in asked:
        outside = [f for f in nvidia if f.vendor is not None and not f.vendor.covers(cc)]
        if len(outside) != len(nvidia):
            continue
        rows = sorted({f"{f.vendor.library}: {f.vendor.text}" for f in outside if f.vendor is not None})
        out.append(
            finding(
                Code.G019,
                t.target,
                f"{t.target} does not run on {what}, outside its vendor libraries' "
                f"range. Fix: ship their release that supports it, or stop "
                f"{'claiming' if how == 'claimed' else 'promising'} it. They are its only "
                f"device code: {'; '.join(rows)}",
                gpu=label(cc),
                rows=rows,
                asked=how,
            )
        )
    return out


__all__ = ["rule_c001", "rule_c002", "rule_c003", "rule_g006", "rule_g011", "rule_g019"]
