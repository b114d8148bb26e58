"""Time and peak memory of reading each hostile generator (tests/fuzz/hostile.py) at growing
sizes, each in a fresh child process (peak memory by its own getrusage), and the ratio of each
size's figures to the smallest: linear work doubles with the size, never squares. Then the
finding flood end to end: a wheel whose data member is the finding_flood generator, checked and
rendered as JSON (time, peak memory, JSON bytes, findings and the JSON entries that carry them).

    python benchmarks/bench_hostile.py [--sizes 1,4,16] [--only NAME] [--wheel-sizes 1,16,64]

Figures are recorded in records/hostile.md (docs/threat-model.md, "Bounded work", says the bounds).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
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
                  "problems": sum(p.count for p in lib.problems)}))
"""


WHEEL_CHILD = """
import json, resource, sys, time
import archaudit
from archaudit.report.render import render_json
t = time.perf_counter()
report = archaudit.check([sys.argv[1]], arch="80")
doc = render_json(report)
print(json.dumps({"seconds": time.perf_counter() - t,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "json_bytes": len(doc.encode()), "findings": sum(f.count for f in report.findings),
                  "entries": len(report.findings), "exit_code": report.exit_code}))
"""


def measure_wheel(mib: int) -> dict[str, float]:
    """The finding flood end to end, in a child: a wheel of `mib` MiB inflated, checked, as JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        wheel = hostile.flood_wheel(Path(tmp) / "flood-1.0-py3-none-any.whl", mib << 20)
        out = subprocess.run(
            [sys.executable, "-c", WHEEL_CHILD, str(wheel)], check=True, capture_output=True, text=True
        ).stdout
        figures: dict[str, float] = json.loads(out)
        figures["wheel_bytes"] = wheel.stat().st_size
    return figures


def measure(name: str, mib: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(FUZZ), name, str(mib << 20)], check=True, capture_output=True, text=True
    ).stdout
    figures: dict[str, float] = json.loads(out)
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,4,16", help="sizes in MiB, comma-separated (default 1,4,16)")
    ap.add_argument("--only", help="one generator's name")
    ap.add_argument(
        "--wheel-sizes",
        default="1,16,64",
        help="finding-flood wheel members in MiB, comma-separated (default 1,16,64; '' for none)",
    )
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    names = [args.only] if args.only else sorted(hostile.GENERATORS)
    print(f"{'generator':26} {'MiB':>4} {'seconds':>8} {'x time':>7} {'peak MiB':>9} {'x mem':>6} {'findings':>9}")
    for name in names:
        first: dict[str, float] | None = None
        for mib in sizes:
            m = measure(name, mib)
            first = first or m
            print(
                f"{name:26} {mib:4} {m['seconds']:8.2f} {m['seconds'] / first['seconds']:7.1f} "
                f"{m['peak_mib']:9.0f} {m['peak_mib'] / first['peak_mib']:6.1f} {int(m['problems']):9}"
            )
    if not args.wheel_sizes:
        return
    print(
        f"\n{'finding flood wheel':20} {'KB':>6} {'MiB':>4} {'seconds':>8} {'peak MiB':>9} {'JSON KB':>8} "
        f"{'findings':>9} {'entries':>7}"
    )
    for mib in [int(s) for s in args.wheel_sizes.split(",")]:
        w = measure_wheel(mib)
        print(
            f"{'':20} {w['wheel_bytes'] / 1e3:6.0f} {mib:4} {w['seconds']:8.2f} {w['peak_mib']:9.0f} "
            f"{w['json_bytes'] / 1e3:8.1f} {int(w['findings']):9} {int(w['entries']):7}"
        )


if __name__ == "__main__":
    main()
