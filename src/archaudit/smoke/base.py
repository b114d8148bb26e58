"""What every built-in probe shares: the Probe base and protocol, and the judging of what an
untrusted child observed (did it hold a GPU, where did its output live), decided here, in
archaudit's process.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from typing import Any, Protocol

from . import child, reference
from .context import ProbeContext
from .report import Row


class ProbeLike(Protocol):
    """What the runner asks of a probe: a name, a description, and rows for a context."""

    name: str
    description: str

    def run(self, ctx: ProbeContext) -> Iterable[Row]: ...


class Probe:
    """Base class for probes (plugins need not inherit from it)."""

    name = "probe"
    description = ""

    def run(self, ctx: ProbeContext) -> Iterable[Row]:  # pragma: no cover - interface
        raise NotImplementedError


# ---------------------------------------------------------------------------------------
# judging observations: every verdict below is decided here, in archaudit's process
# ---------------------------------------------------------------------------------------
def holds_gpu(outcome: child.Outcome) -> bool:
    """archaudit saw the child hold a GPU device file open as its report arrived."""
    return any(d.startswith(child.GPU_DEVICE_PREFIXES) for d in outcome.devices_open)


def gpu_name(ctx: ProbeContext) -> str:
    g = ctx.gpus[0]
    return f"{g['name']} ({g['sm']})"


def write_data(ctx: ProbeContext, name: str, data: dict[str, Any]) -> str:
    """The inputs and weights archaudit drew, for the child to read (JSON numbers)."""
    import json

    def plain(v: Any) -> Any:
        if isinstance(v, reference.Tensor):
            return v.as_json()
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    fd, path = tempfile.mkstemp(prefix=f"{name}-", suffix=".json", dir=ctx.workdir)
    with os.fdopen(fd, "w") as f:
        json.dump(plain(data), f)
    return path


def sm_number(sm: str) -> int:
    digits = "".join(ch for ch in sm if ch.isdigit())
    return int(digits) if digits else 0


def no_gpu_here(ctx: ProbeContext) -> str:
    return f"archaudit's own driver query found no GPU ({ctx.gpu_error or 'none'}), so nothing can have run on one here"


def ran_on_gpu(out: child.Outcome, d: dict[str, Any]) -> str:
    """'' when archaudit saw the child hold a GPU open and the output lived on one; else why not."""
    if not holds_gpu(out):
        return (
            "the child held no GPU device file open when it reported (archaudit read its /proc/PID/fd): "
            "it did not run on a GPU"
        )
    device = str(d.get("device", ""))
    if not device.startswith(("cuda", "gpu", "rocm")):
        return f"its output lived on {device or 'no device'}, not on the GPU"
    return ""


__all__ = ["gpu_name", "holds_gpu", "no_gpu_here", "Probe", "ProbeLike", "ran_on_gpu", "sm_number", "write_data"]
