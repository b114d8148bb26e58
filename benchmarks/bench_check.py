"""Time `archaudit check` against the inflate floor, in one process, on public wheels.

The floor: inflating every library member of the wheel once, in parallel across members,
with the fastest inflater archaudit depends on (ISA-L). Nothing can be faster, since every
deflated byte must be inflated once. The script prints each figure and the ratios; run it
as `python benchmarks/bench_check.py WHEEL... [--rounds N] [--baseline-cuobjdump]`.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from archaudit import zipread
from archaudit.artifacts import inventories, is_library_name, select_member
from archaudit.audit import Policy, audit


def library_members(paths: list[str]) -> list[tuple[str, zipread.Member]]:
    out = []
    for path in paths:
        members, _ = zipread.read_directory(path, select_member)  # the members check reads
        out += [(path, m) for m in members if m.tag and m.tag != "zip"]
    return sorted(out, key=lambda pm: -pm[1].size)


def inflate_floor(paths: list[str], jobs: int) -> float:
    """Read each wheel's directory and inflate every library member once, in parallel across
    members: the least any reader of the wheels can do."""

    def one(pm):
        path, m = pm
        with open(path, "rb") as f:
            for _ in zipread.iter_member(f, m):
                pass

    start = time.perf_counter()
    libs = library_members(paths)
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, libs))
    return time.perf_counter() - start


def check(paths: list[str], jobs: int, decode: bool) -> float:
    start = time.perf_counter()
    audit(inventories(paths, jobs=jobs, decode=decode), None, Policy())
    return time.perf_counter() - start


def cuobjdump_baseline(path: str) -> float | None:
    """The status quo: unzip the wheel, run cuobjdump -lelf -lptx on every library."""
    tool = shutil.which("cuobjdump")
    if tool is None:
        try:
            import nvidia
            cand = os.path.join(list(nvidia.__path__)[0], "cu13", "bin", "cuobjdump")
            tool = cand if os.path.exists(cand) else None
        except ImportError:
            tool = None
    if tool is None:
        return None
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["unzip", "-q", "-o", path, "-d", tmp], check=True)
        for root, _, files in os.walk(tmp):
            for name in files:
                if is_library_name(name):
                    subprocess.run([tool, "-lelf", "-lptx", os.path.join(root, name)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheels", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--kernels", action="store_true", help="also time the per-kernel (decoding) audit")
    ap.add_argument("--baseline-cuobjdump", action="store_true", help="also time unzip + cuobjdump once")
    ap.add_argument("--scaling", action="store_true",
                    help="instead: audit the first 1, 2 and all wheels in one call each, with MB/s")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, inflater {zipread.INFLATER}, jobs {args.jobs}, "
          f"cpus {os.cpu_count()}, rounds {args.rounds}")
    if args.scaling:
        sizes = sorted({1, min(2, len(args.wheels)), len(args.wheels)})
        for n in sizes:
            paths = args.wheels[:n]
            nbytes = sum(m.size for _, m in library_members(paths))
            floors, checks = [], []
            for _ in range(args.rounds):
                floors.append(inflate_floor(paths, args.jobs))
                checks.append(check(paths, args.jobs, decode=False))
            f, c = statistics.median(floors), statistics.median(checks)
            print(f"{n:>3} wheel(s), {nbytes / 1e6:7.0f} MB of libraries: floor {f:.2f} s, check {c:.2f} s "
                  f"({nbytes / 1e6 / c:.0f} MB/s), check/floor "
                  f"{statistics.median(a / b for a, b in zip(checks, floors)):.2f}", flush=True)
        print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
        return 0
    for path in args.wheels:
        floors, checks, kernels = [], [], []
        for _ in range(args.rounds):  # interleaved, so drift hits every figure alike
            floors.append(inflate_floor([path], args.jobs))
            checks.append(check([path], args.jobs, decode=False))
            if args.kernels:
                kernels.append(check([path], args.jobs, decode=True))
        f, c = statistics.median(floors), statistics.median(checks)
        line = (f"{os.path.basename(path)}: floor {f:.2f} s, check {c:.2f} s, "
                f"check/floor {statistics.median(a / b for a, b in zip(checks, floors)):.2f}")
        if kernels:
            k = statistics.median(kernels)
            line += (f", kernels {k:.2f} s, kernels/check "
                     f"{statistics.median(a / b for a, b in zip(kernels, checks)):.2f}")
        if args.baseline_cuobjdump:
            base = cuobjdump_baseline(path)
            if base is not None:
                line += f", unzip+cuobjdump {base:.2f} s, speed-up {base / c:.1f}x"
        print(line, flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
