"""`archaudit gpus`: the GPU catalogs (NVIDIA and AMD) the --gpu names come from."""

from __future__ import annotations

import argparse
import json


def configure_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("gpus", help="list the GPU catalog")
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="a table for people (default) or a JSON list of every GPU with its target",
    )
    p.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    from ..gpus import amd as gfx, cuda as arch

    nvidia, amd = arch.gpu_catalog(), gfx.gpus()
    if args.format == "json":
        print(
            json.dumps(
                [
                    {
                        "name": g.name,
                        "vendor": "nvidia",
                        "cc": f"{g.cc[0]}.{g.cc[1]}",
                        "kind": "integrated" if g.integrated else "discrete",
                        "aliases": list(g.aliases),
                    }
                    for g in nvidia
                ]
                + [{"name": g.name, "vendor": "amd", "target": g.target, "aliases": list(g.aliases)} for g in amd],
                indent=2,
            )
        )
        return 0
    rows = [
        (g.name, f"{g.cc[0]}.{g.cc[1]}", "integrated" if g.integrated else "discrete", ", ".join(g.aliases))
        for g in nvidia
    ] + [(g.name, g.target, "amd", ", ".join(g.aliases)) for g in amd]
    width = max(len(r[0]) for r in rows)
    for name, where, kind, aliases in rows:
        print(f"{name:<{width}}  {where:>5}  {kind:<10}  {aliases}")
    return 0


__all__ = ["configure_parser", "execute"]
