"""`archaudit query html`: the page is drawn by matplotlib and rendered by a real headless
browser (Debian's chromium); the screenshot must show the heat map's colours where the
coverage table says so."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from archaudit.cli import main
from helpers import CUDA_BIN as FIXTURES, DEMO_LIB as LIB, make_wheel
from reference_tools import needs_tool

matplotlib = pytest.importorskip("matplotlib", reason="matplotlib (archaudit[html]) is not installed")
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
GREEN, YELLOW, RED = (0x1A, 0x98, 0x50), (0xFE, 0xE0, 0x8B), (0xD7, 0x30, 0x27)


def _screenshot(page: Path, out: Path, profile: Path) -> None:
    assert BROWSER is not None
    subprocess.run(
        [
            BROWSER,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--hide-scrollbars",
            "--window-size=1400,1800",
            f"--screenshot={out}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def _count(png: Path, rgb: tuple[int, int, int]) -> int:
    import numpy as np
    from matplotlib import image

    px = (image.imread(str(png))[..., :3] * 255).round().astype(int)
    return int((np.abs(px - np.array(rgb)).sum(axis=-1) <= 6).sum())


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("html")
    wheels = d / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "demo", "1.0", {LIB: FIXTURES / "lib_multi.so"})
    make_wheel(wheels, "demo", "2.0", {LIB: FIXTURES / "lib_sm80.so"})
    make_wheel(wheels, "demo", "3.0", {LIB: FIXTURES / "lib_ptx90.so"})
    path = d / "i.db"
    assert main(["index", str(wheels), "--db", str(path), "-j", "1", "-q", "-o", os.devnull]) == 1
    return path


def test_page_holds_both_plots_and_the_tables(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    assert main(["query", "html", "--db", str(db), "--project", "demo", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.count("<svg") == 2 and "id=heatmap" in text and "id=driver-floor" in text
    assert "<table id=lost>" in text and "sm_75" in text


@needs_tool("chromium (apt-get install chromium)", BROWSER)
def test_a_real_browser_draws_the_heat_map(db: Path, tmp_path: Path) -> None:
    """1.0 runs natively everywhere it has SASS (green), 3.0 carries only PTX 9.0 (yellow from 9.0 up,
    red below), 2.0 only sm_80: so all three colours are on the page, drawn by the browser."""
    out = tmp_path / "demo.html"
    assert main(["query", "html", "--db", str(db), "--project", "demo", "-o", str(out)]) == 0
    png = tmp_path / "shot.png"
    _screenshot(out, png, tmp_path / "profile")
    counts = {name: _count(png, rgb) for name, rgb in (("green", GREEN), ("yellow", YELLOW), ("red", RED))}
    assert all(n > 200 for n in counts.values()), counts
    # an empty page (the same browser, no plots) has none of them: the colours come from the plots
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><html><body><p>nothing</p></body></html>")
    _screenshot(blank, tmp_path / "blank.png", tmp_path / "profile2")
    assert _count(tmp_path / "blank.png", GREEN) == 0


def test_a_release_whose_floor_is_unknown_is_left_off_the_plot_not_a_traceback():
    """The one driver order makes "unknown" the floor of any wheel with one unnamed floor; the
    plot draws the releases with a floor it can place and the table still lists "unknown"."""
    from archaudit.index.reports import Table
    from archaudit.report.index_html import floor_plot

    columns = ("version", "tags", "uploaded", "cuda", "driver", "set by")
    rows = (("1.0", "t", "", "12.0", "525.60.13", "liba.so"), ("1.1", "t", "", "13.0", "unknown", "libb.so"))
    assert "<svg" in floor_plot(Table("driver-floor", "floor", columns, rows))
    assert "<svg" in floor_plot(Table("driver-floor", "floor", columns, rows[1:]))
