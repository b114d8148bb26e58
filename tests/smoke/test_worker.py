"""What runs inside a probe's child (archaudit.smoke.worker): where a library's search paths and
NEEDED entries resolve, on the gcc-built fixture wheels (tests/fixtures/smoke/build.sh), and the
signed event protocol of a task, run as child.py runs it: worker.py alone, by path."""

from __future__ import annotations

import hashlib
import hmac
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from archaudit.smoke import worker
from archaudit.smoke.load import load_item

WHEELS = Path(__file__).parents[1] / "fixtures" / "smoke" / "wheels"


def unpacked(tmp_path: Path, name: str) -> Path:
    site = tmp_path / "site"
    with zipfile.ZipFile(WHEELS / f"{name}-1.0-py3-none-linux_x86_64.whl") as z:
        z.extractall(site)
    return site


def test_origin_and_lib_expand_as_the_dynamic_loader_expands_them():
    assert worker.expand_origin("$ORIGIN/../lib", "/opt/pkg/bin") == "/opt/pkg/lib"
    assert worker.expand_origin("${ORIGIN}/x/./y", "/o") == "/o/x/y"
    lib = "lib64" if sys.maxsize > 2**32 else "lib"  # as ld.so expands $LIB for the interpreter's class
    assert worker.expand_origin("/usr/$LIB/a:${LIB}", "/o") == f"/usr/{lib}/a:{lib}"
    assert worker.expand_origin("relative/dir", "/o") == "relative/dir"


def test_a_search_path_that_resolves_to_nothing_is_named_until_it_exists(tmp_path):
    lib = unpacked(tmp_path, "smoke_ok") / "smoke_ok" / "libsmoke_runpath.so"
    info = load_item(str(lib))["elf"]
    gone = tmp_path / "site" / "smoke_ok_missing_dir"
    assert worker.dangling_search_paths(str(lib), info) == [
        f"RUNPATH $ORIGIN/../smoke_ok_missing_dir (-> {gone}, which does not exist)"
    ]
    gone.mkdir()
    assert worker.dangling_search_paths(str(lib), info) == []
    # $PLATFORM is the loader's to expand, never judged here
    assert worker.dangling_search_paths(str(lib), {"rpath": ["$ORIGIN/$PLATFORM", "${PLATFORM}/x"]}) == []


def test_needed_entries_resolve_in_the_order_the_loader_searches(tmp_path, monkeypatch):
    lib = unpacked(tmp_path, "smoke_missing") / "smoke_missing" / "libsmoke_missing.so"
    info = load_item(str(lib))["elf"]
    assert "libsmoke_absent.so.1" in info["needed"]
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    found = worker.resolve_needed(str(lib), info)
    assert found["libsmoke_absent.so.1"] is None  # not shipped: the cause the load probe names
    assert all(found[n] == "the system search path" for n in info["needed"] if n.startswith("libc."))
    own, env = lib.parent / "deps", tmp_path / "env"
    for d in (own, env):
        d.mkdir()
        shutil.copy(lib, d / "libsmoke_absent.so.1")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(env))
    # DT_RUNPATH: LD_LIBRARY_PATH first; DT_RPATH (without RUNPATH): the library's own paths first
    runpath = worker.resolve_needed(str(lib), {**info, "runpath": ["$ORIGIN/deps"]})
    rpath = worker.resolve_needed(str(lib), {**info, "rpath": ["$ORIGIN/deps"]})
    assert runpath["libsmoke_absent.so.1"] == str(env / "libsmoke_absent.so.1")
    assert rpath["libsmoke_absent.so.1"] == str(own / "libsmoke_absent.so.1")
    assert worker.resolve_needed(str(lib), {"needed": [str(own / "libsmoke_absent.so.1"), "/no/such.so"]}) == {
        str(own / "libsmoke_absent.so.1"): str(own / "libsmoke_absent.so.1"),
        "/no/such.so": None,
    }


def test_each_event_of_a_task_is_signed_with_the_key_and_numbered(tmp_path):
    """worker.py run by path in a plain interpreter, as a child runs it: the inspect task's events
    on the descriptor given, each line the HMAC-SHA256 of its JSON under the key, then the JSON."""
    key = os.urandom(32)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"start": 0, "items": [], "params": {"distribution": "pytest", "paths": sys.path}}))
    code = (
        "import runpy, sys; main = runpy.run_path(sys.argv[1])['main']; "
        "sys.exit(main(['inspect', sys.argv[2], '1'], bytes.fromhex(sys.argv[3])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, worker.__file__, str(spec), key.hex()], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    events = []
    for line in done.stdout.splitlines():
        mac, body = line.split(" ", 1)
        assert hmac.compare_digest(mac, hmac.new(key, body.encode(), hashlib.sha256).hexdigest())
        events.append(json.loads(body))
    assert [e["ev"] for e in events] == ["info", "end"] and [e["seq"] for e in events] == [1, 2]
    info = events[0]
    assert info["found"] is True and (info["name"], info["version"]) == ("pytest", importlib.metadata.version("pytest"))
    init = importlib.metadata.distribution("pytest").locate_file("pytest/__init__.py")
    assert os.path.realpath(str(init)) in info["files"]
