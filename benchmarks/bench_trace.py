"""The trace probe's cost: the torch sweep (smoke/trace.py SWEEP) with CUPTI's launch tracer off,
then on, in one process on one GPU; prints the ratio.

    python benchmarks/bench_trace.py [--repeat N] [--size N]   (needs a GPU and torch)

Each pass runs every sweep step --repeat times; the best of three passes counts, after a warm-up
pass that loads every library. The tracer starts after the warm-up, so what is measured is its
cost per launch (a ctypes callback on each launch's exit), not the module loads.
"""

from __future__ import annotations

import argparse
import json
import time

from archaudit.smoke import cupti, trace, worker_steps


def sweep(torch, repeat: int, n: int) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for step in trace.SWEEP:
        for _ in range(repeat):
            worker_steps.sweep_step(torch, step, n)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--size", type=int, default=512)
    args = ap.parse_args()
    import torch

    sweep(torch, 1, args.size)
    off = min(sweep(torch, args.repeat, args.size) for _ in range(3))
    tracer = cupti.start_tracer()
    on = min(sweep(torch, args.repeat, args.size) for _ in range(3))
    tracer.stop()
    launches = sum(r["count"] for r in tracer.records()["launches"] if r["layer"] == "driver")
    print(
        json.dumps(
            {
                "gpu": torch.cuda.get_device_name(0),
                "torch": torch.__version__,
                "cupti": tracer.library,
                "repeat": args.repeat,
                "size": args.size,
                "seconds_off": round(off, 4),
                "seconds_on": round(on, 4),
                "ratio": round(on / off, 3),
                "driver_launches_traced_in_3_passes": launches,
                "microseconds_per_launch": round(1e6 * (on - off) / max(1, launches / 3), 2),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
