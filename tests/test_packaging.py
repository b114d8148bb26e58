"""The package as a user gets it: ``python -m build`` makes an sdist and a wheel, and the wheel,
installed into a fresh virtual environment, runs the README's quick start and reports its version.
The compiled speedups are optional: without them the wheel is pure Python and reads alike."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VERSION = re.search(r'^__version__ = "([^"]+)"', (REPO / "src" / "archaudit" / "__init__.py").read_text(encoding="utf-8"),
                    re.M).group(1)  # type: ignore[union-attr]


def build(out: Path, *args: str, **env: str) -> Path:
    pytest.importorskip("build", reason="build is a test dependency: pip install -e '.[test]'")
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), *args, str(REPO)],
                          capture_output=True, text=True, timeout=900, env={**os.environ, **env})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("dist"))


def installed(wheel: Path, where: Path) -> Path:
    """A fresh virtual environment with the wheel installed: its bin directory."""
    venv.create(where, with_pip=True)
    done = subprocess.run([str(where / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           str(wheel)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return where / "bin"


def speedups(bin_dir: Path) -> bool:
    done = subprocess.run([str(bin_dir / "python"), "-c", "from archaudit.read import native; print(native.active)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() != "None"


def test_build_makes_an_sdist_and_a_wheel_with_license_data_and_types(dist: Path) -> None:
    """The wheel carries the compiled speedups, so it is tagged for this interpreter and
    platform; the sdist carries their C source, so an install from it builds them."""
    (wheel,) = dist.glob("archaudit-*.whl")
    (sdist,) = dist.glob("archaudit-*.tar.gz")
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheel.name.startswith(f"archaudit-{VERSION}-{tag}-{tag}-"), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    for member in ("archaudit/py.typed", "archaudit/_speedups.pyi", "archaudit/data/cuda.json",
                   "archaudit/data/gpus.json"):
        assert member in names, member
    assert any(re.fullmatch(r"archaudit/_speedups\..+\.so", n) for n in names), names
    assert any(n.endswith(".whl") and n.startswith("archaudit/examples/") for n in names)
    assert any(n.endswith("LICENSE") for n in names)
    with tarfile.open(sdist) as t:
        assert any(n.endswith("/LICENSE") for n in t.getnames())
        assert any(n.endswith("/src/archaudit/_speedups.c") for n in t.getnames())
        assert any(n.endswith("/setup.py") for n in t.getnames())


def test_without_the_speedups_the_wheel_is_pure_python_and_reads_the_same(tmp_path: Path) -> None:
    """ARCHAUDIT_NO_SPEEDUPS=1 (what a platform without a C compiler gets): a py3-none-any
    wheel whose check of the example wheel reports what the compiled speedups' does."""
    (wheel,) = build(tmp_path / "dist", "--wheel", ARCHAUDIT_NO_SPEEDUPS="1").glob("archaudit-*.whl")
    assert wheel.name.startswith(f"archaudit-{VERSION}-py3-none-any"), wheel.name
    assert not any(n.endswith(".so") for n in zipfile.ZipFile(wheel).namelist())
    bin_dir = installed(wheel, tmp_path / "venv")
    assert not speedups(bin_dir)
    argv = ["check", "--no-config", "--example", "--arch", "80;90", "--detail", "kernels", "--format", "json"]
    pure = subprocess.run([str(bin_dir / "archaudit"), *argv], capture_output=True, text=True, timeout=300)
    here = subprocess.run([sys.executable, "-m", "archaudit", *argv], capture_output=True, text=True, timeout=300)
    assert pure.returncode == here.returncode == 1
    reports = [json.loads(run.stdout)["targets"] for run in (pure, here)]
    for targets in reports:
        for t in targets:
            del t["seconds"], t["target"]  # the time, and the example's path in each install
    assert reports[0] == reports[1] and reports[0][0]["libraries"]


def test_installed_wheel_runs_the_quick_start(dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob("archaudit-*.whl")
    bin_dir = installed(wheel, tmp_path / "venv")
    assert speedups(bin_dir)
    exe = bin_dir / "archaudit"
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and VERSION in version.stdout, version.stdout + version.stderr
    check = subprocess.run([str(exe), "check", "--no-config", "--example", "--arch", "80;90"],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "G001 gpu_example/libshim.so" in check.stdout
