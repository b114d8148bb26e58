"""Time the rule layer against reading, in one process: what judging costs beside inventory.

The floor is the inventory of the same wheel (every payload decoded), measured in the same
run; the rules (facts, every GPU's choice per container, kernels, floors) must stay a small
fraction of it. Run as `python benchmarks/bench_rules.py WHEEL --arch LIST [--rounds N]`.
"""

from __future__ import annotations

import argparse
import statistics
import time

from archaudit.claims import parse_claim
from archaudit.judge.audit import audit
from archaudit.judge.policy import Policy
from archaudit.read.artifacts import inventory


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("wheel")
    ap.add_argument("--arch", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    claim = parse_claim(args.arch, "--arch")
    policy = Policy(driver="580.65.06", gpus=(("H200", (9, 0)),))
    reads, judges = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        inv = inventory(args.wheel)
        t1 = time.perf_counter()
        report = audit([inv], claim, policy)
        t2 = time.perf_counter()
        reads.append(t1 - t0)
        judges.append(t2 - t1)
    containers = sum(len(lib.containers) for lib in inv.libraries)
    read, judge = statistics.median(reads), statistics.median(judges)
    print(
        f"{args.wheel}: {containers} containers; inventory {read:.2f} s (floor), rules {judge:.2f} s, "
        f"ratio {judge / read:.2f}; exit {report.exit_code}"
    )


if __name__ == "__main__":
    main()
