"""The trace probe's raw records: what each traced process wrote (launches per kernel and result,
the modules the driver loaded, asynchronous errors), read and bounded here, judged in
trace_judge.py.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

MAX_RECORD_BYTES = 64 << 20  # one process's records file; a larger one is refused, not read


@dataclass(frozen=True)
class Launch:
    """Launches of one kernel with one result, summed over the traced processes."""

    kernel: str
    code: int
    count: int
    layer: str  # "driver" | "runtime"
    modules: tuple[str, ...]  # sha256 of the images loaded in its context that define the kernel


@dataclass(frozen=True)
class Module:
    sha256: str
    size: int


@dataclass(frozen=True)
class AsyncError:
    api: str
    code: int
    after: str  # the kernel launched last in that context


@dataclass(frozen=True)
class Trace:
    """What the tracers of every traced process wrote, read and checked for shape here."""

    launches: tuple[Launch, ...]
    modules: tuple[Module, ...]
    async_errors: tuple[AsyncError, ...]
    mapped: tuple[str, ...]
    processes: int
    problems: tuple[str, ...]  # files that are not records, tracers that did not start
    dropped: int = 0
    cupti: str = ""


def _launches(raw: Any) -> list[Launch]:
    out = []
    for r in raw if isinstance(raw, list) else ():
        if not isinstance(r, dict):
            raise ValueError("a launch record is not an object")
        mods = r.get("modules") or []
        out.append(
            Launch(
                str(r["kernel"]),
                int(r["code"]),
                int(r["count"]),
                str(r.get("layer", "driver")),
                tuple(str(m) for m in mods),
            )
        )
    return out


def parse_records(raw: dict[str, Any]) -> tuple[list[Launch], list[Module], list[AsyncError], list[str]]:
    """One process's records; raises ValueError (KeyError, TypeError) on anything else."""
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    mods = [Module(str(m["sha256"]), int(m["size"])) for m in raw.get("modules") or ()]
    errs = [AsyncError(str(e["api"]), int(e["code"]), str(e.get("after", ""))) for e in raw.get("async_errors") or ()]
    mapped = [str(p) for p in raw.get("mapped") or () if isinstance(p, str)]
    return _launches(raw.get("launches")), mods, errs, mapped


def read_trace(directory: str) -> Trace:
    """Every <pid>.json (records) and <pid>.error (a tracer that did not start) of the directory."""
    launches: Counter[tuple[str, int, str, tuple[str, ...]]] = Counter()
    modules: dict[str, Module] = {}
    errors: list[AsyncError] = []
    mapped: list[str] = []
    problems: list[str] = []
    processes = dropped = 0
    cupti = ""
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith(".error"):
            with open(path, errors="replace") as f:
                problems.append(f"process {name[:-6]}: the tracer did not start: {f.read(2000)}")
            continue
        if not name.endswith(".json"):
            continue
        try:
            if os.path.getsize(path) > MAX_RECORD_BYTES:
                raise ValueError(f"{os.path.getsize(path)} bytes, more than the {MAX_RECORD_BYTES}-byte bound")
            with open(path) as f:
                raw = json.load(f)
            ls, ms, es, mp = parse_records(raw)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"process {name[:-5]}: its records cannot be read: {type(exc).__name__}: {exc}")
            continue
        processes += 1
        dropped += int(raw.get("dropped") or 0)
        cupti = cupti or str(raw.get("cupti") or "")
        problems += [f"process {name[:-5]}: the tracer's callback raised {e}" for e in raw.get("callback_errors") or ()]
        for launch in ls:
            launches[(launch.kernel, launch.code, launch.layer, launch.modules)] += launch.count
        for m in ms:
            modules[m.sha256] = m
        errors += es
        mapped += [p for p in mp if p not in mapped]
    return Trace(
        tuple(Launch(k, c, n, layer, mods) for (k, c, layer, mods), n in sorted(launches.items())),
        tuple(modules.values()),
        tuple(errors),
        tuple(mapped),
        processes,
        tuple(problems),
        dropped,
        cupti,
    )


__all__ = ["AsyncError", "Launch", "MAX_RECORD_BYTES", "Module", "parse_records", "read_trace", "Trace"]
