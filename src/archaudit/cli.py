"""The command line: a thin layer that gathers inputs, calls the core and renders.

Exit codes: 0 pass, 1 findings, 2 unusable input or usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import resources

from . import __version__, arch
from .artifacts import Progress, inventories, progress_display, rescan
from .audit import IgnoreRule, Policy, audit
from .claims import Claim, parse_claim
from .config import ConfigError, load
from .findings import CODES
from .render import render_json, render_text

FORMATS = ("text", "json", "markdown", "github", "junit")


class UsageError(Exception):
    """Bad flags, config or claim: exit 2 with the message."""


def example_wheel() -> str:
    return str(resources.files("archaudit") / "examples" / "gpu_example-1.0-py3-none-linux_x86_64.whl")


def _check_parser(sub) -> None:
    p = sub.add_parser("check", help="audit the device code of wheels, directories, files or distributions",
                       description="Statically verify that every library's device code runs on every "
                                   "claimed GPU architecture. Fails closed.")
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="a .whl, a directory, a .so/.cubin/.fatbin/.ptx file, or an installed distribution")
    p.add_argument("--example", action="store_true", help="also audit the small example wheel shipped with archaudit")
    g = p.add_argument_group("claims")
    g.add_argument("--arch", metavar="LIST", help="claimed CUDA architectures, in any common spelling "
                                                  "('80;90-real', '8.0 9.0+PTX', '-gencode ...', '80,90')")
    g.add_argument("--arch-style", choices=("auto", "cmake", "torch", "nvcc", "list"), default=None)
    g.add_argument("--arch-from-env", metavar="VAR", help="read the claim from an environment variable")
    g.add_argument("--amd-arch", metavar="LIST", help="claimed AMD gfx targets (PYTORCH_ROCM_ARCH, "
                                                      "GPU_TARGETS or --offload-arch spellings)")
    g.add_argument("--cuda-version", metavar="X.Y", help="CUDA release that expands 'all'/'all-major' (default 13.0)")
    g = p.add_argument_group("policy")
    g.add_argument("--exact", action="store_true", default=None,
                   help="also fail on architectures carried but not claimed")
    g.add_argument("--require-ptx", choices=("newest",), default=None,
                   help="require PTX for the newest claimed architecture")
    g.add_argument("--strict", action="store_true", default=None,
                   help="judge arch-specific-only libraries like any other")
    g.add_argument("--strict-kernels", action="store_true", default=None,
                   help="judge arch-specific-only containers like any other")
    g.add_argument("--driver", metavar="VERSION", help="fail when the device code needs a newer NVIDIA driver")
    g.add_argument("--driver-os", choices=("linux", "windows"), default=None)
    g.add_argument("--gpu", action="append", metavar="NAME|sm_XX|local",
                   help="answer: does it run on this GPU? (repeatable; 'local' asks NVML)")
    g.add_argument("--select", action="append", metavar="CODE", help="report only these codes or prefixes")
    g.add_argument("--ignore", action="append", metavar="CODE", help="drop these codes or prefixes")
    g.add_argument("--config", metavar="PYPROJECT", help="read [tool.archaudit] from this file (default: found upward)")
    g.add_argument("--no-config", action="store_true", help="ignore pyproject.toml")
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=FORMATS, default=None)
    g.add_argument("--detail", choices=("libraries", "containers", "kernels"), default=None)
    g.add_argument("-o", "--output", metavar="FILE", help="write the report here instead of standard output")
    g.add_argument("--costs", action="store_true", default=None,
                   help="show the device-code bytes of each target (sm_XX, compute_XX), wheel-wide and per "
                        "library: what dropping an architecture saves")
    g.add_argument("--no-timings", action="store_true",
                   help="leave out elapsed seconds, so the same input gives byte-identical output")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    g.add_argument("-v", "--verbose", action="store_true")
    g = p.add_argument_group("reading")
    g.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="libraries read in parallel (default: cores)")
    g.add_argument("--decode", action="store_true",
                   help="decode and verify every device-code payload and read kernel names "
                        "(implied by --detail kernels)")
    g.add_argument("--max-payload", type=int, default=256 << 20, metavar="BYTES",
                   help="largest single device-code payload verified in memory (default 256 MiB)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="archaudit",
        description="Prove a GPU wheel carries device code for every GPU it claims, and runs there.")
    parser.add_argument("--version", action="version", version=f"archaudit {__version__}")
    sub = parser.add_subparsers(dest="command")
    _check_parser(sub)
    e = sub.add_parser("explain", help="cause, example and fix of a finding code")
    e.add_argument("code", nargs="?", help="a code such as G001 (omit to list all)")
    g = sub.add_parser("gpus", help="list the GPU catalog")
    g.add_argument("--format", choices=("text", "json"), default="text")
    try:
        from .smoke.runner import add_smoke_arguments
    except ImportError:
        add_smoke_arguments = None
    if add_smoke_arguments is not None:
        s = sub.add_parser("smoke", help="install a wheel in isolation and prove it runs on this machine's GPU")
        add_smoke_arguments(s)
    try:
        from .diff import add_diff_arguments
    except ImportError:
        add_diff_arguments = None
    if add_diff_arguments is not None:
        d = sub.add_parser("diff", help="GPU architectures gained or lost per library between two releases")
        add_diff_arguments(d)
    return parser


def _claim(args, cfg) -> Claim | None:
    cuda = (13, 0)
    version = args.cuda_version or cfg.get("cuda-version")
    if version:
        try:
            major, minor = str(version).split(".")[:2]
            cuda = (int(major), int(minor))
        except ValueError:
            raise UsageError(f"--cuda-version {version!r} is not X.Y") from None
    style = args.arch_style or cfg.get("cuda-archs-style") or "auto"
    if args.arch is not None:
        text, source = args.arch, "--arch"
    elif args.arch_from_env:
        if args.arch_from_env not in os.environ:
            raise UsageError(f"--arch-from-env {args.arch_from_env}: the variable is not set")
        text, source = os.environ[args.arch_from_env], f"environment {args.arch_from_env}"
    elif cfg.get("cuda-archs") is not None:
        raw = cfg.get("cuda-archs")
        text = ";".join(raw) if isinstance(raw, list) else raw
        source = f"{os.path.relpath(cfg.path)} [tool.archaudit] cuda-archs"
    else:
        return None
    try:
        return parse_claim(text, source, style=style, cuda_version=cuda)
    except ValueError as e:
        raise UsageError(f"C002 unparseable claim from {source}: {e}") from None


def _gpus(names: list[str]) -> tuple[tuple[tuple[str, tuple[int, int]], ...], tuple[tuple[str, str], ...]]:
    nvidia, amd = [], []
    for name in names:
        if name == "local":
            nvidia.extend(_local_gpus())
            continue
        found = arch.lookup_gpu(name)
        if found:
            g = found[0]
            nvidia.append((g.name if len(found) == 1 else name, g.cc))
            continue
        try:
            from . import gfx
            amd_found = gfx.lookup_gpu(name)
        except ImportError:
            amd_found = []
        if amd_found:
            amd.append((name, amd_found[0].target if hasattr(amd_found[0], "target") else str(amd_found[0])))
            continue
        if name.lower().startswith("gfx"):
            from . import gfx
            try:
                target = gfx.normalise(name)
            except ValueError as e:
                raise UsageError(f"--gpu {name!r}: {e}") from None
            if gfx.is_generic(target):
                raise UsageError(f"--gpu {name!r} is a generic code target, not a GPU")
            amd.append((name, target))
            continue
        raise UsageError(f"--gpu {name!r}: not in the GPU catalog (see 'archaudit gpus') and not sm_XX")
    return tuple(nvidia), tuple(amd)


def _local_gpus() -> list[tuple[str, tuple[int, int]]]:
    try:
        import pynvml
    except ImportError:
        raise UsageError("--gpu local needs NVML: pip install 'archaudit[gpu]' (nvidia-ml-py)") from None
    try:
        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - NVML raises its own error types
        raise UsageError(f"--gpu local: no NVIDIA GPU or driver on this machine ({e})") from None
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else name
            out.append((f"GPU {i} {name}", tuple(pynvml.nvmlDeviceGetCudaComputeCapability(h))))
        if not out:
            raise UsageError("--gpu local: NVML sees no GPU on this machine")
        return out
    finally:
        pynvml.nvmlShutdown()


def _policy(args, cfg) -> Policy:
    def pick(flag, key, default):
        value = getattr(args, flag)
        return value if value is not None else cfg.get(key, default)

    amd_claim: tuple[str, ...] = ()
    amd_source = ""
    amd_text = args.amd_arch if args.amd_arch is not None else cfg.get("amd-archs")
    if amd_text:
        from . import gfx
        try:
            amd_claim = tuple(gfx.parse_amd_claim(";".join(amd_text) if isinstance(amd_text, list) else amd_text))
        except ValueError as e:
            raise UsageError(f"C002 unparseable AMD claim: {e}") from None
        amd_source = "--amd-arch" if args.amd_arch is not None else "[tool.archaudit] amd-archs"
    gpus, amd_gpus = _gpus(list(args.gpu or cfg.get("gpus", [])))
    rules = tuple(IgnoreRule(r["code"], r["library"], r.get("reason", "")) for r in cfg.get("ignore-library", []))
    driver = pick("driver", "driver", None)
    if driver is not None:
        try:
            arch.driver_at_least(driver, "0")
        except ValueError as e:
            raise UsageError(f"--driver: {e}") from None
    return Policy(
        exact=bool(pick("exact", "exact", False)),
        require_ptx=pick("require_ptx", "require-ptx", None),
        strict=bool(pick("strict", "strict", False)),
        strict_kernels=bool(pick("strict_kernels", "strict-kernels", False)),
        driver=driver, driver_os=pick("driver_os", "driver-os", "linux"),
        gpus=gpus, amd_gpus=amd_gpus,
        select=tuple(args.select or cfg.get("select", [])),
        ignore=tuple(args.ignore or cfg.get("ignore", [])),
        ignore_rules=rules,
        require_device_code=tuple(cfg.get("require-device-code", [])),
        amd_claim=amd_claim, amd_claim_source=amd_source,
    )


def render(report, fmt: str, detail: str, verbose: bool, stream, *, costs: bool = False,
           timings: bool = True) -> str:
    if fmt == "json":
        return render_json(report, detail=detail, timings=timings)
    if fmt in ("markdown", "github", "junit"):
        from . import formats
        if fmt == "markdown":
            return formats.render_markdown(report, detail=detail, costs=costs, verbose=verbose)
        return getattr(formats, f"render_{fmt}")(report)
    ascii_only = not (getattr(stream, "encoding", "") or "").lower().startswith("utf")
    return render_text(report, detail=detail, verbose=verbose, ascii_only=ascii_only, costs=costs,
                       timings=timings)


def cmd_check(args) -> int:
    try:
        cfg = load(args.config, discover=not args.no_config) if not args.no_config else load(None, discover=False)
        claim = _claim(args, cfg)
        policy = _policy(args, cfg)
    except (UsageError, ConfigError) as e:
        print(f"archaudit: {e}", file=sys.stderr)
        return 2
    targets = list(args.targets) + ([example_wheel()] if args.example else [])
    if not targets:
        print("archaudit check: give at least one TARGET (or --example)", file=sys.stderr)
        return 2
    fmt = args.format or cfg.get("format", "text")
    detail = args.detail or cfg.get("detail", "libraries")
    show = not args.quiet and sys.stderr.isatty()
    progress = Progress() if show else None
    stop = progress_display(progress) if progress is not None else None
    try:
        found = inventories(targets, jobs=args.jobs, decode=args.decode or detail == "kernels",
                            max_payload=args.max_payload, progress=progress)
    finally:
        if stop is not None:
            stop()
    report = audit(found, claim, policy)
    if not (args.decode or detail == "kernels"):
        report = _name_kernels(report, found, claim, policy, args)
    out_stream = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        costs = bool(args.costs if args.costs is not None else cfg.get("costs", False))
        out_stream.write(render(report, fmt, detail, args.verbose, out_stream, costs=costs,
                                timings=not args.no_timings))
    finally:
        if args.output:
            out_stream.close()
    return report.exit_code


REFINE = ("G001", "G003", "G004", "K001", "K002")


def _name_kernels(report, found, claim, policy, args):
    """Read again, decoding, the libraries with coverage findings: their kernels get named, and
    kernel-less device code (nvlink's stubs) stops counting. Passing libraries are never re-read."""
    again = []
    for inv, t in zip(found, report.targets):
        paths = {f.subject for f in t.findings if f.code in REFINE}
        again.append(rescan(inv, paths, jobs=args.jobs, max_payload=args.max_payload) if paths else inv)
    if all(a is b for a, b in zip(again, found)):
        return report
    return audit(again, claim, policy)


def cmd_explain(args) -> int:
    if not args.code:
        for c in CODES.values():
            print(f"{c.code}  {c.severity:<7}  {c.title}")
        return 0
    code = CODES.get(args.code.upper())
    if code is None:
        print(f"archaudit explain: unknown code {args.code!r}; 'archaudit explain' lists them", file=sys.stderr)
        return 2
    print(f"{code.code} ({code.severity}): {code.title}\n\nCause: {code.cause}\n\nExample: {code.example}\n\n"
          f"Fix: {code.fix}")
    return 0


def cmd_gpus(args) -> int:
    from . import gfx
    rows = [(g.name, f"{g.cc[0]}.{g.cc[1]}", "integrated" if g.integrated else "discrete", ", ".join(g.aliases))
            for g in arch.gpu_catalog()]
    amd = [(g.name, g.target, "amd", ", ".join(g.aliases)) for g in gfx.gpus()]
    if args.format == "json":
        import json
        print(json.dumps([{"name": n, "vendor": "nvidia", "cc": cc, "kind": k, "aliases": a.split(", ") if a else []}
                          for n, cc, k, a in rows]
                         + [{"name": n, "vendor": "amd", "target": t, "aliases": a.split(", ") if a else []}
                            for n, t, _, a in amd], indent=2))
        return 0
    rows += amd
    width = max(len(r[0]) for r in rows)
    for n, cc, k, a in rows:
        print(f"{n:<{width}}  {cc:>5}  {k:<10}  {a}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "check":
            return cmd_check(args)
        if args.command == "explain":
            return cmd_explain(args)
        if args.command == "gpus":
            return cmd_gpus(args)
        if args.command == "smoke":
            from .smoke.runner import main_smoke
            return main_smoke(args)
        if args.command == "diff":
            from .diff import main_diff
            return main_diff(args)
    except KeyboardInterrupt:
        print("archaudit: interrupted", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 2
    parser.print_help()
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
