"""Child interpreters: run worker.py tasks in another process, and survive whatever they do.

A task works through a list of items (libraries, containers, model steps). The worker
announces each item before it starts and reports it when done, on a pipe of its own, so a
segfault, an abort, a hang or an os._exit in the middle of one item is pinned on that item:
it becomes a FAIL outcome with the signal (or the timeout), the stderr tail and the
duration, and a fresh child resumes with the next item. The timeout counts from the last
event, so it bounds each step, not the whole list; a hung child is killed with its whole
process group.

The wheel under test must not be able to forge a result. Only the tasks in TRUSTED_TASKS (the
metadata read, the driver query, the driver loads of device code) report a status: they run no
code of the wheel, with nothing of its environment on sys.path. Every other task runs the
wheel's code on purpose (dlopen, `import torch`), so its child reports raw observations only
(status "OBS": return values, output numbers, error texts); whatever status it writes is
replaced by "OBS", and the probe decides in archaudit's process, against references computed
there and what archaudit itself saw of the child (its exit, its signal, its output, the device
files it held open). A .pth file in the wheel runs in every interpreter of its environment, so
a child runs `python -I -S`: no site module, so no .pth file runs, and the environment's
site-packages are put on sys.path by archaudit's own bootstrap. The child reads a fresh random
key from a pipe of its own before any other code runs, and every event it writes is an
HMAC-SHA256 over the line with a sequence number; the parent ignores and reports any line that
does not verify (for an untrusted task this keeps a library's blind writes off the channel; it
is not what a verdict rests on). Every process archaudit starts dies with it
(PR_SET_PDEATHSIG), and archaudit is the subreaper of whatever they leave behind: a process a
child detached (double fork, setsid) is killed as
soon as the child that started it ends, and on SIGTERM (lifetime.py). What became of each
item and child, and what archaudit reads of a child from outside it, is outcomes.py.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from .lifetime import (
    _DIE_WITH_PARENT,
    _LIVE,
    _LIVE_LOCK,
    _SPAWN_LOCK,
    _STOPPING,
    Stopped,
    _end_group,
    _reap,
    become_subreaper,
    reset,
    stop_all,
    sweep,
)
from .outcomes import GPU_DEVICE_PREFIXES, TAIL_CHARS, Death, Outcome, TaskRun, _how, _scan_log, _tail, open_devices

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
DRIVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_driver.py")
CUPTI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cupti.py")  # the traced child's tracer
STEPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_steps.py")  # the framework steps


def _held(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# What a child runs, read once as this module loads (before any child starts): each child gets a
# fresh copy written into a directory of its own, so code of the wheel that rewrites archaudit's
# files, or a copy a previous child was given, never runs as the next trusted child's worker.
CHILD_SOURCES = {
    "worker.py": _held(WORKER),
    "cuda_driver.py": _held(DRIVER),
    "cupti.py": _held(CUPTI),
    "worker_steps.py": _held(STEPS),
}


# Tasks whose children run no code of the wheel under test: only their reports carry a status.
TRUSTED_TASKS = frozenset({"inspect", "gpu-info", "device-load"})
OBS = "OBS"  # the status of every item an untrusted child reports: an observation, not a verdict


# Run by `python -I -S -c BOOT task spec fd keyfd worker parent`: die with archaudit, take the
# key from its pipe before anything else runs, then put the environment's paths on sys.path
# (without processing any .pth file) and run the worker.
BOOT = (
    _DIE_WITH_PARENT.replace("PARENT", "6")
    + r"""
sys.dont_write_bytecode = True  # -I ignores PYTHONDONTWRITEBYTECODE: no .pyc into archaudit (plugins import it)
key, kfd = b"", int(sys.argv[4])
while len(key) < 64:
    chunk = os.read(kfd, 64 - len(key))
    if not chunk:
        break
    key += chunk
import json, faulthandler, runpy
faulthandler.enable()
with open(sys.argv[2]) as f:
    extra = json.load(f).get("sys_path") or []
sys.path.extend(p for p in extra if p not in sys.path)
if sys.argv[1] != "plugin":  # a probe plugin is built on archaudit; no other child may import it
    class _NoArchaudit:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "archaudit" or name.startswith("archaudit."):
                raise ImportError("archaudit is not importable in a smoke child")
            return None
    sys.meta_path.insert(0, _NoArchaudit)
main = runpy.run_path(sys.argv[5], run_name="archaudit_smoke_worker")["main"]
sys.exit(main(sys.argv[1:4], bytes.fromhex(key.decode()), kfd))
"""
)

# Run by `python -I -S -c EXEC parent cmd...`: die with archaudit, then become cmd.
EXEC = (
    _DIE_WITH_PARENT.replace("PARENT", "1")
    + r"""
os.execvp(sys.argv[2], sys.argv[2:])
"""
)


def _spawn_once(
    python: str,
    task: str,
    spec: dict[str, Any],
    env: dict[str, str],
    cwd: str,
    timeout: float,
    on_event: Callable[[dict[str, Any]], None],
    watch: tuple[str, ...] = (),
) -> tuple[int, bool, str, bool, list[str], dict[str, str]]:
    """Run one child; call on_event(event) for each authenticated event (a result event carries
    "_devices": the GPU device files archaudit saw the child hold open as it arrived).

    Returns (rc, timed_out, tail, saw_end, forged, log_hits): forged lists the lines that did
    not verify; log_hits what the watch patterns matched in the child's output."""
    fd, spec_path = tempfile.mkstemp(prefix="spec-", suffix=".json", dir=cwd)
    with os.fdopen(fd, "w") as f:
        json.dump(spec, f)
    log_fd, log_path = tempfile.mkstemp(prefix="stderr-", suffix=".log", dir=cwd)
    if _STOPPING.is_set():
        os.close(log_fd)
        raise Stopped()
    key = os.urandom(32)
    stage = _stage(cwd)
    r, w = os.pipe()
    key_r, key_w = os.pipe()
    cmd = [
        python,
        "-I",
        "-S",
        "-c",
        BOOT,
        task,
        spec_path,
        str(w),
        str(key_r),
        os.path.join(stage, "worker.py"),
        str(os.getpid()),
    ]
    try:
        proc = _launch(cmd, log_fd, (w, key_r), cwd, env, close_on_error=(r, w, key_r, key_w, log_fd))
    except OSError:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    os.close(w)
    os.close(key_r)
    os.close(log_fd)
    _write_quietly(key_w, key.hex().encode())  # a child already gone: its death is reported below
    # An untrusted child waits after each result for one byte on the key's pipe: archaudit reads
    # the device files it holds open first, so a child that ends at once is still seen whole.
    ack = bool(spec.get("ack"))
    if not ack:
        os.close(key_w)
    timed_out = False
    try:
        timed_out, saw_end, forged = _read_events(r, proc, key, key_w if ack else None, timeout, on_event)
    finally:
        os.close(r)
        if ack:
            os.close(key_w)
        rc, timed_out = _reap(proc, timeout, timed_out)
    tail = _tail(log_path)
    hits = _scan_log(log_path, watch)
    shutil.rmtree(stage, ignore_errors=True)
    for p in (spec_path, log_path):
        try:
            os.unlink(p)
        except OSError:
            pass
    return rc, timed_out, tail, saw_end, forged, hits


def _stage(cwd: str) -> str:
    """A fresh directory in cwd holding the worker and the modules it loads, from the bytes read at start."""
    stage = tempfile.mkdtemp(prefix="worker-", dir=cwd)
    for name, data in CHILD_SOURCES.items():
        with open(os.path.join(stage, name), "wb") as f:
            f.write(data)
    return stage


def _launch(
    cmd: list[str],
    log_fd: int,
    pass_fds: tuple[int, ...],
    cwd: str,
    env: dict[str, str],
    close_on_error: tuple[int, ...],
) -> subprocess.Popen[bytes]:
    """Start the child in its own session, registered as live; on failure close every fd given."""
    try:
        with _SPAWN_LOCK:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                pass_fds=pass_fds,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
            with _LIVE_LOCK:
                _LIVE.add(proc)
    except OSError:
        for x in close_on_error:
            os.close(x)
        raise
    return proc


def _write_quietly(fd: int, data: bytes) -> None:
    """Write to the child's key pipe; a child that closed its end is going, and says so by its death."""
    try:
        os.write(fd, data)
    except OSError:
        pass


def _read_events(
    r: int,
    proc: subprocess.Popen[bytes],
    key: bytes,
    ack_fd: int | None,
    timeout: float,
    on_event: Callable[[dict[str, Any]], None],
) -> tuple[bool, bool, list[str]]:
    """Read the child's event pipe until it closes or goes quiet for `timeout` seconds, calling
    on_event for each authenticated event. Returns (timed_out, saw_end, forged)."""
    os.set_blocking(r, False)
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ)
    buf = b""
    saw_end = False
    forged: list[str] = []
    seq = 0
    last = time.monotonic()
    try:
        while True:
            remaining = timeout - (time.monotonic() - last)
            if remaining <= 0:
                return True, saw_end, forged
            if not sel.select(min(remaining, 1.0)):
                continue
            chunk = os.read(r, 65536)
            if not chunk:
                return False, saw_end, forged  # every writer closed: the child ended (or closed the pipe)
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                event = _authentic_event(line, key, seq)
                if event is None:
                    forged.append(line[:200].decode(errors="replace"))
                    continue
                seq += 1
                last = time.monotonic()
                if event.get("ev") == "end":
                    saw_end = True
                if event.get("ev") == "result":
                    event["_devices"] = list(open_devices(proc.pid))
                    if ack_fd is not None:
                        _write_quietly(ack_fd, b"+")
                on_event(event)
    finally:
        sel.close()


def _authentic_event(line: bytes, key: bytes, seq: int) -> dict[str, Any] | None:
    """The event a line carries when its MAC verifies and it is the next in sequence; None otherwise."""
    mac, _, body = line.partition(b" ")
    want = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
    try:
        event = json.loads(body) if hmac.compare_digest(mac, want) else None
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("seq") != seq + 1:
        return None
    return event


def run_command(
    cmd: list[str], what: str, *, env: dict[str, str], timeout: float, cwd: str | None = None
) -> tuple[int, str]:
    """Run a helper command (an installer) as a killable child: its own process group, dead
    with archaudit, killed with everything it started after `timeout` seconds in all.

    Returns (exit status, output tail); raises TimeoutError naming `what` when killed."""
    if _STOPPING.is_set():
        raise Stopped()
    log = tempfile.TemporaryFile()
    full = [sys.executable, "-I", "-S", "-c", EXEC, str(os.getpid()), *cmd]
    with _SPAWN_LOCK:
        proc = subprocess.Popen(
            full, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=cwd, start_new_session=True
        )
        with _LIVE_LOCK:
            _LIVE.add(proc)
    try:
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise TimeoutError(
                f"{what} did not finish in {timeout:g} s: killed with every process it started"
            ) from None
    finally:
        _end_group(proc)
    log.seek(0)
    text = log.read().decode(errors="replace")
    log.close()
    return rc, text[-TAIL_CHARS:]


def run_task(
    python: str,
    task: str,
    items: list[Any],
    params: dict[str, Any] | None = None,
    *,
    env: dict[str, str],
    cwd: str,
    timeout: float,
    resume: bool = True,
    sys_path: tuple[str, ...] | list[str] = (),
    watch: tuple[str, ...] = (),
) -> TaskRun:
    """Run task over items in as many children as it takes; every item gets an outcome.

    resume=False: after a death, the remaining items are not retried (they depend on state
    the dead child held) and get a SKIP outcome naming the item that died.
    A trusted task (TRUSTED_TASKS) gets nothing of the environment on its sys.path (the paths
    go to it as params["paths"], for reading metadata); any other task's items come back
    with status OBS whatever the child wrote. watch: regular expressions searched in each
    child's stdout+stderr (TaskRun.log_hits).
    """
    trusted = task in TRUSTED_TASKS
    if trusted:
        params = {**(params or {}), "paths": list(sys_path)}
        sys_path = ()
    n = len(items)
    outcomes: list[Outcome | None] = [None] * n
    infos: list[dict[str, Any]] = []
    deaths: list[Death] = []
    log_hits: dict[str, str] = {}
    t_start = time.monotonic()
    start = 0
    while True:
        current: dict[str, Any] = {"i": None, "t": None}

        def on_event(event: dict[str, Any], current: dict[str, Any] = current) -> None:
            ev = event.get("ev")
            i = event.get("i")
            if ev in ("begin", "result") and not (isinstance(i, int) and 0 <= i < n):
                return  # no item of this task: nothing to pin on (an untrusted child may write anything)
            if ev == "begin":
                current["i"], current["t"] = i, time.monotonic()
            elif ev == "result" and isinstance(i, int):
                t = current["t"] if current["i"] == i and current["t"] else time.monotonic()
                elapsed = event.get("elapsed")
                details = event.get("details")
                outcomes[i] = Outcome(
                    str(event.get("status")) if trusted else OBS,
                    str(event.get("reason", "")) if trusted else "",
                    float(elapsed) if isinstance(elapsed, (int, float)) else time.monotonic() - t,
                    gpu=bool(event.get("gpu")) and trusted,
                    details=details if isinstance(details, dict) else {},
                    devices_open=tuple(event.get("_devices") or ()),
                )
                current["i"], current["t"] = None, None
            elif ev == "info":
                infos.append({k: v for k, v in event.items() if k != "ev"})

        spec = {"items": items, "start": start, "params": params or {}, "sys_path": list(sys_path), "ack": not trusted}
        t_child = time.monotonic()
        rc, timed_out, tail, saw_end, forged, hits = _spawn_once(python, task, spec, env, cwd, timeout, on_event, watch)
        for k, v in hits.items():
            log_hits.setdefault(k, v)
        if forged:
            deaths.append(
                Death(
                    f"{len(forged)} line(s) on the child's result channel were not written by "
                    f"archaudit's probe code (they fail its authentication) and were ignored; "
                    f"the first: {forged[0]!r}",
                    None,
                    tail,
                    0.0,
                )
            )
        if saw_end and rc == 0 and not timed_out:
            break
        how, sig = _how(rc, timed_out, timeout)
        i = current["i"]
        if i is None:
            deaths.append(
                Death(how + (" after its last item" if saw_end else ""), sig, tail, time.monotonic() - t_child)
            )
            break
        outcomes[i] = Outcome("FAIL", how, time.monotonic() - current["t"], signal=sig, stderr_tail=tail, died=True)
        start = i + 1
        if start >= n:
            break
        if not resume:
            for j in range(start, n):
                outcomes[j] = Outcome("SKIP", f"not run: the child died in the step before ({items[i]!r})", 0.0)
            break
    return TaskRun(outcomes, infos, deaths, time.monotonic() - t_start, log_hits)


def private_dirs(workdir: str) -> dict[str, str]:
    """HOME, TMPDIR and the XDG directories of the probes' children: fresh directories under the
    run's work directory (removed with it), so what the wheel's code writes to its home or temp
    never lands in archaudit's user's (its caches, configuration, a user site-packages)."""
    out = {}
    for var, sub in (
        ("HOME", "home"),
        ("TMPDIR", "tmp"),
        ("XDG_CACHE_HOME", "home/.cache"),
        ("XDG_CONFIG_HOME", "home/.config"),
        ("XDG_DATA_HOME", "home/.local/share"),
    ):
        path = os.path.join(workdir, sub)
        os.makedirs(path, exist_ok=True)
        out[var] = path
    return out


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONFAULTHANDLER"] = "1"  # a crash prints the Python stack into the stderr tail
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONSTARTUP", None)
    if extra:
        env.update(extra)
    return env


__all__ = [
    "become_subreaper",
    "BOOT",
    "child_env",
    "Death",
    "GPU_DEVICE_PREFIXES",
    "OBS",
    "open_devices",
    "Outcome",
    "private_dirs",
    "reset",
    "run_command",
    "run_task",
    "stop_all",
    "sweep",
    "TaskRun",
    "TRUSTED_TASKS",
]
