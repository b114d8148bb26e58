"""`archaudit index SOURCE... --db FILE`: audit every wheel of directories, indexes or URL lists
into a database (archaudit.index); a rerun skips what is done."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..findings import Code
from . import common

if TYPE_CHECKING:
    from ..index.engine import RunSummary
    from ..index.store import Change
    from ..index.task import WheelResult

FORMATS = ("text", "json")
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def byte_count(text: str) -> int:
    """An argparse type: bytes, with an optional k/M/G/T suffix (powers of ten)."""
    t = text.strip().lower().removesuffix("b")
    unit = t[-1:] if t[-1:] in _UNITS else ""
    digits = t[:-1] if unit else t
    if not digits.isascii() or not digits.isdigit() or int(digits) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte count (e.g. 500M, 2G)")
    return int(digits) * _UNITS[unit]


def configure_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "index",
        help="audit many wheels (directories, simple indexes, URL lists) into a database",
        description="Audit every wheel of the sources once (keyed by sha256) into an SQLite "
        "database; a rerun skips wheels this archaudit judged already. Remote wheels "
        "are read by HTTP range requests, never downloaded whole.",
    )
    p.add_argument(
        "--trace",
        action="append",
        default=[],
        metavar="REPORT.json",
        help="store the trace rows of an 'archaudit smoke --format json' report: the containers a GPU "
        "launched from ('archaudit query dispatch' reads them)",
    )
    p.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="a directory or mirror tree of wheels, a .whl, a PEP 503/691 simple index URL (with "
        "--project), a wheel URL, or a file of wheel URLs",
    )
    p.add_argument("--db", required=True, metavar="FILE", help="the SQLite database (created if missing)")
    g = p.add_argument_group("which wheels")
    g.add_argument(
        "--project",
        action="append",
        default=[],
        metavar="NAME[RANGE]",
        help="a project of an index and its versions, e.g. 'torch>=2.4,<2.8' (repeatable)",
    )
    g.add_argument(
        "--platform",
        action="append",
        default=[],
        metavar="GLOB",
        help="only wheels with a platform tag matching, e.g. 'manylinux*_x86_64' (repeatable)",
    )
    g.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="GLOB",
        help="only wheels with a python tag matching, e.g. cp311 (repeatable)",
    )
    g.add_argument(
        "--libraries",
        default="",
        metavar="GLOB",
        help="read only the libraries whose member path matches (the row records this scope)",
    )
    g.add_argument(
        "--max-bytes",
        type=byte_count,
        default=None,
        metavar="N",
        help="start no new wheel once N bytes have been fetched (e.g. 2G)",
    )
    g = p.add_argument_group("judging")
    g.add_argument(
        "--arch",
        metavar="LIST",
        help="the claim every wheel is judged against (default: the claim a wheel embeds, else none)",
    )
    g.add_argument(
        "--no-kernels", action="store_true", help="do not decode payloads (faster; no kernel names in the database)"
    )
    g = p.add_argument_group("engine")
    g.add_argument(
        "-j",
        "--jobs",
        type=common.positive_int,
        default=None,
        metavar="N",
        help="wheels judged in parallel (default: cores; a process each)",
    )
    g.add_argument(
        "--ray",
        metavar="ADDRESS|auto|local",
        help="run the tasks on a Ray cluster ('auto': the one this machine belongs to; 'local': start one here)",
    )
    common.add_output_options(p, FORMATS)
    p.add_argument("-q", "--quiet", action="store_true", help="no line per wheel on standard error")
    p.set_defaults(execute=execute)


def _line(r: WheelResult) -> str:
    from ..report.view import size_text

    share = f"{100 * r.fetched / r.size:.0f}%" if r.size else "-"
    return (
        f"{r.verdict:8} {r.ref.file}  fetched {size_text(r.fetched)} of {size_text(r.size)} ({share})  {r.seconds:.1f}s"
    )


def _why(failed_by: dict[str, int]) -> str:
    """Why the verdicts failed: each error code with the wheels it failed, and for C001 (no
    claim: every third-party wheel without --arch) what to give."""
    if not failed_by:
        return ""
    from ..findings import CODES

    titles = {str(k): v.title for k, v in CODES.items()}
    parts = [
        f"{code} {titles[code]} in {n}" if code in titles else f"{code} in {n}"
        for code, n in sorted(failed_by.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    hint = "; C001: give the claim (--arch) or ask about GPUs (--gpu T4 --gpu H100)" if Code.C001 in failed_by else ""
    return f" (failed by {', '.join(parts)}{hint}; `archaudit explain CODE`)"


def _store_traces(paths: list[str], db: str) -> int:
    """The trace rows of smoke JSON reports into the database; unusable input is a UsageError."""
    from ..index.store import Store

    store = Store(db)
    added = 0
    try:
        for path in paths:
            try:
                with open(path, "rb") as f:
                    raw = f.read()
                added += store.put_trace(json.loads(raw), raw)
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise UsageError(f"--trace {path}: {type(e).__name__}: {e}") from None
    finally:
        store.close()
    return added


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse what cannot run before anything is read or opened: a run with no source, an
    unparseable --arch, --ray without Ray."""
    from ..claims import parse_claim

    if not args.sources:
        raise UsageError("index: give a SOURCE (a directory, an index, a URL list) or --trace REPORT.json")
    if args.arch:
        try:
            parse_claim(args.arch, "--arch")
        except ValueError as e:
            raise UsageError(f"--arch {args.arch!r}: {e}") from None
    if args.ray is not None and importlib.util.find_spec("ray") is None:
        # before the database is opened: a refused run leaves no file behind
        raise UsageError("--ray needs Ray: install archaudit with its 'ray' extra")
    common.nonempty_targets("index", args.sources, "SOURCE")


def _summary_json(db: str, s: RunSummary, page_errors: list[str], changes: list[Change]) -> str:
    return (
        json.dumps(
            {
                "db": db,
                "listed": s.listed,
                "skipped": s.skipped,
                "judged": s.judged,
                "not_started": s.not_started,
                "verdicts": s.verdicts,
                "wheel_bytes": s.wheel_bytes,
                "fetched_bytes": s.fetched,
                "requests": s.requests,
                "seconds": round(s.seconds, 3),
                "wheels": [{"file": f, "verdict": v, "size": z, "fetched": b} for f, v, z, b in s.results],
                "failed_by": s.failed_by,
                "project_errors": page_errors,
                "changed": [
                    {"file": c.file, "before": c.before, "before_version": c.before_version, "after": c.after}
                    for c in changes
                ],
            },
            indent=2,
        )
        + "\n"
    )


def _summary_text(s: RunSummary, page_errors: list[str], changes: list[Change]) -> str:
    from ..report.view import size_text

    share = f"{100 * s.fetched / s.wheel_bytes:.1f}%" if s.wheel_bytes else "-"
    rate = s.judged / s.seconds if s.seconds else 0.0
    lines = [
        f"{s.listed} wheel(s) listed: {s.judged} judged, {s.skipped} judged before (skipped)"
        + (f", {s.not_started} not started (--max-bytes)" if s.not_started else ""),
        "verdicts: " + (", ".join(f"{k} {v}" for k, v in sorted(s.verdicts.items())) or "none") + _why(s.failed_by),
        f"fetched {size_text(s.fetched)} of {size_text(s.wheel_bytes)} ({share})"
        + (f" in {s.requests} HTTP requests" if s.requests else ""),
        f"{s.seconds:.1f}s, {rate:.2f} wheels/s, {s.wheel_bytes / 1e6 / s.seconds if s.seconds else 0:.0f} "
        f"MB/s of wheels",
    ]
    lines += [f"project page error: {e}" for e in page_errors]
    for c in changes:
        lines.append(f"verdict changed: {c.file}: {c.before} (archaudit {c.before_version}) -> {c.after}")
    return "\n".join(lines) + "\n"


def execute(args: argparse.Namespace) -> int:
    # The index engine (HTTP, SQLite, process pools) is imported only when `index` runs.
    from ..index import engine, sources
    from ..index.store import Store
    from ..index.task import TaskOptions

    if args.trace:
        added = _store_traces(args.trace, args.db)
        if not args.sources:
            print(f"{added} dispatch row(s) stored from {len(args.trace)} smoke report(s)", file=sys.stderr)
            return 0
    _check_arguments(args)
    filters = sources.Filters(tuple(args.platform), tuple(args.python))
    page_errors: list[str] = []
    refs = sources.resolve(args.sources, args.project, filters, page_errors)
    opts = TaskOptions(claim=args.arch, decode=not args.no_kernels, scope=args.libraries)
    jobs = args.jobs or (os.cpu_count() or 1)
    store = Store(args.db)
    quiet = args.quiet

    def said(r: WheelResult) -> None:
        if not quiet:
            print(_line(r), file=sys.stderr, flush=True)

    try:
        s = engine.run(refs, store, opts, jobs=jobs, ray=args.ray, max_bytes=args.max_bytes, on_result=said)
        changes = list(store.changes)
    finally:
        store.close()
    if args.format == "json":
        text = _summary_json(args.db, s, page_errors, changes)
    else:
        text = _summary_text(s, page_errors, changes)
    common.write(common.terminal_safe(text, args.format or "text"), args.output)
    return 1 if s.verdicts.get("fail") or s.verdicts.get("unusable") or page_errors else 0


__all__ = ["byte_count", "configure_parser", "execute"]
