"""`archaudit check`: the report core.check() returns, rendered in the format and with the options
the command line and [tool.archaudit] ask for."""

from __future__ import annotations

from pathlib import Path

from archaudit import core
from archaudit.cli import main
from archaudit.cli.settings import Output
from archaudit.report.render import render_json

EXAMPLE = "gpu_example-1.0-py3-none-linux_x86_64.whl"


def test_core_check_is_what_the_cli_renders(scratch):
    """check() from Python and `archaudit check` give the same report, kernel names included."""
    rc = main(
        ["check", "--no-config", "-q", "--no-timings", "--arch", "80,90", "--format", "json", "-o", "cli.json", EXAMPLE]
    )
    from archaudit.claims import parse_claim

    report = core.check([EXAMPLE], parse_claim("80,90", "--arch"))
    assert rc == report.exit_code == 1
    assert render_json(report, timings=False) == Path("cli.json").read_text(encoding="utf-8")
    assert Output().format == "text"


def test_the_config_chooses_what_the_rendering_shows_and_a_flag_overrides_it(scratch, capsys):
    (scratch / "pyproject.toml").write_text('[tool.archaudit]\ncuda-archs = "80;90"\ndetail = "kernels"\n')
    assert main(["check", "-q", "--no-timings", "-o", "k.txt", EXAMPLE]) == 1
    assert "[1 kernel: mul]" in Path("k.txt").read_text(encoding="utf-8")
    assert main(["check", "-q", "--no-timings", "--detail", "libraries", "-o", "l.txt", EXAMPLE]) == 1
    assert "[1 kernel: mul]" not in Path("l.txt").read_text(encoding="utf-8")


def test_example_is_a_target_and_no_target_is_a_usage_error(scratch, capsys):
    assert main(["check", "--no-config", "-q", "--arch", "80", "--example", "-o", "e.json"]) == 0
    assert main(["check", "--no-config", "-q", "--arch", "80"]) == 2
    assert "give at least one TARGET (or --example)" in capsys.readouterr().err
