"""Each finding code is described once, by its CodeInfo in findings.py: docs/codes.md and the
README's "Finding codes" table are generated from it by tools/gen_docs.py, and are never stale."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archaudit.findings import CODES, Code
from archaudit.report import codes_doc

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "gen_docs.py"


def gen_docs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_the_generated_documents_are_current() -> None:
    run = gen_docs("--check")
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_readme_table_has_one_row_per_code_from_the_code_table() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index(codes_doc.START) : readme.index(codes_doc.END)]
    rows = [r for r in table.splitlines() if r.startswith("| [")]
    assert len(rows) == len(CODES)
    for row, info in zip(rows, CODES.values()):
        assert row == f"| [{info.code}](docs/codes.md#{info.code.lower()}) | {info.severity} | {info.title} |"


def test_every_code_has_its_explain_text_in_docs_codes_md() -> None:
    text = (REPO / "docs" / "codes.md").read_text(encoding="utf-8")
    for info in CODES.values():
        assert f"\n## {info.code}\n\n**{info.title}** " in text and f"Cause: {info.cause}\n" in text


def _copy(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    shutil.copy(REPO / "docs" / "codes.md", tmp_path / "docs" / "codes.md")
    return tmp_path


@pytest.mark.parametrize("rel", ["README.md", "docs/codes.md"])
def test_a_stale_document_fails_the_check_and_is_rewritten(tmp_path: Path, rel: str) -> None:
    root = _copy(tmp_path)
    info = CODES[Code.G001]
    path = root / rel
    path.write_text(path.read_text(encoding="utf-8").replace(info.title, "a hand-edited title", 1), encoding="utf-8")
    run = gen_docs("--check", "--root", str(root))
    assert run.returncode == 1 and run.stdout == f"{rel}: stale (run python tools/gen_docs.py)\n"
    assert gen_docs("--root", str(root)).returncode == 0
    assert gen_docs("--check", "--root", str(root)).returncode == 0
    assert path.read_text(encoding="utf-8") == (REPO / rel).read_text(encoding="utf-8")


def test_a_readme_without_its_markers_is_an_error(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    readme = root / "README.md"
    readme.write_text(readme.read_text(encoding="utf-8").replace(codes_doc.END, ""), encoding="utf-8")
    run = gen_docs("--check", "--root", str(root))
    assert run.returncode == 2 and "README.md: expected one" in run.stderr
    with pytest.raises(ValueError):
        codes_doc.splice("no markers here")
