"""`archaudit diff OLD NEW`: the two releases read and compared, the report written in every
shared output format through the shared output options, a failed write one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

from archaudit.cli import main
from helpers import lossy_release

EXAMPLE = "gpu_example-1.0-py3-none-linux_x86_64.whl"


def test_diff_writes_every_shared_format(scratch):
    new = lossy_release(scratch / "gpu_example-1.1-py3-none-linux_x86_64.whl").name
    for fmt in ("text", "json", "markdown", "github", "junit"):
        rc = main(["diff", "--no-config", "--format", fmt, "-o", f"d.{fmt}", EXAMPLE, new])
        assert rc == 1, fmt
    github = Path("d.github").read_text(encoding="utf-8")
    assert github.startswith("::error title=archaudit diff%3A GPU architectures lost::gpu_example/libkernels.so: lost")
    junit = Path("d.junit").read_text(encoding="utf-8")
    assert 'failures="1"' in junit and 'type="lost"' in junit and "sm_90" in junit
    assert json.loads(Path("d.json").read_text(encoding="utf-8"))["lost"] == ["sm_90", "compute_90"]
    assert "lost sm_90 (no longer runs" in Path("d.text").read_text(encoding="utf-8")
    rc = main(["diff", "--no-config", "--allow-loss", "--format", "github", "-o", "d2", EXAMPLE, new])
    assert rc == 0 and Path("d2").read_text(encoding="utf-8").startswith("::warning ")


def test_diff_unwritable_output_is_exit_2(scratch, capsys):
    rc = main(["diff", "--no-config", "-o", "/nonexistent/dir/d.txt", EXAMPLE, EXAMPLE])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot write the report" in err and "Traceback" not in err
