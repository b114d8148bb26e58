"""What every rule module shares: the target rules' facts (TargetFacts), the registration
decorators, and the phrasing of findings (kernel lists, claim labels, the G001 message, the
[[tool.archaudit.library]] entry a fix names, kernels grouped by how they fail)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ...claims import Claim
from ...findings import Code, Finding, make_finding
from ...gpus.cuda import label
from ...gpus.selection import NvCode
from ...model import PTX, SASS, Problem, TargetInventory
from ..facts import LibraryFacts
from ..names import demangle
from ..policy import Policy

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
        return self.has_device_code or self.links_runtime or self.claim is not None or bool(self.policy.amd_claim)


# ---- registration: each rule is registered where it is defined; archaudit.judge.rules states
# the order in which they run and report, once ----

LibraryRule = Callable[[LibraryFacts], list[Finding]]
TargetRule = Callable[[TargetFacts], list[Finding]]
Readers = Literal["E*"]
READERS: Readers = "E*"
"""The rule that passes on what the readers found (every E code) rather than deciding one code."""

LIBRARY_REGISTERED: dict[Code | Readers, LibraryRule] = {}
"""Every library rule by its code, as the decorators registered it (order: archaudit.judge.rules)."""

TARGET_REGISTERED: dict[Code | Readers, TargetRule] = {}
"""Every target rule by its code, as the decorators registered it (order: archaudit.judge.rules)."""


def library_rule(code: Code | Readers) -> Callable[[LibraryRule], LibraryRule]:
    """Register a library rule for `code` (one rule per code)."""

    def register(rule: LibraryRule) -> LibraryRule:
        if code in LIBRARY_REGISTERED:
            raise ValueError(f"two library rules for {code}")
        LIBRARY_REGISTERED[code] = rule
        return rule

    return register


def target_rule(code: Code | Readers) -> Callable[[TargetRule], TargetRule]:
    """Register a target rule for `code` (one rule per code)."""

    def register(rule: TargetRule) -> TargetRule:
        if code in TARGET_REGISTERED:
            raise ValueError(f"two target rules for {code}")
        TARGET_REGISTERED[code] = rule
        return rule

    return register


def capitalised(text: str) -> str:
    """A phrase as a sentence starts it: its first letter upper-case, the rest as it is (a
    kernel's name keeps its case, which str.capitalize would lower)."""
    return text[:1].upper() + text[1:]


def kernels_phrase(names: Sequence[str] | None, containers: int) -> str:
    if names is None:
        return f"{containers} container{'s' * (containers != 1)} without identifiable kernels"
    shown = sorted({demangle(n) for n in names})
    more = len(shown) - KERNELS_SHOWN
    listed = ", ".join(shown[:KERNELS_SHOWN]) + (", ..." if more > 0 else "")
    return f"{len(names)} kernel{'s' * (len(names) != 1)} ({listed})"


def count_phrase(names: Sequence[str] | None, containers: int) -> str:
    """How many kernels (or unnamed containers) a finding is about, without their names."""
    if names is None:
        return f"{containers} container{'s' * (containers != 1)} without identifiable kernels"
    return f"{len(names)} kernel{'s' * (len(names) != 1)}"


def fail_verb(names: Sequence[str] | None) -> str:
    return "fails" if names is not None and len(names) == 1 else "fail"


def possessive(names: Sequence[str] | None) -> str:
    return "its" if names is not None and len(names) == 1 else "their"


def label_key(text: str) -> tuple[int, str]:
    digits = "".join(ch for ch in text if ch.isdigit())
    return int(digits or 0), text


def present_codes(codes: Iterable[NvCode]) -> list[str]:
    """The code a library carries, in one notation: ``sm_XY`` for SASS, ``compute_XY`` for PTX."""
    codes = list(codes)
    sass = sorted({c.effective.sm for c in codes if c.kind == SASS}, key=label_key)
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


def kept(f: LibraryFacts, fails: Iterable[str]) -> list[str]:
    """The claimed GPUs (labels) a library keeps once the failing ones are gated away."""
    gone = set(fails)
    keep = [label(cc) for cc in f.claimed if label(cc) not in gone]
    own = [x.removeprefix("sm_") for x in present_codes(f.codes) if x.startswith("sm_")]
    return keep or (own or [x.removeprefix("compute_") for x in present_codes(f.codes)])[:1]


def g001_finding(
    subject: str,
    claimed: Sequence[str],
    source: str,
    carried: Sequence[str],
    missing: Sequence[str],
    kernels: Sequence[str] | None,
    why: str = "",
    nothing: str = "carries only relocatable device code, which never loads on its own",
    fix: str = "Fix: link its device code (nvcc -dlink, or build without -rdc)",
) -> Finding:
    """The one G001 message, for NVIDIA, AMD and relocatable-only code alike: what is missing and
    its fix first (within the 240 characters a text line shows), then the claim and where it came
    from, what the library carries, and the kernels that would fail (``kernels`` None: its code
    names none that could be read)."""
    has = f"carries code only for {', '.join(carried)}" if carried else nothing
    if kernels is None:
        fail = "its kernels cannot be named (its code defines none that could be read)"
    elif not kernels:
        fail = "its code defines no kernel by name"
    else:
        fail = f"{kernels_phrase(kernels, 0)} would fail there with 'no kernel image is available'"
    return finding(
        Code.G001,
        subject,
        f"{subject} has no code for {dotted(missing)} (claimed). {fix}. It {has}{why} (claimed: "
        f"{', '.join(claimed)}, from {source}); {fail}",
        claimed=list(claimed),
        claim_source=source,
        carried=list(carried),
        missing=list(missing),
        kernels=sorted(kernels) if kernels is not None else None,
    )


def library_kernels(f: LibraryFacts) -> list[str] | None:
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


def groups(items: Iterable[tuple[tuple[str, ...], tuple[str, ...], str | None, frozenset[int]]]) -> list[Group]:
    """Group (carried, fails, kernel or None, units) items by (carried, fails), largest first.

    Items without a kernel name are counted as containers of their own group."""
    names: dict[tuple[tuple[str, ...], tuple[str, ...], bool], set[str]] = defaultdict(set)
    homes: dict[tuple[tuple[str, ...], tuple[str, ...], bool], set[int]] = defaultdict(set)
    for carried, fails, name, units in items:
        key = (carried, fails, name is None)
        if name is not None:
            names[key].add(name)
        homes[key] |= units
    out = [
        Group(c, f, None if unnamed else tuple(sorted(names[(c, f, unnamed)])), len(homes[(c, f, unnamed)]))
        for (c, f, unnamed) in homes
    ]
    return sorted(out, key=lambda g: (-(len(g.names) if g.names is not None else g.containers), g.carried, g.fails))


def as_folded(found: Finding, p: Problem, subject: str) -> Finding:
    """The finding of a problem the reader folded (model.Problem.count): as many, the same examples."""
    if p.count == 1:
        return found
    return found.folded(p.count, tuple(f"{subject}: {m}" for m in p.examples))


__all__ = [
    "ENTRY_REASON",
    "Group",
    "KERNELS_SHOWN",
    "LIBRARY_REGISTERED",
    "LibraryRule",
    "READERS",
    "Readers",
    "TARGET_REGISTERED",
    "TargetFacts",
    "TargetRule",
    "as_folded",
    "count_phrase",
    "capitalised",
    "demangle",
    "dotted",
    "fail_verb",
    "finding",
    "g001_finding",
    "groups",
    "kept",
    "kernels_phrase",
    "label_key",
    "library_entry",
    "library_kernels",
    "library_rule",
    "possessive",
    "present_codes",
    "target_rule",
]
