"""`archaudit explain [CODE]`: every code's cause, example and fix as findings.py describes it, the
list of every code, and an unknown code a usage error."""

from __future__ import annotations

import pytest

from archaudit.cli import main
from archaudit.findings import CODES


@pytest.mark.parametrize("code", sorted(CODES))
def test_explain_prints_cause_example_fix(capsys, code):
    assert main(["explain", code.lower()]) == 0
    out = capsys.readouterr().out
    c = CODES[code]
    assert out.startswith(f"{code} ({c.severity}): {c.title}")
    assert f"Cause: {c.cause}" in out and f"Example: {c.example}" in out and f"Fix: {c.fix}" in out


def test_explain_lists_and_rejects(capsys):
    assert main(["explain"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(CODES)
    assert main(["explain", "Z999"]) == 2
    assert "unknown code 'Z999'" in capsys.readouterr().err
