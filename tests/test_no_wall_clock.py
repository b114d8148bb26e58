"""Tests assert no wall-clock time (DEVELOPERS.md): a loaded machine must not fail a test. Work is
asserted by counts (bytes read, steps taken, findings kept); times belong in benchmarks/. This
reads every test file's syntax tree and fails on an `assert` that compares a clock reading, a
duration or a `seconds` field with a bound (issue 39, "Tests that finish")."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLOCKS = {"perf_counter", "monotonic", "time", "process_time", "perf_counter_ns", "monotonic_ns", "time_ns"}
TIMED_NAMES = {"elapsed", "seconds", "duration", "took", "wall", "wall_s"}


def _timed(node: ast.AST, timed_vars: set[str]) -> bool:
    """A comparison operand that is a clock reading or a duration."""
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in CLOCKS
            and isinstance(sub.func.value, ast.Name)
            and sub.func.value.id == "time"
        ):
            return True
        if isinstance(sub, ast.Name) and sub.id in timed_vars:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in TIMED_NAMES:
            return True
        if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant) and sub.slice.value in TIMED_NAMES:
            return True
    return False


def _clock_vars(tree: ast.AST) -> set[str]:
    """Names assigned from a clock (t0 = time.monotonic(), elapsed = time.monotonic() - t0)."""
    out = set(TIMED_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _timed(node.value, set()):
            out |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def wall_clock_asserts(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    timed_vars = _clock_vars(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for cmp in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            if not any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in cmp.ops):
                continue
            operands = [cmp.left, *cmp.comparators]
            timed = [o for o in operands if _timed(o, timed_vars)]
            # a bound: a duration against a number or another duration; not `0 <= seconds <= took`,
            # which holds on any machine (a reading is within the interval that brackets it)
            lower_only = all(isinstance(op, (ast.Gt, ast.GtE)) for op in cmp.ops) or (
                len(cmp.ops) == 2
                and all(isinstance(op, ast.LtE) for op in cmp.ops)
                and isinstance(cmp.left, ast.Constant)
                and _timed(cmp.comparators[-1], timed_vars)
            )
            if timed and not lower_only:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node.test)[:100]}")
    return found


def test_no_test_asserts_a_wall_clock_bound() -> None:
    found = [
        f"{p.parent.name}/{hit}"
        for p in sorted(TESTS.rglob("*.py"))
        if "fixtures" not in p.parts
        for hit in wall_clock_asserts(p)
    ]
    assert found == [], "\n".join(found)


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    """The check is not vacuous: the asserts issue 39 found are caught, a count is not."""
    (tmp_path / "t.py").write_text(
        "import time\n"
        "t0 = time.monotonic()\nelapsed = time.monotonic() - t0\nassert elapsed < 90\n"
        "assert large['seconds'] < 6 * small['seconds'] + 0.5\n"
        "assert run.seconds < bound\n"
        "assert 0 <= inv.seconds < 60\n"
        "assert large['steps'] < 6 * small['steps']\n"
        "assert row.duration >= 10.0\n",
        encoding="utf-8",
    )
    hits = wall_clock_asserts(tmp_path / "t.py")
    assert [h.split(":")[1] for h in hits] == ["4", "5", "6", "7"], hits
    (tmp_path / "u.py").write_text(
        "small, large = (t['seconds'] for t in doc['targets'])\nassert small < large / 4\n", encoding="utf-8"
    )
    assert [h.split(":")[1] for h in wall_clock_asserts(tmp_path / "u.py")] == ["2"]
