"""Test-suite hooks: reference tools skip on a developer machine and fail in CI (see reference_tools)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reference_tools import missing_tool, speedups


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "reference_tool(tool, present): needs a reference tool")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("reference_tool"):
        if not mark.kwargs["present"]:
            missing_tool(mark.kwargs["tool"])


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding the bundled example wheel, so outputs name no machine path."""
    from archaudit import core

    shutil.copy(core.example_wheel(), tmp_path / "gpu_example-1.0-py3-none-linux_x86_64.whl")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(params=["compiled", "python"])
def each_cubin_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once with each cubin reader: the compiled one (archaudit._speedups, where the
    install built it) and the Python reference (fatbin._tables)."""
    from archaudit.read import fatbin

    if request.param == "compiled":
        monkeypatch.setattr(fatbin, "_compiled", speedups())
    else:
        monkeypatch.setattr(fatbin, "_compiled", None)
    return str(request.param)
