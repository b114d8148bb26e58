"""Test-suite hooks: reference tools skip on a developer machine and fail in CI (see reference_tools);
the census tier runs only when asked for by name; the wheel cache knows which tier asks."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

import wheels
from reference_tools import missing_tool, speedups


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "reference_tool(tool, present): needs a reference tool")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked census (wheels over wheels.TIER_BYTES) run only under a -m that names census,
    even where they are also slow (a module marked slow as a whole): the real-wheel tier
    (-m "slow and not gpu") stays within its bytes."""
    if "census" in (config.option.markexpr or ""):
        return
    census = [item for item in items if item.get_closest_marker("census")]
    if census:
        config.hook.pytest_deselected(items=census)
        items[:] = [item for item in items if not item.get_closest_marker("census")]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    wheels.CENSUS = item.get_closest_marker("census") is not None  # before the fixtures fetch anything
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


@pytest.fixture
def empty_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty temp directory for the tool (`tempfile` caches its directory: set it directly),
    which a test asserts is still empty after a run that must write nothing."""
    where = tmp_path / "tmp"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


@pytest.fixture(params=["compiled", "python"])
def each_cubin_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test once with each cubin reader: the compiled one (archaudit._speedups, where the
    install built it) and the Python reference (codefacts._tables)."""
    from archaudit.read import codefacts

    if request.param == "compiled":
        monkeypatch.setattr(codefacts, "_compiled", speedups())
    else:
        monkeypatch.setattr(codefacts, "_compiled", None)
    return str(request.param)
