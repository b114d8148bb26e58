"""Issue 4's observable behaviour: progress on a terminal only, the benchmark script runs,
several targets in one call, and a wheel carrying both vendors' device code."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import oracle
from archaudit.cli import main
from wheels import fetch

ROOT = Path(__file__).resolve().parents[2]
AMD = ROOT / "tests" / "fixtures" / "amd" / "bin"


def _run_on_a_terminal(args: list[str], timeout: float = 120) -> tuple[int, bytes]:
    """Run archaudit with stderr (and stdout) on a pseudo-terminal; return (rc, what it wrote)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "archaudit", *args], stdout=follower, stderr=follower, stdin=subprocess.DEVNULL
    )
    os.close(follower)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(leader)
    return proc.wait(timeout=10), out


@pytest.mark.slow
def test_progress_is_shown_on_a_terminal_and_not_with_quiet():
    wheel = str(fetch("nvidia-curand", "10.4.0.35"))
    rc, out = _run_on_a_terminal(["check", "--no-config", "--arch", "80", wheel])
    assert rc == 0
    assert b" MB/s" in out and b"libraries" in out and b"\r" in out
    rc, out = _run_on_a_terminal(["check", "--no-config", "--quiet", "--arch", "80", wheel])
    assert rc == 0 and b"MB/s" not in out


def test_no_progress_when_stderr_is_not_a_terminal():
    r = subprocess.run(
        [sys.executable, "-m", "archaudit", "check", "--no-config", "--example", "--arch", "80,90"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1 and r.stderr == ""


@pytest.mark.slow
def test_benchmark_script_short_mode():
    """CI runs the benchmark on one mid-size wheel; it asserts nothing about time."""
    wheel = str(fetch("nvidia-curand", "10.4.0.35"))
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_check.py"), "--rounds", "1", wheel],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "check/floor" in r.stdout and "peak RSS" in r.stdout


def test_several_targets_in_one_call(capsys):
    rc = main(
        [
            "check",
            "-q",
            "--no-config",
            "--format",
            "json",
            "--arch",
            "80",
            str(oracle.FIXTURES / "lib_sm80.so"),
            str(oracle.FIXTURES / "lib_ptx90.so"),
            str(oracle.FIXTURES / "lib_host.so"),
        ]
    )
    rep = json.loads(capsys.readouterr().out)
    assert [t["target"].rsplit("/", 1)[-1] for t in rep["targets"]] == ["lib_sm80.so", "lib_ptx90.so", "lib_host.so"]
    assert rc == 1  # compute_90 PTX cannot run on 8.0; the host library has no device code (G006)


def _both_vendors(tmp_path: Path) -> Path:
    whl = tmp_path / "both-1.0-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        z.write(oracle.FIXTURES / "lib_multi.so", "both/libcuda_kernels.so")
        z.write(AMD / "hip_multi.so", "both/libhip_kernels.so")
    return whl


def test_a_wheel_with_both_vendors_reports_both(tmp_path, capsys):
    whl = str(_both_vendors(tmp_path))
    # hip_multi.so's gfx90a code is xnack- only: the claim names that mode (a bare gfx90a claim
    # needs code for both modes, and fails on it).
    rc = main(
        [
            "check",
            "-q",
            "--no-config",
            "--format",
            "json",
            whl,
            "--arch",
            "80;90",
            "--amd-arch",
            "gfx90a:xnack-;gfx1100",
        ]
    )
    rep = json.loads(capsys.readouterr().out)
    libs = {x["path"]: x for x in rep["targets"][0]["libraries"]}
    assert rc == 0
    assert set(libs["both/libcuda_kernels.so"]["coverage"]) == {"80", "90"}
    assert set(libs["both/libhip_kernels.so"]["coverage"]) == {"gfx90a:xnack-", "gfx1100"}
    rc = main(["check", "-q", "--no-config", "--format", "json", whl, "--arch", "80;90"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 1 and [f["subject"] for f in rep["targets"][0]["findings"] if f["code"] == "C001"] == [
        "both/libhip_kernels.so"
    ]
    rc = main(["check", "-q", "--no-config", "--format", "json", whl, "--arch", "80;90", "--amd-arch", "gfx1030"])
    rep = json.loads(capsys.readouterr().out)
    miss = [f for f in rep["targets"][0]["findings"] if f["code"] == "G001"]
    assert rc == 1 and [f["subject"] for f in miss] == ["both/libhip_kernels.so"]
