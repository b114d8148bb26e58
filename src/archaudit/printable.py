"""Text from a wheel made safe for a terminal: what is not printable (CR, ESC and every other
control, C1 controls, bidirectional overrides, unassigned code points) is written as its Python
escape (`\\r`, `\\x1b`, `\\u202e`), so a member name or a kernel name cannot move the cursor,
erase a line or recolour a verdict. Shared by the readers (display names) and every text format."""

from __future__ import annotations


def _escape(ch: str) -> str:
    return ch.encode("unicode_escape").decode("ascii")


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every character str.isprintable() refuses escaped; newlines too unless kept
    (a whole report keeps its own lines; a name never holds one)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or (keep_newlines and ch == "\n") else _escape(ch) for ch in text)


# What Markdown (CommonMark and GitHub's tables) would read as markup: code, emphasis, strike,
# links and images, raw HTML and entities, table cells. Each is written escaped.
_MARKDOWN = {
    "\\": "\\\\",
    "`": "\\`",
    "*": "\\*",
    "_": "\\_",
    "[": "\\[",
    "]": "\\]",
    "~": "\\~",
    "|": "\\|",
    "<": "&lt;",
    ">": "&gt;",
    "&": "&amp;",
    "\n": " ",
    "\r": " ",
}
_MARKDOWN_TABLE = str.maketrans(_MARKDOWN)


def markdown(text: str) -> str:
    """`text` as literal Markdown inline text, fit for a table cell: no link, image, emphasis, code
    span, HTML tag or entity of the text's own becomes markup (names from a wheel are shown, never
    rendered)."""
    return text.translate(_MARKDOWN_TABLE)


__all__ = ["markdown", "printable"]
