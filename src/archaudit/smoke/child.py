"""Child interpreters: run worker.py tasks in another process, and survive whatever they do.

A task works through a list of items (libraries, containers, model steps). The worker
announces each item before it starts and reports it when done, on a pipe of its own, so a
segfault, an abort, a hang or an os._exit in the middle of one item is pinned on that item:
it becomes a FAIL outcome with the signal (or the timeout), the stderr tail and the
duration, and a fresh child resumes with the next item. The timeout counts from the last
event, so it bounds each step, not the whole list; a hung child is killed with its whole
process group.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
TAIL_CHARS = 2000
_LIVE: set = set()  # running children, for stop_all()
_LIVE_LOCK = threading.Lock()
_STOPPING = threading.Event()


class Stopped(BaseException):
    """stop_all() was called: no new child is started."""


def stop_all() -> None:
    """Kill every running child (and its process group) and start no more.

    Called from archaudit's SIGTERM/SIGINT handler: the children run in sessions of their
    own, so a signal to archaudit's process group does not reach them.
    """
    _STOPPING.set()
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def reset() -> None:
    _STOPPING.clear()


@dataclass(frozen=True)
class Outcome:
    """What became of one item."""

    status: str  # "PASS" | "FAIL" | "SKIP"
    reason: str
    duration: float
    gpu: bool = False  # a SKIP for want of a GPU (or of code for it): FAIL under --require-gpu
    signal: str | None = None
    stderr_tail: str = ""
    details: dict = field(default_factory=dict)
    died: bool = False  # the child died in this item (signal, exit or timeout)


@dataclass(frozen=True)
class Death:
    """A child that died outside any item (before the first, or between two)."""

    reason: str
    signal: str | None
    stderr_tail: str
    duration: float


@dataclass
class TaskRun:
    outcomes: list[Outcome | None]
    infos: list[dict]
    deaths: list[Death]
    duration: float


def signal_name(returncode: int) -> str | None:
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - TAIL_CHARS))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return text.strip()


def _how(returncode: int | None, timed_out: bool, timeout: float) -> tuple[str, str | None]:
    if timed_out:
        return f"no progress for {timeout:g} s: hung, killed with its process group", "SIGKILL"
    sig = signal_name(returncode or 0)
    if sig:
        return f"the child interpreter was killed by {sig}", sig
    return f"the child interpreter exited with status {returncode}", None


def _spawn_once(python: str, task: str, spec: dict, env: dict, cwd: str, timeout: float, on_event):
    """Run one child; call on_event(event) for each event. Returns (rc, timed_out, tail, saw_end)."""
    fd, spec_path = tempfile.mkstemp(prefix="spec-", suffix=".json", dir=cwd)
    with os.fdopen(fd, "w") as f:
        json.dump(spec, f)
    log_fd, log_path = tempfile.mkstemp(prefix="stderr-", suffix=".log", dir=cwd)
    if _STOPPING.is_set():
        os.close(log_fd)
        raise Stopped()
    r, w = os.pipe()
    code = ("import runpy, sys; sys.argv = ['archaudit-smoke-worker'] + sys.argv[1:]; "
            f"runpy.run_path({WORKER!r}, run_name='__main__')")
    try:
        proc = subprocess.Popen(
            [python, "-c", code, task, spec_path, str(w)],
            stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd, pass_fds=(w,),
            cwd=cwd, env=env, start_new_session=True)
    except OSError:
        os.close(r)
        os.close(w)
        os.close(log_fd)
        raise
    with _LIVE_LOCK:
        _LIVE.add(proc)
    os.close(w)
    os.close(log_fd)
    os.set_blocking(r, False)
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ)
    buf = b""
    saw_end = False
    timed_out = False
    last = time.monotonic()
    try:
        while True:
            remaining = timeout - (time.monotonic() - last)
            if remaining <= 0:
                timed_out = True
                break
            if not sel.select(min(remaining, 1.0)):
                continue
            chunk = os.read(r, 65536)
            if not chunk:
                break  # every writer closed: the child ended (or closed the pipe)
            last = time.monotonic()
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("ev") == "end":
                    saw_end = True
                on_event(event)
    finally:
        sel.close()
        os.close(r)
        if timed_out:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            rc = proc.wait(timeout=max(timeout, 5.0))
        except subprocess.TimeoutExpired:  # the pipe closed but the process lingers
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            rc = proc.wait()
        with _LIVE_LOCK:
            _LIVE.discard(proc)
        # Grandchildren that outlive the worker (a compiler it started) go with the group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    tail = _tail(log_path)
    for p in (spec_path, log_path):
        try:
            os.unlink(p)
        except OSError:
            pass
    return rc, timed_out, tail, saw_end


def run_task(python: str, task: str, items: list, params: dict | None = None, *, env: dict,
             cwd: str, timeout: float, resume: bool = True) -> TaskRun:
    """Run task over items in as many children as it takes; every item gets an outcome.

    resume=False: after a death, the remaining items are not retried (they depend on state
    the dead child held) and get a SKIP outcome naming the item that died.
    """
    n = len(items)
    outcomes: list[Outcome | None] = [None] * n
    infos: list[dict] = []
    deaths: list[Death] = []
    t_start = time.monotonic()
    start = 0
    while True:
        current: dict = {"i": None, "t": None}

        def on_event(event: dict, current: dict = current) -> None:
            ev = event.get("ev")
            if ev == "begin":
                current["i"], current["t"] = event["i"], time.monotonic()
            elif ev == "result":
                i = event["i"]
                t = current["t"] if current["i"] == i and current["t"] else time.monotonic()
                elapsed = event.get("elapsed")
                outcomes[i] = Outcome(event["status"], event["reason"],
                                      float(elapsed) if elapsed is not None else time.monotonic() - t,
                                      gpu=bool(event.get("gpu")), details=event.get("details") or {})
                current["i"], current["t"] = None, None
            elif ev == "info":
                infos.append({k: v for k, v in event.items() if k != "ev"})

        spec = {"items": items, "start": start, "params": params or {}}
        t_child = time.monotonic()
        rc, timed_out, tail, saw_end = _spawn_once(python, task, spec, env, cwd, timeout, on_event)
        if saw_end and rc == 0 and not timed_out:
            break
        how, sig = _how(rc, timed_out, timeout)
        i = current["i"]
        if i is None:
            deaths.append(Death(how + (" after its last item" if saw_end else ""), sig, tail,
                                time.monotonic() - t_child))
            break
        outcomes[i] = Outcome("FAIL", how, time.monotonic() - current["t"], signal=sig,
                              stderr_tail=tail, died=True)
        start = i + 1
        if start >= n:
            break
        if not resume:
            for j in range(start, n):
                outcomes[j] = Outcome("SKIP", f"not run: the child died in the step before ({items[i]!r})", 0.0)
            break
    return TaskRun(outcomes, infos, deaths, time.monotonic() - t_start)


def child_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONFAULTHANDLER"] = "1"  # a crash prints the Python stack into the stderr tail
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONSTARTUP", None)
    if extra:
        env.update(extra)
    return env
