"""Per-kernel coverage: kernels whose own container lacks code for a claimed GPU (K001), kernels
meant for other GPUs by design (K002, K003), and kernels only another container gives (K004)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ...findings import Code, Finding
from ...gpus.cuda import label
from ..facts import LibraryFacts
from ..policy import LibraryClaim, kernel_claim
from .amd import amd_kernel_gaps
from .common import (
    ENTRY_REASON,
    KERNELS_SHOWN,
    Group,
    capitalised,
    count_phrase,
    dotted,
    fail_verb,
    finding,
    groups,
    kept,
    kernels_phrase,
    label_key,
    library_entry,
    library_rule,
    possessive,
)


@library_rule(Code.K001)
def rule_k001(f: LibraryFacts) -> list[Finding]:
    """K001: kernels (or unnamed containers) whose own object lacks code for a claimed GPU
    the library as a whole covers, with nothing in the binary saying it was meant that way.
    For AMD code the object is the kernel's own bundle (or bare code object): ROCm looks a
    kernel up in its own module only."""
    gaps = [(g.carried, g.fails, g.name, g.units) for g in f.kernel_gaps if g.verdict == "fails"]
    out = [
        finding(
            Code.K001,
            f.path,
            f"{f.path}: {count_phrase(g.names, g.containers)} {fail_verb(g.names)} on "
            f"{dotted(g.fails)}. Fix: build for {', '.join('sm_' + x for x in g.fails)} or "
            f"record: {library_entry(f.path, kept(f, g.fails))}. "
            f"{possessive(g.names).capitalize()} own container lacks the claimed "
            f"{dotted(g.fails)}, carrying only {', '.join(g.carried)}: "
            f"{kernels_phrase(g.names, g.containers)}",
            kernels=list(g.names or ()),
            containers=g.containers,
            carried=list(g.carried),
            fails=list(g.fails),
        )
        for g in groups(gaps)
    ]
    amd = [(g.carried, g.fails, g.name, frozenset({g.module})) for g in amd_kernel_gaps(f)]
    out += [
        finding(
            Code.K001,
            f.path,
            f"{f.path}: {count_phrase(g.names, g.containers)} {fail_verb(g.names)} on "
            f"{', '.join(g.fails)} (claimed), where the library's other bundles run: "
            f"{possessive(g.names)} own bundle lacks it. Fix: build every bundle for "
            f"{', '.join(sorted({x.split(':')[0] for x in g.fails}))}. They carry only "
            f"{', '.join(g.carried)} (ROCm looks a kernel up in its own module only): "
            f"{kernels_phrase(g.names, g.containers)}",
            kernels=list(g.names or ()),
            containers=g.containers,
            carried=list(g.carried),
            fails=list(g.fails),
            vendor="amd",
        )
        for g in groups(amd)
    ]
    return out


@library_rule(Code.K002)
def rule_k002(f: LibraryFacts) -> list[Finding]:
    """K002: kernels whose code is all arch-specific or family code: they serve only those
    GPUs by design."""
    gaps = [(g.carried, g.fails, g.name, g.units) for g in f.kernel_gaps if g.verdict == "specialised"]
    return [
        finding(
            Code.K002,
            f.path,
            f"{f.path}: {count_phrase(g.names, g.containers)} not meant for "
            f"{dotted(g.fails)} (claimed), as designed: all their code is arch-specific or "
            f"family code "
            f"({', '.join(g.carried)}), and their names say so or no generic code of the "
            f"library runs there: {kernels_phrase(g.names, g.containers)}",
            kernels=list(g.names or ()),
            carried=list(g.carried),
            fails=list(g.fails),
        )
        for g in groups(gaps)
    ]


@library_rule(Code.K003)
def rule_k003(f: LibraryFacts) -> list[Finding]:
    """K003: kernels a claimed GPU cannot launch by design, as the binary shows for each kernel in
    its own container: a sourced statement in the library's own bytes speaks for it (data/vendor.json
    ``statements``), its name names the architecture its code there is for, or it was compiled
    out of its own container's code for that GPU."""
    out = _k003_stated(f)
    for why in ("named", "compiled-out", "chosen"):
        gaps = [(g.carried, g.fails, g.name, g.units) for g in f.kernel_gaps if g.verdict == why]
        for g in groups(gaps):
            if why == "chosen":
                out.append(
                    finding(
                        Code.K003,
                        f.path,
                        f"{f.path}: {count_phrase(g.names, g.containers)} not meant for "
                        f"{dotted(g.fails)} (claimed) from their own cubin, as designed: on "
                        f"{dotted(g.fails)} another of the whole cubins the library loads itself carries "
                        f"them, and it loads the image it picks (cuModuleLoadData); they carry code only "
                        f"for {', '.join(g.carried)}: {kernels_phrase(g.names, g.containers)}",
                        kernels=list(g.names or ()),
                        carried=list(g.carried),
                        fails=list(g.fails),
                        reason=why,
                    )
                )
                continue
            if why == "named":
                said = (
                    f"their names mean {_name_floor_text(g.names)} or newer ({_conventions(g.names)}), and "
                    f"their code is for no older GPU (only {', '.join(g.carried)})"
                )
            else:  # the code their containers do give these GPUs, which leaves them out
                said = (
                    f"{dotted(g.fails)} runs {', '.join(_given_labels(f, g))} of their own container, built "
                    f"for it (or newer than all code that carries them), and the source left them out there; "
                    f"they have code only for {', '.join(g.carried)}"
                )
            out.append(
                finding(
                    Code.K003,
                    f.path,
                    f"{f.path}: {count_phrase(g.names, g.containers)} not meant for {dotted(g.fails)} "
                    f"(claimed), as designed: {said}: {kernels_phrase(g.names, g.containers)}",
                    kernels=list(g.names or ()),
                    carried=list(g.carried),
                    fails=list(g.fails),
                    reason=why,
                )
            )
    return out


def _name_floor_text(names: Sequence[str] | None) -> str:
    """The oldest architecture the kernels' names allow ("8.0"), over all of them."""
    from ..names import name_floor

    floors = [x for n in names or () if (x := name_floor(n)) is not None]
    return f"{min(floors)[0]}.{min(floors)[1]}" if floors else "another architecture"


def _conventions(names: Sequence[str] | None) -> str:
    """The conventions (data/names.json rows) the kernels' names are read by."""
    from ..names import conventions_of

    seen = dict.fromkeys(c for n in names or () for c in conventions_of(n))
    return "; ".join(list(seen)[:2]) + ", data/names.json"


def _k003_stated(f: LibraryFacts) -> list[Finding]:
    """K003 for kernels a sourced statement in the library's own bytes speaks for, one finding
    per statement and (carried, fails): the string, what it speaks for, and its source."""
    out = []
    for said in f.statements:
        gaps = [
            (g.carried, g.fails, g.name, g.units)
            for g in f.kernel_gaps
            if g.verdict == "stated" and g.name is not None and said.kernels.search(g.name)
        ]
        for g in groups(gaps):
            text = said.text.decode("utf-8")
            out.append(
                finding(
                    Code.K003,
                    f.path,
                    f"{f.path}: {count_phrase(g.names, g.containers)} not meant for {dotted(g.fails)} (claimed), as "
                    f'designed: the library carries "{text}", so its host code launches {said.speaks_for} only from '
                    f"{said.first[0]}.{said.first[1]} on ({said.name}, data/vendor.json); they carry code only for "
                    f"{', '.join(g.carried)}: {kernels_phrase(g.names, g.containers)}",
                    kernels=list(g.names or ()),
                    carried=list(g.carried),
                    fails=list(g.fails),
                    reason="stated",
                    statement=text,
                    statement_kernels=said.kernels.pattern,
                    statement_source=said.source,
                )
            )
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
    return sorted(out, key=label_key)


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
        theirs = [container_name(f, j) for j in sorted(others[key] - units[key])] or [
            container_name(f, j) for j in sorted(others[key])
        ]
        base = f.path.rsplit("!", 1)[-1].rsplit("/", 1)[-1]
        listed = sorted(names[key])
        out.append(
            finding(
                Code.K004,
                f.path,
                f"{f.path}: {count_phrase(listed, 0)} {fail_verb(listed)} on {dotted(fails)} unless the host picks "
                f"another container. Fix: build for {', '.join('sm_' + x for x in fails)} or record: "
                f'[[tool.archaudit.ignore-library]] code = "K004" library = "{base}" reason = "{ENTRY_REASON}". '
                f"{_first(mine)} (claimed {', '.join(fails)}) carr{'ies' if len(mine) == 1 else 'y'} only "
                f"{', '.join(carried)}; only {_first(theirs)} carr{'ies' if len(theirs) == 1 else 'y'} the same names; "
                f"the runtime launches each container's kernels from its own module: {kernels_phrase(listed, 0)}",
                kernels=sorted(names[key]),
                containers=mine,
                carried=list(carried),
                fails=list(fails),
                elsewhere=theirs,
            )
        )
    return out


@library_rule(Code.K006)
def rule_k006(f: LibraryFacts) -> list[Finding]:
    """K006: kernels of the project's own library without code for a claimed GPU in their own
    container, which the project records its host code launches only on other GPUs (a
    [[tool.archaudit.library]] entry with kernels). One finding per entry and failing GPUs."""
    by: dict[tuple[LibraryClaim, tuple[str, ...]], set[str]] = defaultdict(set)
    for g in f.kernel_gaps:
        if g.verdict == "gated" and g.name is not None:
            own = kernel_claim(f.policy, f.path, g.name)
            if own is not None:
                by[(own, g.fails)].add(g.name)
    out = []
    for (own, fails), names in sorted(by.items(), key=lambda item: (-len(item[1]), item[0][0].path, item[0][1])):
        listed = sorted(names)
        out.append(
            finding(
                Code.K006,
                f.path,
                f"{f.path}: {count_phrase(listed, 0)} not launched on {dotted(fails)} (claimed): the "
                f"project's host code gates them to {own.claim.raw} ({own.reason}; [tool.archaudit] "
                f"library {own.path} kernels {', '.join(own.kernels)}). {capitalised(kernels_phrase(listed, 0))}",
                kernels=listed[:100],
                kernel_count=len(listed),
                fails=list(fails),
                gate=own.claim.raw,
                reason=own.reason,
            )
        )
    return out


def _first(items: list[str]) -> str:
    """The first few of a list, and how many more."""
    more = len(items) - KERNELS_SHOWN
    return ", ".join(items[:KERNELS_SHOWN]) + (f" and {more} more" if more > 0 else "")


__all__ = ["container_name", "rule_k001", "rule_k002", "rule_k003", "rule_k004", "rule_k006"]
