"""What the subcommands share: empty targets refused, numbers and Python versions checked where
they are parsed, marks coloured only where asked, what is not printable escaped in the text
formats, and a report that cannot be written one usage line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from archaudit.cli import common
from archaudit.errors import UsageError


def test_an_empty_target_is_a_usage_error_naming_the_unset_variable():
    assert common.nonempty_targets("check", ["a.whl", "b.whl"]) == ("a.whl", "b.whl")
    with pytest.raises(UsageError, match=r"diff: an empty OLD \(' '\): is the variable that should name it unset\?"):
        common.nonempty_targets("diff", [" "], "OLD")


@pytest.mark.parametrize("text, value", [("1", 1), ("64", 64), (" 8 ", 8)])
def test_positive_whole_numbers_are_taken(text, value):
    assert common.positive_int(text) == value


@pytest.mark.parametrize("text", ["0", "-3", "1.5", "x", "1\u0660", "\u0661"])
def test_anything_else_is_not_a_positive_whole_number(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a positive whole number"):
        common.positive_int(text)


def test_python_version_is_parsed_as_pip_takes_it():
    assert common.python_version_arg("3.12") == common.python_version_arg("312") == (3, 12)
    with pytest.raises(argparse.ArgumentTypeError, match="not a Python version"):
        common.python_version_arg("3")


def test_paint_colours_a_lines_leading_mark_and_leaves_the_words():
    text = "✗ G001 lib: misses 90\n! K001 x\n✓ lib passes\n· D002 floor\n  LIBRARY ✗\n✗"
    lines = common.paint(text).split("\n")
    assert lines[0] == "\x1b[31m✗\x1b[0m G001 lib: misses 90"
    assert lines[1].startswith("\x1b[33m!\x1b[0m ") and lines[2].startswith("\x1b[32m✓\x1b[0m ")
    assert lines[3].startswith("\x1b[2m·\x1b[0m ")
    assert lines[4:] == ["  LIBRARY ✗", "✗"]  # a mark inside a line, or alone, is left as it is


def test_colour_only_for_text_and_never_into_a_file(monkeypatch: pytest.MonkeyPatch):
    assert common.colour_on("always", "text", "r.txt")
    assert not common.colour_on("always", "json", None) and not common.colour_on("never", "text", None)
    assert not common.colour_on("auto", "text", "r.txt")
    monkeypatch.setenv("NO_COLOR", "1")
    assert not common.colour_on("auto", "text", None)


def test_text_formats_escape_what_is_not_printable_and_the_others_keep_it():
    hostile = "lib\x1b[2K\rok.so\nnext line"
    for fmt in ("text", "markdown", "github"):
        safe = common.terminal_safe(hostile, fmt)
        assert "\x1b" not in safe and "\r" not in safe and safe.endswith("\nnext line")
    for fmt in ("json", "sarif", "junit"):
        assert common.terminal_safe(hostile, fmt) == hostile


def test_a_report_is_written_as_utf8_or_refused_in_one_line(tmp_path: Path):
    out = tmp_path / "r.txt"
    common.write("✓ passes\n", str(out))
    assert out.read_text(encoding="utf-8") == "✓ passes\n"
    with pytest.raises(UsageError, match=r"-o .*missing/r.txt: cannot write the report: No such file or directory"):
        common.write("x", str(tmp_path / "missing" / "r.txt"))
    assert common.unicode_ok(str(out)) and common.text_width(str(out)) == 240


def test_only_a_url_or_a_requirement_needs_the_http_reader():
    def fetch(*targets: str) -> object:
        return common.fetch_for(targets, platform=None, index_url=None, decode=True, max_payload=1 << 20)

    assert fetch("a.whl", "dist/", "torch") is None
    assert callable(fetch("a.whl", "torch==2.5.1"))
    assert callable(fetch("https://files.example/x-1.0-py3-none-any.whl"))
