"""CHANGELOG.md holds release notes a user reads: under "Unreleased", one line per change, grouped
as Keep a Changelog groups them, so that branches adding lines merge by `merge=union`
(.gitattributes) without conflicts. History lives in git; the notebook check of the user docs
(tests/test_readme.py) keeps commit ids, issue numbers and dates out of it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHANGELOG = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
GROUPS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
MAX_LINE = 160


def unreleased() -> list[str]:
    section = CHANGELOG.split("\n## Unreleased\n", 1)[1]
    return section.split("\n## ", 1)[0].splitlines()


def test_unreleased_is_grouped_one_line_per_change() -> None:
    lines = unreleased()
    groups = [line[4:] for line in lines if line.startswith("### ")]
    assert groups and all(g in GROUPS for g in groups) and len(set(groups)) == len(groups), groups
    assert groups == sorted(groups, key=GROUPS.index)
    for line in lines:
        if line.startswith("### ") or not line.strip():
            continue
        assert line.startswith("- ") and len(line) <= MAX_LINE, f"one line per change, at most {MAX_LINE}: {line[:80]}"


def test_entries_are_not_measurements() -> None:
    for line in unreleased():
        assert not re.search(r"\d+(\.\d+)? ?(s|ms|MB|GB|MiB|GiB|KB)\b|\d\.\d+x\b", line), line


def test_the_changelog_merges_by_union() -> None:
    attributes = (REPO / ".gitattributes").read_text(encoding="utf-8").splitlines()
    assert "CHANGELOG.md merge=union" in attributes
