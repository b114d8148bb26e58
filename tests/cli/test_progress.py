"""The progress line of `archaudit check` on a terminal: it redraws the readers' counters, here
while a real check of the example wheel updates them, and clears its line when stopped."""

from __future__ import annotations

import io

from archaudit import core
from archaudit.claims import parse_claim
from archaudit.cli.progress import progress_display
from archaudit.read.artifacts import Progress


def test_the_line_shows_the_counters_and_is_cleared_when_stopped():
    progress = Progress()
    stream = io.StringIO()
    stop = progress_display(progress, stream)
    try:
        report = core.check([core.example_wheel()], parse_claim("80", "--arch"), progress=progress)
    finally:
        stop()
    out = stream.getvalue()
    assert report.exit_code == 0 and progress.done_libraries == progress.total_libraries == 2
    frames = [f for f in out.split("\r") if f.strip()]
    assert frames and all("MB  " in f and " libraries " in f and f.rstrip().endswith("MB/s") for f in frames)
    assert out.endswith("\r" + " " * 70 + "\r")  # the line is blanked, the cursor back at its start


def test_stopping_at_once_still_draws_one_line_and_clears_it():
    progress = Progress()
    progress.total_bytes, progress.total_libraries = 2_000_000, 3
    progress.add(1_000_000, 1)
    stream = io.StringIO()
    progress_display(progress, stream)()
    first = stream.getvalue().split("\r")[1]
    assert first.split()[:3] == ["1/2", "MB", "1/3"]
