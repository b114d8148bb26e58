"""`archaudit query --db FILE html` without --project: the GPU atlas of every project in the
database. Its rows are the catalog's real GPUs, its cells agree with the coverage report,
each links to its wheel's findings, and a real headless browser (Debian's chromium) draws it
and applies its filters. docs/atlas.png is the screenshot this test makes
(ARCHAUDIT_REGEN_SCREENSHOT=1 writes it; ARCHAUDIT_ATLAS_DB=FILE draws it from another index,
such as the census's)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from archaudit.cli import main
from archaudit.core import example_wheel
from archaudit.index import atlas as atlas_data, reports, schema
from archaudit.report import atlas
from helpers import AMD_BIN, CUDA_BIN, DEMO_LIB, make_wheel
from reference_tools import needs_tool

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DOCS_SHOT = Path(__file__).resolve().parents[2] / "docs" / "atlas.png"
COLOURS = {"native": (0x1A, 0x98, 0x50), "jit": (0xFE, 0xE0, 0x8B), "no": (0xD7, 0x30, 0x27)}
HEADER = (0x14, 0x21, 0x3D)  # the page's title bar


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo 1.0 (sm_75..sm_120 and PTX), 2.0 (sm_80 only), 3.0 (PTX 9.0 only), the example wheel,
    and an AMD project (a HIP library for gfx1100, gfx90a:xnack- and gfx942, clang-built)."""
    d = tmp_path_factory.mktemp("atlas")
    wheels = d / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "demo", "1.0", {DEMO_LIB: CUDA_BIN / "lib_multi.so"})
    make_wheel(wheels, "demo", "2.0", {DEMO_LIB: CUDA_BIN / "lib_sm80.so"})
    make_wheel(wheels, "demo", "3.0", {DEMO_LIB: CUDA_BIN / "lib_ptx90.so"})
    make_wheel(wheels, "rocdemo", "1.0", {"rocdemo/libk.so": AMD_BIN / "hip_multi.so"})
    shutil.copy(example_wheel(), wheels)
    path = d / "index.db"
    main(["index", str(wheels), "--db", str(path), "-j", "1", "-q", "-o", os.devnull])
    return path


def _page(db: Path, out: Path) -> str:
    assert main(["query", "html", "--db", str(db), "-o", str(out)]) == 0  # no --project needed
    return out.read_text(encoding="utf-8")


def test_rows_are_the_catalogs_real_gpus_and_generations() -> None:
    rows = {r.key: r for r in atlas.gpu_rows()}
    assert "sm_88" not in rows and "sm_107" not in rows  # numbers no GPU reports
    assert rows["sm_87"].generation.startswith("Ampere") and "Jetson Orin" in rows["sm_87"].gpus
    assert "Jetson Thor" in rows["sm_110"].gpus and rows["sm_75"].generation == "Turing"
    names = {n for r in rows.values() for n in r.gpus}
    for gpu in (
        "Tesla T4",
        "A100",
        "H100",
        "B200",
        "GeForce RTX 4090",
        "GeForce RTX 5090",
        "Jetson Orin",
        "Instinct MI300X",
    ):
        assert gpu in names, gpu
    assert rows["gfx942:sramecc+:xnack-"].vendor == "amd" and "Instinct MI300X" in rows["gfx942:sramecc+:xnack-"].gpus


def test_every_project_on_one_page_with_cells_the_coverage_report_agrees_with(db: Path, tmp_path: Path) -> None:
    text = _page(db, tmp_path / "atlas.html")
    conn = schema.connect(str(db), create=False)
    try:
        by_project = atlas_data.columns(conn, atlas.gpu_rows())
        assert set(by_project) == {"demo", "gpu-example", "rocdemo"}
        for project in by_project:
            assert f'data-project="{project}"' in text
        mark = {"N": atlas.NATIVE, "J": atlas.JIT, "-": atlas.NO, "?": atlas.UNVERIFIED}
        for project in ("demo", "gpu-example"):
            cov = reports.coverage(conn, project)
            for row, col in zip(cov.rows, by_project[project]):
                assert row[0] == col.release
                for name, cell in zip(cov.columns[2:], row[2:]):
                    if cell and name in col.cells:  # the coverage axis also has numbers no GPU has (sm_88)
                        assert col.cells[name] == mark[str(cell)], (project, col.release, name)
    finally:
        conn.close()
    demo = {c.release: c.cells for c in by_project["demo"]}
    assert (demo["2.0"]["sm_80"], demo["2.0"]["sm_75"], demo["2.0"]["sm_90"]) == ("native", "no", "no")
    assert demo["3.0"]["sm_90"] == "jit" and demo["3.0"]["sm_80"] == "no"
    roc = by_project["rocdemo"][0].cells
    # AMD rows ask about their first GPU as it ships: the command's answer for that GPU
    amd_rows = [r for r in atlas.gpu_rows() if r.vendor == "amd"]
    wheel = next((db.parent / "wheels").glob("rocdemo-*.whl"))
    out = tmp_path / "amd.json"
    main(
        [
            "check",
            "--no-config",
            "-q",
            "--format",
            "json",
            "-o",
            str(out),
            str(wheel),
            *(a for r in amd_rows for a in ("--gpu", r.gpus[0])),
        ]
    )
    answers: dict[str, str] = {}
    for f in json.loads(out.read_text())["targets"][0]["findings"]:
        if f["code"] in ("G008", "G009"):
            answers[f["data"]["gpu"]] = (
                "no" if f["code"] == "G009" else {"native": "native", "jit": "jit"}[f["data"]["runs"]]
            )
    assert {r.key: roc[r.key] for r in amd_rows} == {r.key: answers[r.gpus[0]] for r in amd_rows}
    assert roc["gfx942:sramecc+:xnack-"] == "native" and roc["gfx942"] == "no"  # MI300X ships it; MI325X unrecorded
    assert roc["sm_90"] == atlas.HOST  # no NVIDIA code: no NVIDIA answer
    # every cell links to its wheel's findings, which the page holds
    for target in set(re.findall(r'href="#(w\d+)"', text)):
        assert f'id="{target}"' in text
    # the findings as indexed (no claim given: C001), and a driver floor for each project with NVIDIA code
    assert "C001" in text and "Driver floor over time" in text and text.count("<svg") == 2


def test_an_empty_database_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema.connect(str(tmp_path / "empty.db"), create=True).close()
    assert main(["query", "html", "--db", str(tmp_path / "empty.db")]) == 2
    assert "holds no wheels" in capsys.readouterr().err


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert BROWSER is not None
    return subprocess.run(
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
            *args,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _count(png: Path, rgb: tuple[int, int, int]) -> int:
    np = pytest.importorskip("numpy")
    image = pytest.importorskip("matplotlib.image")
    px = (image.imread(str(png))[..., :3] * 255).round().astype(int)
    return int((np.abs(px - np.array(rgb)).sum(axis=-1) <= 6).sum())


@needs_tool("chromium (apt-get install chromium)", BROWSER)
def test_a_real_browser_applies_the_filters(db: Path, tmp_path: Path) -> None:
    page = tmp_path / "atlas.html"
    _page(db, page)
    dom = _chromium("--dump-dom", page.as_uri() + "?project=demo&gpu=sm_75", profile=tmp_path / "p").stdout

    def shown(tag: str, attribute: str) -> dict[str, bool]:
        return {
            re.search(rf'{attribute}="([^"]+)"', t)[1]: " hidden" not in t  # type: ignore[index]
            for t in re.findall(rf"<{tag} [^>]*{attribute}=[^>]*>", dom)
        }

    assert shown("section", "data-project") == {"demo": True, "gpu-example": False, "rocdemo": False}
    cells = [
        (re.search(r'data-project="([^"]+)"', t)[1], " hidden" in t)  # type: ignore[index]
        for t in re.findall(r'<td class="cell[^>]*>', dom)
    ]
    assert {p for p, h in cells if not h} == {"demo"} and {p for p, h in cells if h} == {"gpu-example", "rocdemo"}
    rows = shown("tr", "data-gpu")
    assert {g for g, visible in rows.items() if visible} == {"sm_75"} and len(rows) > 10


@needs_tool("chromium (apt-get install chromium)", BROWSER)
def test_the_screenshot_shows_every_state_and_is_the_docs_one(db: Path, tmp_path: Path) -> None:
    """docs/atlas.png: regenerated here (from ARCHAUDIT_ATLAS_DB when given, such as the census's
    index); written to docs/ under ARCHAUDIT_REGEN_SCREENSHOT=1."""
    source = Path(os.environ.get("ARCHAUDIT_ATLAS_DB") or db)
    page = tmp_path / "atlas.html"
    _page(source, page)
    shot = tmp_path / "atlas.png"
    _chromium("--window-size=1400,1600", f"--screenshot={shot}", page.as_uri(), profile=tmp_path / "p")
    counts = {state: _count(shot, rgb) for state, rgb in COLOURS.items()}
    # native and no on any index; PTX only where some wheel runs somewhere by JIT alone (the fixtures do)
    assert counts["native"] > 500 and counts["no"] > 500, counts
    assert counts["jit"] > 500 or "ARCHAUDIT_ATLAS_DB" in os.environ, counts
    if os.environ.get("ARCHAUDIT_REGEN_SCREENSHOT") == "1":
        shutil.copy(shot, DOCS_SHOT)
    assert DOCS_SHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    docs = {state: _count(DOCS_SHOT, rgb) for state, rgb in {**COLOURS, "header": HEADER}.items()}
    assert docs["native"] > 500 and docs["no"] > 500 and docs["header"] > 5000, docs  # an atlas, drawn
