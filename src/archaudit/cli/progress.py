"""The one-line progress display of `archaudit check` on a terminal: a thread that reads the
readers' counters (read.artifacts.Progress) and redraws them on stderr."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import IO

from ..read.artifacts import Progress


def progress_display(progress: Progress, stream: IO[str] = sys.stderr) -> Callable[[], None]:
    """Start a one-line progress display on a terminal; returns the function that stops it."""
    stop = threading.Event()
    began = time.perf_counter()

    def loop() -> None:
        while True:
            el = max(time.perf_counter() - began, 1e-6)
            with progress.lock:
                done, total = progress.done_bytes, max(progress.total_bytes, 1)
                libs, nlibs = progress.done_libraries, progress.total_libraries
            stream.write(
                f"\r{done / 1e6:8.0f}/{total / 1e6:.0f} MB  {libs}/{nlibs} libraries  {done / el / 1e6:6.0f} MB/s "
            )
            stream.flush()
            if stop.wait(0.2):
                break
        stream.write("\r" + " " * 70 + "\r")
        stream.flush()

    t = threading.Thread(target=loop, daemon=True)
    t.start()

    def finish() -> None:
        stop.set()
        t.join()

    return finish


__all__ = ["progress_display"]
