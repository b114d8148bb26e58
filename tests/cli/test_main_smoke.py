"""`archaudit smoke`: what the command refuses before it makes an environment, and its exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from archaudit.cli import main


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="smoke runs on Linux only")
def test_smoke_of_a_missing_wheel_is_no_such_file_exit_2(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "archaudit", "smoke", "nope.whl"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert "nope.whl: no such file" in r.stderr and "Linux wheels on Linux only" not in r.stderr


@pytest.mark.parametrize("fmt", ["text", "json", "sarif"])
def test_an_empty_wheel_name_is_refused_before_anything_is_installed(fmt, tmp_path, capsys):
    out = tmp_path / "r.out"
    assert main(["smoke", "", "--format", fmt, "-o", str(out)]) == 2
    assert "an empty wheel ('')" in capsys.readouterr().err
    if fmt == "json":
        doc = json.loads(out.read_text())
        assert doc["exit_code"] == 2 and doc["error"].startswith("an empty wheel ('')")
    elif fmt == "sarif":
        assert json.loads(out.read_text())["runs"][0]["invocations"][0]["exitCode"] == 2
    else:
        assert not out.exists()  # text: the one line on stderr


def test_neither_a_wheel_nor_installed_is_a_usage_error(capsys):
    assert main(["smoke"]) == 2
    assert "give a wheel, --example or --installed NAME" in capsys.readouterr().err
