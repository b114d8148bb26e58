"""archaudit.printable: a name from a wheel shown as text, never obeyed by a terminal, and shown
as Markdown text, never rendered as markup. The Markdown side is checked by a CommonMark parser
(markdown-it-py, which the test extra installs with abi3audit's rich), not by the escapes themselves."""

from __future__ import annotations

from typing import Any

import pytest

from archaudit.printable import markdown, printable
from reference_tools import missing_tool


@pytest.mark.parametrize(
    "name, shown",
    [
        ("lib/\x1b[32mPASS\x1b[0m.so", "lib/\\x1b[32mPASS\\x1b[0m.so"),  # a colour escape
        ("lib\rlibgood.so", "lib\\rlibgood.so"),  # a carriage return rewriting the line
        ("lib\u202eos.bil", "lib\\u202eos.bil"),  # a right-to-left override
        ("lib\x85.so", "lib\\x85.so"),  # a C1 control
        ("lib\U000e0080.so", "lib\\U000e0080.so"),  # an unassigned code point
        ("two\nlines", "two\\nlines"),
    ],
)
def test_what_a_terminal_would_obey_is_shown_as_its_escape(name, shown):
    assert printable(name) == shown and printable(shown) == shown


def test_printable_text_is_kept_as_it_is_and_a_report_keeps_its_lines():
    name = "torch/lib/libtorch_cuda.so ünïcode ✓"
    assert printable(name) is name
    assert printable("line 1\nline\x1b 2", keep_newlines=True) == "line 1\nline\\x1b 2"


def parser() -> Any:
    """A CommonMark parser with GitHub's tables (skip here without it, fail in CI)."""
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        missing_tool("markdown-it-py", "not installed (it comes with the test extra, through abi3audit)")
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def tokens(cell: str) -> list[str]:
    """Every inline token type a CommonMark parser makes of a table cell."""
    parsed = parser().parse(f"| a |\n|---|\n| {cell} |\n")
    return [c.type for t in parsed if t.type == "inline" for c in t.children or ()]


@pytest.mark.parametrize(
    "name",
    [
        "lib[click](http://evil.example).so",
        "![x](http://evil.example/x.png)",
        "lib*bold*_em_.so",
        "lib`code`.so",
        "lib~~gone~~.so",
        "lib<script>x</script>.so",
        "lib&lt;.so",
        "lib|cell.so",
        "lib\\*.so",
    ],
)
def test_a_name_in_a_markdown_cell_is_only_text(name):
    assert set(tokens(markdown(name))) <= {"text"}  # no link, image, emphasis, code or HTML
    assert "|" not in markdown(name).replace("\\|", "")  # the cell is not split


def test_a_name_in_a_markdown_cell_reads_back_as_itself():
    name = "lib[a](b)*c*_d_`e`<f>&g|h~i\\j.so"
    parsed = parser().parseInline(markdown(name))
    assert "".join(c.content for c in parsed[0].children or ()) == name
