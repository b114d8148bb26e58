"""The Python API (`from archaudit import check, ...`): the README's example runs and prints what
the README shows, and a call gives the verdict the command gives for the same spellings."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import archaudit
from archaudit import ArchauditError, Claim, Finding, Policy, Report, check
from archaudit.cli import main
from archaudit.core import example_wheel
from archaudit.report.render import render_json

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _readme_example() -> tuple[str, str]:
    """The Python block of the README's "Python API" section and the text block after it."""
    section = README[README.index("## Python API") :]
    section = section[: section.index("\n## ", 1)]
    m = re.search(r"```python\n(.*?)```\s*```text\n(.*?)```", section, re.S)
    assert m, "the Python API section shows a python block and its output"
    return m.group(1), m.group(2)


def _cli_json(argv: list[str]) -> tuple[int, dict[str, object]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv + ["--format", "json", "--no-timings", "--no-config", "-q"])
    return code, json.loads(out.getvalue())


def test_the_readme_example_prints_what_the_readme_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, shown = _readme_example()
    (tmp_path / "dist").mkdir()
    shutil.copy(example_wheel(), tmp_path / "dist")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue() == shown


@pytest.mark.parametrize(
    "spelling",
    [
        "80;90",
        "8.0 9.0",
        ["80", "90"],
        "-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90",
        "sm_80,sm_90",
    ],
)
def test_check_gives_the_commands_verdict_for_the_same_spelling(spelling: str | list[str]) -> None:
    report = check(example_wheel(), arch=spelling, gpus=["T4", "H100"])
    text = spelling if isinstance(spelling, str) else " ".join(spelling)
    code, cli = _cli_json(["check", example_wheel(), "--arch", text, "--gpu", "T4", "--gpu", "H100"])
    api = json.loads(render_json(report, timings=False))
    assert report.exit_code == code == 1 and not report.passed
    # the claim's source is named after the keyword rather than the flag; the verdicts are the same
    assert json.dumps(api).replace('"arch="', '"--arch"').replace("from arch=", "from --arch") == json.dumps(cli)
    assert {f.code for f in report.findings} == {"G001", "G008", "G009", "D002"}


def test_check_reads_the_named_config_and_only_that(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.archaudit]\ncuda-archs = "80"\nignore = ["D002"]\n')
    monkeypatch.chdir(tmp_path)
    unclaimed = check(example_wheel())  # no config searched for: the binaries' own claim, none here
    assert unclaimed.targets[0].claim is None
    report = check(example_wheel(), config=tmp_path / "pyproject.toml")
    assert report.passed and report.targets[0].claim is not None
    assert report.targets[0].claim.gpus == ((8, 0),) and "D002" not in {f.code for f in report.findings}
    overridden = check(example_wheel(), config=tmp_path / "pyproject.toml", arch="90")  # a keyword wins
    assert [f.code for f in overridden.findings if f.severity == "error"] == ["G001"]


def test_a_claim_and_a_policy_built_by_hand_are_taken_as_they_are() -> None:
    from archaudit.claims import parse_claim

    claim = parse_claim("80", "the release notes")
    report = check([Path(example_wheel())], arch=claim, policy=Policy(exact=True))
    assert isinstance(report, Report) and report.targets[0].claim == claim
    assert report.policy == Policy(exact=True) and "G003" in {f.code for f in report.findings}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gpus": ["no such GPU"]}, "not in the GPU catalog"),
        ({"arch": "80;banana"}, "C002"),
        ({"arch": "80;gfx942"}, "--amd-arch"),
        ({"select": ["Z9"]}, "Z9"),
        ({"driver": "five"}, "--driver"),
        ({"policy": Policy(), "exact": True}, "policy= replaces exact"),
    ],
)
def test_a_bad_argument_raises_the_commands_message(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ArchauditError, match=re.escape(message)):
        check(example_wheel(), **kwargs)  # type: ignore[arg-type]


def test_no_paths_is_an_error_and_an_unreadable_one_a_finding(tmp_path: Path) -> None:
    with pytest.raises(ArchauditError):
        check([])
    report = check(tmp_path / "missing.whl")
    assert report.exit_code == 2 and [f.code for f in report.findings] == ["E001"]


def test_every_public_name_is_exported_and_documented() -> None:
    assert set(archaudit.__all__) == {"check", "Claim", "Policy", "Report", "Finding", "ArchauditError", "__version__"}
    for name in archaudit.__all__:
        assert getattr(archaudit, name) is not None
    assert sorted(dir(archaudit)) == sorted(archaudit.__all__)
    assert (Claim, Finding, Policy, Report) and check.__doc__ and "arch=" in check.__doc__
    assert archaudit.__doc__ and "from archaudit import check" in archaudit.__doc__
    with pytest.raises(AttributeError):
        archaudit.no_such_name  # noqa: B018


def test_importing_archaudit_loads_no_reader() -> None:
    """`import archaudit` is what every command pays before parsing: the readers load on use."""
    probe = "import sys, archaudit; print(sorted(m for m in sys.modules if m.startswith('archaudit')))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    ).stdout
    assert json.loads(out.replace("'", '"')) == ["archaudit"]
