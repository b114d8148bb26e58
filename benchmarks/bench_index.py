"""Throughput of `archaudit index` on a directory of wheels, for several worker counts, and the
bytes a remote run fetches (the same wheels served by a range-capable server on 127.0.0.1).

    python benchmarks/bench_index.py WHEEL_DIR [--max-size MB] [--workers 1,2,4] [--remote]

Each run indexes into a fresh database. The floor, run in the same call, is one sequential
read of every byte of the same wheels (what any audit of the whole files must at least do);
the table gives wheels/s, MB/s of wheels, and each run's time as a multiple of that floor.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from archaudit.index import engine, sources  # noqa: E402
from archaudit.index.store import Store  # noqa: E402
from archaudit.index.task import TaskOptions  # noqa: E402


def floor(paths: list[str]) -> float:
    start = time.perf_counter()
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 22):
                pass
    return time.perf_counter() - start


def cpu_seconds() -> float:
    """CPU time of this process and of its reaped children (the pool's workers)."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def one_run(refs: list[sources.WheelRef], jobs: int, tmp: str) -> tuple[engine.RunSummary, float]:
    db = os.path.join(tmp, f"bench-{jobs}-{time.monotonic_ns()}.db")
    store = Store(db)
    before = cpu_seconds()
    try:
        s = engine.run(refs, store, TaskOptions(), jobs=jobs)
    finally:
        store.close()
    return s, cpu_seconds() - before


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("wheels")
    ap.add_argument("--max-size", type=float, default=60.0, help="only wheels up to this many MB")
    ap.add_argument("--workers", default="1,2,4", help="worker counts to time, comma-separated ('': none)")
    ap.add_argument("--remote", action="store_true", help="also index them over HTTP ranges (1 worker)")
    args = ap.parse_args()
    refs = [r for r in sources.from_directory(args.wheels) if (r.size or 0) <= args.max_size * 1e6]
    total = sum(r.size or 0 for r in refs)
    print(f"{len(refs)} wheels, {total / 1e6:.0f} MB, {os.cpu_count()} cores")
    base = floor([r.location for r in refs])
    print(f"floor (one sequential read of every byte): {base:.1f} s, {total / 1e6 / base:.0f} MB/s\n")
    print("| workers | seconds | wheels/s | MB/s of wheels | x floor | CPU seconds | MB per CPU second |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for jobs in (int(j) for j in args.workers.split(",") if j):
            s, cpu = one_run(refs, jobs, tmp)
            print(
                f"| {jobs} | {s.seconds:.1f} | {s.judged / s.seconds:.2f} | {s.wheel_bytes / 1e6 / s.seconds:.0f} "
                f"| {s.seconds / base:.1f} | {cpu:.1f} | {s.wheel_bytes / 1e6 / cpu:.0f} |",
                flush=True,
            )
        if args.remote:
            from range_server import serving

            with serving(args.wheels) as srv:
                remote = [
                    sources.WheelRef(f"{srv.url}/{r.file}", r.file, r.size)
                    for r in refs
                    if os.path.dirname(r.location) == os.path.normpath(args.wheels)
                ]
                s, _ = one_run(remote, 1, tmp)
            print(
                f"\nremote (HTTP ranges, 127.0.0.1, 1 worker): {s.judged} wheels, fetched {s.fetched / 1e6:.0f} MB "
                f"of {s.wheel_bytes / 1e6:.0f} MB ({100 * s.fetched / s.wheel_bytes:.1f}%) in {s.requests} "
                f"requests, {s.seconds:.1f} s"
            )
            print("| wheel | size MB | fetched MB | share |")
            print("|---|---|---|---|")
            for f, _, size, got in sorted(s.results, key=lambda r: r[3] / max(r[2], 1)):
                print(f"| {f} | {size / 1e6:.1f} | {got / 1e6:.1f} | {100 * got / max(size, 1):.0f}% |")


if __name__ == "__main__":
    main()
