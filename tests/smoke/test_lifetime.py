"""Every process archaudit starts dies with it (smoke/lifetime.py): archaudit becomes the subreaper
of what its children detach, the sweep ends those orphans, and stop_all() starts no child again
until reset(). Run in a fresh interpreter of its own, so this test process stays no one's parent."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from helpers import SRC

SCRIPT = textwrap.dedent("""
    import os, subprocess, sys, time
    from archaudit.smoke import child, lifetime

    assert lifetime.become_subreaper()
    mark = sys.argv[1]
    # a child that detaches a daemon (setsid, double fork) and exits at once
    subprocess.run([sys.executable, "-c", '''
    import os, sys, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open(sys.argv[1], "w").write(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    ''', mark], check=True)
    deadline = time.monotonic() + 30
    while not (os.path.exists(mark) and open(mark).read()) and time.monotonic() < deadline:
        time.sleep(0.05)
    daemon = int(open(mark).read())
    with open(f"/proc/{daemon}/stat") as f:
        parent = int(f.read().rsplit(") ", 1)[1].split()[1])
    print("adopted", parent == os.getpid())
    print("swept", lifetime.sweep())
    print("daemon alive", os.path.exists(f"/proc/{daemon}"))
    print("swept again", lifetime.sweep())
    lifetime.stop_all()
    try:
        child.run_command(["true"], "a step", env=dict(os.environ), timeout=10)
        print("ran while stopping")
    except lifetime.Stopped:
        print("stopped")
    lifetime.reset()
    print("after reset", child.run_command(["true"], "a step", env=dict(os.environ), timeout=10)[0])
""")


def test_orphans_are_adopted_and_swept_and_stop_all_holds_until_reset(tmp_path):
    env = dict(os.environ, PYTHONPATH=SRC)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "daemon")], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "adopted True",  # its parent gone, the daemon is ours, not init's
        "swept 2",  # the daemon, and the child that detached it (ours to reap once its parent went)
        "daemon alive False",  # killed and reaped
        "swept again 0",
        "stopped",
        "after reset 0",
    ]
