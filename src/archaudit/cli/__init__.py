"""The command line: a thin layer that parses, calls the core and prints.

One module per subcommand (main_check, main_diff, main_explain, main_gpus, main_smoke), each
with `configure_parser(sub)` and `execute(args) -> int`. Exit codes: 0 pass, 1 findings,
2 unusable input, usage, or an internal error (one line, never a traceback).

Building the parser imports argparse and the subcommands' options only: what a subcommand
needs to run (the readers, the index engine, the smoke runner) is imported by its `execute`.
"""

from __future__ import annotations

import argparse
import gc
import sys

from .. import __version__
from ..errors import ArchauditError
from . import main_check, main_diff, main_explain, main_gpus, main_index, main_query, main_smoke

SUBCOMMANDS = (main_check, main_diff, main_explain, main_gpus, main_smoke, main_index, main_query)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="archaudit", description="Prove a GPU wheel carries device code for every GPU it claims, and runs there."
    )
    parser.add_argument("--version", action="version", version=f"archaudit {__version__}")
    sub = parser.add_subparsers(dest="command")
    for command in SUBCOMMANDS:
        command.configure_parser(sub)
    return parser


def _unknown_command(argv: list[str], parser: argparse.ArgumentParser) -> str | None:
    """git's and pip's 'unknown command' with 'did you mean', for a first word that is no
    subcommand (argparse would list every choice)."""
    from ..suggest import did_you_mean

    first = next((a for a in argv if not a.startswith("-")), None)
    if first is None or any(a in ("-h", "--help", "--version") for a in argv[: argv.index(first)]):
        return None
    names = [n for a in parser._actions if isinstance(a, argparse._SubParsersAction) for n in a.choices]
    if first in names:
        return None
    return f"archaudit: unknown command '{first}'{did_you_mean(first, names)} (commands: {', '.join(names)})"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    unknown = _unknown_command(sys.argv[1:] if argv is None else list(argv), parser)
    if unknown is not None:
        print(unknown, file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        code: int = args.execute(args)
        return code
    except ArchauditError as e:
        print(f"archaudit: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("archaudit: interrupted", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 2
    except Exception as e:  # fail closed: an internal error is exit 2 and one line, never a pass
        print(f"archaudit: internal error: {type(e).__name__}: {e} (please report it)", file=sys.stderr)
        return 2


def entry(argv: list[str] | None = None) -> int:
    """The `archaudit` command and `python -m archaudit`: main(), after which what the run
    leaves in memory is moved out of the cyclic collector's reach. The interpreter's exit
    would otherwise walk all of it once more (a large wheel's report and kernel names:
    torch 2.14.1, about 0.06 s of a process's exit, 0.1 s before)."""
    code = main(argv)
    gc.freeze()
    return code


def __getattr__(name: str) -> object:
    if name == "example_wheel":  # archaudit.core.example_wheel, as before, without importing core to parse
        from ..core import example_wheel

        return example_wheel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["main", "entry", "build_parser", "example_wheel"]
