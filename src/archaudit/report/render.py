"""Rendering a Report: text for people, versioned JSON for machines. No judgement here."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from ..findings import CODES, ERROR, INFO, WARNING, Code, Finding
from ..gpus.cuda import label
from ..gpus.drivers import driver_key, floor_words
from ..judge.audit import AmdEntryVerdict, LibraryVerdict, Report, TargetReport
from ..judge.filters import Suppression
from ..model import CUBIN, Container, Entry, Library
from .names import readable
from .view import (
    QUIET_INFO,
    code_counts,
    cost_table,
    device_code_bytes,
    finding_text,
    size_text,
    suppressed_errors,
    suppressed_in,
    suppression_groups,
    verdict_text,
)

MARK = {ERROR: "✗", WARNING: "!", INFO: "·"}
GROUPED = {Code.K001, Code.K002}  # one line per group of containers; long libraries are cut at
GROUP_LINES = 5
PASS_LINES = 20  # more passing libraries than this are counted, not listed


def _claimed(t: TargetReport, amd: tuple[str, ...]) -> list[str]:
    """Every claimed architecture: CUDA compute capabilities, then AMD gfx targets."""
    return ([label(c) for c in t.claim.gpus] if t.claim is not None else []) + list(amd)


def _claim_text(t: TargetReport, amd: tuple[str, ...] = (), amd_source: str = "") -> str:
    parts = []
    if t.claim is not None:
        parts.append(f"claim {', '.join(label(c) for c in t.claim.gpus)} (from {t.claim.source})")
    if amd:
        parts.append(f"AMD claim {', '.join(amd)} (from {amd_source or '--amd-arch'})")
    return "; ".join(parts) or "no claim"


def _wrap(words: list[str], width: int) -> list[str]:
    """Space-joined targets wrapped into lines of at most `width` characters (a word longer
    than `width` stands alone): every target is shown, none is cut."""
    lines: list[str] = []
    for w in words:
        if lines and len(lines[-1]) + 1 + len(w) <= width:
            lines[-1] += " " + w
        else:
            lines.append(w)
    return lines


def render_text(
    report: Report,
    *,
    detail: str = "libraries",
    verbose: bool = False,
    ascii_only: bool = False,
    costs: bool = False,
    timings: bool = True,
    width: int = 240,
) -> str:
    """The report for people. By default it fits a screen: one line per library (its targets
    wrapped) and per error or warning finding (at most FLOOD_LINES of one code on one library, the
    rest counted), mangled kernel names shortened, each line cut to `width` characters,
    information findings counted; -v (verbose) lists everything whole."""
    lines: list[str] = []
    for t in report.targets:
        lines.extend(
            _target_text(
                t,
                detail,
                verbose,
                costs=costs,
                timings=timings,
                amd=report.policy.amd_claim,
                amd_source=report.policy.amd_claim_source,
                hidden=suppressed_in(report, t),
                line_width=width,
            )
        )
        lines.append("")
    if not verbose:  # every target's names in one demangler run, not one per target
        lines = [_cut(line, width) for line in readable(lines)]
    if report.policy.config is not None:
        lines.append(f"config: {report.policy.config} [tool.archaudit]")
    if len(report.targets) > 1:
        bad = sum(1 for t in report.targets if any(f.severity == ERROR for f in t.findings) or t.unusable)
        lines.append(f"{MARK[ERROR] if bad else '✓'} {len(report.targets) - bad} of {len(report.targets)} targets pass")
    text = "\n".join(lines).rstrip() + "\n"
    if ascii_only:
        text = text.replace("✓", "OK").replace("✗", "X").replace("·", "-").replace("…", "...")
    return text


def _suppressed_text(hidden: tuple[Suppression, ...], bounded: bool = False) -> list[str]:
    """One line per rule and code that hid findings; bounded, at most SUPPRESSED_LINES."""
    out = []
    groups = suppression_groups(hidden)
    cut = SUPPRESSED_LINES - 1 if bounded and len(groups) > SUPPRESSED_LINES else len(groups)
    for rule, code, n, subjects in groups[:cut]:
        shown = ", ".join(subjects[:3]) + (", ..." if len(subjects) > 3 else "")
        out.append(f"- suppressed by {rule}: {code} x{n} ({shown})")
    if cut < len(groups):
        rest = groups[cut:]
        out.append(
            f"- suppressed: {sum(g.hits for g in rest)} more findings by {len(rest)} more rules and codes "
            f"(-v lists them)"
        )
    return out


FLOOD_LINES = 3  # findings of one code on one library listed by default; the rest counted


def _group_limit(code: Code) -> int:
    return GROUP_LINES if code in GROUPED else FLOOD_LINES


def _cut(line: str, width: int) -> str:
    """A line shortened to `width` characters with an ellipsis (-v and JSON keep it whole)."""
    return line if len(line) <= width else line[: width - 1] + "…"


# The default text fits a screen by construction, whatever the input (issue 27 item 8): at most
# SCREEN_LINES lines per target, each cut to the width (240 at most); what does not fit is folded
# into counted lines that name the flag that shows it. -v, --detail containers/kernels and --costs
# ask for more and get all of it.
SCREEN_LINES = 60
TARGET_LINES = SCREEN_LINES - 3  # one target's block: less its blank line, the config and totals lines
SUPPRESSED_LINES = 4


def _target_text(
    t: TargetReport,
    detail: str,
    verbose: bool,
    *,
    costs: bool = False,
    timings: bool = True,
    amd: tuple[str, ...] = (),
    amd_source: str = "",
    hidden: tuple[Suppression, ...] = (),
    line_width: int = 240,
) -> list[str]:
    """One target in text: its head line, the library table, the passing libraries, the
    findings, the driver floor, notes, suppressions, costs and the summary line."""
    name = t.distribution or t.target
    head = (
        f"{name} ({t.kind}): {len(t.libraries)} librar{'y' if len(t.libraries) == 1 else 'ies'}, "
        f"{sum(1 for v in t.libraries if v.carried)} with device code; {_claim_text(t, amd, amd_source)}; "
        f"{size_text(t.bytes_read)}" + (f" in {t.seconds:.2f} s" if timings else "")
    )
    bounded = not verbose and detail == "libraries"
    tail = _floor_line(t, verbose)
    if t.inventory is not None and verbose:
        tail += [f"  note: {lib.path}: {lib_note}" for lib in t.inventory.libraries for lib_note in lib.notes]
    tail += _suppressed_text(hidden, bounded)
    rows = _library_table(t, detail, hidden, line_width)
    passing = _passing_lines(t, verbose, amd)
    listed, counted = _finding_lines(t, verbose)
    if bounded:
        rows, passing, listed = _fit(t, rows, passing, listed, TARGET_LINES - 2 - len(tail) - len(counted))
    out = [
        head,
        *_origin_text(t),
        *(line for row in rows for line in row),
        *passing,
        *(item[0] for item in listed),
        *counted,
        *tail,
    ]
    if costs:
        out.extend(_costs_text(t))
    out.append(_summary(t, amd, hidden))
    return out


def _origin_text(t: TargetReport) -> list[str]:
    """Which file a remote target judged: its name, URL, sha256 and the bytes fetched of it."""
    o = t.inventory.origin if t.inventory is not None else None
    if o is None:
        return []
    asked = f" for {o.requirement} on {o.platform or 'this platform'}" if o.requirement else ""
    sha = f"sha256 {o.sha256} (as the index lists it)" if o.sha256 else "sha256 not listed by the index"
    return [
        f"  judged {o.file}{asked}, {sha}",
        f"  from {o.url} ({size_text(o.fetched)} of {size_text(o.size)} fetched by range requests)",
    ]


Listed = tuple[str, Code, int]  # a finding line, its code, how many findings it stands for


def _fit(
    t: TargetReport, rows: list[list[str]], passing: list[str], listed: list[Listed], room: int
) -> tuple[list[list[str]], list[str], list[Listed]]:
    """The table's rows, the passing lines and the finding lines cut to `room` lines: passing
    libraries are counted first, then the table and the findings share what is left (the
    findings at least half), each cut ending in a line that counts what it left out."""
    lines = sum(len(r) for r in rows)
    if lines + len(passing) + len(listed) <= room:
        return rows, passing, listed
    n_pass = sum(1 for v in t.libraries if v.status == "pass" and v.carried and v.coverage)
    passing = [f"✓ {n_pass} libraries cover every claimed GPU architecture (-v lists them)"] if passing else []
    room -= len(passing)
    if lines + len(listed) <= room:
        return rows, passing, listed
    table_room = min(lines, max(room - len(listed), room // 2))
    return _cut_rows(t, rows, table_room), passing, _cut_listed(listed, room - table_room)


def _cut_rows(t: TargetReport, rows: list[list[str]], room: int) -> list[list[str]]:
    """The table (its header row first) cut at a row to `room` lines, the last counting the rest."""
    kept: list[list[str]] = []
    used = 1  # the counting line
    for row in rows:
        if used + len(row) > room:
            break
        kept.append(row)
        used += len(row)
    if len(kept) == len(rows):
        return kept
    left = len(rows) - len(kept)
    failing = sum(1 for v in _table_libraries(t)[max(len(kept) - 1, 0) :] if v.status in ("fail", "unverified"))
    return kept + [
        [f"  … {left} more librar{'y' if left == 1 else 'ies'} ({failing} failing or unverified; -v lists them)"]
    ]


def _cut_listed(listed: list[Listed], room: int) -> list[Listed]:
    """The finding lines cut to `room` lines, the last counting the findings left out by code."""
    if len(listed) <= room:
        return listed
    keep = max(room - 1, 0)
    left = _listed_counts(listed[keep:])
    n = sum(left.values())
    worst = ERROR if any(CODES[c].severity == ERROR for c in left) else WARNING
    counted = ", ".join(f"{c} x{k}" for c, k in sorted(left.items()))
    line = f"{MARK[worst]} {n} more finding{'s' * (n != 1)} ({counted}; -v or --format json lists them)"
    return listed[:keep] + [(line, next(iter(left)), 0)]


def _listed_counts(listed: list[Listed]) -> Counter[Code]:
    out: Counter[Code] = Counter()
    for _, code, n in listed:
        out[code] += n
    return out


VERDICT_ROOM = 40  # the verdict width the CARRIES column leaves room for before it wraps
CARRIES_MIN = 24  # the CARRIES column is never narrower than this, however long the paths


def _table_libraries(t: TargetReport) -> list[LibraryVerdict]:
    """The libraries the table lists, a row each: those with device code, or unverified."""
    return [v for v in t.libraries if v.carried or v.relocatable or v.status in ("unverified",)]


def _library_table(
    t: TargetReport, detail: str, hidden: tuple[Suppression, ...], line_width: int = 240
) -> list[list[str]]:
    """LIBRARY / CARRIES / VERDICT for each library with device code (or unverified), a row
    of lines each, the header first. CARRIES lists every target, wrapped onto further lines to
    fit `line_width`."""
    device = _table_libraries(t)
    if not device:
        return []
    width = min(max(len(v.path) for v in device), 60)
    verdicts = [verdict_text(v, hidden) for v in device]
    room = line_width - 6 - width - min(max(len("VERDICT"), *(len(text) for text in verdicts)), VERDICT_ROOM)
    cwidth = min(max(len(" ".join(v.carried)) for v in device), max(CARRIES_MIN, room))
    cwidth = max(cwidth, len("CARRIES"), *(len(w) for v in device for w in v.carried))
    out = [[f"  {'LIBRARY':<{width}}  {'CARRIES':<{cwidth}}  VERDICT"]]
    for v, verdict in zip(device, verdicts):
        carried = _wrap(list(v.carried), cwidth) or ["(relocatable only)" if v.relocatable else "(none read)"]
        row = [f"  {v.path:<{width}}  {carried[0]:<{cwidth}}  {verdict}"]
        row += [f"  {'':<{width}}  {more}" for more in carried[1:]]
        if detail in ("containers", "kernels"):
            row.extend(_containers_text(t, v, detail))
        out.append(row)
    return out


def _passing_lines(t: TargetReport, verbose: bool, amd: tuple[str, ...]) -> list[str]:
    """The libraries that cover every claimed GPU architecture: listed, or counted when many."""
    passing = [v for v in t.libraries if v.status == "pass" and v.carried and v.coverage]
    if not (t.claim is not None or amd) or not passing:
        return []
    if len(passing) > PASS_LINES and not verbose:
        return [f"✓ {len(passing)} libraries cover every claimed GPU architecture"]
    return [
        f"✓ {v.path} covers every claimed GPU architecture ({', '.join(lbl for lbl, _ in v.coverage)})" for v in passing
    ]


def _finding_lines(t: TargetReport, verbose: bool) -> tuple[list[Listed], list[str]]:
    """The findings, one a line (a folded one says how many it stands for): at most
    _group_limit of one code on one library, the rest counted; information counted, not listed,
    unless verbose. Returns the lines listed and the line that counts information."""
    out: list[Listed] = []
    shown = [f for f in t.findings if f.code not in QUIET_INFO or verbose]
    infos: Counter[Code] = Counter()
    if not verbose:  # the default fits a screen: information is counted, not listed
        infos = code_counts(f for f in shown if f.severity == INFO)
        shown = [f for f in shown if f.severity != INFO]
    per_group: Counter[tuple[Code, str]] = Counter()
    more: Counter[tuple[Code, str]] = Counter()
    for f in shown:
        key = (f.code, f.subject)
        per_group[key] += 1
        if per_group[key] > _group_limit(f.code) and not verbose:
            more[key] += f.count
            continue
        out.append((f"{MARK[f.severity]} {f.code} {finding_text(f)}", f.code, f.count))
        if verbose:
            out += [(f"    e.g. {example}", f.code, 0) for example in f.examples]
    for code, subject in [key for key in per_group if key in more]:
        n = more[(code, subject)]
        what = "groups" if code in GROUPED else f"{code} findings"
        out.append(
            (
                f"{MARK[CODES[code].severity]} {code} {subject}: {n} more {what} (-v or --format json lists them)",
                code,
                n,
            )
        )
    counted = []
    if infos:
        listed = ", ".join(f"{c} x{n}" for c, n in sorted(infos.items()))
        counted.append(
            f"· {sum(infos.values())} information finding{'s' * (sum(infos.values()) != 1)} ({listed}; -v lists them)"
        )
    return out, counted


def _floor_line(t: TargetReport, verbose: bool) -> list[str]:
    """The target's driver floor, the most demanding library's D002 (verbose lists them all)."""
    floors = [f for f in t.findings if f.code == Code.D002]
    if not floors or verbose:
        return []
    top = max(floors, key=lambda f: driver_key(str(f.get("driver"))))
    line = f"· D002 driver floor: {floor_words(top)}, from {top.subject})"
    if top.get("scope") == "claimed":
        line += " on the claimed GPUs: the floor to publish"
        every = max((str(f.get("all_code_driver") or f.get("driver")) for f in floors), key=driver_key)
        if driver_key(every) > driver_key(str(top.get("driver"))):
            line += f"; all its code: >= {every}, which no claimed GPU needs"
    return [line]


def _costs_text(t: TargetReport) -> list[str]:
    c = cost_table(t)
    if not c.rows:
        return ["  device code by target: none"]
    width = max(21, *(len(r.target) for r in c.rows))
    out = [f"  {'DEVICE CODE BY TARGET':<{width}}  {'STORED':>10}  {'DECODED':>10}  {'SHARE':>5}  LIBRARIES"]
    out += [f"  {r.target:<{width}}  {r.stored:>10}  {r.decoded:>10}  {r.share:>5}  {r.libraries}" for r in c.rows]
    out.append(f"  {'total':<{width}}  {c.stored:>10}  {c.decoded:>10}")
    for path, by_target in c.per_library:
        parts = ", ".join(
            f"{k} {size_text(s)}" + (f" ({size_text(d)} decoded)" if d != s else "") for k, s, d in by_target
        )
        out.append(f"    {path}: {parts}")
    return out


def _summary(t: TargetReport, amd: tuple[str, ...] = (), hidden: tuple[Suppression, ...] = ()) -> str:
    errors = [f for f in t.findings if f.severity == ERROR]
    if t.unusable:
        return f"✗ {t.target}: unusable input"
    if not errors and suppressed_errors(hidden):
        n = sum(1 for s in hidden if s.finding.severity == ERROR)
        return (
            f"✓ passes only because {n} error finding{'s' * (n != 1)} {'are' if n != 1 else 'is'} "
            f"suppressed ({suppressed_errors(hidden)})"
        )
    if not t.gpu_wheel and not errors:
        return "✓ CPU wheel: no device code to verify"
    if errors:
        by = code_counts(errors)
        counts = ", ".join(f"{c} x{n}" for c, n in sorted(by.items()))
        total = sum(by.values())
        return f"✗ {total} finding{'s' * (total != 1)} ({counts})"
    return _passed_summary(t, amd)


def _passed_summary(t: TargetReport, amd: tuple[str, ...]) -> str:
    """The summary line of a GPU wheel with no error finding: what its device code was verified for."""
    libs = [v for v in t.libraries if v.carried]
    answered = sorted({str(f.get("gpu")) for f in t.findings if f.code == Code.G008})
    if t.claim is None and not amd and answered:
        return f"✓ every library with device code runs on {', '.join(answered)}"
    if t.claim is not None or amd:
        return (
            f"✓ device code covers every claimed GPU architecture ({', '.join(_claimed(t, amd))}) "
            f"in {len(libs)} librar{'y' if len(libs) == 1 else 'ies'}"
        )
    return f"✓ device code verified in {len(libs)} librar{'y' if len(libs) == 1 else 'ies'}"


def _entry_order(kind_target: str) -> tuple[int, int, str]:
    """ "kind:target" keys: SASS before PTX before the rest, then by number (sm_75 before sm_100)."""
    kind, _, target = kind_target.partition(":")
    digits = "".join(ch for ch in target if ch.isdigit())
    return ({"sass": 0, "ptx": 1}.get(kind, 2), int(digits or 0), target)


def _amd_of(v: LibraryVerdict) -> dict[tuple[int, int], AmdEntryVerdict]:
    """The judge's AMD verdicts of a library by (container, entry) index."""
    return {(a.container, a.entry): a for a in v.amd_entries}


def _amd_label(e: Entry, a: AmdEntryVerdict | None) -> str:
    """An AMD entry as ROCm judged it: its code object's own target where that is more specific
    than the bundle id, and whether HIP selects it at all."""
    if a is None:  # no verdict carried: the bundle id, as read
        return e.target
    text = a.judged_target + (f"(id {e.target})" if a.disagrees else "")
    return text if a.hip_selects else f"{text}(never selected: {e.identifier.split('-', 1)[0] or 'id'})"


def _library_of(t: TargetReport, v: LibraryVerdict) -> Library | None:
    """The inventory's record of a verdict's library, where the report carries an inventory."""
    if not t.inventory:
        return None
    return next((lib for lib in t.inventory.libraries if lib.path == v.path), None)


def _container_groups(lib: Library, v: LibraryVerdict) -> dict[tuple[str, tuple[str, ...]], list[Container]]:
    """The library's containers grouped by role and the "kind:target" keys of their entries."""
    amd = _amd_of(v)
    groups: dict[tuple[str, tuple[str, ...]], list[Container]] = {}
    for ci, c in enumerate(lib.containers):
        framed = c.role == CUBIN and any(e.compression == "zstd" for e in c.entries)  # a bare zstd frame
        labels = {
            f"{e.kind}:{_amd_label(e, amd.get((ci, ei))) if e.vendor == 'amd' else e.target}"
            for ei, e in enumerate(c.entries)
        }
        key = (c.role + " zstd" * framed, tuple(sorted(labels, key=_entry_order)))
        groups.setdefault(key, []).append(c)
    return groups


def _kernels_text(cs: list[Container]) -> str:
    """The kernels of a group of containers, counted, the first five demangled."""
    from ..judge.audit import demangle

    names = sorted({k for c in cs for e in c.entries for k in (e.kernels or ())})
    shown = ", ".join(sorted({demangle(n) for n in names})[:5])
    return (
        f"  [{len(names)} kernel{'s' * (len(names) != 1)}{': ' + shown if shown else ''}"
        f"{', ...' if len(names) > 5 else ''}]"
    )


def _containers_text(t: TargetReport, v: LibraryVerdict, detail: str) -> list[str]:
    lib = _library_of(t, v)
    if lib is None:
        return []
    out = []
    for (role, targets), cs in sorted(_container_groups(lib, v).items(), key=lambda kv: (-len(kv[1]), kv[0])):
        label = (
            " ".join(
                t.replace("sass:", "")
                .replace("ptx:sm_", "compute_")
                .replace("code-object:", "")
                .replace("lto:sm_", "lto_")
                for t in targets
            )
            or "(empty)"
        )
        if role.startswith(CUBIN):
            how = (
                ""
                if not role.endswith("zstd")
                else " stored as zstd frames"
                if len(cs) != 1
                else " stored as a zstd frame"
            )
            what = f"whole cubin{'s' * (len(cs) != 1)}{how} outside any container, loaded by the library itself,"
        else:
            what = f"{role} container{'s' * (len(cs) != 1)}"
        line = f"      {len(cs):>5} {what} in {cs[0].section or '(file)'}: {label}"
        if detail == "kernels":
            line += _kernels_text(cs)
        out.append(line)
    return out


# ---- JSON ----


def _finding_json(f: Finding) -> dict[str, object]:
    return {
        "code": f.code,
        "severity": f.severity,
        "subject": f.subject,
        "message": f.message,
        "data": {k: v for k, v in f.data},
        "count": f.count,
        "examples": list(f.examples),
    }


def _suppressed_json(s: Suppression) -> dict[str, object]:
    return {**_finding_json(s.finding), "suppressed_by": s.rule, "target": s.target}


def to_dict(report: Report, *, detail: str = "libraries", timings: bool = True) -> dict[str, Any]:
    return {
        "schema": "archaudit-report",
        "schema_version": report.schema_version,
        "tool_version": report.tool_version,
        "exit_code": report.exit_code,
        "passed": report.passed,
        "config": report.policy.config,
        "targets": [_target_json(t, detail, timings) for t in report.targets],
        "suppressed": [_suppressed_json(s) for s in report.suppressed],
    }


def _entry_json(
    e: Entry, amd: dict[tuple[int, int], AmdEntryVerdict], at: tuple[int, int], detail: str
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "vendor": e.vendor,
        "kind": e.kind,
        "target": e.target,
        "code_version": list(e.code_version),
        "compression": e.compression,
        "stored_size": e.stored_size,
        "size": e.size,
        "offset": e.offset,
        "identifier": e.identifier,
        "debug": e.debug,
    }
    if e.ptx_target:
        d["ptx_target"] = e.ptx_target
    if e.own_target is not None:
        d.update(
            {"own_target": e.own_target, "judged_target": amd[at].judged_target, "hip_selects": amd[at].hip_selects}
        )
    if detail == "kernels":
        d["kernels"] = list(e.kernels) if e.kernels is not None else None
    return d


def _container_list_json(lib: Library, v: LibraryVerdict, detail: str) -> list[dict[str, Any]]:
    amd = _amd_of(v)
    return [
        {
            "role": c.role,
            "section": c.section,
            "offset": c.offset,
            "size": c.size,
            "entries": [_entry_json(e, amd, (ci, ei), detail) for ei, e in enumerate(c.entries)],
        }
        for ci, c in enumerate(lib.containers)
    ]


def _library_json(v: LibraryVerdict, lib: Library | None, detail: str) -> dict[str, Any]:
    d: dict[str, Any] = {
        "path": v.path,
        "status": v.status,
        "carries": list(v.carried),
        "relocatable": list(v.relocatable),
        "coverage": {lbl: how for lbl, how in v.coverage},
        "containers": v.containers,
        "kernels": v.kernels,
        "driver_floor": {"cuda": v.driver_floor[0], "driver": v.driver_floor[1]} if v.driver_floor else None,
        "bytes_by_target": [{"target": k, "stored": s, "decoded": d_} for k, s, d_ in v.bytes_by_target],
    }
    if lib is not None:
        d["size"] = lib.size
        d["format"] = lib.format
        d["needed"] = list(lib.needed)
        if detail in ("containers", "kernels"):
            d["container_list"] = _container_list_json(lib, v, detail)
    return d


def _origin_json(t: TargetReport) -> dict[str, Any]:
    """{"origin": ...} for a target read from an index or URL; {} for one read from a file here."""
    o = t.inventory.origin if t.inventory is not None else None
    if o is None:
        return {}
    return {
        "origin": {
            "file": o.file,
            "url": o.url,
            "sha256": o.sha256 or None,
            "size": o.size,
            "fetched": o.fetched,
            "requirement": o.requirement or None,
            "platform": o.platform or None,
        }
    }


def _claim_json(t: TargetReport) -> dict[str, Any] | None:
    if t.claim is None:
        return None
    return {
        "source": t.claim.source,
        "raw": t.claim.raw,
        "archs": [{"target": a.target.label, "sass": a.sass, "ptx": a.ptx} for a in t.claim.archs],
        "gpus": [label(c) for c in t.claim.gpus],
    }


def _target_json(t: TargetReport, detail: str, timings: bool = True) -> dict[str, Any]:
    inv = {lib.path: lib for lib in t.inventory.libraries} if t.inventory else {}
    libs = [_library_json(v, inv.get(v.path), detail) for v in t.libraries]
    out = {
        "target": t.target,
        "kind": t.kind,
        "distribution": t.distribution,
        "gpu_wheel": t.gpu_wheel,
        "unusable": t.unusable,
        **_origin_json(t),
        "claim": _claim_json(t),
        "bytes_read": t.bytes_read,
        "seconds": round(t.seconds, 3),
        "libraries": libs,
        "findings": [_finding_json(f) for f in t.findings],
        "device_code_bytes": device_code_bytes(t),
    }
    if not timings:
        del out["seconds"]
    return out


def render_json(report: Report, *, detail: str = "libraries", timings: bool = True) -> str:
    return json.dumps(to_dict(report, detail=detail, timings=timings), indent=2, sort_keys=False) + "\n"


__all__ = ["render_json", "render_text", "to_dict"]
