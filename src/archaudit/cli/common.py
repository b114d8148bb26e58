"""What the subcommands share: the output options (--format, -o) and the one way a report
reaches its destination (a failed write is one line and exit 2, never a traceback), and the
configuration options (--config, --no-config)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .. import config
from ..config import FORMATS
from ..errors import UsageError


def add_output_options(parser: argparse.ArgumentParser, formats: Sequence[str] = FORMATS) -> None:
    g = parser.add_argument_group("output")
    g.add_argument("--format", choices=tuple(formats), default=None,
                   help="report format (default: text, or format in [tool.archaudit])")
    g.add_argument("-o", "--output", metavar="FILE", help="write the report here instead of standard output")
    if "sarif" in formats:
        g.add_argument("--docs-url", metavar="URL",
                       help="where archaudit's docs/ are published: SARIF rules' helpUri point at URL/codes.md#CODE")


def unicode_ok(path: str | None) -> bool:
    """Whether the destination takes ✓ and ✗: a file (written as UTF-8) or a UTF-8 stdout."""
    if path is not None:
        return True
    return (getattr(sys.stdout, "encoding", "") or "").lower().replace("-", "").startswith("utf")


def write(text: str, path: str | None) -> None:
    """The report to its file (UTF-8) or to standard output."""
    if path is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"-o {path}: cannot write the report: {e.strerror or e}") from None


def add_config_options(parser: argparse._ActionsContainer) -> None:
    parser.add_argument("--config", metavar="PYPROJECT",
                        help="read [tool.archaudit] from this file (default: found upward)")
    parser.add_argument("--no-config", action="store_true", help="ignore pyproject.toml")


def load_config(args: argparse.Namespace) -> config.Config:
    if args.no_config:
        return config.load(None, discover=False)
    return config.load(args.config, discover=True)


def positive_int(text: str) -> int:
    """An argparse type: a whole number above zero, in ASCII digits."""
    if not text.strip().isascii() or not text.strip().isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


__all__ = ["add_output_options", "add_config_options", "load_config", "positive_int", "unicode_ok", "write"]
