"""archaudit smoke without a GPU: real wheels installed into real throwaway environments,
real child interpreters, real dlopen, real crashes and hangs (fixture libraries built by
tests/fixtures/smoke/build.sh). Nothing under test is mocked.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import archaudit
from archaudit.cli import main_smoke
from archaudit.report import smoke as render
from archaudit.smoke import runner
from archaudit.smoke.report import FAIL, PASS, SKIP
from helpers import no_gpu_reason, smoke_cli as cli, smoke_wheel as wheel
from reference_tools import needs_tool

HERE = Path(__file__).parents[1]
FIXTURES = HERE / "fixtures" / "smoke"
WHEELS = FIXTURES / "wheels"
SRC = str(Path(archaudit.__file__).resolve().parent.parent)


def have_cuda_driver() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def smoke(target=None, **kw):
    kw.setdefault("installed", None)
    kw.setdefault("require_gpu", False)
    kw.setdefault("timeout", 60.0)
    kw.setdefault("system_site_packages", False)
    kw.setdefault("probes", ["load"])
    return runner.run_smoke(target, **kw)


def by_subject(report, probe="load"):
    return {r.subject: r for r in report.rows if r.probe == probe}


# -- the load probe on fixture wheels --------------------------------------------------------


def test_clean_libraries_pass_and_a_dangling_runpath_is_named():
    report = smoke(wheel("smoke_ok"))
    rows = by_subject(report)
    assert set(rows) == {"smoke_ok/libsmoke_ok.so", "smoke_ok/libsmoke_runpath.so"}
    assert all(r.status == PASS for r in rows.values())
    assert "RTLD_NOW" in rows["smoke_ok/libsmoke_ok.so"].reason
    runpath = rows["smoke_ok/libsmoke_runpath.so"].reason
    assert "RUNPATH $ORIGIN/../smoke_ok_missing_dir" in runpath and "does not exist" in runpath
    assert report.environment.startswith("fresh venv")
    assert report.exit_code == 0


def test_missing_dependency_is_named():
    report = smoke(wheel("smoke_missing"))
    (row,) = report.rows
    assert row.status == FAIL and row.subject == "smoke_missing/libsmoke_missing.so"
    assert "missing dependencies: libsmoke_absent.so.1" in row.reason
    assert dict(row.details)["missing"] == ["libsmoke_absent.so.1"]
    assert report.exit_code == 1


def test_undefined_symbol_is_named():
    (row,) = smoke(wheel("smoke_undef")).rows
    assert row.status == FAIL
    assert "undefined symbol: smoke_not_defined_anywhere" in row.reason


def test_a_segfaulting_constructor_is_a_failed_row_and_the_run_goes_on():
    report = smoke(wheel("smoke_crash"))
    rows = by_subject(report)
    assert [r.subject for r in report.rows] == [
        "smoke_crash/liba_ok.so",
        "smoke_crash/libb_segv.so",
        "smoke_crash/libc_ok.so",
    ]
    crash = rows["smoke_crash/libb_segv.so"]
    assert crash.status == FAIL and crash.signal == "SIGSEGV"
    assert "killed by SIGSEGV" in crash.reason
    assert "Segmentation fault" in crash.stderr_tail  # faulthandler's report from the child
    assert rows["smoke_crash/liba_ok.so"].status == PASS
    assert rows["smoke_crash/libc_ok.so"].status == PASS


def test_a_hanging_constructor_is_killed_at_the_timeout():
    # 10 s: --timeout bounds the install steps too, and pip needs a few seconds on a loaded machine.
    # The constructor never returns: a row at all says the kill ended it (no wall-clock upper bound,
    # which a loaded machine would break; the child waited at least the timeout).
    (row,) = smoke(wheel("smoke_hang"), timeout=10.0).rows
    assert row.status == FAIL and row.signal == "SIGKILL"
    assert "no progress for 10 s" in row.reason
    assert row.duration >= 10.0


# -- device-load and the model probes without a GPU -------------------------------------------


def test_device_code_is_a_skip_without_a_gpu_and_a_fail_under_require_gpu(no_gpu):
    probes_ = ["load", "device-load", "model-torch", "model-executorch"]
    report = smoke(wheel("smoke_cuda"), probes=probes_)
    device = by_subject(report, "device-load")
    assert set(device) == {f"smoke_cuda/libsmoke_{v}.so" for v in ("sm80", "ptx80", "sm90", "rdc")}
    for r in device.values():
        assert r.status == SKIP
        assert "fatbin container(s) not loaded: " in r.reason and no_gpu_reason(r.reason), r.reason
    assert all(r.status == PASS for r in by_subject(report, "load").values())
    # named with --probe, the model probes run even for a wheel that does not need torch
    torch_rows = [r for r in report.rows if r.probe == "model-torch"]
    assert [r.status for r in torch_rows] == [SKIP, SKIP]
    assert torch_rows[0].reason == "torch is not importable here: ModuleNotFoundError: No module named 'torch'"
    et = [r for r in report.rows if r.probe == "model-executorch"]
    assert len(et) == 1 and et[0].status == SKIP
    assert "executorch is not importable here: ModuleNotFoundError" in et[0].reason
    assert report.exit_code == 0
    assert report.gpu_error and no_gpu_reason(report.gpu_error)

    strict = smoke(wheel("smoke_cuda"), probes=probes_, require_gpu=True)
    for r in by_subject(strict, "device-load").values():
        assert r.status == FAIL and r.reason.startswith("--require-gpu: this must run on a GPU")
    # a framework that is absent stays a skip: --require-gpu is about GPUs, not frameworks
    assert next(r for r in strict.rows if r.probe == "model-torch").status == SKIP
    assert strict.exit_code == 1


def test_framework_probes_skip_for_a_wheel_that_does_not_need_the_framework():
    report = smoke(wheel("smoke_ok"), probes=None, require_gpu=True)
    assert [r.probe for r in report.rows] == [
        "load",
        "load",
        "device-load",
        "model-torch",
        "model-torch-aoti",
        "model-executorch",
        "model-jax",
        "trace",
    ]
    assert report.rows[-2].status == SKIP and report.rows[-2].reason == (
        "smoke_ok is not of the jax-cuda*/jax-rocm* families (JAX's GPU plugins) and needs none of them: "
        "model-jax runs for those"
    )
    assert report.rows[-1].status == SKIP and report.rows[-1].reason == (
        "smoke_ok neither is nor depends on torch or jax, and no --run COMMAND was given: no workload to trace "
        "(--probe trace runs the torch sweep anyway)"
    )
    for r in report.rows[3:-2]:
        framework = "executorch" if r.probe == "model-executorch" else "torch"
        assert r.status == SKIP
        assert r.reason == f"smoke_ok neither is nor depends on {framework} (--probe {r.probe} runs it anyway)"
    assert report.exit_code == 0


def test_a_distribution_without_device_code_skips_device_load():
    report = smoke(wheel("smoke_ok"), probes=["device-load"])
    (row,) = report.rows
    assert row.status == SKIP
    assert row.reason == "no file of the distribution carries CUDA device code"


# -- isolation: the environment is always removed --------------------------------------------


def test_a_wheel_that_does_not_install_is_exit_2_and_leaves_nothing(tmp_path):
    r = cli(wheel("smoke_bad"), tmpdir=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "archaudit smoke: error: installing smoke_bad-1.0" in r.stderr
    assert "requires a different Python" in r.stderr or "Requires-Python" in r.stderr or "python" in r.stderr.lower()
    assert list(tmp_path.iterdir()) == []


def test_failing_run_exits_1_prints_rows_and_leaves_nothing(tmp_path):
    r = cli(wheel("smoke_crash"), "--probe", "load", "--timeout", "30", tmpdir=tmp_path)
    assert r.returncode == 1, r.stderr
    assert "FAIL  load  smoke_crash/libb_segv.so: the child interpreter was killed by SIGSEGV" in r.stdout
    assert "signal: SIGSEGV" in r.stdout
    assert "2 passed, 1 failed, 0 skipped" in r.stdout
    assert list(tmp_path.iterdir()) == []


def test_sigterm_during_a_run_still_removes_the_environment(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=SRC)
    proc = subprocess.Popen(
        [sys.executable, "-m", "archaudit.smoke", wheel("smoke_hang"), "--probe", "load", "--timeout", "120"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the hanging child is running
        envs = [p for p in tmp_path.iterdir() if p.name.startswith("archaudit-smoke-env-")]
        if envs and any(p.name.startswith("stderr-") for d in tmp_path.iterdir() if d.is_dir() for p in d.iterdir()):
            break
        time.sleep(0.2)
    proc.terminate()
    proc.wait(timeout=60)
    assert proc.returncode != 0
    assert list(tmp_path.iterdir()) == []


def test_unusable_input_is_exit_2(tmp_path):
    r = cli("--installed", "no-such-distribution-archaudit", "--probe", "load", tmpdir=tmp_path)
    assert r.returncode == 2
    assert (
        f"no-such-distribution-archaudit is not installed in the current environment (the interpreter "
        f"{sys.executable})" in r.stderr
    )
    r = cli(str(tmp_path / "absent-1.0-py3-none-any.whl"), tmpdir=tmp_path)
    assert r.returncode == 2 and "no such file" in r.stderr
    r = cli(wheel("smoke_ok"), "--probe", "no-such-probe", tmpdir=tmp_path)
    assert r.returncode == 2 and "unknown probe" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_installed_mode_uses_the_current_environment():
    report = smoke(installed="zstandard")
    assert report.environment == "the current environment"
    libs = by_subject(report)
    assert libs and all(r.status == PASS for r in libs.values())
    assert any(s.startswith("zstandard/") and ".so" in s for s in libs)


# -- output and plugins ----------------------------------------------------------------------


def test_json_and_text_renderings():
    report = smoke(wheel("smoke_crash"))
    doc = json.loads(render.to_json(report))
    assert doc["schema"] == "archaudit-smoke/1" and doc["exit_code"] == 1
    assert doc["summary"] == {"passed": 2, "failed": 1, "skipped": 0}
    crash = next(r for r in doc["rows"] if r["subject"].endswith("libb_segv.so"))
    assert crash["status"] == "FAIL" and crash["signal"] == "SIGSEGV" and crash["duration"] >= 0
    text = render.render_text(report)
    assert "archaudit smoke: smoke_crash 1.0" in text and "GPUs:" in text
    assert text.splitlines()[-2] == "2 passed, 1 failed, 0 skipped"
    assert text.splitlines()[-1].endswith(" MB") and "peak memory: archaudit " in text.splitlines()[-1]


# -- the fixtures themselves -------------------------------------------------------------------


@needs_tool("gcc (apt-get install gcc)", shutil.which("gcc"))
def test_build_script_rebuilds_the_fixture_wheels(tmp_path):
    r = subprocess.run(["bash", str(FIXTURES / "build.sh"), str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    import zipfile

    for name in ("smoke_ok", "smoke_missing", "smoke_undef", "smoke_crash", "smoke_hang", "smoke_bad"):
        built = tmp_path / f"{name}-1.0-py3-none-linux_x86_64.whl"
        with zipfile.ZipFile(built) as a, zipfile.ZipFile(wheel(name)) as b:
            assert a.namelist() == b.namelist()
    rebuilt = smoke(str(tmp_path / "smoke_missing-1.0-py3-none-linux_x86_64.whl"))
    assert "missing dependencies: libsmoke_absent.so.1" in rebuilt.rows[0].reason


# -- one interface: formats, -o, --example, exit codes, Linux only ---------------------------


def test_every_format_renders_the_same_rows(tmp_path, no_gpu):
    docs = {}
    for fmt in ("text", "json", "markdown", "github", "junit"):
        out = tmp_path / f"report.{fmt}"
        r = cli(wheel("smoke_crash"), "--probe", "load", "--format", fmt, "-o", str(out), tmpdir=tmp_path / fmt)
        assert r.returncode == 1 and r.stdout == "", r.stderr
        docs[fmt] = out.read_text()
    assert "FAIL  load  smoke_crash/libb_segv.so: the child interpreter was killed by SIGSEGV" in docs["text"]
    rows = json.loads(docs["json"])["rows"]
    assert [(x["subject"], x["status"]) for x in rows] == [
        ("smoke_crash/liba_ok.so", PASS),
        ("smoke_crash/libb_segv.so", FAIL),
        ("smoke_crash/libc_ok.so", PASS),
    ]
    row = "| ✗ FAIL | load | smoke\\_crash/libb\\_segv.so | the child interpreter was killed by SIGSEGV |"
    assert row in docs["markdown"]
    assert docs["github"].splitlines()[0] == (
        "::error title=archaudit smoke load%3A smoke_crash/libb_segv.so::the child interpreter was killed by SIGSEGV"
    )
    import xml.etree.ElementTree as ET

    suite = ET.fromstring(docs["junit"]).find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("3", "1")
    failed = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["smoke_crash/libb_segv.so"]


def test_sarif_names_the_failed_library_as_a_member_of_the_wheel(tmp_path, no_gpu):
    from reference_tools import sarif_validator

    out = tmp_path / "report.sarif"
    r = cli(wheel("smoke_crash"), "--probe", "load", "--format", "sarif", "-o", str(out), tmpdir=tmp_path)
    assert r.returncode == 1, r.stderr
    log = json.loads(out.read_text())
    sarif_validator().validate(log)
    (run,) = log["runs"]
    (result,) = run["results"]  # passes are not results
    assert result["ruleId"] == "smoke-load" and result["level"] == "error"
    assert result["message"]["text"] == "smoke_crash/libb_segv.so: the child interpreter was killed by SIGSEGV"
    where = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert where["uri"] == "smoke_crash/libb_segv.so"
    assert run["artifacts"][run["artifacts"][where["index"]]["parentIndex"]]["location"]["uri"].endswith(
        "smoke_crash-1.0-py3-none-linux_x86_64.whl"
    )
    failed = cli(str(tmp_path / "missing.whl"), "--format", "sarif", tmpdir=tmp_path)
    assert failed.returncode == 2
    (run,) = json.loads(failed.stdout)["runs"]
    sarif_validator().validate(json.loads(failed.stdout))
    assert run["invocations"][0]["executionSuccessful"] is False and run["results"] == []


def test_an_unwritable_output_is_exit_2_in_one_line(tmp_path):
    r = cli(wheel("smoke_ok"), "--probe", "load", "-o", str(tmp_path / "no" / "such" / "dir" / "x"), tmpdir=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("archaudit smoke: error: -o ") and len(r.stderr.strip().splitlines()) == 1


def test_example_runs_on_the_bundled_wheel(tmp_path, no_gpu):
    r = cli("--example", "--format", "json", tmpdir=tmp_path)
    doc = json.loads(r.stdout)
    assert doc["distribution"] == "gpu_example" and r.returncode == 0, r.stderr
    assert {x["probe"] for x in doc["rows"]} >= {"load", "device-load"}
    strict = cli("--example", "--require-gpu", "--probe", "device-load", tmpdir=tmp_path)
    assert strict.returncode == 1 and "FAIL  device-load  gpu_example/" in strict.stdout


def test_exit_codes_are_documented_beside_checks():
    doc = (HERE.parent / "docs" / "smoke.md").read_text()
    for code, meaning in main_smoke.EXIT_CODES:
        assert f"| {code} | {meaning} |" in doc
