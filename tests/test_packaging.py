"""The package as a user gets it: ``python -m build`` makes an sdist and a wheel, and the wheel,
installed into a fresh virtual environment, runs the README's quick start and reports its version."""

from __future__ import annotations

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


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("build", reason="build is a test dependency: pip install -e '.[test]'")
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_build_makes_an_sdist_and_a_wheel_with_license_data_and_types(dist: Path) -> None:
    (wheel,) = dist.glob("archaudit-*.whl")
    (sdist,) = dist.glob("archaudit-*.tar.gz")
    assert wheel.name.startswith(f"archaudit-{VERSION}-py3-none-any")
    names = zipfile.ZipFile(wheel).namelist()
    for member in ("archaudit/py.typed", "archaudit/data/cuda.json", "archaudit/data/gpus.json"):
        assert member in names, member
    assert any(n.endswith(".whl") and n.startswith("archaudit/examples/") for n in names)
    assert any(n.endswith("LICENSE") for n in names)
    with tarfile.open(sdist) as t:
        assert any(n.endswith("/LICENSE") for n in t.getnames())


def test_installed_wheel_runs_the_quick_start(dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob("archaudit-*.whl")
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    py = env / "bin" / "python"
    done = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    exe = env / "bin" / "archaudit"
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and VERSION in version.stdout, version.stdout + version.stderr
    check = subprocess.run([str(exe), "check", "--no-config", "--example", "--arch", "80;90"],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "G001 gpu_example/libshim.so" in check.stdout
