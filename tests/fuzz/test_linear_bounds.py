"""Work that grows with the input's bytes, never faster (docs/threat-model.md, "Bounded work"):
each hostile generator read at 1 and 4 MiB, in a child process each, so its peak memory
(getrusage) is its own. Generous bounds: a loaded machine must not fail them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import hostile
import pytest

HERE = Path(__file__).parent
CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import hostile
from archaudit.read import library
data = hostile.GENERATORS[sys.argv[2]](int(sys.argv[3]))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
lib = library.library_from_bytes("hostile.so", data)
print(json.dumps({"seconds": time.perf_counter() - t,
                  "grown_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base,
                  "problems": len(lib.problems)}))
"""
MEMORY_BOUND_KIB = 64 << 10  # 64 MiB grown over the input already in memory, at 4 MiB


def measure(name: str, size: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(HERE), name, str(size)],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    figures: dict[str, float] = json.loads(out)
    return figures


@pytest.mark.parametrize("name", sorted(hostile.GENERATORS))
def test_hostile_input_is_read_in_linear_time_and_bounded_memory(name):
    small, large = measure(name, 1 << 20), measure(name, 4 << 20)
    assert large["seconds"] < 6 * small["seconds"] + 0.5, (small, large)
    assert large["grown_kib"] < MEMORY_BOUND_KIB, large


WHEEL_CHILD = """
import json, resource, sys, time
import archaudit
from archaudit.report.render import render_json
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
report = archaudit.check([sys.argv[1]], arch="80")
doc = render_json(report)
print(json.dumps({"seconds": time.perf_counter() - t,
                  "grown_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base,
                  "json_bytes": len(doc.encode()), "entries": len(report.findings),
                  "findings": sum(f.count for f in report.findings), "exit_code": report.exit_code}))
"""
FLOOD_JSON_BOUND = 16 << 10  # bytes of JSON for a flood of any size: a folded finding per code


def measure_wheel(path: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", WHEEL_CHILD, str(path)],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    figures: dict[str, float] = json.loads(out)
    return figures


def test_a_finding_flood_is_folded_in_memory_and_in_json(tmp_path):
    """One E030 (E032 once the look-ahead is spent) per 32 bytes of a data member, checked end to
    end: every record is counted, yet the findings kept, the JSON and the memory do not grow with
    them (issue 27 item 2: 2 million findings and 534 MB of JSON from a 180 KB wheel)."""
    small = measure_wheel(hostile.flood_wheel(tmp_path / "s-1.0-py3-none-any.whl", 1 << 20))
    large = measure_wheel(hostile.flood_wheel(tmp_path / "l-1.0-py3-none-any.whl", 4 << 20))
    for size, m in ((1 << 20, small), (4 << 20, large)):
        assert m["exit_code"] == 1
        assert m["findings"] == size // 32 + 1, m  # every record, and G006: no device code
        assert m["entries"] <= 3 and m["json_bytes"] < FLOOD_JSON_BOUND, m
    assert large["seconds"] < 6 * small["seconds"] + 0.5, (small, large)
    assert large["grown_kib"] < MEMORY_BOUND_KIB, large
