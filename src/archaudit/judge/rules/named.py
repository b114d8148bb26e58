"""The answers to --gpu: whether a library runs on a named NVIDIA or AMD GPU (G008) or not (G009),
and on_gpu, the same answer for one library, which smoke's device-load uses."""

from __future__ import annotations

from dataclasses import replace

from ...findings import Code, Finding
from ...gpus import cuda as arch, rocm
from ...gpus.cuda import CC, label
from ...model import Library
from ..facts import Floor, KernelGap, LibraryFacts, library_facts
from ..filters import IgnoreRule, recorded_for
from ..policy import AmdGpu, NvidiaGpu, Policy, arm_linux, library_claim
from .amd import amd_kernel_gaps, amd_why
from .common import capitalised, finding, kept, kernels_phrase, library_entry, library_rule, present_codes
from .drivers import ptx_floor


@library_rule(Code.G008)
def rule_g008(f: LibraryFacts) -> list[Finding]:
    """G008: the answer to --gpu where the library runs on the named GPU."""
    return [x for x in named_gpus(f) if x.code == Code.G008]


@library_rule(Code.G009)
def rule_g009(f: LibraryFacts) -> list[Finding]:
    """G009: with --gpu, a library carrying device code of which none runs on that GPU, or
    with kernels that cannot run there while nothing in the binary says it is by design."""
    return [x for x in named_gpus(f) if x.code == Code.G009]


def named_gpus(f: LibraryFacts) -> list[Finding]:
    """The answer for each NVIDIA and AMD GPU asked about with --gpu, in the order asked."""
    out = [_on_nvidia_gpu(f, name, cc) for name, cc in f.policy.gpus] if f.codes else []
    if f.amd:
        out += [_on_amd_gpu(f, g) for g in f.policy.amd_gpus]
    return out


def _on_nvidia_gpu(f: LibraryFacts, name: str, cc: CC) -> Finding:
    """--gpu for an NVIDIA GPU: not installable there, outside a vendor library's range, gated
    away by the project's host code, or what the GPU runs of the library."""
    if arch.is_tegra(cc) and f.policy.platforms and not arm_linux(f.policy.platforms):
        # a Jetson runs Linux on aarch64: a wheel for another platform is never installed there
        return finding(
            Code.G009,
            f.path,
            f"{f.path} on {name} ({cc[0]}.{cc[1]}): not at all (the wheel "
            f"is for {', '.join(f.policy.platforms)}; a {name} runs Linux on aarch64, so "
            f"it cannot be installed there)",
            gpu=name,
            runs="none",
            platforms=list(f.policy.platforms),
        )
    if f.vendor is not None and not f.vendor.covers(cc):
        # the same rule as for a claimed GPU: a vendor library is not held against a GPU
        # outside the range its vendor documents (its callers use it only there)
        return finding(
            Code.G016,
            f.path,
            f"{f.path} on {name} ({cc[0]}.{cc[1]}): not supported by its "
            f"vendor, so not held against the wheel: it is {f.vendor.library}, which its "
            f"vendor documents for {f.vendor.text} ({f.vendor.source})",
            gpu=name,
            library=f.vendor.library,
            range=f.vendor.text,
            gpus=[label(cc)],
        )
    own = library_claim(f.policy, f.path)
    if own is not None and cc not in own.claim.gpus:  # the project records its host gates it away
        return finding(
            Code.G008,
            f.path,
            f"{f.path} on {name} ({cc[0]}.{cc[1]}): not launched there: "
            f"its host code gates it to {own.claim.raw} ({own.reason}; [tool.archaudit] "
            f"library {own.path})",
            gpu=name,
            runs="gated",
        )
    p = f.paths[cc]
    failing, aside = _recorded_aside(f, [g for g in f.kernel_gaps_on(cc) if g.verdict in ("fails", "elsewhere")])
    word = _runs_word(f, cc)
    if failing:
        word = _failing_word(f, cc, failing, word)
    elif p.runs == "none":
        word += _none_fix(f, cc)
    if p.runs == "native":
        word += _jit_part(f, cc)
    if aside:
        word += "; " + "; ".join(
            f"{_failing_count(gaps)} set aside by {rule.describe()}" for rule, gaps in aside.items()
        )
    data: dict[str, object] = {"recorded": [rule.describe() for rule in aside]} if aside else {}
    return finding(
        Code.G009 if p.runs == "none" or failing else Code.G008,
        f.path,
        f"{f.path} on {name} ({cc[0]}.{cc[1]}): {word}",
        gpu=name,
        runs=p.runs,
        **data,
    )


def _recorded_aside(
    f: LibraryFacts, gaps: list[KernelGap]
) -> tuple[list[KernelGap], dict[IgnoreRule, list[KernelGap]]]:
    """The kernel gaps a GPU keeps, and those an ignore-library entry of the project records for
    this library (K001 for a gap of its own container, K004 for one another container fills): the
    answer to --gpu honours the same record the claim's answer does."""
    kept_gaps: list[KernelGap] = []
    aside: dict[IgnoreRule, list[KernelGap]] = {}
    for g in gaps:
        rule = recorded_for(Code.K001 if g.verdict == "fails" else Code.K004, f.path, f.policy.ignore_rules)
        if rule is None:
            kept_gaps.append(g)
        else:
            aside.setdefault(rule, []).append(g)
    return kept_gaps, aside


def _runs_word(f: LibraryFacts, cc: CC) -> str:
    """How the GPU runs the library (its best unit), and why not where the code cannot run."""
    p = f.paths[cc]
    word = {"native": "native", "jit": "only through PTX JIT", "none": "not at all"}[p.runs]
    if p.runs == "none" and p.dead:
        return word + " (its code needs a newer driver than any for this GPU)"
    if p.runs == "none" and p.unlinked:
        return word + " (its code for this GPU is not loadable alone, and the library links none)"
    return word


def _failing_word(f: LibraryFacts, cc: CC, failing: list[KernelGap], word: str) -> str:
    """The kernels the GPU cannot run, the fix, and how it runs the rest (``word``)."""
    names = sorted({g.name for g in failing if g.name is not None})
    keep = [label(c) for c in f.claimed if c != cc] or [
        x.removeprefix("sm_") for x in present_codes(f.codes) if x.startswith("sm_") and x != f"sm_{label(cc)}"
    ]
    return (
        f"{_failing_count(failing)} cannot run there ({word} for the rest). "
        f"Fix: build for sm_{label(cc)}, or record its gate: "
        f"{library_entry(f.path, keep)}. They carry only "
        f"{', '.join(sorted({t for g in failing for t in g.carried})[:6])}: "
        f"{kernels_phrase(names, 0)}"
    )


def _none_fix(f: LibraryFacts, cc: CC) -> str:
    """The fix where the GPU runs none of the library: build for it (or, where its code is only
    missing, record the gate that keeps it off the GPU), and what the library carries."""
    p = f.paths[cc]
    if p.dead or p.unlinked:
        return f". Fix: build for sm_{label(cc)}"
    return (
        f". Fix: build for sm_{label(cc)}, or record its gate: "
        f"{library_entry(f.path, _present_sass(f, cc))}. It carries only "
        f"{', '.join(present_codes(f.codes)[:6])}"
    )


def _present_sass(f: LibraryFacts, cc: CC) -> list[str]:
    """The architectures a library not running on `cc` is launched on, for its gate's entry: its
    claim, else its own SASS (else PTX) architectures."""
    return kept(f, [label(cc)])


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
    ptx = sorted(
        {f"{c.label}, PTX ISA {c.entry.code_version[0]}.{c.entry.code_version[1]}" for c in codes if c is not None}
    )
    floors = sorted({d for c in codes if (d := ptx_floor(c, f)) is not None}, key=lambda d: Floor(None, d, "").key)
    need = f": driver >= {floors[-1]}" if floors else ""
    return (
        f"; {kernels_phrase(names, 0)} in {len(jit)} container{'s' * (len(jit) != 1)} reach it only through "
        f"PTX JIT ({'; '.join(ptx)}{need})"
    )


def _on_amd_gpu(f: LibraryFacts, g: AmdGpu) -> Finding:
    """--gpu for an AMD GPU: judged in the setting it ships with (or the target ID given names);
    where archaudit does not know that setting, in every setting the GPU can run (fail closed)."""
    asked = [g.ships] if g.ships else rocm.settings(g.target)
    ok = [m for m in asked if f.amd_path(m).runs]
    gaps = amd_kernel_gaps(f, ok)
    where = f"{g.ships}, as it ships" if g.ships else g.target
    if len(ok) == len(asked) and not gaps:
        return finding(
            Code.G008,
            f.path,
            f"{f.path} on {g.name} ({where}): native",
            gpu=g.name,
            runs="native",
            setting=g.ships or None,
        )
    word = _amd_runs_word(f, asked, ok, gaps) + _amd_setting_note(f, g, asked, ok)
    fix = f"Fix: build for {g.target.split(':')[0]} (--offload-arch={g.ships or g.target})"
    return finding(
        Code.G009,
        f.path,
        f"{f.path} on {g.name} ({where}): {_fix_second(word, fix)}",
        gpu=g.name,
        runs="native" if ok else "none",
        setting=g.ships or None,
    )


def _amd_runs_word(f: LibraryFacts, asked: list[str], ok: list[str], gaps: tuple[rocm.AmdKernelGap, ...]) -> str:
    """How an AMD GPU that does not run all of the library in every asked setting runs it."""
    if gaps:
        names = sorted({x.name for x in gaps if x.name is not None})
        return (
            f"native for part of it; {kernels_phrase(names, sum(1 for x in gaps if x.name is None))} cannot "
            f"run there (their own bundles carry only {', '.join(sorted({t for x in gaps for t in x.carried}))})"
        )
    if not ok:
        return "not at all" + amd_why(f, asked)
    return f"only as {', '.join(ok)}, not as {', '.join(m for m in asked if m not in ok)}"


def _amd_setting_note(f: LibraryFacts, g: AmdGpu, asked: list[str], ok: list[str]) -> str:
    """What the GPU's setting adds: it is not recorded (every setting must run), or the library
    runs only in a setting the GPU does not ship with, and what changing it takes."""
    if not g.ships and ok != asked:
        return f"; how {g.name} is set up is not recorded, so every setting must run (name one: --gpu {asked[0]})"
    others = [m for m in rocm.settings(g.target.split(":")[0]) if m not in asked and f.amd_path(m).runs]
    if not others or ok:
        return ""
    changes = [f"{n} ({how})" for n, how in g.switch]
    return f"; it runs only as {', '.join(others)}, which is not how {g.name} ships" + (
        f": that takes {', '.join(changes)}" if changes else ""
    )


def _fix_second(word: str, fix: str) -> str:
    """An answer's verdict (up to its first '; ' or ' (' of detail), the fix, then the detail."""
    cut = min((i for i in (word.find("; "), word.find(" (")) if i >= 0), default=len(word))
    rest = word[cut:].removeprefix("; ").strip()
    return f"{word[:cut]}. {fix}" + (f". {capitalised(rest)}" if rest else "")


def on_gpu(lib: Library, name: str, cc: CC, policy: Policy | None = None) -> Finding | None:
    """check's answer to ``--gpu`` for one library and one NVIDIA GPU: G008 (it runs there) or
    G009 (it does not, or kernels that are not by design cannot), None without NVIDIA code.
    smoke's device-load judges a library on the GPU it ran on with this same rule."""
    base = policy if policy is not None else Policy()
    f = library_facts(lib, None, replace(base, gpus=(NvidiaGpu(name, cc),), amd_gpus=()))
    return next(iter(named_gpus(f)), None)


__all__ = ["named_gpus", "on_gpu", "rule_g008", "rule_g009"]
