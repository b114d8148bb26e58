"""What every probe gets (ProbeContext): the environment, the distribution, the GPUs, the limits.

Its own module so that a plugin's child (worker.py's plugin task) can rebuild a context
without importing the probes, which import the worker: no cycle between them.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name

from ..model import Library
from ..read.artifacts import is_audited_file
from . import child
from .report import FAIL, SKIP, Row

ET_DYN = 3


def _elf_type(path: str) -> int | None:
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return None
    if head[:4] != b"\x7fELF" or len(head) < 18:
        return None
    return int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")


@dataclass
class ProbeContext:
    """What every probe gets: the environment, the distribution, the GPUs, the limits."""

    python: str  # interpreter of the environment under test
    distribution: str
    version: str
    requires: tuple[str, ...]
    location: str  # site-packages directory the distribution's paths are relative to
    files: tuple[str, ...]  # absolute paths of the distribution's files
    gpus: tuple[dict[str, Any], ...]  # {"ordinal", "name", "cc", "sm"} per visible device
    gpu_error: str | None  # why there is no GPU, where there is none
    require_gpu: bool
    timeout: float
    workdir: str  # scratch directory, removed after the run
    child_env: dict[str, str]  # environment for child interpreters
    selected: tuple[str, ...] = ()  # probes named on the command line (--probe)
    driver: str | None = None  # the CUDA version the driver reports ("13.0")
    sys_path: tuple[str, ...] = ()  # the environment's import path, for children run with -I -S
    run_command: str | None = None  # the user's own workload for the trace probe (--run)
    _scans: dict[str, Library] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- the distribution --------------------------------------------------------------
    def display(self, path: str) -> str:
        try:
            rel = os.path.relpath(path, self.location)
        except ValueError:
            return path
        return path if rel.startswith("..") else rel

    def shared_libraries(self) -> list[str]:
        """The distribution's ELF shared objects, chosen by content (as check chooses), not by name."""
        return [f for f in self.device_code_files() if _elf_type(f) == ET_DYN]

    def device_code_files(self) -> list[str]:
        """Every file check would read: chosen by its magic (ELF, fatbin, ...) or a library name."""
        seen: set[str] = set()
        out = []
        for f in self.files:
            if f not in seen and os.path.isfile(f) and is_audited_file(f):
                seen.add(f)
                out.append(f)
        return sorted(out, key=self.display)

    def depends_on(self, name: str) -> bool:
        """True when the target is `name` or declares it (unconditionally or under any marker)."""
        norm = _normalise(name)
        if _normalise(self.distribution) == norm:
            return True
        return any(_normalise(re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0]) == norm for r in self.requires)

    def wanted(self, probe: str, framework: str) -> bool:
        """A framework probe runs for a target that is or needs the framework, or on request."""
        return probe in self.selected or self.depends_on(framework)

    def not_wanted(self, probe: str, framework: str) -> Row:
        return Row(
            probe,
            self.distribution,
            SKIP,
            f"{self.distribution} neither is nor depends on {framework} (--probe {probe} runs it anyway)",
        )

    def scan(self, path: str) -> Library:
        """The inventory of one file (payloads decoded, so kernels are named), computed once."""
        with self._lock:
            if path not in self._scans:
                from archaudit.read.library import scan_file

                self._scans[path] = scan_file(path, decode=True)
            return self._scans[path]

    # -- children ----------------------------------------------------------------------
    def run_task(
        self,
        task: str,
        items: list[Any],
        params: dict[str, Any] | None = None,
        *,
        resume: bool = True,
        extra_env: dict[str, str] | None = None,
        watch: tuple[str, ...] = (),
    ) -> child.TaskRun:
        env = dict(self.child_env)
        env.update(extra_env or {})
        return child.run_task(
            self.python,
            task,
            items,
            params,
            env=env,
            cwd=self.workdir,
            timeout=self.timeout,
            resume=resume,
            sys_path=self.sys_path,
            watch=watch,
        )

    def row(self, probe: str, subject: str, outcome: child.Outcome | None, **details: object) -> Row:
        """A report row from a trusted item's outcome, or from a death archaudit saw; a GPU skip
        is a FAIL under --require-gpu. An untrusted child's observation is never a row by itself."""
        if outcome is None:
            return Row(probe, subject, FAIL, "the child never reported this item", 0.0)
        if outcome.status == child.OBS:
            return Row(
                probe,
                subject,
                FAIL,
                "an observation reached the report without a judgement (a bug in the probe)",
                outcome.duration,
            )
        status, reason = outcome.status, outcome.reason
        if status == SKIP and outcome.gpu and self.require_gpu:
            status, reason = FAIL, f"--require-gpu: this must run on a GPU, but {reason}"
        merged = {k: v for k, v in {**outcome.details, **details}.items() if k != "traceback"}
        return Row(
            probe,
            subject,
            status,
            reason,
            outcome.duration,
            outcome.signal,
            outcome.stderr_tail or str(outcome.details.get("traceback", "")),
            tuple(sorted(merged.items())),
        )

    def verdict(
        self,
        probe: str,
        subject: str,
        outcome: child.Outcome | None,
        status: str,
        reason: str,
        *,
        gpu: bool = False,
        **details: object,
    ) -> Row:
        """A row decided here about an item an untrusted child observed (its duration, its stderr tail)."""
        if status == SKIP and gpu and self.require_gpu:
            status, reason = FAIL, f"--require-gpu: this must run on a GPU, but {reason}"
        facts = outcome.details if outcome is not None else {}
        tail = (outcome.stderr_tail if outcome is not None else "") or str(facts.get("traceback", ""))
        kept = {k: v for k, v in details.items() if v is not None}
        return Row(
            probe,
            subject,
            status,
            reason,
            outcome.duration if outcome is not None else 0.0,
            outcome.signal if outcome is not None else None,
            tail if status == FAIL else "",
            tuple(sorted(kept.items())),
        )

    def gpu_skip(self, probe: str, subject: str, reason: str) -> Row:
        return self.row(probe, subject, child.Outcome(SKIP, reason, 0.0, gpu=True))

    def death_rows(self, probe: str, run: child.TaskRun, subject: str) -> list[Row]:
        return [Row(probe, subject, FAIL, d.reason, d.duration, d.signal, d.stderr_tail) for d in run.deaths]


def _normalise(name: str) -> str:
    return canonicalize_name(name).strip()


__all__ = ["ProbeContext"]
