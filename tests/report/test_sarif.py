"""SARIF 2.1.0 rules: each finding code is a rule whose id is the code and whose help is
`archaudit explain`'s text, and docs/codes.md (where helpUri points) is that text for every rule.
Each report's SARIF is checked against the published schema beside its other formats
(tests/report/test_formats.py, test_diff.py, test_smoke.py)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from archaudit.cli import main
from archaudit.findings import CODES, Code
from archaudit.report import sarif
from reference_tools import sarif_validator

DOCS = Path(__file__).resolve().parents[2] / "docs"


def explain(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["explain", code]) == 0
    return out.getvalue()


@pytest.mark.parametrize("code", sorted(CODES))
def test_each_codes_rule_is_its_explain_text(code: str) -> None:
    rule = sarif._code_rule(Code(code))
    assert rule.id == code and rule.help_text + "\n" == explain(code)
    assert rule.level == {"error": "error", "warning": "warning", "info": "note"}[CODES[Code(code)].severity]


def test_docs_codes_md_is_generated_from_the_code_table() -> None:
    text = (DOCS / "codes.md").read_text(encoding="utf-8")
    assert text == sarif.rules_markdown(), "regenerate docs/codes.md: python tools/gen_docs.py"
    for code in CODES:  # each helpUri anchor is a heading GitHub names #<code in lower case>
        assert f"\n## {code}\n" in text


def test_a_failure_log_is_valid_and_never_clean() -> None:
    log = json.loads(sarif.render_failure("the install failed: no matching distribution"))
    sarif_validator().validate(log)
    (run,) = log["runs"]
    assert run["results"] == [] and run["invocations"][0]["executionSuccessful"] is False
    assert run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"].startswith("the install")


def test_absolute_and_odd_paths_are_uris() -> None:
    assert sarif._uri("/srv/dist/a b.whl") == "file:///srv/dist/a%20b.whl"
    assert sarif._uri("dist/x#1.whl") == "dist/x%231.whl" and sarif._uri("pkg\\lib.so") == "pkg/lib.so"
