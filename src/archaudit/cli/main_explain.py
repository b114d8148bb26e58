"""`archaudit explain [CODE]`: the cause, example and fix of a finding code."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..findings import CODES


def configure_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("explain", help="cause, example and fix of a finding code")
    p.add_argument("code", nargs="?", help="a code such as G001 (omit to list all)")
    p.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    if not args.code:
        for c in CODES.values():
            print(f"{c.code}  {c.severity:<7}  {c.title}")
        return 0
    code = CODES.get(args.code.upper())
    if code is None:
        raise UsageError(f"explain: unknown code {args.code!r}; 'archaudit explain' lists them")
    print(
        f"{code.code} ({code.severity}): {code.title}\n\nCause: {code.cause}\n\nExample: {code.example}\n\n"
        f"Fix: {code.fix}"
    )
    return 0


__all__ = ["configure_parser", "execute"]
