"""What became of a smoke child and of each of its items (Outcome, Death, TaskRun), and what
archaudit reads of a child from outside it: how it ended, its stderr tail, the patterns its output
matched, the GPU device files it holds open (child.py runs them).

Standard library only, as child.py: a probe plugin's child imports it.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from typing import Any

TAIL_CHARS = 2000
LOG_SCAN_BYTES = 64 << 20  # how much of a child's stdout+stderr the watch patterns are searched in


# Device files that show a process opened a GPU (NVIDIA's, AMD's kfd and render nodes).
GPU_DEVICE_PREFIXES = ("/dev/nvidia", "/dev/kfd", "/dev/dri/renderD")


@dataclass(frozen=True)
class Outcome:
    """What became of one item."""

    status: str  # "PASS" | "FAIL" | "SKIP"
    reason: str
    duration: float
    gpu: bool = False  # a SKIP for want of a GPU (or of code for it): FAIL under --require-gpu
    signal: str | None = None
    stderr_tail: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    died: bool = False  # the child died in this item (signal, exit or timeout)
    # GPU device files archaudit saw the child hold open (/proc/PID/fd) when its report arrived
    devices_open: tuple[str, ...] = ()


@dataclass(frozen=True)
class Death:
    """A child that died outside any item (before the first, or between two)."""

    reason: str
    signal: str | None
    stderr_tail: str
    duration: float


@dataclass
class TaskRun:
    outcomes: list[Outcome | None]
    infos: list[dict[str, Any]]
    deaths: list[Death]
    duration: float
    # watch pattern -> the first text it matched in a child's stdout+stderr (read by archaudit)
    log_hits: dict[str, str] = field(default_factory=dict)


def signal_name(returncode: int) -> str | None:
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - TAIL_CHARS))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return text.strip()


def open_devices(pid: int) -> tuple[str, ...]:
    """The GPU device files process pid holds open, read from outside it (/proc/PID/fd)."""
    found: set[str] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return ()
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(GPU_DEVICE_PREFIXES):
            found.add(target)
    return tuple(sorted(found))


def _scan_log(path: str, patterns: tuple[str, ...]) -> dict[str, str]:
    import re

    if not patterns:
        return {}
    try:
        with open(path, "rb") as f:
            text = f.read(LOG_SCAN_BYTES).decode(errors="replace")
    except OSError:
        return {}
    hits = {}
    for pattern in patterns:
        m = re.search(pattern, text)
        if m:
            hits[pattern] = m.group(0)[:500]
    return hits


def _how(returncode: int | None, timed_out: bool, timeout: float) -> tuple[str, str | None]:
    if timed_out:
        return f"no progress for {timeout:g} s: hung, killed with its process group", "SIGKILL"
    sig = signal_name(returncode or 0)
    if sig:
        return f"the child interpreter was killed by {sig}", sig
    return f"the child interpreter exited with status {returncode}", None


__all__ = [
    "Death",
    "GPU_DEVICE_PREFIXES",
    "LOG_SCAN_BYTES",
    "open_devices",
    "Outcome",
    "signal_name",
    "TAIL_CHARS",
    "TaskRun",
]
