"""The throwaway environment (smoke/venv.py): the wheel goes in alone, then its dependencies.

smoke installs a wheel's dependencies as binary wheels only, in a child under the probes'
isolation, and says what it installed and from where; --allow-source-dependencies lets a sdist
in (its build backend runs) and the report says so. Everything comes from a local directory
(PIP_NO_INDEX, PIP_FIND_LINKS): no index is asked."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path

import pytest

from archaudit.smoke import runner, venv
from helpers import smoke_wheel as wheel

HERE = Path(__file__).parents[1]
MAKE_WHEEL = HERE / "fixtures" / "smoke" / "make_wheel.py"

# An in-tree PEP 517 backend: it marks that it ran, then writes a plain wheel.
BACKEND = textwrap.dedent("""
    import base64, hashlib, os, zipfile
    NAME, VERSION = "smokesdistdep", "1.0"

    def get_requires_for_build_wheel(config_settings=None):
        return []

    def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        open(os.environ["SDIST_MARK"], "w").write("the build backend ran")
        dist = f"{NAME}-{VERSION}.dist-info"
        meta = f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n".encode()
        files = {f"{NAME}/__init__.py": b"", f"{dist}/METADATA": meta,
                 f"{dist}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
        def digest(v):
            return base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b"=").decode()
        lines = [f"{k},sha256={digest(v)},{len(v)}" for k, v in files.items()]
        files[f"{dist}/RECORD"] = ("\\n".join(lines) + f"\\n{dist}/RECORD,,\\n").encode()
        name = f"{NAME}-{VERSION}-py3-none-any.whl"
        with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
            for k, v in files.items():
                z.writestr(k, v)
        return name
""")


def make_wheel(out: Path, name: str, *args: str) -> Path:
    stage = out / f"stage-{name}"
    stage.mkdir(parents=True)
    (stage / "__init__.py").write_text("")
    member = f"{name}/__init__.py={stage}/__init__.py"
    subprocess.run(
        [sys.executable, str(MAKE_WHEEL), str(out), name, "1.0", *args, member], check=True, capture_output=True
    )
    return next(out.glob(f"{name}-1.0-*.whl"))


@pytest.fixture
def links(tmp_path, monkeypatch):
    d = tmp_path / "links"
    d.mkdir()
    make_wheel(d, "smokebindep", "--tag", "py3-none-any")
    src = tmp_path / "smokesdistdep-1.0"
    src.mkdir()
    (src / "backend.py").write_text(BACKEND)
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    (src / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: smokesdistdep\nVersion: 1.0\n")
    with tarfile.open(d / "smokesdistdep-1.0.tar.gz", "w:gz") as t:
        t.add(src, arcname="smokesdistdep-1.0")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(d))
    monkeypatch.setenv("PIP_CONSTRAINT", "")
    monkeypatch.setenv("SDIST_MARK", str(tmp_path / "backend-ran"))
    monkeypatch.setenv(
        "PATH", ":".join(p for p in __import__("os").environ["PATH"].split(":") if not (Path(p) / "uv").exists())
    )
    return d


def smoke(whl: Path, **kw):
    return runner.run_smoke(
        str(whl), installed=None, require_gpu=False, timeout=120.0, system_site_packages=False, probes=["load"], **kw
    )


def test_the_report_lists_what_was_installed_and_from_where(links, tmp_path):
    whl = make_wheel(tmp_path / "w", "smoke_deps", "--requires-dist", "smokebindep")
    report = smoke(whl)
    assert report.install_policy == venv.BINARY_ONLY
    got = {name: (version, source) for name, version, source in report.installed}
    assert got["smoke_deps"] == ("1.0", whl.name)
    assert got["smokebindep"][0] == "1.0"
    assert got["smokebindep"][1] == (links / "smokebindep-1.0-py3-none-any.whl").as_uri()
    from archaudit.report import smoke as render

    text = render.render(report, "text")
    assert f"installed 2 distribution(s), {venv.BINARY_ONLY}:" in text
    assert json.loads(render.render(report, "json"))["install_policy"] == venv.BINARY_ONLY


def test_a_sdist_only_dependency_is_refused_and_its_build_backend_never_runs(links, tmp_path):
    whl = make_wheel(tmp_path / "w", "smoke_sdist", "--requires-dist", "smokesdistdep")
    with pytest.raises(runner.SmokeInputError, match="installing the dependencies of smoke_sdist-1.0"):
        smoke(whl)
    assert not (tmp_path / "backend-ran").exists()
    report = smoke(whl, allow_source_dependencies=True)
    assert (tmp_path / "backend-ran").read_text() == "the build backend ran"
    assert report.install_policy == venv.SOURCE_ALLOWED
    assert "smokesdistdep" in {name for name, _, _ in report.installed}


def test_the_distribution_and_version_come_from_the_wheel_file_name():
    assert venv.wheel_distribution("/x/smoke_ok-1.0-py3-none-linux_x86_64.whl") == ("smoke_ok", "1.0")
    build_tagged = "nvidia_curand-10.4.0.35-1-py3-none-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
    assert venv.wheel_distribution(build_tagged) == ("nvidia_curand", "10.4.0.35")
    for name in ("smoke_ok-1.0.tar.gz", "smoke_ok-1.0-py3-none.whl", "smoke_ok.whl"):
        with pytest.raises(venv.InstallError, match="is not a wheel file name"):
            venv.wheel_distribution(name)


def test_the_installers_get_no_variable_that_steers_a_python(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("PYTHONHOME", "/elsewhere")
    monkeypatch.setenv("VIRTUAL_ENV", "/elsewhere/venv")
    monkeypatch.setenv("PIP_INDEX_URL", "https://index.example/simple")
    env = venv.install_env()
    assert not [k for k in env if k.startswith("PYTHON") or k == "VIRTUAL_ENV"]
    assert env["PIP_INDEX_URL"] == "https://index.example/simple"  # the index settings stay


def test_a_fresh_environment_holds_the_wheel_and_goes_with_close(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # mkdtemp reads TMPDIR again
    env = venv.create(wheel("smoke_ok"), system_site_packages=False, timeout=120.0)
    try:
        assert env.root is not None and Path(env.root).parent == tmp_path
        assert Path(env.python).is_file() and env.description.startswith("fresh venv (")
        (site,) = env.sys_path  # its own site-packages alone: the base's are not seen
        assert (Path(site) / "smoke_ok" / "libsmoke_ok.so").is_file()
        assert [(d.name, d.version, d.source) for d in env.installed] == [
            ("smoke_ok", "1.0", "smoke_ok-1.0-py3-none-linux_x86_64.whl")
        ]
        assert env.install_policy == venv.BINARY_ONLY
    finally:
        venv.close(env)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(venv.InstallError, match="no such file"):
        venv.create(str(tmp_path / "absent-1.0-py3-none-any.whl"), system_site_packages=False)
    assert venv.current().root is None and venv.current().python == sys.executable
