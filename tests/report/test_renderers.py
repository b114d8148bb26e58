"""One renderer table per report type, covering every format its command offers."""

from __future__ import annotations

from archaudit.cli import main_diff, main_query, main_smoke
from archaudit.config import FORMATS
from archaudit.report import check, diff, index, smoke


def test_every_command_format_has_its_renderer():
    assert set(check.RENDERERS) == set(FORMATS)
    assert set(diff.RENDERERS) == set(main_diff.FORMATS)
    assert set(smoke.RENDERERS) == set(main_smoke.FORMATS)
    assert set(index.RENDERERS) == set(main_query.FORMATS)
