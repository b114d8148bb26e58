"""The text and JSON renderings of a check Report: the text fits its width without hiding a
target a library carries, JSON is the report's dict whole."""

from __future__ import annotations

import json

import archaudit
from archaudit.core import example_wheel
from archaudit.report.render import render_json, render_text, to_dict
from wheels import fetch


def test_carries_lists_every_target_wrapped_to_the_width():
    """curand 10.4.5.25 carries 19 targets: the CARRIES column shows each (none cut to "+8 sm"),
    wrapped onto further lines that still fit the width."""
    wheel = fetch("nvidia-curand", "10.4.5.25", filename="nvidia_curand-10.4.5.25-py3-none-manylinux_2_27_x86_64.whl")
    report = archaudit.check(wheel, arch="75;80;90;100;120")
    carried = report.targets[0].libraries[0].carried
    assert len(carried) > 12
    for width in (240, 100, 80):
        lines = render_text(report, width=width).splitlines()
        table = lines[lines.index(next(x for x in lines if x.lstrip().startswith("LIBRARY"))) + 1 :]
        rows = [line for line in table if line.startswith("  ")]
        assert [w for line in rows for w in line.split() if w in carried] == list(carried), width
        assert "+" not in " ".join(rows) and all(len(line) <= width for line in lines), width
    assert len(rows) > 1  # wrapped at 80


def test_json_is_the_whole_dict_and_text_holds_each_finding_line():
    report = archaudit.check(example_wheel(), arch="80;90")
    doc = json.loads(render_json(report, timings=False))
    assert doc == to_dict(report, timings=False)
    assert [f["code"] for t in doc["targets"] for f in t["findings"]] == [f.code for f in report.findings]
    text = render_text(report, timings=False)
    assert " in 0." not in text.splitlines()[0]  # no time on the target's line
    assert text.rstrip().splitlines()[-1] == "✗ 1 finding (G001 x1)"
    assert render_text(report, ascii_only=True).rstrip().splitlines()[-1] == "X 1 finding (G001 x1)"
