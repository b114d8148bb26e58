"""Every process archaudit starts dies with it: the children of smoke run in sessions of their own,
registered while they live, each killed with its process group when it ends or archaudit stops,
and archaudit is the subreaper that ends whatever they detached (child.py runs them).

Standard library only, as child.py: a probe plugin's child imports it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading

_LIVE: set[subprocess.Popen[bytes]] = set()  # running children, for stop_all()
_LIVE_LOCK = threading.Lock()
# Held while a child is started and registered, and while orphans are swept: a child that is
# forked but not yet in _LIVE must never look like an orphan to another thread's sweep.
_SPAWN_LOCK = threading.RLock()
_STOPPING = threading.Event()
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36

# Both die with archaudit: PR_SET_PDEATHSIG(SIGKILL), then a check that the parent is still the
# one that started them (it may have died before the call). PARENT is the argv index of its pid.
_DIE_WITH_PARENT = r"""
import os, sys
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, 9)
except Exception:
    pass
if os.getppid() != int(sys.argv[PARENT]):
    os._exit(113)
"""


def become_subreaper() -> bool:
    """Make this process the parent of every orphan its children leave (Linux); True if it is."""
    try:
        import ctypes

        return bool(ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1) == 0)
    except (OSError, AttributeError):
        return False


def _adopted() -> list[int]:
    """Processes whose parent is this one but which no live child of ours is: orphans we reap."""
    me = os.getpid()
    with _LIVE_LOCK:
        live = {p.pid for p in _LIVE}
    out: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit() or int(name) in live:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            out.append(int(name))
    return out


def sweep() -> int:
    """Kill (and reap) every orphan adopted from our children's descendants; how many."""
    with _SPAWN_LOCK:
        return _sweep_locked()


def _sweep_locked() -> int:
    killed = 0
    for _ in range(100):
        found = _adopted()
        if not found:
            break
        for pid in found:
            try:
                group = os.getpgid(pid)
                if group != os.getpgrp():
                    os.killpg(group, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            killed += 1
    return killed


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
    sweep()


def reset() -> None:
    _STOPPING.clear()


def _reap(proc: subprocess.Popen[bytes], timeout: float, timed_out: bool) -> tuple[int, bool]:
    """Wait for the child (killing its group first when it timed out, or when it lingers after
    closing its pipe) and end what it left. Returns (rc, timed_out)."""
    if timed_out:
        _kill_group(proc.pid)
    try:
        rc = proc.wait(timeout=max(timeout, 5.0))
    except subprocess.TimeoutExpired:  # the pipe closed but the process lingers
        timed_out = True
        _kill_group(proc.pid)
        rc = proc.wait()
    _end_group(proc)
    return rc, timed_out


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """Forget a finished child and end what it left: grandchildren that outlive it (a compiler it
    started) go with its process group, and anything that left the group (setsid) was adopted by
    us: the sweep ends it too."""
    with _LIVE_LOCK:
        _LIVE.discard(proc)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    sweep()


__all__ = ["become_subreaper", "PR_SET_CHILD_SUBREAPER", "PR_SET_PDEATHSIG", "reset", "stop_all", "Stopped", "sweep"]
