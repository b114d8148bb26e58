"""How the driver's JIT answers and how long it takes, by loading mode (run on a GPU machine).

    python benchmarks/bench_jit_modes.py OUTDIR

Part A, the largest PTX-only container of nvidia-cusparselt-cu13 (13 MB of sm_75 PTX on an
sm_90 GPU), all at once, one process each: eager cuModuleLoadData at the driver's default
optimisation level; eager cuModuleLoadDataEx with CU_JIT_OPTIMIZATION_LEVEL 0; lazy loading
(CUDA_MODULE_LOADING=LAZY) then cuFuncLoad of every function, timed one by one; and lazy
loading split over K processes, each loading every K-th function. Each reports its result
codes, wall time and peak RSS. The edge fixtures (tests/fixtures/smoke/bin) go through the same
modes, so a mode that stops checking the PTX ISA version or the text .target shows here.

Part B, the answers at both levels on a sample: every container predicted "PTX JIT only" of
nvidia-cufft, nvidia-cufile and cuSPARSELt, eager, in 16 processes per level; the codes must
be equal container by container; the JIT's summed and wall time per level are the ratio.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CU_JIT_OPTIMIZATION_LEVEL = 7
SCRATCH = tempfile.mkdtemp(prefix="jit-modes-")


def _driver():
    lib = ctypes.CDLL("libcuda.so.1")
    assert lib.cuInit(0) == 0
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    lib.cuDeviceGet(ctypes.byref(dev), 0)
    lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    lib.cuCtxSetCurrent(ctx)
    return lib


def _load(lib, image: bytes, level: int | None):
    mod = ctypes.c_void_p()
    t0 = time.perf_counter()
    if level is None:
        code = lib.cuModuleLoadData(ctypes.byref(mod), image)
    else:
        opts = (ctypes.c_int * 1)(CU_JIT_OPTIMIZATION_LEVEL)
        vals = (ctypes.c_void_p * 1)(level)
        code = lib.cuModuleLoadDataEx(ctypes.byref(mod), image, 1, opts, vals)
    return code, time.perf_counter() - t0, mod


def worker(argv: list[str]) -> None:
    """worker MODE LEVEL K N SPECFILE: print one JSON line per item."""
    mode, level_s, k, n, spec = argv[0], argv[1], int(argv[2]), int(argv[3]), argv[4]
    level = None if level_s == "default" else int(level_s)
    items = json.load(open(spec))
    lib = _driver()
    out = []
    for it in items:
        with open(it["file"], "rb") as f:
            f.seek(it["offset"])
            image = f.read(it["size"])
        code, secs, mod = _load(lib, image, level)
        rec = {"id": it["id"], "code": code, "load_s": round(secs, 4)}
        if mode == "lazy" and code == 0:
            count = ctypes.c_uint()
            rec["count_code"] = lib.cuModuleGetFunctionCount(ctypes.byref(count), mod)
            funcs = (ctypes.c_void_p * max(1, count.value))()
            lib.cuModuleEnumerateFunctions(funcs, count.value, mod)
            rec["functions"] = count.value
            times, codes = [], {}
            t0 = time.perf_counter()
            for i in range(count.value):
                if i % n != k:
                    continue
                t1 = time.perf_counter()
                c = lib.cuFuncLoad(ctypes.c_void_p(funcs[i]))
                times.append(time.perf_counter() - t1)
                codes[c] = codes.get(c, 0) + 1
            rec["func_codes"] = codes
            rec["func_s"] = round(time.perf_counter() - t0, 3)
            rec["func_first5"] = [round(t, 3) for t in times[:5]]
            rec["func_max"] = round(max(times), 3) if times else 0
            rec["loaded_here"] = len(times)
        if code == 0:
            lib.cuModuleUnload(mod)
        out.append(rec)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(json.dumps({"mode": mode, "level": level_s, "k": k, "n": n, "rss_mb": rss, "items": out}))


def spawn(mode: str, level: str, k: int, n: int, items: list[dict], tag: str, out: str) -> subprocess.Popen:
    spec = os.path.join(SCRATCH, f"spec-{tag}-{k}.json")
    json.dump(items, open(spec, "w"))
    env = dict(
        os.environ,
        CUDA_CACHE_DISABLE="1",
        CUDA_DISABLE_PTX_JIT="0",
        CUDA_MODULE_LOADING="LAZY" if mode == "lazy" else "EAGER",
    )
    return subprocess.Popen(
        [sys.executable, __file__, "worker", mode, level, str(k), str(n), spec],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )


def collect(procs: list[subprocess.Popen]) -> list[dict]:
    res = []
    for p in procs:
        text, _ = p.communicate()
        try:
            res.append(json.loads(text.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            res.append({"died": p.returncode, "out": text[-500:]})
    return res


def main(out: str) -> int:
    sys.path.insert(0, os.path.join(ROOT, "src"))
    import importlib.metadata as md

    from archaudit.gpus import predict as P
    from archaudit.read.library import scan_file

    os.makedirs(out, exist_ok=True)
    log = open(os.path.join(out, "jit-modes.txt"), "w")

    def say(*a: object) -> None:
        text = " ".join(str(x) for x in a)
        print(text, flush=True)
        log.write(text + "\n")
        log.flush()

    h200 = P.Gpu((9, 0), (13, 0))
    jit_items: list[dict] = []
    for dist, member in (
        ("nvidia-cufft", "libcufft.so.12"),
        ("nvidia-cufile", "libcufile.so.0"),
        ("nvidia-cusparselt-cu13", "libcusparseLt.so.0"),
    ):
        files = [str(f.locate()) for f in md.distribution(dist).files or () if str(f).endswith(member)]
        t0 = time.perf_counter()
        lib = scan_file(files[0], decode=True)
        n = 0
        for i, c in enumerate(lib.containers):
            if c.vendor == "nvidia" and P.predict(c, h200).outcome is P.Outcome.JIT:
                ptx = sum(e.size for e in c.entries if e.kind == "ptx")
                jit_items.append(
                    {
                        "id": f"{dist} {member} #{i} @0x{c.offset:x}",
                        "file": files[0],
                        "offset": c.offset,
                        "size": c.size,
                        "ptx": ptx,
                    }
                )
                n += 1
        say(
            f"{dist} {md.version(dist)} {member}: {len(lib.containers)} containers, {n} predicted PTX JIT only "
            f"(scan {time.perf_counter() - t0:.1f} s)"
        )
    big = max(jit_items, key=lambda it: it["ptx"])
    say(f"largest: {big['id']}, container {big['size']} B, PTX {big['ptx']} B")
    bins = os.path.join(ROOT, "tests", "fixtures", "smoke", "bin")
    edge = [
        {"id": n, "file": os.path.join(bins, n), "offset": 0, "size": os.path.getsize(os.path.join(bins, n))}
        for n in sorted(os.listdir(bins))
        if n.endswith(".fatbin")
    ]

    # Part A: the big container, every mode at once
    split = 12
    t0 = time.monotonic()
    procs = [
        spawn("eager", "default", 0, 1, [big], "a-eager-default", out),
        spawn("eager", "0", 0, 1, [big], "a-eager-0", out),
        spawn("lazy", "default", 0, 1, [big], "a-lazy-default", out),
    ]
    procs += [spawn("lazy", "default", k, split, [big], "a-split", out) for k in range(split)]
    results = collect(procs)
    say(f"part A wall {time.monotonic() - t0:.1f} s (15 processes at once)")
    for r in results[:3]:
        say("A", json.dumps(r))
    parts = results[3:]
    say(
        f"A lazy split over {split} processes: max load_s+func_s "
        f"{max(p['items'][0]['load_s'] + p['items'][0].get('func_s', 0) for p in parts if 'items' in p):.1f} s, "
        f"max rss {max(p.get('rss_mb', 0) for p in parts)} MB, codes "
        f"{[p['items'][0]['code'] for p in parts if 'items' in p]} "
        f"{[p['items'][0].get('func_codes') for p in parts if 'items' in p]}"
    )
    t0 = time.monotonic()
    results = collect(
        [
            spawn(m, lv, 0, 1, edge, f"edge-{m}-{lv}", out)
            for m, lv in (("eager", "default"), ("eager", "0"), ("lazy", "default"), ("lazy", "0"))
        ]
    )
    for r in results:
        say(
            "edge",
            r.get("mode"),
            r.get("level"),
            {x["id"]: (x["code"], x.get("func_codes")) for x in r.get("items", [])},
        )

    # Part B: every JIT-predicted container at both levels, eager, 16 processes each
    sample = sorted(jit_items, key=lambda it: -it["ptx"])
    sample = [it for it in sample if it is not big]
    answers: dict[str, dict[str, int]] = {}
    for level in ("0", "default"):
        lists: list[list[dict]] = [[] for _ in range(16)]
        load = [0] * 16
        for it in sample:
            j = load.index(min(load))
            lists[j].append(it)
            load[j] += it["ptx"] + 20000
        t0 = time.monotonic()
        res = collect([spawn("eager", level, k, 16, lists[k], f"b-{level}", out) for k in range(16)])
        wall = time.monotonic() - t0
        codes: dict[str, int] = {}
        total = 0.0
        for r in res:
            for x in r.get("items", []):
                codes[x["id"]] = x["code"]
                total += x["load_s"]
        answers[level] = codes
        tally: dict[int, int] = {}
        for c in codes.values():
            tally[c] = tally.get(c, 0) + 1
        say(
            f"B level {level}: {len(codes)} of {len(sample)} containers answered, codes {tally}, "
            f"JIT summed {total:.1f} s, wall {wall:.1f} s (16 processes), "
            f"max rss {max(r.get('rss_mb', 0) for r in res)} MB"
        )
    same = sum(1 for k in answers["0"] if answers["default"].get(k) == answers["0"][k])
    say(f"B equal answers at level 0 and default: {same} of {len(answers['0'])}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        worker(sys.argv[2:])
    else:
        sys.exit(main(sys.argv[1]))
