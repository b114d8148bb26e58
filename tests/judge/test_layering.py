"""The judge imports no reader: `import archaudit.judge` and every module under it load neither
archaudit.read nor a compression library (zstandard, lz4, isal) nor ctypes, so the rules run
where those are absent. And no reader imports the judge or the report."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import archaudit.judge

JUDGE_MODULES = sorted(f"archaudit.judge.{m.name}" for m in pkgutil.iter_modules(archaudit.judge.__path__))
FORBIDDEN = ("archaudit.read", "zstandard", "lz4", "isal", "ctypes")


def loaded_after(*modules: str) -> list[str]:
    """The modules a fresh interpreter holds after importing `modules`."""
    code = f"import sys\nfor m in {list(modules)!r}:\n    __import__(m)\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


def test_the_judge_package_has_its_modules():
    assert {"archaudit.judge.rules", "archaudit.judge.audit", "archaudit.judge.facts"} <= set(JUDGE_MODULES)


def test_import_archaudit_judge_loads_no_reader_and_no_compression_library():
    loaded = loaded_after("archaudit.judge", *JUDGE_MODULES)
    bad = [m for m in loaded if m.split(".")[0] in FORBIDDEN or m.startswith(FORBIDDEN[0])]
    assert bad == []
    assert "archaudit.judge.rules" in loaded  # the check saw the modules it speaks of


def test_a_reader_imports_no_judge_and_no_report():
    import archaudit.read

    readers = sorted(f"archaudit.read.{m.name}" for m in pkgutil.iter_modules(archaudit.read.__path__))
    loaded = loaded_after(*readers)
    assert "archaudit.read.scan" in loaded
    assert [m for m in loaded if m.startswith(("archaudit.judge", "archaudit.report", "archaudit.cli"))] == []
