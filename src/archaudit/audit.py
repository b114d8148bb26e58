"""The audit rule: does each library's device code run on every GPU the wheel claims?

Pure: takes inventories (archaudit.artifacts) and a policy, returns frozen verdicts.
Each library is judged on its own, and each container (one translation unit, which the
runtime registers separately) on its own, so one piece of code never stands in for
another. Whatever could not be read fails closed.
"""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from dataclasses import dataclass, field, replace

from . import __version__, arch
from .artifacts import TargetInventory
from .claims import Claim, parse_claim
from .filters import IgnoreRule, Suppression, apply, stale_rules
from .findings import ERROR, INFO, WARNING, Finding, severity
from .model import CODE_OBJECT, DEVICE_LINK, PTX, RELOCATABLE, SASS, Container, Coverage, Entry, Library, Status

try:
    from . import gfx as _gfx
except ImportError:  # pragma: no cover
    _gfx = None  # type: ignore[assignment]

SCHEMA_VERSION = 1
KERNELS_SHOWN = 3


@dataclass(frozen=True, slots=True)
class Policy:
    exact: bool = False
    require_ptx: str | None = None  # None | "newest"
    strict: bool = False
    strict_kernels: bool = False
    driver: str | None = None
    driver_os: str = "linux"
    gpus: tuple[tuple[str, tuple[int, int]], ...] = ()  # (display name, compute capability)
    amd_gpus: tuple[tuple[str, str], ...] = ()  # (display name, gfx target)
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    ignore_rules: tuple[IgnoreRule, ...] = ()
    require_device_code: tuple[str, ...] = ()  # globs of libraries that must carry device code
    amd_claim: tuple[str, ...] = ()
    amd_claim_source: str = ""


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


def _f(code: str, subject: str, message: str, **data: object) -> Finding:
    return Finding(code, severity(code), subject, message, tuple(data.items()))


def _label(cc: tuple[int, int]) -> str:
    return f"{cc[0]}{cc[1]}"


def _loadable(lib: Library) -> list[Container]:
    return [c for c in lib.containers if c.role != RELOCATABLE]


def _nv(entries) -> list[tuple[Entry, arch.CudaTarget]]:
    out = []
    for e in entries:
        if e.vendor == "nvidia" and e.kind in (SASS, PTX):
            out.append((e, arch.CudaTarget.parse(e.target)))
    return out


def _carried_labels(pairs) -> tuple[str, ...]:
    sass = sorted({t for e, t in pairs if e.kind == SASS})
    ptx = sorted({t for e, t in pairs if e.kind == PTX})
    return tuple([t.sm for t in sass] + [t.compute for t in ptx])


def _best(pairs, cc: tuple[int, int]) -> str:
    how = "none"
    for e, t in pairs:
        r = arch.runs_on(e.kind, t, cc)
        if r == "native":
            return "native"
        if r == "jit":
            how = "jit"
    return how


def _specialised(pairs) -> bool:
    return bool(pairs) and all(t.suffix in ("a", "f") for _, t in pairs)


def _judged_containers(lib: Library) -> list[Container]:
    """Containers that hold kernels of their own: device-link containers only when they
    carry kernels (an -rdc build), or when kernels were not read."""
    loadable = _loadable(lib)
    others = any(c.role != DEVICE_LINK and c.entries for c in loadable)
    out = []
    for c in loadable:
        if not c.entries:
            continue
        if c.role == DEVICE_LINK:
            kernels = [e.kernels for e in c.entries if e.kind == SASS]
            if any(k is None for k in kernels):
                if others:  # unread: an -rdc build has no other executable containers
                    continue
            elif not any(kernels):
                continue
        out.append(c)
    return out


def _kernel_names(entries) -> list[str] | None:
    """Every kernel named by the entries, or None when the payloads were not read."""
    names: set[str] = set()
    for e in entries:
        if e.kernels is None:
            return None
        names.update(e.kernels)
    return sorted(names)


def demangle(name: str) -> str:
    """A short readable name for an Itanium-mangled kernel: its qualified name without
    parameters (`_Z4axpyfPKfPfi` -> `axpy`, `_ZN2ns5scaleIfEEvPT_S1_i` -> `ns::scale`)."""
    if not name.startswith("_Z"):
        return name
    nested = name.startswith("_ZN")
    i = 3 if nested else 2
    while nested and i < len(name) and name[i] in "rVK":
        i += 1
    parts: list[str] = []
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        n = int(name[i:j])
        parts.append(name[j:j + n])
        i = j + n
        if not nested or (i < len(name) and name[i] == "I"):
            break
    return "::".join(p for p in parts if p) or name


def _kernels_phrase(names: list[str] | None, containers: int) -> str:
    if names is None:
        return f"{containers} container{'s' * (containers != 1)} (kernel names not read; --detail kernels)"
    if not names:
        return f"{containers} container{'s' * (containers != 1)} without kernels"
    shown = sorted({demangle(n) for n in names})
    more = len(shown) - KERNELS_SHOWN
    listed = ", ".join(shown[:KERNELS_SHOWN]) + (", ..." if more > 0 else "")
    return f"{len(names)} kernel{'s' * (len(names) != 1)} ({listed})"


def _driver_floor(pairs, os_name: str) -> tuple[tuple[int, int], str] | None:
    """The minimum driver the entries need, and the CUDA release that sets it.

    PTX needs the driver of the release that introduced its ISA (the JIT must know the ISA);
    a cubin only needs its major release's floor (minor version compatibility)."""
    best: tuple[tuple[int, ...], tuple[int, int], str] | None = None
    for e, _ in pairs:
        try:
            if e.kind == PTX and e.code_version != (0, 0):
                rel = arch.cuda_release_for_ptx_isa(e.code_version)
                need = arch.min_driver(rel, os_name)
            elif e.kind == SASS and e.toolkit:
                rel = e.toolkit
                need = arch.min_driver(rel, os_name, kind="minor")
            else:
                continue
        except LookupError:
            rel, need = (e.code_version if e.kind == PTX else e.toolkit), "unknown"
        key = (1 << 30,) if need == "unknown" else tuple(int(p) for p in need.split("."))
        if best is None or key > best[0]:
            best = (key, rel, need)
    return None if best is None else (best[1], best[2])


def _judge_library(lib: Library, claim: Claim | None, policy: Policy) -> LibraryVerdict:
    findings: list[Finding] = []
    for p in lib.problems:
        where = f" (at 0x{p.offset:x})" if p.offset is not None and "0x" not in p.message else ""
        findings.append(_f(p.code, lib.path, f"{lib.path}: {p.message}{where}"))
    loadable = [e for c in _loadable(lib) for e in c.entries]
    pairs = _nv(loadable)
    reloc = [e for c in lib.containers if c.role == RELOCATABLE for e in c.entries]
    amd = [e for e in loadable if e.kind == CODE_OBJECT]
    carried = _carried_labels(pairs) + tuple(sorted({e.target for e in amd}))
    reloc_labels = tuple(sorted({f"{e.kind}:{e.target}" for e in reloc}))
    kernels = None
    if loadable and all(e.kernels is not None for e in loadable):
        kernels = len({k for e in loadable for k in e.kernels or ()})
    floor = _driver_floor(pairs, policy.driver_os)
    bytes_by: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in loadable:
        key = arch.CudaTarget.parse(e.target).sm if e.vendor == "nvidia" and e.kind == SASS else (
            arch.CudaTarget.parse(e.target).compute if e.vendor == "nvidia" and e.kind == PTX else e.target)
        bytes_by[key][0] += e.stored_size
        bytes_by[key][1] += e.size
    coverage: list[tuple[str, str]] = []

    if not lib.has_device_code:
        status = "unverified" if lib.problems else "host"
        return LibraryVerdict(lib.path, status, (), (), (), 0, None, None, tuple(findings))
    if kernels == 0 and not lib.problems:
        # Every payload was read and none defines a kernel (nvlink's stubs in a host-side
        # library): nothing can fail with "no kernel image", so there is nothing to judge.
        findings.append(_f("G010", lib.path, f"{lib.path} carries device code without kernels "
                                             f"({' '.join(carried) or 'relocatable only'})"))
        return LibraryVerdict(lib.path, "host", carried, reloc_labels, (), 0, 0, None, tuple(findings))
    if not pairs and not amd:
        if reloc:
            findings.append(_f("G007", lib.path, f"{lib.path}: {len(reloc)} relocatable entries "
                                                 f"(-rdc objects) are not loadable coverage"))
        if claim is not None and reloc:
            findings.append(_f("G001", lib.path,
                               f"{lib.path} claims GPU architectures {[_label(c) for c in claim.gpus]} "
                               f"but carries only relocatable device code; a model would fail on "
                               f"hardware needing {[_label(c) for c in claim.gpus]}",
                               missing=[_label(c) for c in claim.gpus]))
    elif pairs:
        if reloc:
            findings.append(_f("G007", lib.path, f"{lib.path}: {len(reloc)} relocatable entries "
                                                 f"(-rdc objects) are not loadable coverage"))
        specialised = _specialised(pairs) and not policy.strict
        if specialised:
            served = arch.served_ccs([(e.kind, t) for e, t in pairs])
            findings.append(_f("G005", lib.path,
                               f"{lib.path} is specialised: serves only "
                               f"{', '.join(f'{a}.{b}' for a, b in served)} ({' '.join(carried)})",
                               serves=[f"{a}.{b}" for a, b in served]))
        elif claim is not None:
            _claim_rules(lib, pairs, claim, policy, carried, coverage, findings)
        if floor is not None:
            findings.append(_f("D002", lib.path, f"{lib.path} needs driver >= {floor[1]} "
                                                 f"({policy.driver_os}, CUDA {floor[0][0]}.{floor[0][1]})",
                               cuda=f"{floor[0][0]}.{floor[0][1]}", driver=floor[1]))
            if policy.driver and floor[1] == "unknown":
                findings.append(_f("D001", lib.path, f"{lib.path} needs a driver archaudit cannot name (CUDA "
                                                     f"{floor[0][0]}.{floor[0][1]} is newer than its table); "
                                                     f"{policy.driver} cannot be verified"))
            elif policy.driver and not arch.driver_at_least(policy.driver, floor[1]):
                findings.append(_f("D001", lib.path, _driver_message(lib, pairs, policy, floor)))
        for name, cc in policy.gpus:
            how = _best(pairs, cc)
            word = {"native": "native", "jit": "only through PTX JIT", "none": "not at all"}[how]
            findings.append(_f("G009" if how == "none" else "G008", lib.path,
                               f"{lib.path} on {name} ({cc[0]}.{cc[1]}): {word}", gpu=name, runs=how))
    if amd:
        _amd_rules(lib, amd, policy, coverage, findings)
    status = "pass"
    if any(f.severity == ERROR for f in findings):
        status = "fail"
    elif any(f.code == "G005" for f in findings):
        status = "specialised"
    floor_out = (f"{floor[0][0]}.{floor[0][1]}", floor[1]) if floor else None
    return LibraryVerdict(lib.path, status, carried, reloc_labels, tuple(coverage),
                          len(_judged_containers(lib)), kernels, floor_out, tuple(findings),
                          tuple((k, v[0], v[1]) for k, v in sorted(bytes_by.items())))


def _driver_message(lib: Library, pairs, policy: Policy, floor) -> str:
    rel, need = floor
    culprits = sorted({f"{e.kind} {t.sm if e.kind == SASS else t.compute}"
                       + (f" (PTX ISA {e.code_version[0]}.{e.code_version[1]})" if e.kind == PTX else "")
                       for e, t in pairs
                       if (e.kind == PTX and e.code_version != (0, 0) and _safe_rel(e.code_version) == rel)
                       or (e.kind == SASS and e.toolkit == rel)} or {"its device code"})
    return (f"{lib.path} needs driver >= {need} (CUDA {rel[0]}.{rel[1]}); {policy.driver} given: "
            f"'the provided PTX was compiled with an unsupported toolchain' from "
            f"{', '.join(culprits[:4])}{' ...' if len(culprits) > 4 else ''}")


def _safe_rel(isa):
    try:
        return arch.cuda_release_for_ptx_isa(isa)
    except LookupError:
        return None


def _claim_rules(lib, pairs, claim, policy, carried, coverage, findings) -> None:
    claimed = claim.gpus
    labels = [_label(c) for c in claimed]
    missing, jit = [], []
    for cc in claimed:
        how = _best(pairs, cc)
        coverage.append((_label(cc), how))
        if how == "none":
            missing.append(_label(cc))
        elif how == "jit":
            jit.append(_label(cc))
    present = sorted({t.label for e, t in pairs if e.kind == SASS}, key=_label_key) + \
        [f"compute_{t.label}" for t in sorted({t for e, t in pairs if e.kind == PTX})]
    if missing:
        findings.append(_f("G001", lib.path,
                           f"{lib.path} claims GPU architectures {labels} but only carries device code "
                           f"for {present}; a model would fail on hardware needing {missing}",
                           claimed=labels, carried=present, missing=missing))
    if jit:
        ptx = sorted({t.compute for e, t in pairs if e.kind == PTX})
        findings.append(_f("G002", lib.path, f"{lib.path} runs on {jit} only through PTX JIT ({', '.join(ptx)})",
                           jit=jit))
    if policy.exact:
        claimed_set = set(claimed)
        judged = {id(e) for c in _judged_containers(lib) for e in c.entries}
        extra = sorted({t.label for e, t in pairs if e.kind == SASS and id(e) in judged
                        and arch.canonical_cc(t.cc) not in claimed_set}, key=_label_key)
        if extra:
            findings.append(_f("G003", lib.path, f"{lib.path} carries {extra} which the claim does not list",
                               extra=extra))
    if policy.require_ptx == "newest" and claimed:
        newest = max(claimed)
        if not any(e.kind == PTX and t.cc == newest and not t.suffix for e, t in pairs):
            findings.append(_f("G004", lib.path, f"{lib.path} carries no PTX for compute_{_label(newest)}",
                               newest=_label(newest)))
    _container_rules(lib, claimed, policy, findings, missing)


def _label_key(label: str) -> tuple[int, str]:
    digits = "".join(ch for ch in label if ch.isdigit())
    return int(digits or 0), label


def _container_rules(lib: Library, claimed, policy: Policy, findings: list[Finding], lib_missing) -> None:
    """Per kernel when kernel names are known, else per container.

    A kernel is launched from the container that registered it, so its code must cover the
    claim there. Libraries that dispatch by architecture compile the same kernel into several
    single-target containers and pick one at run time; a kernel whose containers together cover
    the claim is that pattern, and passes unless --strict-kernels judges every container alone."""
    judged = [c for c in _judged_containers(lib) if _nv(c.entries)]
    named = all(e.kernels is not None for c in judged for e in c.entries)
    if named and not policy.strict_kernels:
        _kernel_rules(lib, judged, claimed, findings, lib_missing)
        return
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[Container]] = defaultdict(list)
    special: dict[tuple[str, ...], list[Container]] = defaultdict(list)
    for c in judged:
        pairs = _nv(c.entries)
        carried = _carried_labels(pairs)
        if _specialised(pairs) and not policy.strict_kernels:
            special[carried].append(c)
            continue
        fails = tuple(_label(cc) for cc in claimed if _best(pairs, cc) == "none" and _label(cc) not in lib_missing)
        if fails:
            groups[(carried, fails)].append(c)
    for (carried, fails), cs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        names = _kernel_names(e for c in cs for e in c.entries)
        _k001(lib, findings, names, len(cs), carried, fails)
    for carried, cs in special.items():
        names = _kernel_names(e for c in cs for e in c.entries)
        _k002(lib, findings, names, len(cs), carried)


def _kernel_rules(lib: Library, judged: list[Container], claimed, findings: list[Finding], lib_missing) -> None:
    code: dict[str, list] = defaultdict(list)  # kernel name -> every (entry, target) carrying it
    homes: dict[str, set[int]] = defaultdict(set)
    for i, c in enumerate(judged):
        for e, t in _nv(c.entries):
            for k in e.kernels or ():
                code[k].append((e, t))
                homes[k].add(i)
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = defaultdict(list)
    special: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for k, pairs in code.items():
        carried = _carried_labels(pairs)
        if _specialised(pairs):
            special[carried].append(k)
            continue
        fails = tuple(_label(cc) for cc in claimed if _best(pairs, cc) == "none" and _label(cc) not in lib_missing)
        if fails:
            groups[(carried, fails)].append(k)
    for (carried, fails), ks in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        _k001(lib, findings, sorted(ks), len({i for k in ks for i in homes[k]}), carried, fails)
    for carried, ks in special.items():
        _k002(lib, findings, sorted(ks), len({i for k in ks for i in homes[k]}), carried)


def _k001(lib, findings, names, containers: int, carried, fails) -> None:
    findings.append(_f("K001", lib.path,
                       f"{lib.path}: {_kernels_phrase(names, containers)} carry code only for "
                       f"{', '.join(carried)}; they fail on {', '.join('sm_' + f for f in fails)} (claimed)",
                       kernels=names or [], containers=containers, carried=list(carried), fails=list(fails)))


def _k002(lib, findings, names, containers: int, carried) -> None:
    findings.append(_f("K002", lib.path, f"{lib.path}: {_kernels_phrase(names, containers)} are specialised "
                                         f"for {', '.join(carried)}", kernels=names or [],
                       carried=list(carried)))


def _amd_rules(lib, amd, policy: Policy, coverage, findings) -> None:
    targets = sorted({e.target for e in amd})
    if not policy.amd_claim and not policy.amd_gpus:  # a --gpu question needs no claim
        findings.append(_f("C001", lib.path, f"{lib.path} carries AMD device code ({', '.join(targets)}) but no "
                                             f"claimed gfx targets reached the check (--amd-arch)"))
        return
    missing = []
    for want in policy.amd_claim:
        ok = _amd_runs(targets, want) if _gfx else False
        coverage.append((want, "native" if ok else "none"))
        if not ok:
            missing.append(want)
    if missing:
        findings.append(_f("G001", lib.path,
                           f"{lib.path} claims GPU architectures {list(policy.amd_claim)} but only carries "
                           f"device code for {targets}; a model would fail on hardware needing {missing}",
                           claimed=list(policy.amd_claim), carried=targets, missing=missing))
    for name, gfx_target in policy.amd_gpus:
        ok = any(_gfx.runs_on(t, gfx_target) for t in targets) if _gfx else False
        findings.append(_f("G008" if ok else "G009", lib.path,
                           f"{lib.path} on {name} ({gfx_target}): {'native' if ok else 'not at all'}"))


def _amd_runs(targets, want: str) -> bool:
    """Whether code for one of `targets` runs on the claimed `want`; a generic claim (such as
    gfx11-generic) stands for every GPU of its family."""
    if not _gfx.is_generic(want):
        return any(_gfx.runs_on(t, want) for t in targets)
    features = _gfx.parse_target(want).features
    for proc in _gfx.family(want):
        gpu = proc + "".join(f":{n}{'+' if v else '-'}" for n, v in features if _gfx.processors()[proc].supports(n))
        if not any(_gfx.runs_on(t, gpu) for t in targets):
            return False
    return True


def _embedded_claim(inv: TargetInventory) -> tuple[Claim | None, list[Finding]]:
    for lib in inv.libraries:
        for raw in lib.embedded_claims:
            try:
                return parse_claim(raw, f"embedded in {lib.path.rsplit('/', 1)[-1]}"), []
            except ValueError as e:
                return None, [_f("C002", lib.path, f"{lib.path}: embedded claim {raw!r}: {e}")]
    return None, []


def judge(inv: TargetInventory, claim: Claim | None, policy: Policy) -> TargetReport:
    findings: list[Finding] = [_f(p.code, inv.target, f"{inv.target}: {p.message}") for p in inv.problems]
    embedded, bad = _embedded_claim(inv)
    findings += bad
    if claim is None:
        claim = embedded
    elif embedded is not None and embedded.gpus != claim.gpus:
        findings.append(_f("C003", inv.target,
                           f"{embedded.source[12:]} embeds {[_label(c) for c in embedded.gpus]} but "
                           f"{claim.source} says {[_label(c) for c in claim.gpus]}"))
    verdicts = [_judge_library(lib, claim, policy) for lib in inv.libraries]
    device = [v for v, lib in zip(verdicts, inv.libraries) if lib.has_device_code]
    links = any(lib.links_gpu_runtime for lib in inv.libraries)
    gpu_wheel = bool(device) or links or claim is not None or bool(policy.amd_claim)
    for v in verdicts:
        findings.extend(v.findings)
    has_nvidia = any(e.vendor == "nvidia" for lib in inv.libraries for e in lib.entries)
    if gpu_wheel and not inv.unusable:
        asked = bool(policy.gpus or policy.amd_gpus)  # a --gpu question needs no claim: G008/G009 answer it
        if claim is None and not asked and (has_nvidia or (links and not policy.amd_claim)):
            findings.append(_f("C001", inv.target, f"{inv.target}: GPU wheel but no claimed architectures "
                                                   f"reached the check"))
        loadable = any(_loadable(lib) and any(c.entries for c in _loadable(lib)) for lib in inv.libraries)
        if not loadable:
            why = "links a GPU runtime" if links else "a claim was given"
            findings.append(_f("G006", inv.target, f"{inv.target}: GPU wheel ({why}) but no library "
                                                   f"carries loadable device code"))
    for pattern in policy.require_device_code:
        hits = [lib for lib in inv.libraries if fnmatch.fnmatch(lib.path, pattern)
                or fnmatch.fnmatch(lib.path.rsplit("/", 1)[-1], pattern)]
        if not any(lib.has_device_code for lib in hits):
            findings.append(_f("G006", inv.target, f"{inv.target}: required library {pattern!r} "
                                                   f"{'carries no device code' if hits else 'is not shipped'}"))
    return TargetReport(inv.target, inv.kind, inv.distribution, gpu_wheel, claim, tuple(verdicts),
                        tuple(findings), inv.unusable, inv.bytes_read, inv.seconds, inv)


def apply_filters(report: Report) -> Report:
    """Apply --select/--ignore and [tool.archaudit] ignore rules; stale rules become X001."""
    policy = report.policy
    used: set[IgnoreRule] = set()
    suppressed: list[Suppression] = []
    targets = []
    for t in report.targets:
        result = apply(t.findings, policy.select, policy.ignore, policy.ignore_rules, t.target)
        used |= result.used
        suppressed += result.suppressed
        targets.append(replace(t, findings=result.kept))
    stale = stale_rules(policy.ignore_rules, frozenset(used), targets[0].target) if targets else ()
    if stale:
        targets[0] = replace(targets[0], findings=targets[0].findings + stale)
    return replace(report, targets=tuple(targets), suppressed=tuple(suppressed))


def audit(inventories: list[TargetInventory], claim: Claim | None, policy: Policy) -> Report:
    """Judge every target against the claim and policy."""
    return apply_filters(Report(tuple(judge(inv, claim, policy) for inv in inventories), policy))


__all__ = ["Policy", "IgnoreRule", "LibraryVerdict", "TargetReport", "Report", "audit", "judge",
           "demangle", "SCHEMA_VERSION", "INFO", "WARNING", "ERROR"]
