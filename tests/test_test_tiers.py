"""The tests finish (issue 39): the README's test command is a fast tier, a second documented
command the real-wheel tier, a third the census tier (wheels over wheels.TIER_BYTES, refused to
every other test); .ci/run runs the first two, wheels are cached where XDG_CACHE_HOME says, a
listing run names what a tier downloads without downloading it, and the reference tools .ci/run
installs through apt skip outside CI (failing under CI=true) and are listed in the README."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import wheels
from reference_tools import missing_tool

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI_RUN = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
PYTEST = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
FAST, REAL = "python -m pytest -q", 'python -m pytest -q -m "slow and not gpu"'


CENSUS = "python -m pytest -q -m census"


def test_the_fast_tier_is_the_default_and_markers_are_strict() -> None:
    assert {m.split(":")[0] for m in PYTEST["markers"]} == {"gpu", "slow", "census"}
    assert "-m 'not gpu and not slow and not census'" in PYTEST["addopts"]
    assert "--strict-markers" in PYTEST["addopts"]
    assert CENSUS in README and CENSUS not in CI_RUN  # documented, and not CI's


def test_a_wheel_over_the_tier_bound_is_the_census_tiers_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound is bytes: a cached wheel one byte over TIER_BYTES fails a test not marked census
    (before any download it would have cost), and is handed to a census test."""
    monkeypatch.setenv("ARCHAUDIT_WHEEL_CACHE", str(tmp_path))
    monkeypatch.delenv("ARCHAUDIT_WHEELS_LIST", raising=False)
    name = "nvidia_cublas-13.1.1.3-py3-none-manylinux_2_27_x86_64.whl"
    with open(tmp_path / name, "wb") as f:  # sparse: the size without the bytes
        f.truncate(wheels.TIER_BYTES + 1)
    monkeypatch.setattr(wheels, "CENSUS", False)
    with pytest.raises(pytest.fail.Exception, match="over the 100 MiB .* mark the test census"):
        wheels.fetch("nvidia-cublas", "13.1.1.3", filename=name)
    monkeypatch.setattr(wheels, "CENSUS", True)
    assert wheels.fetch("nvidia-cublas", "13.1.1.3", filename=name) == tmp_path / name
    (tmp_path / name).unlink()
    with open(tmp_path / name, "wb") as f:
        f.truncate(wheels.TIER_BYTES)
    monkeypatch.setattr(wheels, "CENSUS", False)
    assert wheels.fetch("nvidia-cublas", "13.1.1.3", filename=name) == tmp_path / name


def test_census_tests_run_only_when_asked_for_by_name(tmp_path: Path) -> None:
    """A census test in a module marked slow as a whole stays out of the real-wheel tier, and
    runs under -m census (a real child pytest with the suite's conftest as a plugin)."""
    (tmp_path / "test_tiers_child.py").write_text(
        "import pytest\n\npytestmark = pytest.mark.slow\n\n"
        "def test_small():\n    pass\n\n"
        "@pytest.mark.census\ndef test_large():\n    pass\n",
        encoding="utf-8",
    )
    env = {"PATH": "/usr/bin:/bin", "ARCHAUDIT_WHEEL_CACHE": str(tmp_path / "cache")}
    ran = {}
    for expr in ("slow and not gpu", "census"):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-v",
                "-p",
                "no:cacheprovider",
                "-p",
                "conftest",
                "--rootdir",
                str(tmp_path),
                "-o",
                f"pythonpath={ROOT / 'tests'}",
                "-m",
                expr,
                str(tmp_path / "test_tiers_child.py"),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
        )
        ran[expr] = sorted(re.findall(r"::(test_\w+) PASSED", r.stdout))
    assert ran == {"slow and not gpu": ["test_small"], "census": ["test_large"]}


def test_the_readme_and_ci_run_the_same_two_commands() -> None:
    quick = README[README.index("## Quick start") : README.index("## What a pass means")]
    block = quick[quick.index("```sh") : quick.index("```", quick.index("```sh") + 3)]
    commands = [line.split("#")[0].strip().split("&& ")[-1] for line in block.splitlines()[1:]]
    assert commands[-2:] == [FAST, REAL]
    ran = [line.strip() for line in CI_RUN.splitlines() if line.strip().startswith("python -m pytest")]
    assert ran == [FAST, REAL]  # the fast tier first, then the real-wheel tier
    assert "XDG_CACHE_HOME" in quick and "ARCHAUDIT_WHEELS_LIST" in quick
    assert not re.search(r"(FAST|SLOW)_(WHEELS|MB|GB|MINUTES)", quick), "the README states measured sizes"


def test_the_wheel_cache_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(ROOT))
    from corpus import manifest

    monkeypatch.delenv("ARCHAUDIT_WHEEL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert wheels.cache_dir() == manifest.cache_dir() == tmp_path / "xdg" / "archaudit" / "wheels"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/ignored")  # the spec: only an absolute path counts
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert wheels.cache_dir() == manifest.cache_dir() == tmp_path / "home" / ".cache" / "archaudit" / "wheels"
    monkeypatch.setenv("ARCHAUDIT_WHEEL_CACHE", str(tmp_path / "own"))
    assert wheels.cache_dir() == manifest.cache_dir() == tmp_path / "own"


def test_a_listing_run_names_the_wheels_and_downloads_none(tmp_path: Path) -> None:
    """A test asking for a wheel under ARCHAUDIT_WHEELS_LIST writes it down and is skipped; the
    cache stays empty (a real child pytest, with the suite's conftest)."""
    (tmp_path / "test_wants.py").write_text(
        "from wheels import fetch\n\n"
        "def test_wants_curand():\n"
        "    fetch('nvidia-curand', '10.4.0.35',\n"
        "          filename='nvidia_curand-10.4.0.35-py3-none-manylinux_2_27_x86_64.whl')\n"
        "    raise AssertionError('never reached: the listing skips first')\n",
        encoding="utf-8",
    )
    listing, cache = tmp_path / "wanted.jsonl", tmp_path / "cache"
    env = {"ARCHAUDIT_WHEELS_LIST": str(listing), "ARCHAUDIT_WHEEL_CACHE": str(cache), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "-o",
            f"pythonpath={ROOT / 'tests'}",
            str(tmp_path / "test_wants.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert "1 skipped" in r.stdout, r.stdout + r.stderr
    (row,) = [json.loads(line) for line in listing.read_text().splitlines()]
    assert row == {
        "test": "test_wants.py::test_wants_curand",
        "name": "nvidia-curand",
        "version": "10.4.0.35",
        "platform": "here",
        "filename": "nvidia_curand-10.4.0.35-py3-none-manylinux_2_27_x86_64.whl",
    }
    assert not cache.exists() or list(cache.iterdir()) == []


def test_a_missing_reference_tool_skips_here_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="reference tool chromium: not installed"):
        missing_tool("chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must install it"):
        missing_tool("chromium")


APT = re.search(r"apt-get install[^\n]*\\\n\s*([^\n>]+)", CI_RUN)


def test_every_package_ci_installs_is_in_the_readme_and_its_tests_use_the_policy() -> None:
    assert APT, "the apt-get install line of .ci/run"
    packages = APT.group(1).split()
    assert {"binutils", "gcc", "zstd", "clang-19", "llvm-19", "llvm-19-dev", "chromium"} <= set(packages)
    for package in packages:
        assert re.search(rf"^\|[^|\n]*`{re.escape(package)}`", README, re.M), f"README names what {package} adds"
    # a test skipping on a missing tool by hand would pass CI silently: each goes through needs_tool
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        for tool in ("readelf", "gcc", "zstd", "clang", "llvm", "chromium"):
            assert not re.search(rf"skipif\([^)]*{tool}", text, re.I), f"{path.name}: use needs_tool for {tool}"
