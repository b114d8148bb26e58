"""One typed settings object per command: flags over [tool.archaudit] over defaults, validated once.

The command line parses flags into an argparse namespace; this module merges it with the
configuration file (archaudit.config) into frozen records, so nothing downstream reads a flag
or a config key by name. Every bad value is a UsageError (exit 2) naming the flag or key.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from ..claims import Claim, merge_claims, parse_claim
from ..config import DETAILS, FORMATS, Config, Detail, Format
from ..errors import UsageError
from ..gpus import amd as gfx, cuda as arch
from ..gpus.catalog import is_gfx_name, resolve
from ..gpus.drivers import driver_at_least
from ..judge.filters import IgnoreRule, parse_patterns
from ..judge.policy import DataMember, LibraryClaim, LibraryGroup, Policy
from ..read.fatbin import DEFAULT_MAX_PAYLOAD
from .common import nonempty_targets


@dataclass(frozen=True, slots=True)
class Output:
    """Where and how a report is written (the options every report-writing command shares)."""

    format: Format = "text"
    path: str | None = None  # None: standard output
    docs_url: str | None = None  # where docs/codes.md is published: SARIF rules' helpUri


@dataclass(frozen=True, slots=True)
class CheckSettings:
    """Everything `archaudit check` needs, merged and validated."""

    targets: tuple[str, ...]
    claim: Claim | None
    policy: Policy
    output: Output
    detail: Detail = "libraries"
    verbose: bool = False
    costs: bool = False
    timings: bool = True
    progress: bool = False
    jobs: int | None = None
    max_payload: int = DEFAULT_MAX_PAYLOAD
    decode: bool = True  # False: --fast, entry headers only (E015 wherever that leaves facts unread)
    also: tuple[Output, ...] = ()  # --also-write: more renderings of the same report


@dataclass(frozen=True, slots=True)
class DiffSettings:
    """Everything `archaudit diff` needs, merged and validated."""

    old: str
    new: str
    allow_loss: bool
    output: Output
    verbose: bool = False
    jobs: int | None = None


def _flag_or(cfg: Config, value: Any, key: str, default: Any) -> Any:
    """A flag's value when given (not None), else the config key, else the default."""
    return value if value is not None else cfg.get(key, default)


def output(args: argparse.Namespace, cfg: Config, formats: Sequence[str] = FORMATS) -> Output:
    """--format (validated by the parser's choices) over the config's format (validated on load;
    one a command does not write, such as junit for smoke, leaves it at text) and -o."""
    fmt = getattr(args, "format", None)
    path = getattr(args, "output", None)
    if fmt is None and path is not None:
        fmt = format_for(path, formats)
    if fmt is None:
        fmt = cfg.get("format", "text") if cfg.get("format", "text") in formats else "text"
    return Output(cast(Format, fmt), getattr(args, "output", None), getattr(args, "docs_url", None))


SUFFIX_FORMATS: tuple[tuple[str, Format], ...] = (
    (".sarif.json", "sarif"),
    (".sarif", "sarif"),
    (".json", "json"),
    (".md", "markdown"),
    (".xml", "junit"),
)


def format_for(path: str, formats: Sequence[str] = FORMATS) -> Format | None:
    """The format a -o file's name asks for, as ruff and pytest do (report.json: JSON), when
    --format is not given; None when its suffix names none this command writes."""
    low = path.lower()
    return next((f for suffix, f in SUFFIX_FORMATS if low.endswith(suffix) and f in formats), None)


# ---- claims ----


def _cuda_version(args: argparse.Namespace, cfg: Config) -> tuple[int, int]:
    version = _flag_or(cfg, args.cuda_version, "cuda-version", None)
    if version is None:
        return (13, 0)
    m = re.fullmatch(r"([0-9]+)\.([0-9]+)(?:\.[0-9]+)?", str(version).strip())
    if not m:
        raise UsageError(f"--cuda-version {version!r} is not X.Y")
    return int(m[1]), int(m[2])


def _given_cuda_version(args: argparse.Namespace, cfg: Config) -> tuple[int, int] | None:
    """The release whose nvcc decides which architectures --arch and --gpu may name: the one
    given (--cuda-version, cuda-version), else None: any release recorded (11.8 to the newest),
    so an older wheel's own list can be claimed without naming its toolkit."""
    given = _flag_or(cfg, args.cuda_version, "cuda-version", None)
    return None if given is None else _cuda_version(args, cfg)


def _claim_text(args: argparse.Namespace, cfg: Config, arch_flags: list[str]) -> tuple[str | None, str]:
    """The arch list's text and its source: --arch, else --arch-from-env, else cuda-archs; (None, "")."""
    if arch_flags:
        return " ".join(arch_flags), "--arch"
    if args.arch_from_env:
        if args.arch_from_env not in os.environ:
            raise UsageError(f"--arch-from-env {args.arch_from_env}: the variable is not set")
        return os.environ[args.arch_from_env], f"environment {args.arch_from_env}"
    if cfg.get("cuda-archs") is not None:
        raw = cfg.get("cuda-archs")
        text = ";".join(raw) if isinstance(raw, list) else raw
        return text, f"{os.path.relpath(cfg.path or '.')} [tool.archaudit] cuda-archs"
    return None, ""


def _cuda_claim(args: argparse.Namespace, cfg: Config, arch_flags: list[str], text: str, source: str) -> Claim:
    """The CUDA claim parsed from its text (each --arch flag on its own, then merged), every
    architecture one that nvcc of the release given accepts."""
    style = _flag_or(cfg, args.arch_style, "cuda-archs-style", "auto")
    parts = arch_flags if len(arch_flags) > 1 and source == "--arch" else [text]
    try:
        claims = [parse_claim(part, source, style=style, cuda_version=_cuda_version(args, cfg)) for part in parts]
    except ValueError as e:
        raise UsageError(f"C002 unparseable claim from {source}: {e}") from None
    cuda = claims[0] if len(claims) == 1 else merge_claims(claims, source)
    release = _given_cuda_version(args, cfg)
    for a in cuda.archs:
        refused = arch.nvcc_refusal(a.target, release, a.target.sm if a.sass else a.target.compute)
        if refused is not None:
            raise UsageError(f"C002 unparseable claim from {source}: {refused}")
    return cuda


def _amd_claim(amd_text: Any, amd_source: str) -> tuple[str, ...]:
    if not amd_text:
        return ()
    joined = ";".join(amd_text) if isinstance(amd_text, list) else str(amd_text)
    try:
        return tuple(gfx.parse_amd_claim(joined))
    except ValueError as e:
        raise UsageError(f"C002 unparseable AMD claim from {amd_source}: {e}") from None


def claim(args: argparse.Namespace, cfg: Config) -> tuple[Claim | None, tuple[str, ...], str]:
    """The CUDA claim, and the AMD claim with its source. gfx targets given to --arch (or
    cuda-archs) are AMD targets: alone they are the AMD claim; mixed with CUDA ones they are
    an error that names --amd-arch."""
    arch_flags = [args.arch] if isinstance(args.arch, str) else list(args.arch or ())
    text, source = _claim_text(args, cfg, arch_flags)
    amd_text = args.amd_arch if args.amd_arch is not None else cfg.get("amd-archs")
    amd_source = "--amd-arch" if args.amd_arch is not None else "[tool.archaudit] amd-archs"
    cuda: Claim | None = None
    if text is not None:
        tokens = [t for t in re.split(r"[\s;,]+", text.strip()) if t]
        gfx_tokens = [t for t in tokens if is_gfx_name(t)]
        if gfx_tokens and len(gfx_tokens) == len(tokens) and amd_text is None:
            amd_text, amd_source = text, source  # an AMD list given where a CUDA one was expected
        elif gfx_tokens:
            raise UsageError(
                f"C002 unparseable claim from {source}: {gfx_tokens[0]!r} is an AMD target; "
                f"give AMD targets with --amd-arch (or amd-archs in [tool.archaudit])"
            )
        else:
            cuda = _cuda_claim(args, cfg, arch_flags, text, source)
    amd = _amd_claim(amd_text, amd_source)
    return cuda, amd, amd_source if amd else ""


# ---- policy ----


def policy(args: argparse.Namespace, cfg: Config, amd_claim: tuple[str, ...], amd_source: str) -> Policy:
    nvidia, amd = resolve(list(args.gpu or cfg.get("gpus", [])), _given_cuda_version(args, cfg))
    driver = _flag_or(cfg, args.driver, "driver", None)
    if driver is not None:
        try:
            driver_at_least(driver, "0")
        except ValueError as e:
            raise UsageError(f"--driver: {e}") from None
    select = (
        parse_patterns(args.select, "--select")
        if args.select
        else parse_patterns(cfg.get("select", []), "[tool.archaudit] select")
    )
    ignore = (
        parse_patterns(args.ignore, "--ignore")
        if args.ignore
        else parse_patterns(cfg.get("ignore", []), "[tool.archaudit] ignore")
    )
    return Policy(
        exact=bool(_flag_or(cfg, args.exact, "exact", False)),
        require_ptx=_flag_or(cfg, args.require_ptx, "require-ptx", None),
        strict=bool(_flag_or(cfg, args.strict, "strict", False)),
        strict_kernels=bool(_flag_or(cfg, args.strict_kernels, "strict-kernels", False)),
        driver=driver,
        driver_os=_flag_or(cfg, args.driver_os, "driver-os", "linux"),
        driver_os_given=args.driver_os is not None or cfg.get("driver-os") is not None,
        gpus=nvidia,
        amd_gpus=amd,
        select=select,
        ignore=ignore,
        require_device_code=tuple(cfg.get("require-device-code", [])),
        data=tuple(DataMember(d["member"], d["reason"]) for d in cfg.get("data", [])),
        **recorded(cfg),
        amd_claim=amd_claim,
        amd_claim_source=amd_source,
        config=cfg.path,
    )


class Recorded(TypedDict):
    """What a project records of its own code in [tool.archaudit], as Policy fields."""

    ignore_rules: tuple[IgnoreRule, ...]
    library_claims: tuple[LibraryClaim, ...]
    library_groups: tuple[LibraryGroup, ...]


def recorded(cfg: Config) -> Recorded:
    """The [[tool.archaudit.ignore-library]], [[tool.archaudit.library]] and
    [[tool.archaudit.library-group]] entries of ``cfg``, as the Policy fields they set."""
    rules = tuple(
        IgnoreRule(code, r["library"], r.get("reason", ""))
        for r in cfg.get("ignore-library", [])
        for code in parse_patterns([r["code"]], "[tool.archaudit] ignore-library")
    )
    groups = tuple(LibraryGroup(tuple(g["paths"]), g["reason"]) for g in cfg.get("library-group", []))
    return Recorded(ignore_rules=rules, library_claims=library_claims(cfg), library_groups=groups)


def library_claims(cfg: Config) -> tuple[LibraryClaim, ...]:
    """[[tool.archaudit.library]] entries, each claim parsed as the wheel's is (any spelling)."""
    out = []
    for entry in cfg.get("library", []):
        raw = entry["arch"] if isinstance(entry["arch"], str) else ";".join(entry["arch"])
        source = f"[tool.archaudit] library {entry['path']}"
        try:
            claim = parse_claim(raw, source)
            out.append(LibraryClaim(entry["path"], claim, entry["reason"], tuple(entry.get("kernels", ()))))
        except ValueError as e:
            raise UsageError(f"{cfg.path}: library {entry['path']!r}: {e}") from None
    return tuple(out)


def also_write(values: Sequence[str] | None, primary: Output) -> tuple[Output, ...]:
    """--also-write FORMAT=FILE ('-' for standard output), each format and file once."""
    out: list[Output] = []
    for value in values or ():
        fmt, sep, path = value.partition("=")
        if not sep or fmt not in FORMATS or not path:
            raise UsageError(f"--also-write {value!r}: give FORMAT=FILE, FORMAT one of {', '.join(FORMATS)}")
        out.append(Output(fmt, None if path == "-" else path, primary.docs_url))
    paths = [o.path for o in (*out, primary)]
    if len(set(paths)) != len(paths):
        raise UsageError("--also-write: each report needs a file of its own (standard output at most once)")
    return tuple(out)


# What `archaudit check` parses when no flag is given: every flag "not given" (the defaults come
# from [tool.archaudit], then the settings above). tests/test_api.py checks it is the parser's.
_CHECK_UNSET: dict[str, Any] = {
    "targets": [],
    "example": False,
    "arch": None,
    "arch_style": None,
    "arch_from_env": None,
    "amd_arch": None,
    "cuda_version": None,
    "exact": None,
    "require_ptx": None,
    "strict": None,
    "strict_kernels": None,
    "driver": None,
    "driver_os": None,
    "gpu": None,
    "select": None,
    "ignore": None,
    "config": None,
    "no_config": False,
    "format": None,
    "output": None,
    "docs_url": None,
    "color": "auto",
    "also_write": None,
    "detail": None,
    "costs": None,
    "no_timings": False,
    "quiet": False,
    "verbose": False,
    "jobs": None,
    "fast": False,
    "max_payload": None,
    "platform": None,
    "python_version": None,
    "index_url": None,
}


def check_args(**given: Any) -> argparse.Namespace:
    """The flags of `archaudit check` as a namespace, each not given unless in `given`: what the
    Python API hands to check_settings, without building the command line's parser."""
    unknown = sorted(set(given) - set(_CHECK_UNSET))
    if unknown:
        raise TypeError(f"check_args: no flag {unknown[0]!r}")
    return argparse.Namespace(**{**_CHECK_UNSET, **given})


def check_settings(args: argparse.Namespace, cfg: Config, targets: Sequence[str]) -> CheckSettings:
    targets = nonempty_targets("check", targets)
    cuda, amd, amd_source = claim(args, cfg)
    detail = _flag_or(cfg, args.detail, "detail", "libraries")
    return CheckSettings(
        targets=tuple(targets),
        claim=cuda,
        policy=policy(args, cfg, amd, amd_source),
        output=output(args, cfg),
        detail=cast(Detail, detail),
        verbose=bool(args.verbose),
        costs=bool(_flag_or(cfg, args.costs, "costs", False)),
        timings=not args.no_timings,
        progress=not args.quiet,
        jobs=args.jobs,
        max_payload=DEFAULT_MAX_PAYLOAD if args.max_payload is None else args.max_payload,
        decode=not args.fast,
        also=also_write(getattr(args, "also_write", None), output(args, cfg)),
    )


def diff_settings(args: argparse.Namespace, cfg: Config, formats: Sequence[str]) -> DiffSettings:
    nonempty_targets("diff", [args.old], "OLD")
    nonempty_targets("diff", [args.new], "NEW")
    return DiffSettings(
        args.old,
        args.new,
        bool(_flag_or(cfg, args.allow_loss, "allow-loss", False)),
        output(args, cfg, formats),
        verbose=bool(args.verbose),
        jobs=args.jobs,
    )


__all__ = [
    "CheckSettings",
    "DiffSettings",
    "Output",
    "Format",
    "Detail",
    "FORMATS",
    "DETAILS",
    "check_args",
    "recorded",
    "check_settings",
    "diff_settings",
    "nonempty_targets",
    "output",
    "claim",
    "policy",
]
