"""What archaudit reads of a smoke child from outside it (smoke/outcomes.py): how it ended, the
tail of its output, the patterns its output matched and the GPU device files it holds open, read
from real child processes and files."""

from __future__ import annotations

import glob
import signal
import subprocess
import sys
import time

from archaudit.smoke import outcomes


def test_a_signal_death_is_named_by_its_signal():
    died = subprocess.run([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    assert died.returncode == -signal.SIGSEGV and outcomes.signal_name(died.returncode) == "SIGSEGV"
    assert outcomes.signal_name(0) is None and outcomes.signal_name(3) is None
    assert outcomes.signal_name(-250) == "signal 250"  # no such signal: its number


def test_how_a_child_ended_is_said_in_one_phrase():
    assert outcomes._how(None, True, 30.0) == ("no progress for 30 s: hung, killed with its process group", "SIGKILL")
    assert outcomes._how(-6, False, 30.0) == ("the child interpreter was killed by SIGABRT", "SIGABRT")
    assert outcomes._how(3, False, 30.0) == ("the child interpreter exited with status 3", None)


def test_the_tail_is_the_end_of_the_output_and_the_patterns_search_all_of_it(tmp_path):
    log = tmp_path / "stderr.log"
    head = "[cuda_backend.cpp:346] Found forward_weights_blob in named data map\n"
    log.write_bytes(head.encode() + b"x" * (3 * outcomes.TAIL_CHARS) + b"\xff the last words\n")
    tail = outcomes._tail(str(log))
    assert len(tail) <= outcomes.TAIL_CHARS and tail.endswith("\ufffd the last words")
    hits = outcomes._scan_log(str(log), ("Found (\\w+) in named data map", "not found or update fn is null"))
    assert hits == {"Found (\\w+) in named data map": "Found forward_weights_blob in named data map"}
    assert outcomes._scan_log(str(log), ()) == {}
    assert outcomes._tail(str(tmp_path / "absent")) == "" and outcomes._scan_log(str(tmp_path / "absent"), ("x",)) == {}


def test_the_gpu_device_files_a_process_holds_are_read_from_outside_it(tmp_path):
    gpu = sorted(p for p in glob.glob("/dev/nvidia*") + glob.glob("/dev/kfd") + glob.glob("/dev/dri/renderD*"))
    ready = tmp_path / "ready"
    code = (
        "import os, sys, time\n"
        "held = []\n"
        "for p in sys.argv[2:]:\n"
        "    try:\n"
        "        held.append(os.open(p, os.O_RDONLY))\n"
        "    except OSError:\n"
        "        pass\n"
        "open(sys.argv[1], 'w').write(' '.join(os.readlink(f'/proc/self/fd/{fd}') for fd in held))\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(ready), "/dev/null", str(ready.parent), *gpu])
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.1)
        opened = ready.read_text().split()
        assert "/dev/null" in opened
        assert outcomes.open_devices(proc.pid) == tuple(sorted(p for p in opened if p in gpu))
    finally:
        proc.kill()
        proc.wait()
    assert outcomes.open_devices(proc.pid) == ()  # gone: nothing to read
