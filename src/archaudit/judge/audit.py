"""The audit: does each library's device code run on every GPU the wheel claims?

Pure: takes inventories (archaudit.read.artifacts) and a policy, returns frozen verdicts. Each
library's facts are computed once (archaudit.judge.facts) and judged by one rule per finding
code (archaudit.judge.rules); this module only assembles the verdicts and applies the filters.
Whatever could not be read fails closed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from .. import __version__
from ..claims import Claim, parse_claim
from ..findings import ERROR, INFO, WARNING, Code, Finding, fold_findings, means_unverified
from ..gpus import amd as gfx, cuda as arch, rocm
from ..gpus.cuda import label
from ..gpus.selection import parse_target
from ..model import DEVICE_LINK, PTX, RELOCATABLE, SASS, Coverage, Library, Status, TargetInventory
from .facts import LibraryFacts, library_facts
from .filters import IgnoreRule, Suppression, apply, stale_rules
from .policy import LibraryGroup, Policy, for_target, library_claim, package_name
from .rules import TargetFacts, amd_missing, demangle, finding, judge_library_rules, judge_target_rules

SCHEMA_VERSION = 2  # 2: a finding may stand for many (count, examples)


@dataclass(frozen=True, slots=True)
class AmdEntryVerdict:
    """How ROCm judges one AMD entry of a library (gpus.rocm): the target it runs on once selected
    (the more specific of its bundle id and its code object's own), whether that differs from the
    bundle id, and whether HIP selects it at all. `container` and `entry` index the library's
    containers and that container's entries."""

    container: int
    entry: int
    judged_target: str
    disagrees: bool
    hip_selects: bool


@dataclass(frozen=True, slots=True)
class LibraryVerdict:
    path: str
    status: Status
    carried: tuple[str, ...]  # "sm_80", "compute_90", "gfx90a:xnack-" (loadable only)
    relocatable: tuple[str, ...]
    coverage: tuple[tuple[str, Coverage], ...]  # (claimed label, how it runs there)
    containers: int
    kernels: int | None
    driver_floor: tuple[str, str] | None  # (CUDA release, minimum driver)
    findings: tuple[Finding, ...]
    bytes_by_target: tuple[tuple[str, int, int], ...] = ()  # (target, stored, decoded)
    amd_entries: tuple[AmdEntryVerdict, ...] = ()  # each AMD entry as ROCm judges it


@dataclass(frozen=True, slots=True)
class TargetReport:
    target: str
    kind: str
    distribution: str
    gpu_wheel: bool
    claim: Claim | None
    libraries: tuple[LibraryVerdict, ...]
    findings: tuple[Finding, ...]  # every finding of this target, libraries' included
    unusable: bool
    bytes_read: int
    seconds: float
    inventory: TargetInventory = field(repr=False, compare=False, default=None)  # type: ignore[assignment]
    # findings a [[tool.archaudit.library-group]] set aside: another member of the group runs the GPU
    grouped: tuple[Suppression, ...] = ()


@dataclass(frozen=True, slots=True)
class Report:
    targets: tuple[TargetReport, ...]
    policy: Policy
    suppressed: tuple[Suppression, ...] = ()  # findings a filter hid, with the rule that hid each
    tool_version: str = __version__
    schema_version: int = SCHEMA_VERSION

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(f for t in self.targets for f in t.findings)

    @property
    def exit_code(self) -> int:
        if any(t.unusable for t in self.targets):
            return 2
        return 1 if any(f.severity == ERROR for f in self.findings) else 0

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


def _bytes_by_target(lib: Library) -> tuple[tuple[str, int, int], ...]:
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for c in lib.containers:
        if c.role == RELOCATABLE:
            continue
        for e in c.entries:
            key = e.target
            if e.vendor == "nvidia" and e.kind in (SASS, PTX):
                t = parse_target(e.target)
                key = t.sm if e.kind == SASS else t.compute
            totals[key][0] += e.stored_size
            totals[key][1] += e.size
    return tuple((k, v[0], v[1]) for k, v in sorted(totals.items()))


def _amd_entries(lib: Library, release: str | None = None) -> tuple[AmdEntryVerdict, ...]:
    """Every AMD entry of the library as ROCm judges it, so that a report carries what it shows."""
    lookup = rocm.lookup_for(lib.needed, release)
    return tuple(
        AmdEntryVerdict(ci, ei, rocm.judged_target(e), rocm.disagrees(e), rocm.hip_reads(e, lookup))
        for ci, c in enumerate(lib.containers)
        for ei, e in enumerate(c.entries)
        if e.vendor == "amd" or e.own_target is not None
    )


def _verdict(f: LibraryFacts, findings: list[Finding]) -> LibraryVerdict:
    """A library's verdict: host code, kernel-less stubs, or its status, coverage and floor."""
    lib = f.library
    amd = _amd_entries(lib, f.rocm_release)
    if not lib.has_device_code:
        bare: Status = "unverified" if lib.problems else "host"
        return LibraryVerdict(lib.path, bare, (), (), (), 0, None, None, tuple(findings), amd_entries=amd)
    reloc = tuple(sorted({f"{e.kind}:{e.target}" for e in f.relocatable}))
    if f.stubs_only and not lib.problems:
        return LibraryVerdict(lib.path, "host", f.carried, reloc, (), 0, 0, None, tuple(findings), amd_entries=amd)
    floor = f.floor if f.codes else None
    floor_out = (floor.cuda_text, floor.driver or "unknown") if floor is not None else None
    own = sum(1 for u in f.units if u.container.role != DEVICE_LINK or u.kernels)  # unread dlinks: not shown
    return LibraryVerdict(
        lib.path,
        _status(findings),
        f.carried,
        reloc,
        _coverage(f),
        own,
        f.kernel_count,
        floor_out,
        tuple(findings),
        _bytes_by_target(lib),
        amd,
    )


def _status(findings: list[Finding]) -> Status:
    """Fail on any error; specialised where G005 says so; else pass."""
    if any(x.severity == ERROR for x in findings):
        return "fail"
    if any(x.code == Code.G005 for x in findings):
        return "specialised"
    return "pass"


def _coverage(f: LibraryFacts) -> tuple[tuple[str, Coverage], ...]:
    """How each claimed NVIDIA GPU and each claimed AMD target runs the library."""
    coverage: list[tuple[str, Coverage]] = [(label(cc), how) for cc, how in f.coverage] if f.codes else []
    if f.amd and f.policy.amd_claim:
        coverage += [(want, "none" if amd_missing(f, want) else "native") for want in f.policy.amd_claim]
    return tuple(coverage)


def _embedded_claim(inv: TargetInventory) -> tuple[Claim | None, Finding | None]:
    for lib in inv.libraries:
        for raw in lib.embedded_claims:
            try:
                return parse_claim(raw, f"embedded in {lib.path.rsplit('/', 1)[-1]}"), None
            except ValueError as e:
                return None, finding(
                    Code.C002,
                    lib.path,
                    f"{lib.path}: embedded claim {raw!r} does not parse ({e}). "
                    f"Fix: give the claim (--arch, or cuda-archs in [tool.archaudit])",
                )
    return None, None


def _without_data(inv: TargetInventory, policy: Policy) -> tuple[TargetInventory, list[Finding]]:
    """The inventory less the libraries a [[tool.archaudit.data]] entry names, and an X002 for
    each member left out (one per nested wheel, not per library in it)."""
    if not policy.data:
        return inv, []
    kept: list[Library] = []
    notes: dict[str, Finding] = {}
    for lib in inv.libraries:
        entry = next((d for d in policy.data if d.matches(lib.path)), None)
        if entry is None:
            kept.append(lib)
            continue
        member = lib.path.split("!")[0]
        notes.setdefault(
            member,
            finding(
                Code.X002, member, f"{member}: data, not judged ({entry.reason}; [tool.archaudit] data {entry.member})"
            ),
        )
    return replace(inv, libraries=tuple(kept)), list(notes.values())


def judge(inv: TargetInventory, claim: Claim | None, policy: Policy) -> TargetReport:
    """Judge one target: every library's facts once, every rule once."""
    policy = for_target(policy, inv.target, inv.kind)
    inv, data = _without_data(inv, policy)
    embedded, bad = _embedded_claim(inv)
    judged_by = claim if claim is not None else embedded
    name = package_name(inv.target, inv.distribution)
    package, release = arch.package_cuda(name), gfx.package_rocm(name)
    facts = tuple(
        library_facts(lib, _claim_of(lib.path, judged_by, policy), policy, package, release) for lib in inv.libraries
    )
    per_library = [judge_library_rules(f) for f in facts]
    per_library, grouped = _set_aside_by_groups(facts, per_library, policy, inv.target)
    target = TargetFacts(inv, judged_by, embedded, bad, policy, facts)
    wide = judge_target_rules(target)
    paths = {lib.path: i for i, lib in enumerate(inv.libraries)}
    head = [x for x in wide if means_unverified(x) and x.subject == inv.target]
    tail = []
    for x in wide:
        if x in head:
            continue
        if x.subject in paths and x.subject != inv.target:
            per_library[paths[x.subject]].append(x)
        else:
            tail.append(x)
    tail += data
    per_library = [fold_findings(found) for found in per_library]  # once, with the target rules' findings added
    head, tail = fold_findings(head), fold_findings(tail)
    verdicts = tuple(_verdict(f, found) for f, found in zip(facts, per_library))
    findings = head + [x for found in per_library for x in found] + tail
    return TargetReport(
        inv.target,
        inv.kind,
        inv.distribution,
        target.gpu_wheel,
        judged_by,
        verdicts,
        tuple(findings),
        inv.unusable,
        inv.bytes_read,
        inv.seconds,
        inv,
        grouped,
    )


def _claim_of(path: str, claim: Claim | None, policy: Policy) -> Claim | None:
    """The claim a library is judged by: its [[tool.archaudit.library]] entry's, else the wheel's."""
    own = library_claim(policy, path)
    return own.claim if own is not None else claim


# The failures a recorded choice between alternative libraries resolves, and the data key that
# names the GPUs each one is about.
_GROUPED = {Code.G001: "missing", Code.K001: "fails", Code.K004: "fails", Code.G009: "gpu"}


def _runs_clean(f: LibraryFacts, cc: tuple[int, int]) -> bool:
    """Whether a GPU runs a library with no failing kernel: some unit runs there, and no kernel
    gap on it is a failure (K001/K004)."""
    if cc not in f.paths or f.paths[cc].runs == "none":
        return False
    return not any(g.verdict in ("fails", "elsewhere") for g in f.kernel_gaps_on(cc))


def _finding_gpus(x: Finding, policy: Policy) -> list[tuple[int, int]] | None:
    """The NVIDIA GPUs a G001/K001/K004/G009 finding is about, or None when it names another kind."""
    key = _GROUPED.get(x.code)
    value = x.get(key) if key is not None else None
    if key == "gpu":
        named = [cc for name, cc in policy.gpus if name == value]
        return named or None
    if not isinstance(value, list) or x.get("vendor") == "amd":
        return None
    try:
        return [parse_target(v if v.startswith(("sm_", "compute_")) else f"sm_{v}").cc for v in value]
    except ValueError:
        return None


def _set_aside_by_groups(
    facts: tuple[LibraryFacts, ...], per_library: list[list[Finding]], policy: Policy, target: str
) -> tuple[list[list[Finding]], tuple[Suppression, ...]]:
    """Findings of a library-group member about GPUs another member of its group runs cleanly:
    the host loads one member, so the claim is met there (bitsandbytes loads the library of the
    CUDA release it finds). Each is kept as a suppression naming the group and the member that
    runs the GPU; a GPU no member runs keeps every finding (fail closed)."""
    if not policy.library_groups:
        return per_library, ()
    out = [list(found) for found in per_library]
    aside: list[Suppression] = []
    for group in policy.library_groups:
        members = [i for i, f in enumerate(facts) if group.matches(f.path)]
        for i in members:
            kept = []
            for x in out[i]:
                runner = _other_runner(facts, members, i, _finding_gpus(x, policy))
                if runner is None:
                    kept.append(x)
                else:
                    aside.append(Suppression(x, f"{_describe(group)}: {runner} runs it", target))
            out[i] = kept
    return out, tuple(aside)


def _other_runner(
    facts: tuple[LibraryFacts, ...], members: list[int], me: int, gpus: list[tuple[int, int]] | None
) -> str | None:
    """A member of the group other than ``me`` that runs every one of ``gpus`` cleanly (its path)."""
    if not gpus:
        return None
    for j in members:
        if j != me and all(_runs_clean(facts[j], cc) for cc in gpus):
            return facts[j].path
    return None


def _describe(group: LibraryGroup) -> str:
    return group.describe()


def _honoured(findings: tuple[Finding, ...], rules: tuple[IgnoreRule, ...]) -> set[IgnoreRule]:
    """The ignore-library entries an answer to --gpu honoured (its ``recorded`` data): in use,
    though the findings they name were not produced (no claim asked for them)."""
    named = {r for x in findings for r in x.get("recorded") or ()}  # type: ignore[attr-defined]
    return {r for r in rules if r.describe() in named}


def apply_filters(report: Report) -> Report:
    """Apply --select/--ignore and [tool.archaudit] ignore rules; stale rules become X001."""
    policy = report.policy
    used: set[IgnoreRule] = set()
    suppressed: list[Suppression] = []
    targets = []
    for t in report.targets:
        result = apply(t.findings, policy.select, policy.ignore, policy.ignore_rules, t.target)
        used |= result.used | _honoured(t.findings, policy.ignore_rules)
        suppressed += t.grouped
        suppressed += result.suppressed
        targets.append(replace(t, findings=result.kept))
    # stale only where a claim was judged: a run that only answers --gpu produces no claim's
    # findings (K001, K004, G001), so the entries recorded for them cannot be shown unused
    claimed = any(t.claim is not None for t in targets) or bool(policy.amd_claim)
    stale = stale_rules(policy.ignore_rules, frozenset(used), targets[0].target) if targets and claimed else ()
    if stale:
        targets[0] = replace(targets[0], findings=targets[0].findings + stale)
    return replace(report, targets=tuple(targets), suppressed=tuple(suppressed))


def audit(inventories: list[TargetInventory], claim: Claim | None, policy: Policy) -> Report:
    """Judge every target against the claim and policy."""
    return apply_filters(Report(tuple(judge(inv, claim, policy) for inv in inventories), policy))


__all__ = [
    "ERROR",
    "INFO",
    "SCHEMA_VERSION",
    "WARNING",
    "AmdEntryVerdict",
    "IgnoreRule",
    "LibraryVerdict",
    "Policy",
    "Report",
    "TargetReport",
    "audit",
    "demangle",
    "judge",
]
