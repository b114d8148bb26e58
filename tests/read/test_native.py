"""Which readers run (native.py): the compiled speedups where the install built them, the Python
references with ARCHAUDIT_PURE_PYTHON=1. Each case imports archaudit in a fresh interpreter, as a
run does, and asks the readers that use them which they took (codefacts' cubin reader, search's
find); that both give the same answers is test_speedups.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from reference_tools import speedups

ASK = """
import json
from archaudit.read import codefacts, native, search
print(json.dumps({
    "active": getattr(native.active, "__name__", None),
    "cubin reader": getattr(codefacts._compiled, "__name__", None),
    "find": search._FIND is not None and search._FIND is getattr(native.active, "find", None),
}))
"""


def readers(**env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if k != "ARCHAUDIT_PURE_PYTHON"}
    done = subprocess.run(
        [sys.executable, "-c", ASK], capture_output=True, text=True, timeout=120, env={**clean, **env}
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_compiled_speedups_run_where_they_were_built():
    built = speedups()  # a skip where the install could not build them (a failure in CI)
    assert readers() == {"active": built.__name__, "cubin reader": built.__name__, "find": True}


def test_pure_python_runs_the_references_only():
    assert readers(ARCHAUDIT_PURE_PYTHON="1") == {"active": None, "cubin reader": None, "find": False}


def test_an_empty_setting_is_no_setting():
    """ARCHAUDIT_PURE_PYTHON= (set, empty: a script's unset variable) leaves the speedups on."""
    built = speedups()
    assert readers(ARCHAUDIT_PURE_PYTHON="")["active"] == built.__name__
