"""Time and peak memory of reading each hostile generator (tests/fuzz/hostile.py) at growing
sizes, each in a fresh child process (peak memory by its own getrusage), and the ratio of each
size's figures to the smallest: linear work doubles with the size, never squares.

    python benchmarks/bench_hostile.py [--sizes 1,4,16] [--only NAME]

Figures are quoted in docs/threat-model.md ("Bounded work").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

FUZZ = Path(__file__).resolve().parent.parent / "tests" / "fuzz"
sys.path.insert(0, str(FUZZ))
import hostile  # noqa: E402

CHILD = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import hostile
from archaudit.read import library
data = hostile.GENERATORS[sys.argv[2]](int(sys.argv[3]))
t = time.perf_counter()
lib = library.library_from_bytes("hostile.so", data)
print(json.dumps({"seconds": time.perf_counter() - t,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "problems": len(lib.problems)}))
"""


def measure(name: str, mib: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(FUZZ), name, str(mib << 20)],
                         check=True, capture_output=True, text=True).stdout
    figures: dict[str, float] = json.loads(out)
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,4,16", help="sizes in MiB, comma-separated (default 1,4,16)")
    ap.add_argument("--only", help="one generator's name")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    names = [args.only] if args.only else sorted(hostile.GENERATORS)
    print(f"{'generator':26} {'MiB':>4} {'seconds':>8} {'x time':>7} {'peak MiB':>9} {'x mem':>6} {'findings':>9}")
    for name in names:
        first: dict[str, float] | None = None
        for mib in sizes:
            m = measure(name, mib)
            first = first or m
            print(f"{name:26} {mib:4} {m['seconds']:8.2f} {m['seconds'] / first['seconds']:7.1f} "
                  f"{m['peak_mib']:9.0f} {m['peak_mib'] / first['peak_mib']:6.1f} {int(m['problems']):9}")


if __name__ == "__main__":
    main()
