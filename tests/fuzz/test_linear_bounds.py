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
