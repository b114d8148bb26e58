"""What the check is asked to enforce beyond the claim: switches, the driver, named GPUs,
filters. Plain frozen data, built by the CLI (or a caller of the core) and read by the rules."""

from __future__ import annotations

from dataclasses import dataclass

from .filters import IgnoreRule


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
