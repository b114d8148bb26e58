"""Time `archaudit check` against its floor, as ratios measured in one run, on public wheels.

The floor is the work no reader of a wheel can skip: inflating every library member once
and decoding every compressed device-code payload once, each spread over the machine's
cores (ISA-L inflate, zstd/LZ4 decode into a reused buffer; the payloads are located
beforehand, untimed). The
check is the whole `archaudit check` process, interpreter start included, with its peak RSS.
Figures are medians over interleaved rounds, so drift on a shared machine hits both alike.

    python benchmarks/bench_check.py WHEEL... [--rounds N] [--detail kernels]
    python benchmarks/bench_check.py --stages WHEEL...     # share of time per stage
    python benchmarks/bench_check.py --scaling WHEEL...    # one check per wheel, then all at once
"""

from __future__ import annotations

import argparse
import compileall
import functools
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import lz4.block
import zstandard

import archaudit
from archaudit.judge import audit as audit_module
from archaudit.judge.audit import Policy
from archaudit.model import CUBIN
from archaudit.read import codefacts, decode, fatbin, library, zipread
from archaudit.read.artifacts import inventories, select_member
from archaudit.report import render


def library_members(path: str) -> list[zipread.Member]:
    """The members check reads (chosen by content and name, as artifacts does)."""
    members, _ = zipread.read_directory(path, select_member)
    return sorted((m for m in members if m.tag and m.tag != "zip"), key=lambda m: -m.size)


def _inflate(path: str, m: zipread.Member) -> Iterator[bytes]:
    with open(path, "rb") as f:
        yield from zipread.iter_member(f, m)


@dataclass(frozen=True)
class Payload:
    compression: str
    data: bytes
    size: int


def compressed_payloads(path: str) -> list[Payload]:
    """Every zstd/LZ4 payload of the wheel's libraries, cut out of the inflated members (untimed
    preparation: where the payloads are comes from a headers-only inventory)."""
    (inv,) = inventories([path], decode=False)
    out: list[Payload] = []
    by_name = {m.name: m for m in library_members(path)}
    for lib in inv.libraries:
        wanted = sorted(e.offset for e in lib.entries if e.compression in ("zstd", "lz4"))
        if not wanted:
            continue
        # whole cubins stored as bare zstd frames (role cubin): the entry is the frame itself
        framed = {e.offset: e for c in lib.containers if c.role == CUBIN for e in c.entries}
        data = b"".join(_inflate(path, by_name[lib.path]))
        for at in wanted:
            if at in framed:
                e = framed[at]
                out.append(Payload("zstd", data[at : at + e.stored_size], e.size))
                continue
            eh = fatbin.parse_entry_header(data, at, len(data) - at, at)
            start = at + eh.header_size
            out.append(Payload(eh.compression, data[start : start + eh.compressed_size], eh.uncompressed_size))
        del data
    return out


def inflate_floor(path: str, jobs: int) -> float:
    members = library_members(path)
    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda m: sum(len(b) for b in _inflate(path, m)), members))
    return time.perf_counter() - start


def decode_floor(payloads: list[Payload], jobs: int) -> float:
    """Every payload decoded once, the fastest way known here: into a buffer each thread
    reuses (LZ4 through the lz4 package's own LZ4_decompress_safe where it exports it; its
    lz4.block.decompress copies the output once more)."""
    local = threading.local()
    lz4_into = fatbin._LZ4_INTO

    def one(p: Payload) -> int:
        out = getattr(local, "out", None) or fatbin.DecodeBuffer()
        local.out = out
        view, address = out.view(p.size)
        if p.compression == "lz4":
            if lz4_into is None:
                return len(lz4.block.decompress(p.data, uncompressed_size=p.size))
            return lz4_into(p.data, address, len(p.data), p.size)
        dctx = getattr(local, "d", None) or zstandard.ZstdDecompressor()
        local.d = dctx
        with dctx.stream_reader(p.data) as reader:
            return reader.readinto(view)

    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, payloads, chunksize=16))
    return time.perf_counter() - start


_CHILD = (
    "import sys\n"
    "from archaudit.cli import entry\n"
    "try:\n"
    "    entry(sys.argv[1:])\n"
    "finally:\n"
    "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n"
    "    sys.stderr.write(hwm[0] if hwm else 'VmHWM: 0 kB\\n')\n"
)


@functools.cache
def compiled_package() -> dict[str, str]:
    """Compile archaudit's modules to bytecode, as an install does, and return the environment
    the check process runs in: with PYTHONDONTWRITEBYTECODE set and stale or missing bytecode,
    every run would compile its modules again (about 0.07 s of CPU that no installed copy pays).
    Done once per benchmark run, not once per check process."""
    compileall.compile_dir(os.path.dirname(archaudit.__file__), quiet=1)
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def check_process(paths: list[str], extra: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one whole `archaudit check` process, from compiled bytecode.
    The peak is the process's own high-water mark (VmHWM): getrusage would count the benchmark's
    memory too, which the child held between fork and exec."""
    cmd = [sys.executable, "-c", _CHILD, "check", "-q", "--no-config", *extra, *paths]
    env = compiled_package()
    start = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False, env=env)
    seconds = time.perf_counter() - start
    line = next((x for x in done.stderr.splitlines() if x.startswith("VmHWM:")), "VmHWM: 0 kB")
    return seconds, int(line.split()[1]) / 1024


def decoded_bytes(path: str) -> int:
    (inv,) = inventories([path], decode=False)
    return sum(e.size for lib in inv.libraries for e in lib.entries)


def ratios(paths: list[str], rounds: int, jobs: int, extra: list[str]) -> None:
    for path in paths:
        payloads = compressed_payloads(path)
        floors, checks, rss = [], [], []
        for _ in range(rounds):
            floors.append(inflate_floor(path, jobs) + decode_floor(payloads, jobs))
            seconds, peak = check_process([path], extra)
            checks.append(seconds)
            rss.append(peak)
        ratio = statistics.median(c / f for c, f in zip(checks, floors))
        print(
            f"{os.path.basename(path)} {' '.join(extra)}: floor {statistics.median(floors):.2f} s "
            f"(inflate + decode of {sum(p.size for p in payloads) / 1e9:.2f} GB), check "
            f"{statistics.median(checks):.2f} s, check/floor {ratio:.2f} "
            f"(rounds: {', '.join(f'{c / f:.2f}' for c, f in zip(checks, floors))}), "
            f"peak RSS {statistics.median(rss):.0f} MB (max {max(rss):.0f})",
            flush=True,
        )
        del payloads


class StageClock:
    """CPU time per stage, summed over threads (time.thread_time around each stage's calls)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {"inflate": 0.0, "scan": 0.0, "decode": 0.0, "judge": 0.0, "render": 0.0}
        self.lock = threading.Lock()

    def add(self, stage: str, seconds: float) -> None:
        with self.lock:
            self.seconds[stage] += seconds


def stages(paths: list[str], jobs: int) -> None:
    """Instrument one in-process check: inflate = inside the member inflater, decode = inside
    payload decoding and its facts, scan = the rest of the reading threads, judge = audit(),
    render = the text report."""
    for path in paths:
        _stages_of(path, jobs)


def _stages_of(path: str, jobs: int) -> None:
    clock = StageClock()
    real_iter, real_decode, real_scan = zipread.iter_member, decode.decode_entry, library.scan_stream

    def timed_iter(f: object, m: zipread.Member) -> Iterator[bytes]:
        it = real_iter(f, m)  # type: ignore[arg-type]
        while True:
            t = time.thread_time()
            try:
                block = next(it)
            except StopIteration:
                clock.add("inflate", time.thread_time() - t)
                return
            clock.add("inflate", time.thread_time() - t)
            yield block

    inline = [0.0]  # decode time inside a reader's scan (raw cubins), counted in scan too

    def timed_decode(*a: object) -> object:
        t = time.thread_time()
        try:
            return real_decode(*a)  # type: ignore[arg-type]
        finally:
            spent = time.thread_time() - t
            clock.add("decode", spent)
            if not threading.current_thread().name.startswith("archaudit-decode"):
                with clock.lock:
                    inline[0] += spent

    def timed_scan(*a: object, **kw: object) -> object:
        t = time.thread_time()
        try:
            return real_scan(*a, **kw)  # type: ignore[arg-type]
        finally:
            clock.add("scan", time.thread_time() - t)

    zipread.iter_member = timed_iter  # type: ignore[assignment]
    decode.decode_entry = timed_decode  # type: ignore[assignment]
    import archaudit.read.artifacts as artifacts

    artifacts.scan_stream = timed_scan  # type: ignore[assignment]
    try:
        wall = time.perf_counter()
        found = inventories([path], jobs=jobs)
        read_wall = time.perf_counter() - wall
        t = time.thread_time()
        report = audit_module.audit(found, None, Policy())
        clock.add("judge", time.thread_time() - t)
        t = time.thread_time()
        render.render_text(report, detail="libraries", verbose=False, ascii_only=False, costs=False, timings=False)
        clock.add("render", time.thread_time() - t)
    finally:
        zipread.iter_member, decode.decode_entry = real_iter, real_decode  # type: ignore[assignment]
        artifacts.scan_stream = real_scan  # type: ignore[assignment]
    # scan_stream's time includes the inflating and the entries decoded in its own thread
    clock.seconds["scan"] -= clock.seconds["inflate"] + inline[0]
    total = sum(clock.seconds.values())
    shares = ", ".join(f"{k} {v:.2f} s ({100 * v / total:.0f}%)" for k, v in clock.seconds.items())
    print(f"{os.path.basename(path)}: read {read_wall:.2f} s wall; CPU by stage: {shares}", flush=True)


def scaling(paths: list[str], rounds: int) -> None:
    rows = []
    for path in paths:
        nbytes = decoded_bytes(path)
        runs = [check_process([path], []) for _ in range(rounds)]
        seconds = statistics.median(r[0] for r in runs)
        rss = statistics.median(r[1] for r in runs)
        rows.append((path, nbytes, seconds, rss))
        print(
            f"{os.path.basename(path)}: {nbytes / 1e9:.2f} GB decoded device code, check {seconds:.2f} s "
            f"({nbytes / 1e6 / seconds:.0f} MB/s decoded), peak RSS {rss:.0f} MB",
            flush=True,
        )
    together = [check_process(paths, []) for _ in range(rounds)]
    seconds = statistics.median(r[0] for r in together)
    print(
        f"all {len(paths)} wheels in one call (one shared pool): {seconds:.2f} s (sum of single calls "
        f"{sum(r[2] for r in rows):.2f} s), peak RSS {statistics.median(r[1] for r in together):.0f} MB"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("wheels", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--detail", choices=("libraries", "containers", "kernels"), default=None)
    ap.add_argument("--fast", action="store_true", help="time `check --fast` (headers only) instead")
    ap.add_argument("--stages", action="store_true", help="CPU time per stage, in process")
    ap.add_argument("--scaling", action="store_true", help="one check per wheel, then all at once")
    args = ap.parse_args()
    reader = "compiled" if codefacts._compiled is not None else "Python (ARCHAUDIT_PURE_PYTHON or not built)"
    print(
        f"python {sys.version.split()[0]}, inflater {zipread.INFLATER}, cubin reader {reader}, jobs {args.jobs}, "
        f"cpus {os.cpu_count()}, rounds {args.rounds}",
        flush=True,
    )
    if args.stages:
        stages(args.wheels, args.jobs)
    elif args.scaling:
        scaling(args.wheels, args.rounds)
    else:
        extra = (["--detail", args.detail] if args.detail else []) + (["--fast"] if args.fast else [])
        ratios(args.wheels, args.rounds, args.jobs, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
