"""`archaudit smoke`: install a wheel in isolation and prove it runs on this machine's GPU.

The probes and their runner live in archaudit.smoke; this module only wires them into the
command line with the shared output options."""

from __future__ import annotations

import argparse

from . import common, smoke_options as options

FORMATS = options.FORMATS


def configure_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("smoke", help="install a wheel in isolation and prove it runs on this machine's GPU "
                                     "(Linux only)")
    options.add_smoke_arguments(p)
    common.add_output_options(p, FORMATS)
    p.set_defaults(execute=execute)


def execute(args: argparse.Namespace) -> int:
    from ..smoke import runner  # the probes and the children, only when `smoke` runs

    return runner.main_smoke(args)
