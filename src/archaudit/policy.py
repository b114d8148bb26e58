"""What the check is asked to enforce beyond the claim: switches, the driver, named GPUs,
filters. Plain frozen data, built by the CLI (or a caller of the core) and read by the rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from .filters import IgnoreRule


class NvidiaGpu(NamedTuple):
    """A --gpu question about an NVIDIA GPU."""

    name: str  # as displayed: the catalog name, or what the user typed
    cc: tuple[int, int]  # compute capability


class AmdGpu(NamedTuple):
    """A --gpu question about an AMD GPU."""

    name: str
    target: str  # gfx target ID


@dataclass(frozen=True, slots=True)
class Policy:
    exact: bool = False
    require_ptx: Literal["newest"] | None = None
    strict: bool = False
    strict_kernels: bool = False
    driver: str | None = None
    driver_os: Literal["linux", "windows"] = "linux"
    gpus: tuple[NvidiaGpu, ...] = ()
    amd_gpus: tuple[AmdGpu, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    ignore_rules: tuple[IgnoreRule, ...] = ()
    require_device_code: tuple[str, ...] = ()  # globs of libraries that must carry device code
    amd_claim: tuple[str, ...] = ()
    amd_claim_source: str = ""
