"""Bare device-code files whose header lines are missing, pinned where mutation testing found the
branch loose (docs/mutation.md)."""

from __future__ import annotations

import json
from pathlib import Path

from archaudit.cli import main


def run(path, tmp_path, *claim: str) -> tuple[int, list[tuple[str, str]]]:
    out = tmp_path / "report.json"
    rc = main(["check", "--no-config", "-q", "--format", "json", "-o", str(out), str(path), *claim])
    doc = json.loads(out.read_text(encoding="utf-8"))
    return rc, [(f["code"], f["message"]) for t in doc["targets"] for f in t["findings"]]


def test_ptx_file_without_a_target_directive_is_e014_not_an_internal_error(tmp_path):
    """nvcc's kern_80.ptx with its `.target` line removed: the architecture it is for is unknown,
    so it is malformed device code (E014), a finding and exit 1, not E099."""
    text = Path(__file__).resolve().parent.joinpath("fixtures", "cuda", "bin", "kern_80.ptx").read_text()
    kept = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(".target"))
    assert kept != text.rstrip("\n")
    bad = tmp_path / "kern_no_target.ptx"
    bad.write_text(kept + "\n")
    rc, found = run(bad, tmp_path, "--arch", "8.0+PTX")
    assert rc == 1 and ("E014", "kern_no_target.ptx: PTX has no .target sm_XX directive") in found, found
    assert "E099" not in [c for c, _ in found]
