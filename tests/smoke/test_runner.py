"""The smoke run (smoke/runner.py): what it refuses before anything is installed (exit status 2
at the command line), Linux only, the probes it lists, and a probe that raises costing one FAIL
row instead of the run.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

import pytest

from archaudit.smoke import runner
from archaudit.smoke.report import FAIL, PASS, Row
from helpers import smoke_cli as cli, smoke_wheel as wheel
from smoke_helpers import probe_context


def test_smoke_says_it_runs_on_linux_only(tmp_path):
    with pytest.raises(runner.SmokeInputError, match=r"archaudit smoke runs on Linux only: .* this is win32"):
        runner.linux_only("win32")
    runner.linux_only("linux")
    win = tmp_path / "gpu_example-1.0-py3-none-win_amd64.whl"
    shutil.copy(wheel("smoke_ok"), win)
    r = cli(str(win), tmpdir=tmp_path / "t")
    assert r.returncode == 2
    assert (
        "gpu_example-1.0-py3-none-win_amd64.whl is a wheel for win_amd64: archaudit smoke runs Linux wheels "
        "on Linux only"
    ) in r.stderr


def run(target, **kw):
    kw.setdefault("probes", ["load"])
    return runner.run_smoke(target, **kw)


def test_input_it_cannot_smoke_is_refused_before_anything_is_installed(tmp_path):
    refused: dict[str, dict[str, Any]] = {
        "give either a wheel or --installed NAME": dict(target=None),
        f"{tmp_path / 'absent.whl'}: no such file": dict(target=str(tmp_path / "absent.whl")),
        f"{tmp_path}: not a regular file": dict(target=str(tmp_path)),
        "--timeout must be positive": dict(target=wheel("smoke_ok"), timeout=0.0),
    }
    for message, kw in refused.items():
        with pytest.raises(runner.SmokeInputError, match=f"^{re.escape(message)}$"):
            run(**kw)
    with pytest.raises(runner.SmokeInputError, match="give either a wheel or --installed NAME"):
        run(wheel("smoke_ok"), installed="zstandard")
    with pytest.raises(runner.SmokeInputError) as unknown:
        run(wheel("smoke_ok"), probes=["load", "no-such-probe", "lod"])
    assert str(unknown.value).startswith("unknown probe(s) no-such-probe, lod; known: load, device-load, ")
    mac = tmp_path / "demo-1.0-cp311-cp311-macosx_11_0_arm64.whl"
    shutil.copy(wheel("smoke_ok"), mac)
    with pytest.raises(runner.SmokeInputError, match=r"is a wheel for macosx_11_0_arm64: archaudit smoke runs"):
        run(str(mac))
    assert list(tmp_path.iterdir()) == [mac]  # nothing was made for a refused run
    runner.wheel_platform(str(tmp_path / "demo-1.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"))
    runner.wheel_platform(str(tmp_path / "demo-1.0-py3-none-any.whl"))


def test_the_probe_list_has_every_builtin_with_its_description():
    text, rc = runner.list_probes()
    assert rc == 0
    lines = text.splitlines()
    assert [line.split()[0] for line in lines[:7]] == [
        "load",
        "device-load",
        "model-torch",
        "model-torch-aoti",
        "model-executorch",
        "model-jax",
        "trace",
    ]
    assert all(len(line.split(maxsplit=1)) == 2 for line in lines[:7])  # each says what it does


class Raising:
    name = "raising"
    description = "a probe with a bug"

    def run(self, ctx):
        yield Row(self.name, "first", PASS, "a row before the bug")
        raise KeyError("gpus")


class Quiet:
    name = "quiet"
    description = "one row"

    def run(self, ctx):
        return [Row(self.name, ctx.distribution, PASS, "ran after the probe that raised")]


def test_a_probe_that_raises_is_one_failed_row_and_the_next_probe_still_runs(tmp_path):
    ctx = probe_context(tmp_path, distribution="demo")
    rows = runner._probe_rows([Raising(), Quiet()], ctx, "demo")
    assert [(r.probe, r.status) for r in rows] == [("raising", FAIL), ("quiet", PASS)]
    assert rows[0].reason == "the probe itself raised KeyError: 'gpus'"  # its partial rows are not kept


def test_why_there_is_no_gpu_is_the_drivers_word_or_the_query_childs_death():
    assert runner._gpu_error({"error": "cuInit failed: CUDA_ERROR_NO_DEVICE (100)"}, ()) == (
        "cuInit failed: CUDA_ERROR_NO_DEVICE (100)"
    )
    assert runner._gpu_error({"devices": []}, ()) == "the CUDA driver reports no device"
    assert runner._gpu_error({}, ()) == "the GPU query child died (see the device-load rows)"
    assert runner._gpu_error({"devices": [{"ordinal": 0}]}, ({"ordinal": 0},)) is None
