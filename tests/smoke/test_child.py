"""Child interpreters (smoke/child.py): a task's items in as many children as it takes, a death
pinned on the item it happened in, the key-signed event channel, the bootstrap every probe child
runs, and the installer steps run as killable children. The children are real interpreters
running archaudit's worker over the gcc-built fixture libraries (tests/fixtures/smoke/build.sh).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import archaudit
from archaudit.smoke import child, probes
from archaudit.smoke.report import FAIL, SKIP
from helpers import smoke_wheel as wheel

PACKAGE = Path(archaudit.__file__).resolve().parent


def crash_libraries(tmp_path: Path) -> list[str]:
    """smoke_crash's three libraries, unpacked: the second segfaults in its constructor."""
    libs = []
    with zipfile.ZipFile(wheel("smoke_crash")) as z:
        for name in ("liba_ok.so", "libb_segv.so", "libc_ok.so"):
            p = tmp_path / name
            p.write_bytes(z.read(f"smoke_crash/{name}"))
            libs.append(str(p))
    return libs


def test_resume_after_a_death_inside_one_child(tmp_path):
    # The worker protocol directly: one child handles several items; after the crash in the
    # second, a fresh child goes on with the third.
    libs = crash_libraries(tmp_path)
    run = child.run_task(
        sys.executable,
        "load",
        [probes.load_item(p) for p in libs],
        env=child.child_env(),
        cwd=str(tmp_path),
        timeout=30,
    )
    # load runs the wheel's code (constructors): its items are observations, judged by the probe
    outcomes = [o for o in run.outcomes if o is not None]
    assert len(outcomes) == len(run.outcomes)
    assert [o.status for o in outcomes] == [child.OBS, FAIL, child.OBS]
    assert outcomes[0].details == {"loaded": True} and outcomes[2].details == {"loaded": True}
    assert outcomes[1].died and outcomes[1].signal == "SIGSEGV"
    assert not run.deaths


def boot_with(tmp: Path, task: str, worker_code: str) -> str:
    """Run child.BOOT as a probe child is run, with a worker of the test's own; its stdout."""
    from archaudit.smoke import child

    spec = tmp / f"spec-{task}.json"
    spec.write_text(json.dumps({"sys_path": [str(PACKAGE.parent)]}))
    worker = tmp / f"worker-{task}.py"
    worker.write_text(worker_code)
    r, w = os.pipe()
    os.write(w, b"0" * 64)
    os.close(w)
    try:
        out = subprocess.run(
            [sys.executable, "-I", "-S", "-c", child.BOOT, task, str(spec), "1", str(r), str(worker), str(os.getpid())],
            capture_output=True,
            text=True,
            pass_fds=(r,),
            timeout=60,
            env=child.child_env(),
        )
    finally:
        os.close(r)
    return out.stdout + out.stderr


TRY_IMPORT = """
def main(args, key, kfd):
    try:
        import archaudit
        print("IMPORTED", archaudit.__file__)
    except ImportError as e:
        print("REFUSED", e)
    return 0
"""


def test_a_probe_child_cannot_import_archaudit_even_with_it_on_its_path(tmp_path):
    assert "REFUSED archaudit is not importable in a smoke child" in boot_with(tmp_path, "load", TRY_IMPORT)
    assert "REFUSED archaudit is not importable in a smoke child" in boot_with(tmp_path, "torch", TRY_IMPORT)
    # a probe plugin is built on archaudit: its child may import it
    assert "IMPORTED" in boot_with(tmp_path, "plugin", TRY_IMPORT)


def test_each_child_runs_a_fresh_copy_of_the_worker_held_since_start(tmp_path):
    from archaudit.smoke import child

    assert child.CHILD_SOURCES["worker.py"] == Path(child.WORKER).read_bytes()
    run = child.run_task(
        sys.executable,
        "inspect",
        [],
        {"distribution": "archaudit"},
        env=child.child_env(child.private_dirs(str(tmp_path))),
        cwd=str(tmp_path),
        timeout=60.0,
        sys_path=tuple(p for p in sys.path if p and os.path.isdir(p)),
    )
    assert run.infos and run.infos[0].get("found")  # its metadata is read as files, not imported
    assert not list(tmp_path.glob("worker-*"))  # the copy went with the child
    assert {p.name for p in tmp_path.iterdir()} == {"home", "tmp"}


def test_without_resume_the_items_after_a_death_are_skipped_naming_it(tmp_path):
    libs = crash_libraries(tmp_path)
    items = [probes.load_item(p) for p in libs]
    run = child.run_task(
        sys.executable, "load", items, env=child.child_env(), cwd=str(tmp_path), timeout=30, resume=False
    )
    first, died, rest = run.outcomes
    assert first is not None and first.status == child.OBS
    assert died is not None and died.status == FAIL and died.signal == "SIGSEGV"
    assert died.reason == "the child interpreter was killed by SIGSEGV"
    assert rest is not None and rest.status == SKIP and not rest.died
    assert rest.reason == f"not run: the child died in the step before ({items[1]!r})"


def test_an_event_counts_only_with_its_key_and_its_place_in_the_sequence():
    key = os.urandom(32)

    def line(event: object, with_key: bytes = key) -> bytes:
        body = json.dumps(event).encode()
        return hmac.new(with_key, body, hashlib.sha256).hexdigest().encode() + b" " + body

    event = {"ev": "result", "i": 0, "status": "PASS", "seq": 1}
    assert child._authentic_event(line(event), key, 0) == event
    assert child._authentic_event(line(event), key, 1) is None  # a replay of an earlier line
    assert child._authentic_event(line(event, os.urandom(32)), key, 0) is None  # another key
    assert (
        child._authentic_event(line(event).replace(b'"PASS"', b'"FAIL"'), key, 0) is None
    )  # the body changed after signing
    assert child._authentic_event(b"0" * 64 + b" " + json.dumps(event).encode(), key, 0) is None
    assert child._authentic_event(line([1, 2]), key, 0) is None  # signed, but no event


def test_an_installer_step_that_overruns_is_killed_with_what_it_started(tmp_path):
    mark = tmp_path / "grandchild"
    script = (
        "import subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        f"open({str(mark)!r}, 'w').write(str(p.pid)); time.sleep(600)"
    )
    with pytest.raises(TimeoutError, match=r"^a sleeper did not finish in 3 s: killed with every process it started$"):
        child.run_command([sys.executable, "-c", script], "a sleeper", env=dict(os.environ), timeout=3)
    stat = Path(f"/proc/{int(mark.read_text())}/stat")
    deadline = time.monotonic() + 30
    while stat.exists() and stat.read_text().rsplit(") ", 1)[1][0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.1)  # SIGKILL to its process group is delivered, not waited for
    assert not stat.exists() or stat.read_text().rsplit(") ", 1)[1][0] == "Z"  # gone, or dead and unreaped
    rc, tail = child.run_command(
        [sys.executable, "-c", "import sys; print('out'); sys.exit(3)"],
        "a failing step",
        env=dict(os.environ),
        timeout=60,
    )
    assert (rc, tail.strip()) == (3, "out")


def test_a_childs_home_and_temp_are_fresh_directories_of_the_run(tmp_path):
    dirs = child.private_dirs(str(tmp_path))
    assert set(dirs) == {"HOME", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"}
    assert all(Path(d).is_dir() and Path(d).is_relative_to(tmp_path) for d in dirs.values())
    out = subprocess.run(
        [sys.executable, "-c", "import os, tempfile; print(os.path.expanduser('~')); print(tempfile.gettempdir())"],
        env=child.child_env(dirs),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == [dirs["HOME"], dirs["TMPDIR"]]
