"""The README says what the code does: every command it shows parses, every command whose output
it shows prints exactly that output and exit status, and its list of finding codes is complete."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from archaudit.cli import build_parser, main
from archaudit.findings import CODES

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, re.S)

sys.path.insert(0, os.path.dirname(__file__))
from wheels import fetch  # noqa: E402


def _command_lines() -> list[str]:
    """Every `archaudit ...` command the README shows in a shell or console block."""
    out = []
    for lang, body in BLOCKS:
        if lang not in ("sh", "console"):
            continue
        for line in body.splitlines():
            line = line.removeprefix("$ ")
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("archaudit "):
                    out.append(part)
    return out


def _console_blocks() -> list[tuple[str, str, int]]:
    """(command, output, exit status) of each console block: `$ archaudit ...`, what it prints,
    and a last line `[exit N]`."""
    out = []
    for lang, body in BLOCKS:
        if lang != "console":
            continue
        lines = body.rstrip("\n").splitlines()
        if not lines or not lines[0].startswith("$ archaudit "):
            continue
        status = re.fullmatch(r"\[exit (\d+)\]", lines[-1])
        assert status, f"a console block ends with its exit status as '[exit N]': {lines[0]}"
        out.append((lines[0][2:], "\n".join(lines[1:-1]) + "\n", int(status.group(1))))
    return out


def test_every_finding_code_is_documented() -> None:
    table = README[README.index("### Finding codes"):]
    for code in CODES:
        assert re.search(rf"\b{code}\b", table), code


def test_the_readme_shows_commands_and_their_output() -> None:
    assert len(_command_lines()) >= 10 and len(_console_blocks()) >= 2


@pytest.mark.parametrize("command", _command_lines())
def test_every_command_shown_parses(command: str) -> None:
    argv = shlex.split(command, comments=True)[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as e:  # --help and --version exit 0; a usage error exits 2
        assert e.code == 0, command


def _real_wheel(token: str) -> str:
    """A wheel file name the README shows, fetched into the test cache (the README shows no paths)."""
    m = re.fullmatch(r"([A-Za-z0-9_]+)-([^-]+)-.*\.whl", token)
    if not m or os.path.exists(token):
        return token
    return str(fetch(m.group(1).replace("_", "-"), m.group(2), filename=token))


def _console_param(command: str, output: str, status: int) -> object:
    """A block that reads a real wheel from the index (torch's, 555 MB) is the census tier's."""
    real = any(re.fullmatch(r"[A-Za-z0-9_]+-[^-]+-.*\.whl", t) and not os.path.exists(t) for t in shlex.split(command))
    return pytest.param(command, output, status, marks=[pytest.mark.census] if real else [])


@pytest.mark.parametrize("command,output,status", [_console_param(*block) for block in _console_blocks()])
def test_console_blocks_print_what_they_show(command: str, output: str, status: int,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    argv = [_real_wheel(t) for t in shlex.split(command)[1:]]
    if argv[0] in ("check", "diff") and "--no-config" not in argv:
        argv.insert(1, "--no-config")
    rc = main(argv)
    out = capsys.readouterr().out
    strip = lambda text: re.sub(r" in \d+\.\d+ s", "", text)  # noqa: E731
    assert strip(out) == strip(output)
    assert rc == status
