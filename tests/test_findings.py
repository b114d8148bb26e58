"""One vocabulary of finding codes: the `Code` StrEnum, its table, and the rules registered
beside their functions."""

from __future__ import annotations

import json
import re
import tokenize
from pathlib import Path

from archaudit.findings import CODES, Code, make_finding
from archaudit.judge import rules

SRC = Path(__file__).resolve().parents[1] / "src" / "archaudit"


def test_every_code_member_has_one_row_and_every_row_a_member():
    assert list(CODES) == list(Code)
    assert all(info.code is member for member, info in CODES.items())


def test_a_code_is_its_string_in_text_json_and_lookups():
    f = make_finding(Code.G001, "lib.so", "message")
    assert f"{f.code}" == str(f.code) == "G001" and f.code == "G001"
    assert json.dumps({"code": f.code}) == '{"code": "G001"}'
    assert CODES["G001"] is CODES[Code.G001]


def test_rules_report_in_the_order_they_are_defined():
    """The decorators register each rule beside its definition; nothing lists them again."""
    text = (SRC / "judge" / "rules.py").read_text(encoding="utf-8")
    defined = re.findall(r"^@(library|target)_rule\((?:Code\.)?(\w+)\)\ndef (\w+)\(", text, re.M)
    assert [fn for kind, _, fn in defined if kind == "library"] == [r.__name__ for _, r in rules.LIBRARY_RULES]
    assert [fn for kind, _, fn in defined if kind == "target"] == [r.__name__ for _, r in rules.TARGET_RULES]
    assert rules.LIBRARY_RULES[0][0] == rules.TARGET_RULES[0][0] == rules.READERS  # reader problems first


def test_no_bare_code_literal_in_the_package():
    """Every finding code the source passes around is a Code member, never a string literal a
    typo would pass (codes inside prose, messages and SQL are text, not values)."""
    codes = {c.value for c in Code}
    hits = []
    for p in SRC.rglob("*.py"):
        if p.name == "findings.py":
            continue
        with p.open("rb") as f:
            for t in tokenize.tokenize(f.readline):
                if t.type == tokenize.STRING and t.string[1:-1] in codes and t.string[0] == t.string[-1] in "'\"":
                    hits.append(f"{p.relative_to(SRC)}:{t.start[0]}")
    assert hits == []
