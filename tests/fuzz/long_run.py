"""Run the fuzz suite in long mode on every core, for a wall-clock budget, and total the inputs.

    python tests/fuzz/long_run.py --seconds 520 --out fuzz-long
    python tests/fuzz/long_run.py --only 20 21 22 --inputs 100000 --seconds 7000  # the PE tests

Each worker is one pytest process running one fuzz test (heavy parsers get several workers,
each with its own random seed) with ARCHAUDIT_FUZZ=long and a very high example count, stopped
by SIGTERM at the budget; its inputs are counted as it goes (ARCHAUDIT_FUZZ_COUNTS). Fixed-count
entries run to their count; with --inputs N, so does every other worker (N inputs each, the
budget still a cap), so that a run ends when it has done what it set out to. Prints per test
the inputs run and whether any failure was found; logs are in --out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
T = "tests/fuzz/"
# (pytest node ids run in order by one worker, example count or None = until the budget)
WORKERS = [
    ([T + "test_fuzz_elf.py::test_elf_tables"], None),
    ([T + "test_fuzz_elf.py::test_elf_tables"], None),
    ([T + "test_fuzz_elf.py::test_elf_truncation_anywhere"], None),
    ([T + "test_fuzz_fatbin.py::test_fatbin_containers_and_entries"], None),
    ([T + "test_fuzz_fatbin.py::test_fatbin_containers_and_entries"], None),
    ([T + "test_fuzz_fatbin.py::test_standalone_fatbin"], None),
    ([T + "test_fuzz_payload.py::test_compressed_payload_lies"], None),
    ([T + "test_fuzz_payload.py::test_compressed_payload_bytes"], None),
    ([T + "test_fuzz_payload.py::test_embedded_cubin"], None),
    ([T + "test_fuzz_cubin_ptx.py::test_cubin"], None),
    ([T + "test_fuzz_cubin_ptx.py::test_ptx_target"], None),
    ([T + "test_fuzz_hip.py::test_hip_bundles"], None),
    ([T + "test_fuzz_hip.py::test_hip_bundles"], None),
    ([T + "test_fuzz_hip.py::test_code_object_file"], None),
    ([T + "test_fuzz_zip.py::test_wheel_structure"], None),
    ([T + "test_fuzz_zip_layouts.py::test_zip_end_structures"], None),
    ([T + "test_fuzz_zip_layouts.py::test_members_chosen_by_content"], None),
    ([T + "test_fuzz_claims.py::test_parse_claim", T + "test_fuzz_claims.py::test_parse_amd_claim"], 100_000),
    ([T + "test_fuzz_config.py::test_config_load", T + "test_fuzz_claims.py::test_claims_through_cli"], 100_000),
    (
        [
            T + "test_fuzz_config.py::test_config_through_cli",
            T + "test_fuzz_memory.py",
            T + "test_fuzz_zip.py::test_wheel_member_streams",
        ],
        3_000,
    ),
    ([T + "test_fuzz_pe.py::test_pe_tables"], None),
    ([T + "test_fuzz_pe.py::test_pe_device_code"], None),
    ([T + "test_fuzz_pe.py::test_pe_truncation_anywhere"], None),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=520)
    ap.add_argument("--out", default="fuzz-long")
    ap.add_argument("--only", type=int, nargs="*", help="worker indexes to run")
    ap.add_argument("--inputs", type=int, help="inputs per budget-bound worker: it stops there")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = HERE.parents[1]
    procs = []
    for i, (nodes, count) in enumerate(WORKERS):
        if args.only and i not in args.only:
            continue
        count = count or args.inputs
        env = dict(
            os.environ,
            ARCHAUDIT_FUZZ="long",
            ARCHAUDIT_FUZZ_EXAMPLES=str(count or 10_000_000),
            ARCHAUDIT_FUZZ_COUNTS=str(out / f"counts-{i}.json"),
        )
        log = open(out / f"worker-{i}.log", "w")
        cmd = [
            "timeout",
            "-s",
            "TERM",
            str(int(args.seconds)),
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::DeprecationWarning",
            *nodes,
        ]
        procs.append((i, nodes, subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)))
    start = time.time()
    results = {}
    for i, _, p in procs:
        results[i] = p.wait()
    total: Counter = Counter()
    for i, nodes, _ in procs:
        f = out / f"counts-{i}.json"
        if f.exists():
            total.update(json.loads(f.read_text()))
        text = (out / f"worker-{i}.log").read_text(errors="replace")
        failed = "Falsifying" in text or " failed" in text.splitlines()[-1] if text.strip() else False
        tests = " ".join(n.split("::")[-1] for n in nodes)
        print(f"worker {i:2d} rc={results[i]:3d} {'FAILURE ' if failed else ''}{tests}")
    (out / "counts.json").write_text(json.dumps(dict(sorted(total.items())), indent=1))
    print(json.dumps(dict(sorted(total.items())), indent=1))
    print(f"{time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
