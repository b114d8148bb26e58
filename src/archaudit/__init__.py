"""archaudit: prove a GPU wheel carries device code for every GPU it claims.

The Python API is what `archaudit check` does, as one call::

    from archaudit import check

    report = check(["dist/mypkg-1.5-cp312-cp312-manylinux_2_28_x86_64.whl"], arch="80;90", gpus=["T4"])
    report.passed          # True when the command would exit 0
    report.findings        # every Finding: .code, .severity, .subject, .message

`check` takes the command line's spellings (an `--arch` list in any of its styles, `--gpu`
names, `--select`/`--ignore` codes) and validates them the same way, then returns the same
frozen `Report` the command renders, so a Python caller and a CLI user get the same verdict.
`Claim`, `Policy` and `Report` are the frozen records it speaks in; a bad argument raises
`ArchauditError` (the command's exit 2), never a half-judged report.

`import archaudit` stays cheap: the readers and rules load on the first call or attribute
that needs them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Literal

__version__ = "0.1.0"  # the one place the version is written; pyproject.toml reads it from here

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from .claims import Claim
    from .errors import ArchauditError
    from .findings import Finding
    from .judge.audit import Report
    from .judge.policy import Policy

StrPath = str | os.PathLike[str]
ArchStyle = Literal["auto", "cmake", "torch", "nvcc", "list"]

# Public name -> the module that defines it, imported on first use (PEP 562).
_LAZY = {
    "Claim": "claims",
    "Policy": "judge.policy",
    "Report": "judge.audit",
    "Finding": "findings",
    "ArchauditError": "errors",
}


def check(
    paths: StrPath | Iterable[StrPath],
    *,
    arch: str | Sequence[str] | Claim | None = None,
    arch_style: ArchStyle | None = None,
    amd_arch: str | Sequence[str] | None = None,
    cuda_version: str | None = None,
    gpus: Sequence[str] = (),
    exact: bool | None = None,
    require_ptx: Literal["newest"] | None = None,
    strict: bool | None = None,
    strict_kernels: bool | None = None,
    driver: str | None = None,
    driver_os: Literal["linux", "windows"] | None = None,
    select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    policy: Policy | None = None,
    config: StrPath | None = None,
    jobs: int | None = None,
    fast: bool = False,
    max_payload: int | None = None,
    platform: str | None = None,
    index_url: str | None = None,
) -> Report:
    """Audit wheels, directories, device-code files or installed distributions; return the Report.

    Each keyword is the `archaudit check` flag of the same name and takes the same text:
    `arch="80;90-real"`, `"8.0 9.0+PTX"`, `"-gencode arch=compute_90,code=sm_90"` or a list
    of those tokens (or a `Claim` built by hand); `gpus=["T4", "H100", "sm_87", "gfx942"]`;
    `select`/`ignore` code lists such as `["G002", "K"]`. `None` (the default) means "not
    given": the value then comes from `config`, a pyproject.toml whose `[tool.archaudit]`
    table is read as the command reads it, else the command's default. No pyproject.toml is
    searched for unless `config` names one, so a library call does not depend on the
    working directory. `policy` replaces every policy keyword with a `Policy` built by hand.
    A path may also be a wheel URL or a requirement (`"torch==2.5.1"`), read by HTTP range
    requests: the wheel for `platform` (a pip platform tag, default this machine's) on the simple
    index `index_url` (default $PIP_INDEX_URL, else PyPI); the report's target names the file.

    Nothing is raised for what a wheel holds: unreadable or unverifiable input is a finding
    (`report.exit_code` 2 or 1), as it is for the command. A bad argument raises
    `ArchauditError` with the message the command prints.
    """
    from collections.abc import Sequence
    from dataclasses import replace

    from . import config as config_file, core
    from .cli.common import fetch_for
    from .cli.settings import check_args, check_settings
    from .errors import UsageError

    targets = [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else [os.fspath(p) for p in paths]
    if not targets:
        raise UsageError("check: give at least one path")
    args = check_args()  # every flag not given, as the command starts
    given_claim = arch if not isinstance(arch, (str, Sequence)) else None
    args.arch = _arch_text(arch)
    args.amd_arch = amd_arch if amd_arch is None or isinstance(amd_arch, str) else ";".join(amd_arch)
    args.arch_style, args.cuda_version = arch_style, cuda_version
    args.gpu = list(gpus) or None
    args.exact, args.require_ptx, args.strict, args.strict_kernels = exact, require_ptx, strict, strict_kernels
    args.driver, args.driver_os = driver, driver_os
    args.select, args.ignore = list(select) or None, list(ignore) or None
    args.jobs, args.fast = jobs, fast
    if max_payload is not None:
        args.max_payload = max_payload
    if policy is not None:
        _refuse_beside_policy(
            gpus=gpus,
            exact=exact,
            require_ptx=require_ptx,
            strict=strict,
            strict_kernels=strict_kernels,
            driver=driver,
            driver_os=driver_os,
            select=select,
            ignore=ignore,
            amd_arch=amd_arch,
        )
    cfg = config_file.load(os.fspath(config), discover=False) if config is not None else config_file.Config()
    s = check_settings(args, cfg, targets)
    claim = given_claim if given_claim is not None else s.claim
    if claim is not None and claim.source == "--arch":
        claim = replace(claim, source="arch=")  # what the report says the claim came from
    return core.check(
        s.targets,
        claim,
        policy if policy is not None else s.policy,
        jobs=s.jobs,
        max_payload=s.max_payload,
        decode=s.decode,
        fetch=fetch_for(s.targets, platform=platform, index_url=index_url, decode=s.decode, max_payload=s.max_payload),
    )


def _arch_text(arch: str | Sequence[str] | Claim | None) -> str | None:
    """The --arch text of the arch keyword: a string as it is, a list of tokens joined; None for
    a Claim built by hand (passed apart) or none."""
    from collections.abc import Sequence

    if isinstance(arch, str):
        return arch
    if isinstance(arch, Sequence):
        return " ".join(arch)
    return None


def _refuse_beside_policy(**keywords: object) -> None:
    """policy= replaces every policy keyword: any of them given beside it is a usage error."""
    from .errors import UsageError

    given = [name for name, value in keywords.items() if value]
    if given:
        raise UsageError(f"check: policy= replaces {', '.join(given)}; give one or the other")


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)


__all__ = ["check", "Claim", "Policy", "Report", "Finding", "ArchauditError", "__version__"]
