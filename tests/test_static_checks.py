"""The code is type-checked (mypy: --strict on src/, every body of tests/ with check_untyped_defs),
linted and format-checked (ruff, on every Python tree), with the configuration in pyproject.toml,
as part of the test command: a change that breaks any of them fails CI like a bug."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )


def test_mypy_strict_is_clean():
    pytest.importorskip("mypy", reason="mypy is a test dependency: pip install -e '.[test]'")
    result = _run("mypy")  # files (src/ and tests/) and strictness come from [tool.mypy] in pyproject.toml
    assert result.returncode == 0, result.stdout + result.stderr


PYTHON_TREES = ("src", "tests", "benchmarks", "tools", "corpus", "examples")


def test_ruff_is_clean():
    """The tests, benchmarks and tools are linted by the same rules as the code they test."""
    pytest.importorskip("ruff", reason="ruff is a test dependency: pip install -e '.[test]'")
    result = _run("ruff", "check", *PYTHON_TREES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_leaves_every_file_as_it_is():
    """One style ([tool.ruff.format]); a file the formatter would change fails, naming the file."""
    pytest.importorskip("ruff", reason="ruff is a test dependency: pip install -e '.[test]'")
    result = _run("ruff", "format", "--check", *PYTHON_TREES)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_complexity_gate_is_on():
    """ruff's C901 (McCabe) is selected with a bar, so test_ruff_is_clean fails on a function
    that branches more than the bar allows."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib

    lint = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    assert "C90" in lint["select"] and 10 <= lint["mccabe"]["max-complexity"] <= 15


def test_no_function_is_over_the_complexity_bar():
    """With no per-file ignores at all, at the bar, ruff finds no function over it."""
    pytest.importorskip("ruff", reason="ruff is a test dependency: pip install -e '.[test]'")
    result = _run(
        "ruff",
        "check",
        "src",
        "--isolated",
        "--select",
        "C901",
        "--config",
        "lint.mccabe.max-complexity=15",
        "--output-format",
        "json",
    )
    found = {
        (Path(v["filename"]).resolve().relative_to(REPO).as_posix(), v["message"].split("`")[1])
        for v in json.loads(result.stdout)
    }
    assert not found, sorted(found)


def test_every_module_says_what_it_exports():
    """Public and private are visible: each module lists its public names in __all__ (what other
    modules and tests use); the rest is internal. Package __init__ files, __main__ and the smoke
    child's path-loaded modules are exempt."""
    exempt = {"__init__.py", "__main__.py", "worker.py", "cuda_driver.py"}
    missing = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "src" / "archaudit").rglob("*.py"))
        if p.name not in exempt and "\n__all__ = " not in p.read_text(encoding="utf-8")
    ]
    assert missing == []


def test_package_is_marked_typed():
    assert (REPO / "src" / "archaudit" / "py.typed").is_file()
