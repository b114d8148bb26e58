"""docs/fail-closed.md names, for each claim about failing closed, the tests that prove it:
every test it names must exist, so that a renamed or deleted test cannot leave a claim
unproved while the table still names it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "fail-closed.md"


def named_tests() -> list[tuple[str, str | None]]:
    """(test file, test function or None) for every `file.py[::name]` and `::name` in the
    table; `::name` belongs to the file named last before it in the same row."""
    out: list[tuple[str, str | None]] = []
    for row in DOC.read_text(encoding="utf-8").splitlines():
        if not row.startswith("| ") or row.startswith("| Claim") or row.startswith("|---"):
            continue
        tests = row.rsplit(" | ", 1)[-1]
        current: str | None = None
        for ref in re.findall(r"`([^`]+)`", tests):
            m = re.fullmatch(r"((?:tests/)?(?:[\w/]+/)?test_\w+\.py)?(?:::(\w+))?", ref)
            if m is None or not (m.group(1) or m.group(2)):
                continue
            current = m.group(1) or current
            assert current is not None, f"{ref!r} names no file: {row[:80]}"
            out.append((current, m.group(2)))
    return out


def test_every_test_the_fail_closed_table_names_exists():
    named = named_tests()
    assert len(named) >= 60
    for file, name in named:
        path = ROOT / (file if file.startswith("tests/") else f"tests/{file}")
        assert path.is_file(), file
        if name is not None:
            assert re.search(rf"^(?:async )?def {name}\(", path.read_text(encoding="utf-8"), re.M), f"{file}::{name}"
