"""An empty target (what an unset `$WHEEL` gives a script) is a usage error that says so, in every
command and in the Python API, never an internal error (issue 39, "Inputs")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import archaudit
from archaudit import core
from archaudit.core import example_wheel

UNSET = "is the variable that should name it unset?"


def run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "archaudit", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "argv, words",
    [
        (["check", "", "--arch", "80"], "check: an empty TARGET"),
        (["check", "   ", "--arch", "80"], "check: an empty TARGET"),
        (["check", "--example", "", "--arch", "80"], "check: an empty TARGET"),
        (["diff", "", "{example}"], "diff: an empty OLD"),
        (["diff", "{example}", ""], "diff: an empty NEW"),
        (["smoke", ""], "smoke: error: an empty wheel"),
        (["smoke", "--installed", ""], "smoke: error: an empty --installed NAME"),
        (["index", "", "--db", "out.db"], "index: an empty SOURCE"),
    ],
)
def test_an_empty_target_is_one_usage_line_exit_2(tmp_path: Path, argv: list[str], words: str) -> None:
    r = run(tmp_path, *[a.replace("{example}", example_wheel()) for a in argv])
    assert r.returncode == 2, r.stderr
    assert words in r.stderr and UNSET in r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out.db").exists()  # a refused index leaves no database behind


@pytest.mark.parametrize("paths", ["", [""], [example_wheel(), " "]])
def test_the_api_raises_archaudit_error_for_an_empty_path(paths: str | list[str]) -> None:
    with pytest.raises(archaudit.ArchauditError, match="an empty TARGET"):
        archaudit.check(paths, arch="80")


def test_core_check_of_an_empty_target_is_an_e001_finding_not_an_exception() -> None:
    report = core.check([""])
    assert report.exit_code == 2
    assert [(f.code, f.message) for f in report.findings] == [
        ("E001", ": cannot read: an empty target names nothing. Fix: check the path and its permissions")
    ]
