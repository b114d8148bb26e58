"""The default text fits a screen by construction (issue 27 item 8), whatever the input: at most
60 lines of at most 240 characters, what does not fit folded into counted lines that name the
flag that shows it; -v asks for all of it. Generated wheels read by the real reader: 500 libraries
that each miss a claimed architecture, 500 members that each fail in their own way (four codes),
and one member whose finding flood folds into one finding."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

import hostile
from archaudit.cli import main
from helpers import wheel

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SM80 = (FIXTURES / "cuda" / "bin" / "lib_sm80.so").read_bytes()
SCREEN_LINES, SCREEN_WIDTH = 60, 240


def _many_libraries(path: Path) -> Path:
    return wheel(path, [(f"many/lib{i:03}.so", SM80) for i in range(500)])


def _many_failures(path: Path) -> Path:
    """500 members, each unverifiable: a finding flood in a bundle file (E030), a .cubin that is
    none (E014), a .so that is text (E010), a fatbin container that overruns its file (E011)."""
    kinds = [
        ("hsaco", hostile.finding_flood(4096)),
        ("cubin", b"not a cubin" * 10),
        ("so", b"INPUT(-lfoo)\n"),
        ("fatbin", struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 1 << 20)),
    ]
    return wheel(path, [(f"bad/m{i:03}.{kinds[i % 4][0]}", kinds[i % 4][1]) for i in range(500)])


def _one_flood(path: Path) -> Path:
    return hostile.flood_wheel(path, 1 << 20)


CASES = {
    "500 libraries": (_many_libraries, ["--arch", "80;90"]),
    "500 failures": (_many_failures, []),
    "one flood": (_one_flood, ["--arch", "80"]),
}


def _run(tmp_path: Path, *args: str, fmt: str = "text") -> tuple[int, str]:
    out = tmp_path / f"out.{fmt}"
    rc = main(["check", "--no-config", "-q", "--no-timings", "--format", fmt, "-o", str(out), *args])
    return rc, out.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_default_text_fits_a_screen_and_verbose_lists_the_rest(case, tmp_path):
    make, args = CASES[case]
    target = str(make(tmp_path / "gen-1.0-py3-none-linux_x86_64.whl"))
    rc, text = _run(tmp_path, *args, target)
    lines = text.splitlines()
    assert rc == 1, text
    assert len(lines) <= SCREEN_LINES and all(len(line) <= SCREEN_WIDTH for line in lines), (len(lines), text)
    assert lines[-1].startswith("✗ "), lines[-1]  # the verdict is on screen, last
    rc_v, verbose = _run(tmp_path, "-v", *args, target)
    assert rc_v == rc
    rc_j, doc = _run(tmp_path, *args, target, fmt="json")
    findings = doc_findings = json.loads(doc)["targets"][0]["findings"]
    assert rc_j == rc
    if case == "one flood":  # folded into one finding per code: the screen holds it whole
        assert sum(f["count"] for f in findings) == (1 << 20) // 32 + 1  # every record, and G006
        assert len(findings) <= 3 and all(len(f["examples"]) <= 5 for f in findings)
        assert len(verbose.splitlines()) > len(lines)  # -v shows the examples
        return
    subjects = {f["subject"] for f in doc_findings}
    assert len(subjects) >= 500  # JSON keeps every subject
    assert any("-v lists them" in line for line in lines), text  # what was left out is counted
    assert len(verbose.splitlines()) > 500  # -v asks for all of it
    for f in findings:
        assert f["subject"] in verbose or f["code"] == "G006"


def test_the_counted_lines_add_up_to_the_findings(tmp_path):
    """The cut lines count what they leave out, by code: the shown and the counted findings
    together are every finding the summary counts."""
    _, text = _run(tmp_path, "--arch", "80;90", str(_many_libraries(tmp_path / "m-1.0-py3-none-any.whl")))
    lines = text.splitlines()
    shown = sum(1 for line in lines if line.startswith("✗ G001 many/"))
    counted = next(line for line in lines if line.startswith("✗ ") and "more findings (G001 x" in line)
    left = int(counted.split("(G001 x", 1)[1].split(";", 1)[0])
    assert shown + left == 500, (shown, left)
    assert lines[-1] == "✗ 500 findings (G001 x500)"
    table = next(line for line in lines if "more libraries (" in line)
    assert "500 failing" not in table and "failing or unverified; -v lists them" in table
