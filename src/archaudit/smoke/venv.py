"""A throwaway virtual environment with the wheel under test installed in it.

uv when it is on PATH, else the standard library's venv and that environment's pip. The
environment lives in a fresh temporary directory that is removed on every way out: success,
a failed install, an exception, Ctrl-C or SIGTERM (main_smoke turns SIGTERM into an
exception so the removal runs).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from ..errors import ArchauditError

INSTALL_TIMEOUT = 1800.0
WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


class InstallError(ArchauditError):
    """The target could not be installed: unusable input (exit status 2)."""


BINARY_ONLY = "binary wheels only (--only-binary :all:): no build backend ran"
SOURCE_ALLOWED = (
    "sdists allowed (--allow-source-dependencies): a dependency's build backend may have run, outside the probes"
)


@dataclass(frozen=True)
class Installed:
    """One distribution the fresh environment got, and where it came from."""

    name: str
    version: str
    source: str  # a URL (pip's --report), the wheel's own path, or the index an installer was configured with


@dataclass(frozen=True)
class Environment:
    python: str  # the interpreter every probe child runs
    description: str  # "fresh venv (uv)", "installed environment", ...
    root: str | None  # the temporary directory, removed by close(); None for the current env
    sys_path: tuple[str, ...] = ()  # what a child (run with -I -S) puts on sys.path: no .pth is run
    installed: tuple[Installed, ...] = ()  # what the install put into the fresh environment
    install_policy: str = ""  # BINARY_ONLY or SOURCE_ALLOWED; "" for the current environment


def wheel_distribution(path: str) -> tuple[str, str]:
    """(distribution name, version) from a wheel's file name (PEP 427)."""
    m = WHEEL_NAME.match(os.path.basename(path))
    if not m:
        raise InstallError(
            f"{os.path.basename(path)} is not a wheel file name (name-version[-build]-python-abi-platform.whl)"
        )
    return m["name"], m["version"]


def _run(cmd: list[str], what: str, env: dict[str, str], timeout: float) -> None:
    """An install step as a killable child (child.run_command): a wheel's code can run here
    (pip re-executes itself in the new environment, where the wheel's .pth files run)."""
    from . import child

    try:
        rc, out = child.run_command(cmd, what, env=env, timeout=timeout)
    except TimeoutError as exc:
        raise InstallError(str(exc)) from None
    except OSError as exc:
        raise InstallError(f"{what} could not start: {exc}") from None
    if rc != 0:
        tail = "\n".join(out.strip().splitlines()[-15:])
        raise InstallError(f"{what} failed (exit status {rc}):\n{tail}")


def _pip_can_target(python: str, env: dict[str, str]) -> bool:
    """True when python's pip has --python (pip 22.3 and later)."""
    try:
        out = subprocess.run(
            [python, "-m", "pip", "--version"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    m = re.match(r"pip (\d+)\.(\d+)", out.stdout)
    return out.returncode == 0 and m is not None and (int(m[1]), int(m[2])) >= (22, 3)


def install_env() -> dict[str, str]:
    """The installers' environment: this one without what steers a Python (PYTHON*, VIRTUAL_ENV);
    the index settings (PIP_*, UV_*, proxies) stay, as the installer needs them."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON") and k != "VIRTUAL_ENV"}


def create(
    wheel: str,
    *,
    system_site_packages: bool,
    base_python: str | None = None,
    timeout: float = INSTALL_TIMEOUT,
    allow_source_dependencies: bool = False,
) -> Environment:
    """A fresh environment with wheel installed; the caller must close() it.

    Both install steps run as children under the probes' isolation (child.run_command: a
    session and process group of their own, dead with archaudit, killed with everything they
    started at the timeout, orphans reaped). The dependencies come as binary wheels only unless
    allow_source_dependencies: a sdist's build backend is the project's own code, run at install."""
    if not os.path.isfile(wheel):
        raise InstallError(f"{wheel}: no such file")
    wheel = os.path.abspath(wheel)
    wheel_distribution(wheel)
    base_python = base_python or sys.executable
    root = tempfile.mkdtemp(prefix="archaudit-smoke-env-")
    try:
        envdir = os.path.join(root, "venv")
        python = os.path.join(envdir, "bin", "python")
        uv = shutil.which("uv")
        env = install_env()
        report = os.path.join(root, "pip-report.json")
        if uv:
            cmd = [uv, "venv", "--quiet", "--python", base_python]
            if system_site_packages:
                cmd.append("--system-site-packages")
            _run(cmd + [envdir], "uv venv", env, timeout)
            pip = [uv, "pip", "install", "--quiet", "--python", python]
            tool = "uv"
        else:
            cmd = [base_python, "-m", "venv"]
            if system_site_packages:
                cmd.append("--system-site-packages")
            if _pip_can_target(base_python, env):
                # no ensurepip (slow, and missing from some system Pythons): this
                # interpreter's own pip installs into the new environment
                _run(cmd + ["--without-pip", envdir], "python -m venv", env, timeout)
                pip = [
                    base_python,
                    "-m",
                    "pip",
                    "--python",
                    python,
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-input",
                ]
            else:
                _run(cmd + [envdir], "python -m venv", env, timeout)
                pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input"]
            tool = "venv + pip"
        # The wheel itself always goes into the new environment, even where the system
        # site-packages already hold the same version; then its dependencies, which a
        # --system-site-packages environment may already satisfy without an index.
        reinstall = ["--reinstall"] if uv else ["--ignore-installed"]
        _run(pip + ["--no-deps"] + reinstall + [wheel], f"installing {os.path.basename(wheel)}", env, timeout)
        deps = [] if allow_source_dependencies else ["--only-binary", ":all:"]
        if not uv:
            deps += ["--report", report]  # what pip installed, with the URL of each file
        _run(pip + deps + [wheel], f"installing the dependencies of {os.path.basename(wheel)}", env, timeout)
        desc = f"fresh venv ({tool}{', system site-packages' if system_site_packages else ''})"
        paths = _venv_paths(envdir, base_python, system_site_packages)
        return Environment(
            python=python,
            description=desc,
            root=root,
            sys_path=paths,
            installed=_installed(envdir, wheel, report, tool),
            install_policy=SOURCE_ALLOWED if allow_source_dependencies else BINARY_ONLY,
        )
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _normal(name: str) -> str:
    return canonicalize_name(name)


def _installed(envdir: str, wheel: str, report: str, tool: str) -> tuple[Installed, ...]:
    """The distributions in the new environment's own site-packages (read here from their
    METADATA: no code of theirs runs), each with where it came from."""
    import email.parser
    import glob
    import json

    urls: dict[str, str] = {}
    try:
        with open(report) as f:
            for entry in json.load(f).get("install", []):
                url = (entry.get("download_info") or {}).get("url")
                name = (entry.get("metadata") or {}).get("name")
                if url and name:
                    urls[_normal(name)] = str(url)
    except (OSError, ValueError, AttributeError):
        pass
    own = _normal(wheel_distribution(wheel)[0])
    out = []
    for meta in sorted(glob.glob(os.path.join(envdir, "lib", "python*", "site-packages", "*.dist-info", "METADATA"))):
        try:
            with open(meta, encoding="utf-8", errors="replace") as f:
                head = email.parser.Parser().parse(f, headersonly=True)
        except OSError:
            continue
        name, version = str(head.get("Name", "?")), str(head.get("Version", "?"))
        if _normal(name) == own:
            source = os.path.basename(wheel)
        else:
            source = urls.get(_normal(name)) or f"the index {tool} is configured with"
        out.append(Installed(name, version, source))
    return tuple(out)


def _venv_paths(envdir: str, base_python: str, system_site_packages: bool) -> tuple[str, ...]:
    """The new environment's site-packages (and the base's, when it sees them), found without
    starting an interpreter there, so no .pth file of the wheel runs."""
    import glob
    import site

    own = sorted(glob.glob(os.path.join(envdir, "lib", "python*", "site-packages")))
    base: list[str] = []
    if system_site_packages and os.path.realpath(base_python) == os.path.realpath(sys.executable):
        base = [p for p in site.getsitepackages() if os.path.isdir(p)]
    return tuple(own + base)


def current() -> Environment:
    """This interpreter's environment: its children see this process's sys.path as it is."""
    return Environment(
        python=sys.executable,
        description="the current environment",
        root=None,
        sys_path=tuple(p for p in sys.path if p and os.path.isdir(p)),
    )


def close(env: Environment) -> None:
    if env.root:
        shutil.rmtree(env.root, ignore_errors=True)


__all__ = [
    "BINARY_ONLY",
    "close",
    "create",
    "current",
    "INSTALL_TIMEOUT",
    "InstallError",
    "SOURCE_ALLOWED",
    "wheel_distribution",
]
