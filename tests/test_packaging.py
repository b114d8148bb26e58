"""The package as a user gets it: ``python -m build`` makes an sdist and a wheel without a warning
about its metadata, and the wheel, installed into a fresh virtual environment, runs the README's
quick start and reports its version. The compiled speedups use the stable ABI (one cp311-abi3
wheel for every CPython from 3.11) and are optional: Python 3.10, or a build without them, gets
a pure-Python wheel that reads alike. archaudit's own wheel passes `archaudit check`."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_VERSION = re.search(
    r'^__version__ = "([^"]+)"', (REPO / "src" / "archaudit" / "__init__.py").read_text(encoding="utf-8"), re.M
)
assert _VERSION is not None
VERSION = _VERSION.group(1)


def build(out: Path, *args: str, **env: str) -> Path:
    pytest.importorskip("build", reason="build is a test dependency: pip install -e '.[test]'")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), *args, str(REPO)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (out / "build.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    return out


def other_python(version: str) -> str | None:
    """Another CPython of this version on this machine (on PATH, or under pyenv), or None."""
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-c", ""], capture_output=True).returncode == 0:
        return found
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    return next(
        iter(sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}")))), None
    )


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("dist"))


def installed(wheel: Path, where: Path) -> Path:
    """A fresh virtual environment with the wheel installed: its bin directory."""
    venv.create(where, with_pip=True)
    done = subprocess.run(
        [str(where / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return where / "bin"


def speedups(bin_dir: Path) -> bool:
    done = subprocess.run(
        [str(bin_dir / "python"), "-c", "from archaudit.read import native; print(native.active)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() != "None"


def test_build_makes_an_sdist_and_a_wheel_with_license_data_and_types(dist: Path) -> None:
    """The wheel carries the compiled speedups built for the stable ABI of 3.11, so it is
    tagged cp311-abi3 whatever CPython 3.11+ built it; the sdist carries their C source, so an
    install from it builds them. The license is a PEP 639 expression: no build warning."""
    (wheel,) = dist.glob("archaudit-*.whl")
    (sdist,) = dist.glob("archaudit-*.tar.gz")
    assert wheel.name.startswith(f"archaudit-{VERSION}-cp311-abi3-"), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    for member in (
        "archaudit/py.typed",
        "archaudit/_speedups.pyi",
        "archaudit/data/cuda.json",
        "archaudit/data/gpus.json",
    ):
        assert member in names, member
    assert "archaudit/_speedups.abi3.so" in names, names
    metadata = zipfile.ZipFile(wheel).read(f"archaudit-{VERSION}.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0\n" in metadata and "License-File: LICENSE\n" in metadata
    assert not re.search(r"^License: ", metadata, re.M)
    log = (dist / "build.log").read_text(encoding="utf-8")
    warnings = [
        line
        for line in log.splitlines()
        if re.search(r"warning|deprecat", line, re.I) and "byte-compiling is disabled" not in line
    ]  # PYTHONDONTWRITEBYTECODE, where set
    assert warnings == [], warnings
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
    check = subprocess.run(
        [str(exe), "check", "--no-config", "--example", "--arch", "80;90"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert check.returncode == 1, check.stdout + check.stderr
    assert "G001 gpu_example/libshim.so" in check.stdout


def test_the_speedups_use_only_the_stable_abi(dist: Path) -> None:
    """abi3audit (a test extra) finds no symbol outside the limited API of 3.11."""
    from reference_tools import missing_tool

    abi3audit = shutil.which("abi3audit") or (shutil.which("abi3audit", path=os.path.dirname(sys.executable)))
    if abi3audit is None:
        missing_tool("abi3audit", "not installed (pip install -e '.[test]')")
    (wheel,) = dist.glob("archaudit-*.whl")
    done = subprocess.run(
        [str(abi3audit), "--strict", "--report", str(wheel)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    (result,) = report["specs"][str(wheel)]["wheel"]
    assert result["name"] == "_speedups.abi3.so" and result["result"]["non_abi3_symbols"] == []


def test_the_abi3_wheel_runs_its_speedups_on_a_newer_python(dist: Path, tmp_path: Path) -> None:
    python = other_python("3.12") or other_python("3.13")
    if python is None:
        pytest.skip("no CPython 3.12 or 3.13 on this machine")
    (wheel,) = dist.glob("archaudit-*.whl")
    venv_dir = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv_dir)], check=True, timeout=300)
    done = subprocess.run(
        [str(venv_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert speedups(venv_dir / "bin")


def test_python_3_10_builds_the_pure_python_wheel(tmp_path: Path) -> None:
    """The limited API has the buffer protocol from 3.11 only: 3.10 builds no extension."""
    python = other_python("3.10")
    if python is None:
        pytest.skip("no CPython 3.10 on this machine")
    done = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "--disable-pip-version-check",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("archaudit-*.whl")
    assert wheel.name == f"archaudit-{VERSION}-py3-none-any.whl"


def test_archaudits_own_wheel_passes_its_check(dist: Path) -> None:
    """Its only device code is the example wheel it ships as data, which the project's
    [[tool.archaudit.data]] entry names with its reason (X002); without that entry, C001."""
    (wheel,) = dist.glob("archaudit-*.whl")
    argv = [sys.executable, "-m", "archaudit", "check", str(wheel), "--format", "json", "--no-timings", "-q"]
    done = subprocess.run(
        [*argv, "--config", str(REPO / "pyproject.toml")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (target,) = json.loads(done.stdout)["targets"]
    assert [(f["code"], f["subject"]) for f in target["findings"]] == [
        ("X002", "archaudit/examples/gpu_example-1.0-py3-none-linux_x86_64.whl")
    ]
    bare = subprocess.run([*argv, "--no-config"], capture_output=True, text=True, timeout=300)
    assert bare.returncode == 1 and '"C001"' in bare.stdout


def test_the_readme_names_no_placeholder_owner() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "OWNER" not in readme and "github.com/" not in readme.split("## Install")[1].split("\n## ")[0]
