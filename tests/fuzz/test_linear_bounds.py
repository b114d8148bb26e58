"""Work that grows with the input's bytes, never faster (docs/threat-model.md, "Bounded work"):
each hostile generator read in a child process at two sizes four times apart. Work is counted,
not timed: the steps the reader takes (every function call and return the interpreter reports to
a profiler, in every thread), which a loaded machine does not change. Linear work grows about
4x; quadratic work 16x. Peak memory (getrusage) is the child's own, at 4 MiB. Times belong in
benchmarks/bench_hostile.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hostile

HERE = Path(__file__).parent
# Counting every call slows the reader about 10x, so steps are counted at 32 and 128 KiB, where
# each generator already repeats its hostile record thousands of times; memory at 4 MiB, uncounted.
SMALL, LARGE, MEMORY_SIZE = 32 << 10, 128 << 10, 4 << 20
GROWTH = 6  # steps at 4x the bytes: under 6x the small input's (linear: 4x; quadratic: 16x)
COUNTER = """
import resource, sys, threading
STEPS = [0]
def count(frame, event, arg):
    STEPS[0] += 1
def counted(call):
    if COUNT:
        threading.setprofile(count)
        sys.setprofile(count)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        return call(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
"""
CHILD = (
    COUNTER
    + """
import json
sys.path.insert(0, sys.argv[1])
import hostile
from archaudit.read import library
COUNT = sys.argv[4] == "count"
data = hostile.GENERATORS[sys.argv[2]](int(sys.argv[3]))
lib, grown = counted(lambda: library.library_from_bytes("hostile.so", data))
print(json.dumps({"steps": STEPS[0], "grown_kib": grown, "problems": len(lib.problems)}))
"""
)
MEMORY_BOUND_KIB = 64 << 10  # 64 MiB grown over the input already in memory, at 4 MiB


def measure(name: str, size: int, count: bool) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(HERE), name, str(size), "count" if count else "memory"],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    figures: dict[str, int] = json.loads(out)
    return figures


@pytest.mark.parametrize("name", sorted(hostile.GENERATORS))
def test_hostile_input_is_read_in_linear_steps_and_bounded_memory(name):
    small, large = measure(name, SMALL, True), measure(name, LARGE, True)
    assert small["steps"] > 0 and large["problems"] >= small["problems"]
    assert large["steps"] < GROWTH * small["steps"], (small, large)
    big = measure(name, MEMORY_SIZE, False)
    assert big["grown_kib"] < MEMORY_BOUND_KIB, big


WHEEL_CHILD = (
    COUNTER
    + """
import json
import archaudit
from archaudit.report.render import render_json
COUNT = sys.argv[2] == "count"
(report, doc), grown = counted(lambda: (lambda r: (r, render_json(r)))(archaudit.check([sys.argv[1]], arch="80",
                                                                                       jobs=1)))
print(json.dumps({"steps": STEPS[0], "grown_kib": grown,
                  "json_bytes": len(doc.encode()), "entries": len(report.findings),
                  "findings": sum(f.count for f in report.findings), "exit_code": report.exit_code}))
"""
)
FLOOD_JSON_BOUND = 16 << 10  # bytes of JSON for a flood of any size: a folded finding per code


def measure_wheel(path: Path, count: bool) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", WHEEL_CHILD, str(path), "count" if count else "memory"],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    figures: dict[str, int] = json.loads(out)
    return figures


def test_a_finding_flood_is_folded_in_memory_and_in_json(tmp_path):
    """One E030 (E032 once the look-ahead is spent) per 32 bytes of a data member, checked end to
    end: every record is counted, yet the findings kept, the JSON and the memory do not grow with
    them, and the steps taken grow with the bytes, no faster (issue 27 item 2: 2 million findings
    and 534 MB of JSON from a 180 KB wheel)."""
    sizes = (SMALL, LARGE, MEMORY_SIZE)
    small, large, big = (
        measure_wheel(hostile.flood_wheel(tmp_path / f"f{i}-1.0-py3-none-any.whl", size), count)
        for i, (size, count) in enumerate(zip(sizes, (True, True, False)))
    )
    for size, m in zip(sizes, (small, large, big)):
        assert m["exit_code"] == 1
        assert m["findings"] == size // 32 + 1, m  # every record, and G006: no device code
        assert m["entries"] <= 3 and m["json_bytes"] < FLOOD_JSON_BOUND, m
    assert large["steps"] < GROWTH * small["steps"], (small, large)
    assert big["grown_kib"] < MEMORY_BOUND_KIB, big
