"""The driver table a wheel is judged by: --driver-os (or the config's driver-os) when given,
else the wheel's own platform tag (a win_* wheel runs on Windows drivers), else Linux.

Wheels are built here from the nvcc-built fixtures: lib_sm80.so (links libcudart.so.13) and
its Windows counterpart sm80.dll (imports cudart64_13.dll). NVIDIA lists a Linux floor for
CUDA 13.0's SASS (580.65.06, the toolkit's driver) and only the branch for Windows (>= 580, the
Compatibility guide's one minimum for 13.x; the release notes list no Windows toolkit driver from
13.0 on), so the two tables give different, checkable answers on driver 580.10.
How a wheel's name gives its driver OS (judge.policy) is in test_policy.py.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from archaudit.cli import main

ROOT = Path(__file__).resolve().parents[1]
DLL = ROOT / "fixtures" / "pe" / "bin" / "sm80.dll"
SO = ROOT / "fixtures" / "cuda" / "bin" / "lib_sm80.so"


def _wheel(tmp_path: Path, platform: str, library: Path) -> Path:
    whl = tmp_path / f"k-1.0-cp312-cp312-{platform}.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        z.write(library, f"k/{library.name}")
    return whl


def _check(capsys, *argv: str) -> tuple[int, list[tuple[str, str, object]]]:
    rc = main(["check", "-q", "--no-config", "--format", "json", *argv])
    report = json.loads(capsys.readouterr().out)
    return rc, sorted(
        (f["code"], t["target"].rsplit("-", 1)[-1], f["data"].get("driver"))
        for t in report["targets"]
        for f in t["findings"]
        if f["code"].startswith("D")
    )


def test_a_windows_wheel_is_judged_by_windows_drivers(tmp_path, capsys):
    win, linux = _wheel(tmp_path, "win_amd64", DLL), _wheel(tmp_path, "manylinux_2_28_x86_64", SO)
    # Linux: CUDA 13.0 needs 580.65.06, which 580.10 does not meet. Windows: the R580 branch, which it does.
    linux_rc, linux_found = _check(capsys, str(linux), "--arch", "80", "--driver", "580.10")
    assert linux_rc == 1 and ("D002", "manylinux_2_28_x86_64.whl", "580.65.06") in linux_found
    inferred = _check(capsys, str(win), "--arch", "80", "--driver", "580.10")
    assert inferred == (0, [("D002", "win_amd64.whl", "580")])
    assert _check(capsys, str(win), "--arch", "80", "--driver", "580.10", "--driver-os", "windows") == inferred
    # The option wins: the same Windows wheel judged against the Linux table.
    assert _check(capsys, str(win), "--arch", "80", "--driver", "580.10", "--driver-os", "linux") == (
        linux_rc,
        [(code, "win_amd64.whl", driver) for code, _, driver in linux_found],
    )
    # One run, two wheels: each by its own tag.
    rc, found = _check(capsys, str(linux), str(win), "--arch", "80")
    assert found == [("D002", "manylinux_2_28_x86_64.whl", "580.65.06"), ("D002", "win_amd64.whl", "580")]


def test_the_config_driver_os_wins_over_the_tag(tmp_path, capsys):
    win = _wheel(tmp_path, "win_amd64", DLL)
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.archaudit]\ndriver-os = "linux"\n')
    rc = main(["check", "-q", "--config", str(config), "--format", "json", str(win), "--arch", "80", "--driver", "600"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and [
        f["data"].get("driver") for t in report["targets"] for f in t["findings"] if f["code"] == "D002"
    ] == ["580.65.06"]


def test_the_floor_is_said_with_its_os(tmp_path, capsys):
    """D002's summary line names the table it came from."""
    win = _wheel(tmp_path, "win_amd64", DLL)
    main(["check", "--no-config", str(win), "--arch", "80", "--driver-os", "linux"])
    assert ">= 580.65.06 on Linux" in capsys.readouterr().out
