"""The complexity gate counts what radon counts, and no module is a big room.

ruff's C901 (McCabe, max-complexity 15, tests/test_static_checks.py) counts branches, so a
function that packs them into conditional expressions, comprehensions and boolean chains passes
it. radon's cyclomatic complexity counts those too. A function radon ranks D or worse (above 20)
is split at its seams into named steps. KNOWN would list, by qualified name, one still over, a
list that may only shrink (it is empty): the test fails on a new offender and on a KNOWN entry
that no longer is one. Closures are measured on their own (radon's --show-closures).

No module of src/ is over 700 lines (LONG, the same rule), and every module with logic has a test
module of its own, tests/<package>/test_<module>.py (NO_MIRROR names the others, with why).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

radon_complexity = pytest.importorskip("radon.complexity", reason="a test dependency: pip install -e '.[test]'")
radon_visitors = pytest.importorskip("radon.visitors")

SRC = Path(__file__).resolve().parents[1] / "src"
BAR = 20  # radon's rank D starts above 20
MAX_LINES = 700

KNOWN: set[str] = set()
"""Functions radon still ranks D or worse (none since issue 34): a list that may only shrink."""

LONG: set[str] = set()
"""Modules still over MAX_LINES (none since issue 34): a list that may only shrink."""


def modules() -> list[Path]:
    return sorted((SRC / "archaudit").rglob("*.py"))


def complexities(text: str) -> Iterator[tuple[str, int]]:
    """(qualified name, cyclomatic complexity) of every function, method and closure in a module."""
    for block in radon_complexity.add_inner_blocks(radon_complexity.cc_visit(text)):
        if isinstance(block, radon_visitors.Function):
            yield block.fullname, block.complexity


def over(text: str, where: str = "") -> dict[str, int]:
    return {f"{where}:{name}": cc for name, cc in complexities(text) if cc > BAR}


def test_no_function_is_ranked_d_or_worse_but_the_known_ones():
    found: dict[str, int] = {}
    for path in modules():
        found |= over(path.read_text(encoding="utf-8"), path.relative_to(SRC).as_posix())
    assert sorted(set(found) - KNOWN) == [], "split these at their seams"
    assert sorted(KNOWN - set(found)) == [], "no longer over the bar: remove them from KNOWN"


def test_no_module_is_over_700_lines_but_the_known_ones():
    long = {
        path.relative_to(SRC).as_posix()
        for path in modules()
        if len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES
    }
    assert sorted(long - LONG) == [], "split these at their seams"
    assert sorted(LONG - long) == [], "no longer over the bar: remove them from LONG"


def test_the_gate_counts_what_c901_does_not():
    """A function that packs its branches into expressions is over radon's bar though McCabe's
    statement count stays low: the gate sees what ruff's C901 lets through."""
    packed = (
        "def f(a, b, c):\n    return [x for x in a if x and b or c] if a else "
        + " or ".join(f"(b{i} if c else a)" for i in range(10))
        + "\n"
    )
    plain = "def g(a):\n    if a:\n        return 1\n    return 2\n"
    assert over(packed, "m") and not over(plain, "m")
    if importlib.util.find_spec("ruff") is not None:  # and C901, at the bar pyproject.toml sets, passes it
        mccabe = subprocess.run(
            [
                sys.executable,
                "-m",
                "ruff",
                "check",
                "--isolated",
                "--select",
                "C901",
                "--config",
                "lint.mccabe.max-complexity=15",
                "--stdin-filename",
                "m.py",
                "-",
            ],
            input=packed,
            capture_output=True,
            text=True,
            check=False,
        )
        assert mccabe.returncode == 0, mccabe.stdout
    closure = (
        "def outer():\n    def inner(a, b):\n        return "
        + " or ".join(f"(a if b{i} else b)" for i in range(21))
        + "\n    return inner\n"
    )
    assert list(over(closure, "m")) == ["m:outer.inner"]


NO_MIRROR: dict[str, str] = {
    "codes/coverage.py": "a table of CodeInfo records, no logic: tests/test_findings.py checks every entry",
    "codes/drivers_config.py": "a table of CodeInfo records, no logic: tests/test_findings.py checks every entry",
    "codes/unverified.py": "a table of CodeInfo records, no logic: tests/test_findings.py checks every entry",
    "smoke/defaults.py": "two constants, no logic",
}
"""Modules with no test module of their own, each with the reason it needs none."""


def mirror_of(module: Path) -> Path:
    """tests/<package>/test_<module>.py for src/archaudit/<package>/<module>.py (a leading
    underscore dropped)."""
    rel = module.relative_to(SRC / "archaudit")
    return SRC.parent / "tests" / rel.parent / f"test_{rel.stem.lstrip('_')}.py"


def test_every_module_has_a_test_module_of_its_own():
    """Tests mirror the code: one test module per module where there is logic (CONTRIBUTING.md)."""
    missing = [
        path.relative_to(SRC / "archaudit").as_posix()
        for path in modules()
        if path.stem not in ("__init__", "__main__") and not mirror_of(path).exists()
    ]
    assert sorted(set(missing) - set(NO_MIRROR)) == [], "write tests/<package>/test_<module>.py for these"
    assert sorted(set(NO_MIRROR) - set(missing)) == [], "they have a test module now: remove them from NO_MIRROR"
