"""Test-suite hooks: reference tools skip on a developer machine and fail in CI (see reference_tools)."""

from __future__ import annotations

import pytest

from reference_tools import missing_tool


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "reference_tool(tool, present): needs a reference tool")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("reference_tool"):
        if not mark.kwargs["present"]:
            missing_tool(mark.kwargs["tool"])
