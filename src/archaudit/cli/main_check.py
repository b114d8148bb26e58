"""`archaudit check`: parse, call archaudit.core.check, print."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from ..config import DETAILS
from ..errors import UsageError
from . import common

if TYPE_CHECKING:
    from ..judge.audit import Report
    from .settings import CheckSettings


def configure_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="audit the device code of wheels, directories, files or distributions",
        description="Statically verify that every library's device code runs on every "
        "claimed GPU architecture. Fails closed.",
    )
    p.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="a .whl, a directory, a .so/.cubin/.fatbin/.ptx file, an installed distribution, a wheel "
        "URL, or a requirement (torch==2.5.1) fetched from the index",
    )
    p.add_argument("--example", action="store_true", help="also audit the small example wheel shipped with archaudit")
    g = p.add_argument_group("remote targets (a wheel URL, or a requirement such as torch==2.5.1)")
    g.add_argument(
        "--platform",
        metavar="TAG",
        default=None,
        help="the pip platform tag a requirement's wheel is chosen for (manylinux_2_28_x86_64, "
        "win_amd64, ...; default: this machine's); read by HTTP range requests",
    )
    g.add_argument(
        "--python-version",
        metavar="X.Y",
        type=common.python_version_arg,
        default=None,
        help="the Python a requirement's wheel is chosen for, as pip's --python-version (3.12 or 312; "
        "default: this interpreter's), with --platform or on this machine's platform",
    )
    g.add_argument(
        "--index-url",
        metavar="URL",
        default=None,
        help="the simple index a requirement is resolved on (default: $PIP_INDEX_URL, else PyPI)",
    )
    g = p.add_argument_group("claims")
    g.add_argument(
        "--arch",
        metavar="LIST",
        action="append",
        help="claimed CUDA architectures, in any common spelling ('80;90-real', '8.0 9.0+PTX', "
        "'-gencode ...', '80,90'); repeatable, the claims add up",
    )
    g.add_argument(
        "--arch-style",
        choices=("auto", "cmake", "torch", "nvcc", "list"),
        default=None,
        help="how to read --arch: CMake CUDA_ARCHITECTURES, TORCH_CUDA_ARCH_LIST, nvcc flags or a "
        "plain list (default: auto, guessed from the spelling)",
    )
    g.add_argument("--arch-from-env", metavar="VAR", help="read the claim from an environment variable")
    g.add_argument(
        "--amd-arch",
        metavar="LIST",
        help="claimed AMD gfx targets (PYTORCH_ROCM_ARCH, GPU_TARGETS or --offload-arch spellings)",
    )
    g.add_argument("--cuda-version", metavar="X.Y", help="CUDA release that expands 'all'/'all-major' (default 13.0)")
    g = p.add_argument_group("policy")
    g.add_argument(
        "--exact", action="store_true", default=None, help="also fail on architectures carried but not claimed"
    )
    g.add_argument(
        "--require-ptx", choices=("newest",), default=None, help="require PTX for the newest claimed architecture"
    )
    g.add_argument(
        "--strict",
        action="store_true",
        default=None,
        help="accepted for compatibility: arch-specific-only libraries are always judged like any other",
    )
    g.add_argument(
        "--strict-kernels", action="store_true", default=None, help="judge arch-specific-only containers like any other"
    )
    g.add_argument("--driver", metavar="VERSION", help="fail when the device code needs a newer NVIDIA driver")
    g.add_argument(
        "--driver-os",
        choices=("linux", "windows"),
        default=None,
        help="driver table for D001/D002 (default: windows for a win_* wheel, else linux)",
    )
    g.add_argument(
        "--gpu",
        action="append",
        metavar="NAME|sm_XX|local",
        help="answer: does it run on this GPU? (repeatable; 'local' asks NVML); without a claim "
        "the exit status is the answer",
    )
    g.add_argument(
        "--select",
        action="append",
        metavar="CODES",
        help="report only these codes or prefixes (comma-separated, repeatable)",
    )
    g.add_argument(
        "--ignore",
        action="append",
        metavar="CODES",
        help="drop these codes or prefixes (comma-separated, repeatable); E0xx, C001 and G006 are never dropped",
    )
    common.add_config_options(g)
    common.add_output_options(p)
    common.add_colour_option(p)
    p.add_argument(
        "--also-write",
        action="append",
        metavar="FORMAT=FILE",
        default=None,
        help="also write the report in FORMAT to FILE ('-': standard output), from the same read "
        "(repeatable; e.g. --format json -o report.json --also-write markdown=summary.md)",
    )
    g = p.add_argument_group("presentation")
    g.add_argument(
        "--detail",
        choices=DETAILS,
        default=None,
        help="what the text lists: one line per library (default), also each container, or also "
        "each kernel; the verdict is the same under every detail",
    )
    g.add_argument(
        "--costs",
        action="store_true",
        default=None,
        help="show the device-code bytes of each target (sm_XX, compute_XX), wheel-wide and per "
        "library: what dropping an architecture saves",
    )
    g.add_argument(
        "--no-timings",
        action="store_true",
        help="leave out elapsed seconds, so the same input gives byte-identical output",
    )
    g.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    g.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="list every finding and passing library in full, with the notes of each library",
    )
    g = p.add_argument_group("reading")
    g.add_argument(
        "-j",
        "--jobs",
        type=common.positive_int,
        default=None,
        metavar="N",
        help="libraries read in parallel (default: cores)",
    )
    g.add_argument(
        "--fast",
        action="store_true",
        help="read entry headers only, without decoding payloads: quicker, but every library "
        "with device code then fails with E015 (its kernels, cubin flags and PTX .target "
        "are not verified), so --fast can find failures but never pass",
    )
    g.add_argument(
        "--max-payload",
        type=common.positive_int,
        default=None,
        metavar="BYTES",
        help="largest single device-code payload verified in memory (default 256 MiB)",
    )
    p.set_defaults(execute=execute)


def render(report: Report, s: CheckSettings, *, unicode: bool = True) -> str:
    """The report in the chosen format (report.check.RENDERERS)."""
    from ..report import check
    from ..report.view import RenderOptions

    return check.render(
        report,
        s.output.format,
        RenderOptions(
            detail=s.detail,
            verbose=s.verbose,
            costs=s.costs,
            timings=s.timings,
            unicode=unicode,
            docs_url=s.output.docs_url,
            width=common.text_width(s.output.path),
        ),
    )


def execute(args: argparse.Namespace) -> int:
    from .. import core  # the readers and the rules: imported when a check runs, not to parse
    from ..read.artifacts import Progress
    from .progress import progress_display
    from .settings import check_settings

    cfg = common.load_config(args)
    from ..read.artifacts import wheels_of

    given = list(common.nonempty_targets("check", args.targets)) + ([core.example_wheel()] if args.example else [])
    targets = [w for t in given for w in (wheels_of(t) or [t])]  # a wheelhouse: one verdict per wheel
    if not targets:
        raise UsageError("check: give at least one TARGET (or --example)")
    s = check_settings(args, cfg, targets)
    progress = Progress() if s.progress and sys.stderr.isatty() else None
    stop = progress_display(progress) if progress is not None else None
    try:
        report = core.check(
            s.targets,
            s.claim,
            s.policy,
            jobs=s.jobs,
            max_payload=s.max_payload,
            decode=s.decode,
            progress=progress,
            fetch=common.fetch_for(
                s.targets,
                platform=args.platform,
                index_url=args.index_url,
                decode=s.decode,
                max_payload=s.max_payload,
                python=args.python_version,
            ),
        )
    finally:
        if stop is not None:
            stop()
    for also in s.also:  # every rendering from the one report: each wheel is read once
        also_s = replace(s, output=replace(s.output, format=also.format, path=also.path))
        also_text = common.terminal_safe(render(report, also_s, unicode=common.unicode_ok(also.path)), also.format)
        common.write(also_text, also.path)
    text = common.terminal_safe(render(report, s, unicode=common.unicode_ok(s.output.path)), s.output.format)
    if common.colour_on(args.color, s.output.format, s.output.path):
        text = common.paint(text)
    common.write(text, s.output.path)
    return report.exit_code


__all__ = ["configure_parser", "execute"]
