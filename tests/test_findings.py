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
    assert CODES["G001"] is CODES[Code.G001]  # type: ignore[index]  # a plain string finds its code


def test_rules_report_in_the_order_the_rule_package_states_once():
    """The decorators register each rule beside its definition, in its family's module; the
    package's LIBRARY_ORDER / TARGET_ORDER state the report order once, naming each rule once."""
    defined = [
        m
        for p in sorted((SRC / "judge" / "rules").glob("*.py"))
        for m in re.findall(
            r"^@(library|target)_rule\((?:Code\.)?(\w+)\)\ndef (\w+)\(", p.read_text(encoding="utf-8"), re.M
        )
    ]
    for kind, order, ruled in (
        ("library", rules.LIBRARY_ORDER, rules.LIBRARY_RULES),
        ("target", rules.TARGET_ORDER, rules.TARGET_RULES),
    ):
        names = sorted(fn for k, _, fn in defined if k == kind)
        assert len(set(order)) == len(order) and sorted(r.__name__ for _, r in ruled) == names
        assert [code for code, _ in ruled] == list(order)
    assert rules.LIBRARY_RULES[0][0] == rules.TARGET_RULES[0][0] == rules.READERS  # reader problems first


def test_no_bare_code_literal_in_the_package():
    """Every finding code the source passes around is a Code member, never a string literal a
    typo would pass (codes inside prose, messages and SQL are text, not values)."""
    codes = {c.value for c in Code}
    hits = []
    for p in SRC.rglob("*.py"):
        if p == SRC / "codes" / "__init__.py":  # where the Code members are defined
            continue
        with p.open("rb") as f:
            for t in tokenize.tokenize(f.readline):
                if t.type == tokenize.STRING and t.string[1:-1] in codes and t.string[0] == t.string[-1] in "'\"":
                    hits.append(f"{p.relative_to(SRC)}:{t.start[0]}")
    assert hits == []


# ---- folding: findings of one code on one subject reported once ----


def _g001(subject: str, i: int, **data: object):
    return make_finding(Code.G001, subject, f"{subject}: gap {i}", **data)


def test_up_to_five_of_one_code_on_one_subject_stay_as_they_are_in_their_order():
    from archaudit.findings import fold_findings

    found = [_g001("a.so", 0), make_finding(Code.G002, "a.so", "jit"), *(_g001("a.so", i) for i in range(1, 5))]
    assert fold_findings(found) == found


def test_a_sixth_folds_them_into_the_first_with_the_count_and_five_examples_where_the_first_was():
    from archaudit.findings import FOLD_EXAMPLES, fold_findings

    other = make_finding(Code.G002, "a.so", "jit")
    found = [other, *(_g001("a.so", i) for i in range(1000)), _g001("b.so", 0)]
    out = fold_findings(found)
    assert [f.code for f in out] == [Code.G002, Code.G001, Code.G001]
    folded = out[1]
    assert (folded.subject, folded.message, folded.count) == ("a.so", "a.so: gap 0", 1000)
    assert folded.examples == tuple(f"a.so: gap {i}" for i in range(FOLD_EXAMPLES))
    assert out[2] == found[-1] and out[0] == other  # another subject, another code: untouched
    again = fold_findings([folded, _g001("a.so", 1000)])  # folded ones count as many as they stand for
    assert len(again) == 1 and again[0].count == 1001 and again[0].examples == folded.examples


def test_answers_about_different_gpus_are_not_folded():
    from archaudit.findings import fold_findings

    found = [make_finding(Code.G009, "a.so", f"a.so on gpu{i}: not at all", gpu=f"gpu{i}") for i in range(20)]
    assert fold_findings(found) == found


def test_filters_act_on_a_folded_finding_as_on_each_it_stands_for():
    from archaudit.findings import fold_findings
    from archaudit.judge.filters import IgnoreRule, apply

    (folded,) = fold_findings(_g001("pkg/a.so", i) for i in range(50))
    kept = apply([folded], (), ("G001",), ())
    assert kept.kept == () and [s.finding.count for s in kept.suppressed] == [50]
    rule = IgnoreRule("G001", "a.so", "deliberate")
    by_rule = apply([folded], (), (), (rule,))
    assert by_rule.kept == () and by_rule.used == {rule}
    assert apply([folded], ("G001",), (), ()).kept == (folded,)  # --select keeps it whole
    assert apply([folded], ("K",), (), ()).kept == ()
    (e030,) = fold_findings(make_finding(Code.E030, "a.so", f"bundle {i}") for i in range(9))
    assert apply([e030], ("G",), ("E",), ()).kept == (e030,)  # an E0xx is never hidden, folded or not
