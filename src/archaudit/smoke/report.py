"""The smoke report: frozen rows, as plain data for the renderers."""

from __future__ import annotations

from dataclasses import dataclass

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass(frozen=True)
class Row:
    probe: str  # "load", "device-load", "model-torch", ...
    subject: str  # a library (relative to site-packages), or a model step
    status: str  # PASS | FAIL | SKIP
    reason: str
    duration: float = 0.0  # seconds the step took (for a death: until it died)
    signal: str | None = None  # "SIGSEGV", "SIGKILL" (a hang killed at the timeout), ...
    stderr_tail: str = ""  # the end of the child's stdout+stderr, for a FAIL
    details: tuple[tuple[str, object], ...] = ()  # probe-specific facts (JSON-able values)


def is_dispatch(row: Row) -> bool:
    """A trace row that says which containers of a library served the GPU (smoke/trace.py): every
    format shows it, those that show only failures as a notice."""
    return row.probe == "trace" and row.status == PASS and any(k == "containers" for k, _ in row.details)


@dataclass(frozen=True)
class SmokeReport:
    target: str  # the wheel path, or the installed distribution's name
    distribution: str
    version: str
    environment: str  # "fresh venv (uv)", "installed (current environment)", ...
    python: str  # the interpreter version the probes ran under
    gpus: tuple[str, ...]  # "GPU0 NVIDIA H200 (sm_90)"
    gpu_error: str | None  # why there is no GPU, where there is none
    driver: str | None
    require_gpu: bool
    timeout: float
    rows: tuple[Row, ...]
    # ("seconds", s), ("archaudit_max_rss_mb", n), ("children_max_rss_mb", n): what the run cost
    resources: tuple[tuple[str, object], ...] = ()
    # (name, version, source) of every distribution the fresh environment got; empty for --installed
    installed: tuple[tuple[str, str, str], ...] = ()
    install_policy: str = ""  # binary wheels only, or sdists allowed (--allow-source-dependencies)

    def count(self, status: str) -> int:
        return sum(1 for r in self.rows if r.status == status)

    @property
    def failed(self) -> bool:
        return self.count(FAIL) > 0

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


__all__ = ["is_dispatch", "Row", "SmokeReport"]
