"""Running the per-wheel task over many wheels: in this process, a local process pool, or a Ray
cluster. Whatever runs the tasks, results come back to this process and the one Store writes
them as they arrive, so an interrupted run keeps every wheel already finished.

What a worker is sent: the WheelRef (a path or URL and what the index said of it), the
TaskOptions, and the sha256 already known. What comes back: the WheelResult (the inventory and
the verdict, a few kilobytes to a few megabytes with kernel names). Workers share nothing.
"""

from __future__ import annotations

import importlib
import multiprocessing
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from .sources import WheelRef
from .store import Store
from .task import TaskOptions, WheelResult, audit_wheel, failed


@dataclass
class RunSummary:
    """What one `archaudit index` run did."""

    listed: int = 0
    skipped: int = 0  # judged before by this archaudit
    judged: int = 0
    not_started: int = 0  # left out by the byte cap
    verdicts: dict[str, int] = field(default_factory=dict)
    wheel_bytes: int = 0  # sizes of the wheels judged
    fetched: int = 0  # bytes read or received for them
    requests: int = 0
    seconds: float = 0.0
    results: list[tuple[str, str, int, int]] = field(default_factory=list)  # (file, verdict, size, fetched)
    failed_by: dict[str, int] = field(default_factory=dict)  # error code -> wheels it failed: why verdicts failed


OnResult = Callable[[WheelResult], None]


def _serial(todo: Sequence[tuple[WheelRef, str | None]], opts: TaskOptions) -> Iterator[WheelResult]:
    for ref, sha in todo:
        yield audit_wheel(ref, opts, sha)


def _pool(
    todo: Sequence[tuple[WheelRef, str | None]], opts: TaskOptions, jobs: int, stop: Callable[[], bool]
) -> Iterator[WheelResult]:
    """At most `jobs` wheels in flight; a new one starts as one finishes, unless `stop` says no."""
    pending = list(reversed(todo))
    # spawn, not fork: a forked worker would inherit the scanner's decode thread pool without its threads
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        running: dict[Future[WheelResult], tuple[WheelRef, str | None]] = {}
        while pending or running:
            while pending and len(running) < jobs and not stop():
                ref, sha = pending.pop()
                running[pool.submit(audit_wheel, ref, opts, sha)] = (ref, sha)
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                ref, sha = running.pop(fut)
                try:
                    yield fut.result()
                except Exception as e:  # noqa: BLE001 - a dead worker is that wheel's row, not the run's end
                    yield failed(ref, opts, sha, f"{type(e).__name__}: {e}")


def _ray(
    todo: Sequence[tuple[WheelRef, str | None]],
    opts: TaskOptions,
    address: str,
    jobs: int | None,
    stop: Callable[[], bool],
) -> Iterator[WheelResult]:
    """The same task as Ray remote functions; results are taken as they finish."""
    try:
        ray: Any = importlib.import_module("ray")
    except ImportError:
        raise UsageError("--ray needs Ray: install archaudit with its 'ray' extra") from None
    started_here = not ray.is_initialized()
    if started_here:
        kwargs: dict[str, Any] = {
            "address": None if address == "local" else address,
            "log_to_driver": False,
            "include_dashboard": False,
        }
        if address == "local" and jobs:
            kwargs["num_cpus"] = jobs
        try:
            ray.init(**kwargs)
        except ConnectionError as e:  # "Could not find any running Ray instance"
            why = (str(e).splitlines() or [type(e).__name__])[0]
            raise UsageError(
                f"--ray {address}: no Ray cluster to connect to ({why}); start one with `ray start "
                f"--head`, or run Ray on this machine alone with --ray local"
            ) from None
    try:
        task = ray.remote(num_cpus=1, max_retries=1)(audit_wheel)
        cap = jobs or max(1, int(ray.cluster_resources().get("CPU", 1)))
        pending = list(reversed(todo))
        running: dict[Any, tuple[WheelRef, str | None]] = {}
        while pending or running:
            while pending and len(running) < cap * 2 and not stop():
                ref, sha = pending.pop()
                running[task.remote(ref, opts, sha)] = (ref, sha)
            if not running:
                break
            done, _ = ray.wait(list(running), num_returns=1)
            for obj in done:
                ref, sha = running.pop(obj)
                try:
                    yield ray.get(obj)
                except Exception as e:  # noqa: BLE001 - a lost task is that wheel's row, not the run's end
                    yield failed(ref, opts, sha, f"{type(e).__name__}: {e}")
    finally:
        if started_here:
            ray.shutdown()


def run(
    refs: Sequence[WheelRef],
    store: Store,
    opts: TaskOptions,
    *,
    jobs: int = 1,
    ray: str | None = None,
    max_bytes: int | None = None,
    on_result: OnResult | None = None,
) -> RunSummary:
    """Judge every wheel not judged before by this archaudit; store each result as it arrives.
    With `max_bytes`, no new wheel starts once that many bytes have been fetched."""
    summary = RunSummary(listed=len(refs))
    start = time.perf_counter()
    todo: list[tuple[WheelRef, str | None]] = []
    for ref in refs:
        if store.done(ref, opts.scope):
            summary.skipped += 1
        else:
            todo.append((ref, store.known_sha(ref)))

    def capped() -> bool:
        return max_bytes is not None and summary.fetched >= max_bytes

    if not todo:
        results: Iterator[WheelResult] = iter(())
    elif ray is not None:
        results = _ray(todo, opts, ray, jobs, capped)
    elif jobs <= 1:
        results = (r for r in _serial_capped(todo, opts, capped))
    else:
        results = _pool(todo, opts, jobs, capped)
    for r in results:
        store.put(r, opts.scope)
        summary.judged += 1
        summary.verdicts[r.verdict] = summary.verdicts.get(r.verdict, 0) + 1
        summary.wheel_bytes += r.size
        summary.fetched += r.fetched
        summary.requests += r.requests
        summary.results.append((r.ref.file, r.verdict, r.size, r.fetched))
        for code in sorted({f.code for f in r.report.findings if f.severity == "error"}):
            summary.failed_by[code] = summary.failed_by.get(code, 0) + 1
        if on_result is not None:
            on_result(r)
    summary.not_started = len(todo) - summary.judged
    summary.seconds = time.perf_counter() - start
    return summary


def _serial_capped(
    todo: Sequence[tuple[WheelRef, str | None]], opts: TaskOptions, stop: Callable[[], bool]
) -> Iterator[WheelResult]:
    for item in todo:
        if stop():
            return
        yield from _serial([item], opts)


__all__ = ["RunSummary", "run"]
