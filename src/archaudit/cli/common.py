"""What the subcommands share: the output options (--format, -o) and the one way a report
reaches its destination (a failed write is one line and exit 2, never a traceback), and the
configuration options (--config, --no-config)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .. import config
from ..config import FORMATS
from ..errors import UsageError

if TYPE_CHECKING:
    from ..model import TargetInventory


def nonempty_targets(command: str, targets: Sequence[str], what: str = "TARGET") -> tuple[str, ...]:
    """The targets as given, or a usage error for an empty one: what an unset variable in a script
    (`archaudit check "$WHEEL"`) gives, which names no file, directory or distribution."""
    for t in targets:
        if not t.strip():
            raise UsageError(f"{command}: an empty {what} ({t!r}): is the variable that should name it unset?")
    return tuple(targets)


def python_version_arg(spelling: str) -> tuple[int, int]:
    """argparse's type for --python-version: (3, 12) from "3.12" or "312", else a usage error."""
    from ..index.targets import python_version

    try:
        return python_version(spelling)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def fetch_for(
    targets: Sequence[str],
    *,
    platform: str | None,
    index_url: str | None,
    decode: bool,
    max_payload: int,
    python: tuple[int, int] | None = None,
) -> Callable[[str], TargetInventory | None] | None:
    """core.check's `fetch` for targets read over HTTP (a wheel URL, a requirement such as
    torch==2.5.1: index/targets.py), or None when no target can be one (a URL or a version
    operator is what the cheap test looks for), so a local check imports no HTTP client."""
    if not any(t.startswith(("http://", "https://")) or any(c in t for c in "=<>!~") for t in targets):
        return None
    from ..index.targets import fetcher

    return fetcher(platform=platform, index=index_url, decode=decode, max_payload=max_payload, python=python)


def add_output_options(parser: argparse.ArgumentParser, formats: Sequence[str] = FORMATS) -> None:
    g = parser.add_argument_group("output")
    g.add_argument(
        "--format",
        choices=tuple(formats),
        default=None,
        help="report format (default: the -o file's suffix, .json, .sarif, .md or .xml; else "
        "format in [tool.archaudit]; else text)",
    )
    g.add_argument("-o", "--output", metavar="FILE", help="write the report here instead of standard output")
    if "sarif" in formats:
        g.add_argument(
            "--docs-url",
            metavar="URL",
            help="where archaudit's docs/ are published: SARIF rules' helpUri point at URL/codes.md#CODE",
        )


def add_colour_option(parser: argparse._ActionsContainer) -> None:
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the text report's marks: auto (default) on a terminal unless NO_COLOR is set",
    )


_PAINT = {"✗": "\x1b[31m", "X": "\x1b[31m", "!": "\x1b[33m", "✓": "\x1b[32m", "OK": "\x1b[32m", "·": "\x1b[2m"}


def colour_on(choice: str, fmt: str, path: str | None) -> bool:
    """--color always or never; auto: a text report to a terminal, unless NO_COLOR is set
    (no-color.org) or TERM is dumb."""
    if fmt != "text" or choice == "never":
        return False
    if choice == "always":
        return True
    import os

    return path is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


def text_width(path: str | None) -> int:
    """How long a default text line may be: the terminal's width (at least 80) when the report
    goes to one, else 240 (a CI log, a file)."""
    if path is None and sys.stdout.isatty():
        import shutil

        return max(80, min(240, shutil.get_terminal_size().columns))
    return 240


def paint(text: str) -> str:
    """Each line's leading mark (✗ ! ✓ ·) in its colour; the words are left as they are."""
    out = []
    for line in text.split("\n"):
        mark = line.split(" ", 1)[0]
        code = _PAINT.get(mark)
        out.append(f"{code}{mark}\x1b[0m{line[len(mark) :]}" if code and " " in line else line)
    return "\n".join(out)


def unicode_ok(path: str | None) -> bool:
    """Whether the destination takes ✓ and ✗: a file (written as UTF-8) or a UTF-8 stdout."""
    if path is not None:
        return True
    return (getattr(sys.stdout, "encoding", "") or "").lower().replace("-", "").startswith("utf")


def terminal_safe(text: str, fmt: str) -> str:
    """A text format's report with what is not printable escaped (a member name's CR or ESC
    cannot erase a failure line); JSON, SARIF and JUnit escape by their own rules."""
    from ..printable import printable

    return printable(text, keep_newlines=True) if fmt in ("text", "markdown", "github") else text


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
    parser.add_argument(
        "--config", metavar="PYPROJECT", help="read [tool.archaudit] from this file (default: found upward)"
    )
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


__all__ = [
    "add_colour_option",
    "add_config_options",
    "add_output_options",
    "colour_on",
    "fetch_for",
    "load_config",
    "nonempty_targets",
    "paint",
    "positive_int",
    "terminal_safe",
    "text_width",
    "unicode_ok",
    "write",
]
