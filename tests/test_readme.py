"""The README says what the code does: its example output and its list of finding codes."""

from __future__ import annotations

import re
from pathlib import Path

from archaudit.cli import main
from archaudit.findings import CODES

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_every_finding_code_is_documented():
    table = README[README.index("### Finding codes"):]
    for code in CODES:
        assert re.search(rf"\b{code}\b", table), code


def test_quick_start_output_is_what_the_example_prints(capsys):
    rc = main(["check", "--no-config", "--example", "--arch", "80;90"])
    out = capsys.readouterr().out
    section = README.split("## Quick start", 1)[1]
    block = next(body for lang, body in re.findall(r"```(\w*)\n(.*?)```", section, re.S) if not lang)
    strip = lambda text: re.sub(r" in \d+\.\d+ s", "", text)  # noqa: E731
    assert rc == 1 and strip(out) == strip(block)
