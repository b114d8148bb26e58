"""Vendor libraries judged by their vendor's documented, versioned contract (data/vendor.json):
GPUs outside the documented range (G016), a release newer than the table (G020), and kernels its
host code dispatches per GPU (K005), in a vendor library or in a vendor's code linked statically
into a project's library."""

from __future__ import annotations

from collections import defaultdict

from ...findings import Code, Finding
from ...gpus import vendor as vendors
from ...gpus.cuda import label
from ..facts import KernelGap, LibraryFacts
from .common import capitalised, count_phrase, dotted, finding, kernels_phrase, label_key, library_rule
from .named import named_gpus


@library_rule(Code.G016)
def rule_g016(f: LibraryFacts) -> list[Finding]:
    """G016: claimed GPUs outside the range the library's vendor documents for its release
    (data/vendor.json, a source per row) are not supported by it: it is not judged there, and
    its callers do not use it there. Where no other library runs on the GPU, G019 fails it."""
    if f.vendor is None:
        return []
    out = [x for x in named_gpus(f) if x.code == Code.G016]
    if not f.outside_vendor_range:
        return out
    gpus = [f"{a}.{b}" for a, b in f.outside_vendor_range]
    return [
        finding(
            Code.G016,
            f.path,
            f"{f.path}: the claimed {', '.join(gpus)} {'is' if len(gpus) == 1 else 'are'} "
            f"not supported by its vendor, so not held against it: it is "
            f"{f.vendor.library}, which its vendor documents for {f.vendor.text} "
            f"({f.vendor.evidence}; "
            f"{f.vendor.source})",
            library=f.vendor.library,
            range=f.vendor.text,
            gpus=[label(cc) for cc in f.outside_vendor_range],
        ),
        *out,
    ]


@library_rule(Code.G020)
def rule_g020(f: LibraryFacts) -> list[Finding]:
    """G020: a vendor library of a release newer than data/vendor.json knows, judged by its
    line's newest row: the row to add."""
    if f.vendor is None or not f.vendor.newer:
        return []
    return [
        finding(
            Code.G020,
            f.path,
            f"{f.path} is {f.vendor.newer}, newer than data/vendor.json knows. Fix: add "
            f"its row to data/vendor.json from its vendor's documentation. It is judged by "
            f"its line's newest row, {f.vendor.library} ({f.vendor.text})",
            library=f.vendor.library,
            release=f.vendor.newer,
            range=f.vendor.text,
        )
    ]


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
    gpus = sorted({x for g in gaps for x in g.fails}, key=label_key)
    unnamed = len({i for g in gaps if g.name is None for i in g.units})
    what = kernels_phrase(names, 0) if names else kernels_phrase(None, unnamed)
    count = count_phrase(names, 0) if names else count_phrase(None, unnamed)
    have = "has" if len(names) == 1 or (not names and unnamed == 1) else "have"
    return [
        finding(
            Code.K005,
            f.path,
            f"{f.path}: {count} in {len(units)} container{'s' * (len(units) != 1)} {have} "
            f"no code for {dotted(gpus)} (claimed) in their own container, as its vendor "
            f"dispatches them: it is {f.vendor.library}, which its vendor documents for "
            f"{f.vendor.text}, and its host code picks the container for each GPU. "
            f"{capitalised(what)}; {f.vendor.evidence} (data/vendor.json, "
            f"{f.vendor.source})",
            kernels=names[:100],
            kernel_count=len(names),
            containers=len(units),
            fails=gpus,
            library=f.vendor.library,
            range=f.vendor.text,
        )
    ]


def _k005_static(f: LibraryFacts) -> list[Finding]:
    """K005 for a vendor's code linked statically into a project's library: one finding per
    vendor row, for the containers every kernel of which the vendor's convention names."""
    rows: dict[str, list[KernelGap]] = defaultdict(list)
    owners: dict[str, vendors.Identified] = {}
    for g in f.kernel_gaps:
        own = next((x for i in g.units if (x := f.static[i]) is not None), None) if g.verdict == "dispatched" else None
        if own is not None:
            rows[own.library].append(g)
            owners[own.library] = own
    out = []
    base = f.path.rsplit("/", 1)[-1]
    for row, gaps in rows.items():
        own = owners[row]
        names = sorted({g.name for g in gaps if g.name is not None})
        units = {i for g in gaps for i in g.units}
        gpus = sorted({x for g in gaps for x in g.fails}, key=label_key)
        what = kernels_phrase(names, 0)
        have = "has" if len(names) == 1 else "have"
        out.append(
            finding(
                Code.K005,
                f.path,
                f"{f.path}: {count_phrase(names, 0)} in {len(units)} "
                f"container{'s' * (len(units) != 1)} {have} no code for {dotted(gpus)} "
                f"(claimed) in their own container, as its vendor dispatches them: they "
                f"are {own.library} linked statically into {base}, which its vendor "
                f"documents for {own.text}, and its host code picks the container for "
                f"each GPU. {capitalised(what)}; {own.evidence}, and "
                f"{own.row.library}'s kernel-name convention names every kernel of those "
                f"containers (data/vendor.json, {own.source})",
                kernels=names[:100],
                kernel_count=len(names),
                containers=len(units),
                fails=gpus,
                library=own.library,
                range=own.text,
                linked_into=base,
            )
        )
    return out


__all__ = ["rule_g016", "rule_g020", "rule_k005"]
