"""Vendor libraries judged by their vendor's documented, versioned contract (data/vendor.json):
GPUs outside the documented range (G016), a release newer than the table (G020), and kernels its
host code dispatches per GPU (K005)."""

from __future__ import annotations

from ...findings import Code, Finding
from ...gpus.cuda import label
from ..facts import LibraryFacts
from .common import finding, kernels_phrase, label_key, library_rule
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



@library_rule(Code.K005)
def rule_k005(f: LibraryFacts) -> list[Finding]:
    """K005: kernels of a vendor library that a claimed GPU inside its vendor's documented range
    cannot launch from their own container: the vendor's host code picks a container per GPU,
    as its vendor builds and tests it. One finding per library, naming the row."""
    if f.vendor is None:
        return []
    gaps = [g for g in f.kernel_gaps if g.verdict == "dispatched"]
    if not gaps:
        return []
    names = sorted({g.name for g in gaps if g.name is not None})
    units = {i for g in gaps for i in g.units}
    gpus = sorted({x for g in gaps for x in g.fails}, key=label_key)
    unnamed = len({i for g in gaps if g.name is None for i in g.units})
    what = kernels_phrase(names, 0) if names else kernels_phrase(None, unnamed)
    return [finding(Code.K005, f.path, f"{f.path}: {what} in {len(units)} container{'s' * (len(units) != 1)} have "
                                    f"no code for {', '.join('sm_' + x for x in gpus)} (claimed) in their own "
                                    f"container; {f.path} is {f.vendor.library} ({f.vendor.evidence}), which its "
                                    f"vendor documents for {f.vendor.text}: its host code picks the container for "
                                    f"each GPU (data/vendor.json, {f.vendor.source})",
                    kernels=names[:100], kernel_count=len(names), containers=len(units), fails=gpus,
                    library=f.vendor.library, range=f.vendor.text)]


__all__ = [
    "rule_g016",
    "rule_g020",
    "rule_k005",
]
