"""archaudit smoke against wheels whose own code attacks it, built here by the tests:

- a .pth file that runs during install (pip re-executes itself in the new environment),
  sleeps past --timeout, detaches a daemon (double fork + setsid) and writes forged result
  lines on every descriptor it can reach;
- a shared library whose constructor, run by the load probe's dlopen, writes forged result
  lines on every descriptor of the probe's child;
- probe plugins that are broken or hostile.

Nothing here needs a GPU: every verdict checked is about who may speak for archaudit.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import archaudit
from archaudit.smoke import runner
from archaudit.smoke.report import FAIL, PASS, SKIP
from reference_tools import needs_tool

HERE = Path(__file__).parents[1]
MAKE_WHEEL = HERE / "fixtures" / "smoke" / "make_wheel.py"
SRC = str(Path(archaudit.__file__).resolve().parent.parent)
FORGED = (
    '{"ev": "result", "i": 0, "status": "PASS", "reason": "FORGED: loaded on GPU0 NVIDIA H100", '
    '"gpu": false, "details": {}, "seq": 1}'
)

# Python run from a .pth line: forge on every descriptor, leave a daemon, then (optionally) sleep.
PTH_CODE = (
    textwrap.dedent("""
    import os, sys, time
    d = os.environ.get("HOSTILE_DIR")
    if d:
        open(os.path.join(d, "ran-" + str(os.getpid())), "w").write(" ".join(sys.orig_argv))
        line = ("0" * 64 + " " + %r + "\\n").encode()
        for fd in range(3, 256):
            try:
                os.write(fd, line)
            except OSError:
                pass
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open(os.path.join(d, "daemon-" + str(os.getpid())), "w").write("")
                time.sleep(600)
            os._exit(0)
        if os.environ.get("HOSTILE_SLEEP"):
            time.sleep(float(os.environ["HOSTILE_SLEEP"]))
""")
    % FORGED
)

CONSTRUCTOR = r"""
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void forge(void) {
    const char *line = "%s\n";
    for (int fd = 3; fd < 256; fd++) write(fd, line, strlen(line));
}
int hostile_answer(void) { return 42; }
"""


def build_wheel(tmp: Path, name: str, files: dict[str, Path | str]) -> Path:
    out = tmp / "wheels"
    out.mkdir(exist_ok=True)
    stage = tmp / f"stage-{name}"
    args = []
    for member, content in files.items():
        path = stage / member
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copy(content, path)
        else:
            path.write_text(content)
        args.append(f"{member}={path}")
    subprocess.run([sys.executable, str(MAKE_WHEEL), str(out), name, "1.0", *args], check=True, capture_output=True)
    (whl,) = out.glob(f"{name}-1.0-*.whl")
    return whl


def pth_wheel(tmp: Path) -> Path:
    return build_wheel(
        tmp,
        "smoke_hostile_pth",
        {
            "smoke_hostile_pth/__init__.py": '"""a wheel whose .pth file attacks archaudit smoke"""\n',
            "smoke_hostile_pth.pth": "import sys; exec(" + repr(PTH_CODE) + ")\n",
        },
    )


def env_without_uv(tmp: Path, **extra: str) -> dict[str, str]:
    """pip, not uv, installs: pip re-executes in the new environment, where the .pth runs."""
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if not (Path(p) / "uv").exists()]
    env = dict(os.environ, PATH=os.pathsep.join(path), PYTHONPATH=SRC, TMPDIR=str(tmp), **extra)
    return env


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def daemons(d: Path) -> list[int]:
    return [int(p.name.split("-")[1]) for p in d.glob("daemon-*")]


def test_a_pth_file_cannot_forge_a_result_nor_outlive_the_run(tmp_path):
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    whl = pth_wheel(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    r = subprocess.run(
        [sys.executable, "-m", "archaudit.smoke", str(whl), "--format", "json", "--timeout", "120"],
        capture_output=True,
        text=True,
        env=env_without_uv(work, HOSTILE_DIR=str(hostile)),
        timeout=300,
    )
    ran = list(hostile.glob("ran-*"))
    assert ran, "the .pth never ran: the test proves nothing"
    # it ran in the installer (pip), never in a probe's child: those run python -I -S
    assert all("archaudit-smoke-worker" not in p.read_text() and "-S" not in p.read_text().split() for p in ran)
    doc = json.loads(r.stdout)
    assert "FORGED" not in r.stdout
    assert all(row["status"] != PASS or "FORGED" not in row["reason"] for row in doc["rows"])
    # every daemon the .pth detached was killed as its installer step ended
    assert daemons(hostile) and not [p for p in daemons(hostile) if alive(p)]
    assert list(work.iterdir()) == []


def test_a_pth_file_that_sleeps_in_the_installer_is_killed_at_the_timeout(tmp_path):
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    whl = pth_wheel(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    # the .pth sleeps 600 s: the run's ending at all (under subprocess's 300) is the kill, and the
    # message says so; no wall-clock bound is asserted
    r = subprocess.run(
        [sys.executable, "-m", "archaudit.smoke", str(whl), "--timeout", "10"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env_without_uv(work, HOSTILE_DIR=str(hostile), HOSTILE_SLEEP="600"),
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert "did not finish in 10 s: killed with every process it started" in r.stderr
    assert not [p for p in daemons(hostile) if alive(p)]
    assert list(work.iterdir()) == []


def test_sigterm_ends_every_process_the_wheel_started(tmp_path):
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    whl = pth_wheel(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "archaudit.smoke", str(whl), "--timeout", "300"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_without_uv(work, HOSTILE_DIR=str(hostile), HOSTILE_SLEEP="600"),
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (daemons(hostile) and list(hostile.glob("ran-*"))):
        time.sleep(0.2)
    sleeping = [int(p.name.split("-")[1]) for p in hostile.glob("ran-*")]
    assert sleeping and daemons(hostile), "the .pth never ran"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    time.sleep(0.5)
    assert not [p for p in daemons(hostile) + sleeping if alive(p)]
    assert list(work.iterdir()) == []


@needs_tool("gcc (apt-get install gcc)", shutil.which("gcc"))
def test_a_library_constructor_cannot_forge_the_load_result(tmp_path):
    src = tmp_path / "forge.c"
    src.write_text(CONSTRUCTOR % FORGED.replace('"', '\\"'))
    lib = tmp_path / "libhostile.so"
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-Wl,--build-id=none", "-o", str(lib), str(src)], check=True)
    whl = build_wheel(
        tmp_path,
        "smoke_hostile_lib",
        {
            "smoke_hostile_lib/__init__.py": '"""a library that forges results"""\n',
            "smoke_hostile_lib/libhostile.so": lib,
        },
    )
    report = runner.run_smoke(
        str(whl), installed=None, require_gpu=False, timeout=60.0, system_site_packages=False, probes=["load"]
    )
    forged = [r for r in report.rows if "not written by archaudit's probe code" in r.reason]
    assert forged and all(r.status == FAIL for r in forged)
    assert "FORGED" in forged[0].reason  # the ignored line is shown, never taken as a result
    load = [r for r in report.rows if r.subject == "smoke_hostile_lib/libhostile.so" and r not in forged]
    assert [r.status for r in load] == [PASS] and "FORGED" not in load[0].reason
    assert report.exit_code == 1


# -- a wheel that ships its own torch -----------------------------------------------------------

# The forger: a `torch` package that, once imported by the model-torch child, finds the worker's
# globals and answers for it: CUDA present on an "NVIDIA H100", every output computed correctly
# (in pure Python, from the inputs and weights the child was given), and any verdict PASS.
FORGED_TORCH = textwrap.dedent("""
    import math, sys, types
    backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace()),
                                     cudnn=types.SimpleNamespace())
    __version__ = "9.9.9"

    def _linear(d):
        x, w, b = d["x"], d["weights"]["weight"], d["weights"]["bias"]
        (n, i), o = x["shape"], w["shape"][0]
        return [n, o], [math.fsum(x["values"][r * i + j] * w["values"][c * i + j] for j in range(i))
                        + b["values"][c] for r in range(n) for c in range(o)]

    def _conv(d):
        x, w, b = d["x"], d["weights"]["weight"], d["weights"]["bias"]
        (n, ch, h, wd), (o, _, k, _) = x["shape"], w["shape"]
        out = []
        for bn in range(n):
            for oc in range(o):
                for r in range(h):
                    for q in range(wd):
                        s = 0.0
                        for ic in range(ch):
                            for kr in range(k):
                                for kq in range(k):
                                    ir, iq = r + kr - 1, q + kq - 1
                                    if 0 <= ir < h and 0 <= iq < wd:
                                        s += (x["values"][((bn * ch + ic) * h + ir) * wd + iq]
                                              * w["values"][((oc * ch + ic) * k + kr) * k + kq])
                        out.append(s + b["values"][oc])
        return [n, o, h, wd], out

    def _facts(torch):
        return {"importable": True, "torch": "9.9.9", "torch_cuda": "13.0", "cuda_available": True,
                "arch_list": ["sm_90"], "capability": [9, 0], "device_name": "NVIDIA H100"}

    def _step(torch, step, work, data):
        shape, values = (_conv if step == "conv" else _linear)(data[step])
        return {"file_bytes": 1234, "device": "cuda:0", "shape": shape, "output": values}

    frame = sys._getframe(1)
    while frame is not None and "_torch_facts" not in frame.f_globals:
        frame = frame.f_back
    if frame is not None:
        g = frame.f_globals
        emit = g["emit"]
        g["_torch_facts"] = _facts
        g["_steps"]().torch_step = _step  # the worker's framework steps (worker_steps.py)
        g["result"] = lambda i, *a, **k: emit(ev="result", i=i, status="PASS", gpu=True, elapsed=0.1,
                                              reason="ran on NVIDIA H100 (sm_90) and matched CPU", details={})
        open(__import__("os").environ.get("FORGE_MARK", "/dev/null"), "w").write("forged")
""")

# The control: a `torch` that forges nothing and has no CUDA.
HONEST_TORCH = textwrap.dedent("""
    import types
    __version__ = "9.9.9"
    version = types.SimpleNamespace(cuda=None)
    cuda = types.SimpleNamespace(is_available=lambda: False)
""")


def torch_wheel(tmp: Path, name: str, code: str) -> Path:
    return build_wheel(
        tmp, name, {f"{name}_marker/__init__.py": '"""ships a torch package"""\n', "torch/__init__.py": code}
    )


@pytest.mark.usefixtures("no_gpu")
def test_a_wheel_shipping_a_forging_torch_cannot_pass_model_torch(tmp_path, monkeypatch):
    mark = tmp_path / "forged"
    monkeypatch.setenv("FORGE_MARK", str(mark))
    forger = torch_wheel(tmp_path, "forgetorch", FORGED_TORCH)
    control = torch_wheel(tmp_path, "honesttorch", HONEST_TORCH)
    kw: dict[str, Any] = dict(
        installed=None, require_gpu=True, timeout=120.0, system_site_packages=False, probes=["model-torch"]
    )
    forged = runner.run_smoke(str(forger), **kw)
    assert mark.read_text() == "forged", "the fake torch never took over the worker: the test proves nothing"
    honest = runner.run_smoke(str(control), **kw)
    for report in (forged, honest):
        assert [r.status for r in report.rows] == [FAIL, FAIL], [r.reason for r in report.rows]
        for r in report.rows:
            assert r.reason.startswith(
                "--require-gpu: this must run on a GPU, but archaudit's own driver query found no GPU"
            ), r.reason
            assert "H100" not in r.reason and "matched" not in r.reason
        assert report.exit_code == 1
    # Without --require-gpu the forger's rows are SKIP, never PASS.
    relaxed = runner.run_smoke(str(forger), **{**kw, "require_gpu": False})
    assert [r.status for r in relaxed.rows] == [SKIP, SKIP] and relaxed.exit_code == 0


def test_forged_numbers_that_match_still_need_a_gpu_archaudit_saw_the_child_hold(tmp_path, monkeypatch):
    # The same forger judged as if archaudit's own driver query had found an H100: its numbers
    # are right (it computes the model), but archaudit saw the child hold no GPU device open.
    from archaudit.smoke import child, probes, venv

    monkeypatch.setenv("FORGE_MARK", str(tmp_path / "forged"))
    forger = torch_wheel(tmp_path, "forgetorch", FORGED_TORCH)
    env = venv.create(str(forger), system_site_packages=False, timeout=120.0)
    work = tmp_path / "work"
    work.mkdir()
    try:
        ctx = probes.ProbeContext(
            python=env.python,
            distribution="forgetorch",
            version="1.0",
            requires=(),
            location="",
            files=(),
            gpus=({"ordinal": 0, "name": "NVIDIA H100", "cc": "9.0", "sm": "sm_90"},),
            gpu_error=None,
            require_gpu=True,
            timeout=120.0,
            workdir=str(work),
            child_env=child.child_env(),
            selected=("model-torch",),
            sys_path=env.sys_path,
        )
        rows = probes.TorchModelProbe().run(ctx)
    finally:
        venv.close(env)
    assert (tmp_path / "forged").read_text() == "forged"
    assert [r.status for r in rows] == [FAIL, FAIL]
    for r in rows:
        assert "matched archaudit's reference, but the child held no GPU device file open" in r.reason, r.reason
