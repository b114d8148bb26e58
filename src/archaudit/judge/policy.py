"""What the check is asked to enforce beyond the claim: switches, the driver, named GPUs,
filters. Plain frozen data, built by the CLI (or a caller of the core) and read by the rules."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ..claims import Claim
from ..gpus.catalog import AmdGpu, NvidiaGpu
from .filters import IgnoreRule
from .names import demangle


class DataMember(NamedTuple):
    """A [[tool.archaudit.data]] entry: wheel members that are data, never loaded as libraries."""

    member: str  # a glob over member paths (a nested wheel: the path before its '!')
    reason: str

    def matches(self, library_path: str) -> bool:
        return fnmatch.fnmatch(library_path, self.member) or fnmatch.fnmatch(library_path.split("!")[0], self.member)


def _glob_matches(library_path: str, glob: str) -> bool:
    """A library glob matches the library's path, its member path (before a nested wheel's '!')
    or its file name, as ignore-library's globs do."""
    return (
        fnmatch.fnmatch(library_path, glob)
        or fnmatch.fnmatch(library_path.split("!")[0], glob)
        or fnmatch.fnmatch(library_path.rsplit("/", 1)[-1], glob)
    )


class LibraryClaim(NamedTuple):
    """A [[tool.archaudit.library]] entry: the project's host code gates a library to its own
    architectures, recorded where it does so (``reason``); the library is judged by this claim
    instead of the wheel's. With ``kernels``, only the kernels of the library those globs name are
    gated (the host launches them only on ``claim``); the rest keep the library's claim."""

    path: str  # a glob over library paths (or their file names)
    claim: Claim
    reason: str
    kernels: tuple[str, ...] = ()  # globs over kernel names; empty: the whole library

    def matches(self, library_path: str) -> bool:
        return _glob_matches(library_path, self.path)

    def names_kernel(self, kernel: str) -> bool:
        """Whether a kernel glob matches the kernel: its qualified name without parameters
        (``vllm::fused_a_gemm_kernel``) or its mangled name."""
        short = demangle(kernel)
        return any(fnmatch.fnmatchcase(short, g) or fnmatch.fnmatchcase(kernel, g) for g in self.kernels)

    def describe(self) -> str:
        scope = f" kernels {', '.join(self.kernels)}" if self.kernels else ""
        return f"library {self.path}{scope} arch {self.claim.raw} ({self.reason})"


class LibraryGroup(NamedTuple):
    """A [[tool.archaudit.library-group]] entry: alternative libraries of which the host loads one
    (bitsandbytes' libbitsandbytes_cuda118.so, _cuda121.so, ...). A claimed GPU is met when some
    member runs it; a member's failure on a GPU another member runs is the host's choice."""

    paths: tuple[str, ...]  # globs: a library matching any is a member
    reason: str

    def matches(self, library_path: str) -> bool:
        return any(_glob_matches(library_path, g) for g in self.paths)

    def describe(self) -> str:
        return f"library-group {', '.join(self.paths)} ({self.reason})"


@dataclass(frozen=True, slots=True)
class Policy:
    exact: bool = False
    require_ptx: Literal["newest"] | None = None
    strict: bool = False
    strict_kernels: bool = False
    driver: str | None = None
    driver_os: Literal["linux", "windows"] = "linux"
    # --driver-os or the config's driver-os was given; otherwise a wheel's platform tag decides
    # per target (win_* wheels are judged against Windows drivers), see for_target.
    driver_os_given: bool = False
    gpus: tuple[NvidiaGpu, ...] = ()
    amd_gpus: tuple[AmdGpu, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    ignore_rules: tuple[IgnoreRule, ...] = ()
    require_device_code: tuple[str, ...] = ()  # globs of libraries that must carry device code
    amd_claim: tuple[str, ...] = ()
    amd_claim_source: str = ""
    data: tuple[DataMember, ...] = ()  # members left out of the verdict (X002), with the reason
    # [[tool.archaudit.library]]: libraries the host gates to architectures of their own
    library_claims: tuple[LibraryClaim, ...] = ()
    # [[tool.archaudit.library-group]]: alternative libraries of which the host loads one
    library_groups: tuple[LibraryGroup, ...] = ()
    config: str | None = None  # the pyproject.toml read ([tool.archaudit]), named in every report
    # The platform tags of the wheel judged (for_target), which say where it installs at all: a
    # Jetson runs only linux aarch64 wheels. Empty for anything but a wheel.
    platforms: tuple[str, ...] = ()


def wheel_driver_os(target: str) -> Literal["linux", "windows"] | None:
    """The driver OS a wheel's file name says it is for: "windows" when every platform tag is
    a Windows one (win_amd64, win_arm64, win32), "linux" when every one is a Linux one
    (manylinux*, musllinux*, linux_*); None otherwise (macOS, any, a name that is not a
    wheel's, a mix)."""
    name = target.replace("\\", "/").rsplit("/", 1)[-1]
    try:
        tags = {t.platform for t in parse_wheel_filename(name)[3]}
    except (InvalidWheelFilename, ValueError):
        return None
    if all(t.startswith("win") for t in tags):
        return "windows"
    if all(t.startswith(("manylinux", "musllinux", "linux")) for t in tags):
        return "linux"
    return None


def package_name(target: str, distribution: str = "") -> str:
    """The distribution name of a target: of an installed distribution ("name-version"), or
    of a wheel's file name; "" when it is neither."""
    if distribution:
        return distribution.rsplit("-", 1)[0]
    name = target.replace("\\", "/").rsplit("/", 1)[-1]
    try:
        return str(parse_wheel_filename(name)[0])
    except (InvalidWheelFilename, ValueError):
        return ""


def wheel_platforms(target: str) -> tuple[str, ...]:
    """The platform tags of a wheel's file name (``manylinux_2_28_x86_64``, ``win_amd64``,
    ``any``), sorted; () for a name that is not a wheel's."""
    name = target.replace("\\", "/").rsplit("/", 1)[-1]
    try:
        return tuple(sorted({t.platform for t in parse_wheel_filename(name)[3]}))
    except (InvalidWheelFilename, ValueError):
        return ()


def arm_linux(platforms: tuple[str, ...]) -> bool:
    """Whether a wheel of these platform tags installs on Linux on aarch64 (a Jetson's): a
    ``linux``/``manylinux``/``musllinux`` tag for aarch64, or ``any``."""
    return any(
        p == "any" or (p.startswith(("linux", "manylinux", "musllinux")) and p.endswith("aarch64")) for p in platforms
    )


def for_target(policy: Policy, target: str, kind: str) -> Policy:
    """The policy one target is judged by: a wheel's platform tags (where it installs); without
    an explicit driver OS, a wheel's platform tag chooses the driver table (a win_amd64 wheel
    runs on Windows drivers)."""
    if kind != "wheel":
        return policy
    platforms = wheel_platforms(target)
    if platforms != policy.platforms:
        policy = replace(policy, platforms=platforms)
    if policy.driver_os_given:
        return policy
    os_name = wheel_driver_os(target)
    if os_name is None or os_name == policy.driver_os:
        return policy
    return replace(policy, driver_os=os_name)


def library_claim(policy: Policy, library_path: str) -> LibraryClaim | None:
    """The first [[tool.archaudit.library]] entry for a whole library whose glob matches it, if any."""
    return next((c for c in policy.library_claims if not c.kernels and c.matches(library_path)), None)


def kernel_claim(policy: Policy, library_path: str, kernel: str) -> LibraryClaim | None:
    """The first [[tool.archaudit.library]] entry with ``kernels`` that names this kernel of this
    library, if any: the architectures the project's host code launches it on."""
    return next(
        (c for c in policy.library_claims if c.kernels and c.matches(library_path) and c.names_kernel(kernel)), None
    )


__all__ = [
    "AmdGpu",
    "arm_linux",
    "DataMember",
    "for_target",
    "kernel_claim",
    "library_claim",
    "LibraryClaim",
    "LibraryGroup",
    "NvidiaGpu",
    "package_name",
    "Policy",
    "wheel_driver_os",
    "wheel_platforms",
]
