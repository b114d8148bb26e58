"""The settings of a run: flags, then [tool.archaudit], then defaults; the output format from the
-o suffix; --also-write; and the namespace the Python API starts from, the parser's own."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from archaudit import config
from archaudit.cli import settings
from archaudit.cli.settings import check_args
from archaudit.errors import UsageError


def test_the_api_starts_from_the_flags_the_command_starts_from() -> None:
    """check() fills the same namespace the command's parser gives with no flag at all, without
    building that parser; a flag added to `check` and not here fails this test."""
    from archaudit.cli import build_parser

    parsed = vars(build_parser().parse_args(["check"]))
    parsed.pop("command"), parsed.pop("execute")
    assert vars(check_args()) == parsed
    assert check_args(arch="80").arch == "80"
    with pytest.raises(TypeError, match="no flag 'no_such_flag'"):
        check_args(no_such_flag=1)


def _config(tmp_path: Path, body: str) -> config.Config:
    path = tmp_path / "pyproject.toml"
    path.write_text("[tool.archaudit]\n" + body)
    return config.load(str(path), discover=False)


@pytest.mark.parametrize(
    "name, fmt",
    [("r.json", "json"), ("r.SARIF", "sarif"), ("r.sarif.json", "sarif"), ("r.md", "markdown"), ("r.xml", "junit")],
)
def test_the_output_file_suffix_names_its_format(name, fmt):
    assert settings.format_for(name) == fmt
    assert settings.format_for("report.txt") is None
    assert settings.format_for("r.xml", ("text", "json")) is None  # a format this command does not write


def test_format_flag_then_suffix_then_config_then_text(tmp_path: Path):
    cfg = _config(tmp_path, 'format = "markdown"\n')
    none = config.load(None, discover=False)
    assert settings.output(check_args(format="github", output="r.json"), cfg).format == "github"
    assert settings.output(check_args(output="r.json"), cfg) == settings.Output("json", "r.json")
    assert settings.output(check_args(output="r.txt"), cfg).format == "markdown"
    assert settings.output(check_args(), none).format == "text"
    assert settings.output(check_args(), cfg, ("text", "json")).format == "text"  # smoke has no markdown here


def test_also_write_gives_each_report_its_own_file():
    primary = settings.Output("json", "r.json", "https://docs.example")
    got = settings.also_write(["text=-", "sarif=r.sarif"], primary)
    assert got == (
        settings.Output("text", None, "https://docs.example"),
        settings.Output("sarif", "r.sarif", "https://docs.example"),
    )
    for bad in (["xml=x"], ["text"], ["text="], ["text=r.json"]):
        with pytest.raises(UsageError, match="--also-write"):
            settings.also_write(bad, primary)
    with pytest.raises(UsageError, match="standard output at most once"):
        settings.also_write(["text=-", "github=-"], settings.Output())


def test_check_settings_take_a_flag_over_the_config_and_the_config_over_the_default(tmp_path: Path):
    cfg = _config(tmp_path, 'cuda-archs = "80;90"\ndetail = "kernels"\ncosts = true\n')
    s = settings.check_settings(check_args(), cfg, ["x.whl"])
    assert (s.detail, s.costs, s.timings, s.decode) == ("kernels", True, True, True)
    assert s.claim is not None and s.claim.gpus == ((8, 0), (9, 0))
    s = settings.check_settings(check_args(detail="libraries", arch="75", fast=True, no_timings=True), cfg, ["x.whl"])
    assert (s.detail, s.timings, s.decode) == ("libraries", False, False)
    assert s.claim is not None and s.claim.gpus == ((7, 5),)
    with pytest.raises(UsageError, match="an empty TARGET"):
        settings.check_settings(check_args(), cfg, [" "])


def test_diff_settings_read_allow_loss_from_the_config(tmp_path: Path):
    cfg = _config(tmp_path, "allow-loss = true\n")
    args = argparse.Namespace(
        old="a.whl", new="b.whl", allow_loss=None, format=None, output="d.md", verbose=False, jobs=2
    )
    s = settings.diff_settings(args, cfg, ("text", "markdown"))
    assert (s.old, s.new, s.allow_loss, s.output.format, s.jobs) == ("a.whl", "b.whl", True, "markdown", 2)
    with pytest.raises(UsageError, match="an empty NEW"):
        settings.diff_settings(argparse.Namespace(**{**vars(args), "new": ""}), cfg, ("text",))
