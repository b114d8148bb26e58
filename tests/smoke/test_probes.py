"""The probe registry (smoke/probes.py): the built-ins in their order, and probe plugins found
through the `archaudit.probes` entry-point group, each run in a child of its own: a real
distribution on sys.path declares one, and a broken, hostile or careless plugin costs a FAIL row,
never the run.
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from archaudit.smoke import probes
from archaudit.smoke.report import FAIL, PASS
from helpers import SRC, smoke_wheel as wheel

SMOKE_OK = wheel("smoke_ok")


def test_builtin_probes_in_order_and_a_plugin_from_an_entry_point(tmp_path):
    assert list(probes.discover())[:5] == ["load", "device-load", "model-torch", "model-torch-aoti", "model-executorch"]
    # a package that ships its own probe: a real distribution on sys.path with an entry point
    site = plugin_site(
        tmp_path,
        "count-files = smoke_plugin_demo:CountFiles",
        textwrap.dedent("""
        from archaudit.smoke.report import Row
        class CountFiles:
            name = "count-files"
            description = "a demo plugin"
            def run(self, ctx):
                import sys
                # archaudit's own process has its runner loaded; the child that hosts a plugin does not
                where = "in archaudit's process" if "archaudit.smoke.runner" in sys.modules else "in a child process"
                return [Row(self.name, ctx.distribution, "PASS", f"{where}: {len(ctx.files)} files")]
    """),
        name="smoke_plugin_demo",
    )
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, TMPDIR=str(out), PYTHONPATH=os.pathsep.join([str(site), SRC]))
    r = subprocess.run(
        [sys.executable, "-m", "archaudit.smoke", "--list-probes"], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 0 and "count-files" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "archaudit.smoke", wheel("smoke_ok"), "--probe", "count-files", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["rows"]
    assert row["probe"] == "count-files" and row["status"] == "PASS" and row["reason"].endswith(" files")
    assert "in a child process" in row["reason"]  # the plugin's code never ran in archaudit's process


def test_a_plugin_child_writes_no_bytecode_into_archaudits_installation(tmp_path):
    """A stale .pyc of archaudit (its source edited since; the parent runs with
    PYTHONDONTWRITEBYTECODE, so it never rewrote it) stays as it was: the plugin child imports
    archaudit under -I, which ignores that variable, and used to rewrite it, a change of
    archaudit's own installation that failed the run (integrity)."""
    site = tmp_path / "site"
    shutil.copytree(Path(SRC) / "archaudit", site / "archaudit", ignore=shutil.ignore_patterns("__pycache__"))
    assert compileall.compile_dir(str(site / "archaudit"), quiet=1)
    later = time.time() + 5
    os.utime(site / "archaudit" / "smoke" / "report.py", (later, later))  # its .pyc is now stale
    plugin_site(
        tmp_path,
        "count-files = smoke_plugin_demo:CountFiles",
        textwrap.dedent("""
        from archaudit.smoke.report import Row
        class CountFiles:
            name = "count-files"
            description = "a demo plugin"
            def run(self, ctx):
                return [Row(self.name, ctx.distribution, "PASS", f"{len(ctx.files)} files")]
    """),
        name="smoke_plugin_demo",
    )
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, TMPDIR=str(out), PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run(
        [sys.executable, "-m", "archaudit.smoke", wheel("smoke_ok"), "--probe", "count-files", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    rows = json.loads(r.stdout)["rows"]
    assert [(row["probe"], row["status"]) for row in rows] == [("count-files", "PASS")], rows
    assert r.returncode == 0


def plugin_site(tmp: Path, entry: str, module: str | None = None, name: str = "smoke_plugin_bad") -> Path:
    """A distribution `name` 1.0 in tmp/site with one archaudit.probes entry point, and its module
    `name`.py where given: a real package that ships a probe, found on sys.path."""
    site = tmp / "site"
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[archaudit.probes]\n{entry}\n")
    if module:
        (site / f"{name}.py").write_text(module)
    return site


def run_cli(tmp: Path, site: Path, *args: str) -> subprocess.CompletedProcess:
    out = tmp / "out"
    out.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(out), PYTHONPATH=os.pathsep.join([str(site), SRC]))
    return subprocess.run(
        [sys.executable, "-m", "archaudit.smoke", *args], capture_output=True, text=True, env=env, timeout=240
    )


def test_a_broken_plugin_is_a_row_not_a_crash(tmp_path):
    site = plugin_site(tmp_path, "broken = smoke_plugin_missing_module:Probe")
    r = run_cli(tmp_path, site, "--list-probes")
    assert r.returncode == 1, r.stderr
    assert "load " in r.stdout and "device-load " in r.stdout  # the built-ins are still listed
    line = next(x for x in r.stdout.splitlines() if x.startswith("broken"))
    assert "BROKEN: plugin smoke_plugin_missing_module:Probe (from smoke-plugin-bad) does not load" in line
    assert "ModuleNotFoundError" in line
    r = run_cli(tmp_path, site, SMOKE_OK, "--format", "json")
    assert r.returncode == 1, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [x["status"] for x in rows if x["probe"] == "load"] == [PASS, PASS]
    (bad,) = [x for x in rows if x["probe"] == "broken"]
    assert bad["status"] == FAIL and bad["reason"].startswith(
        "probe plugin smoke_plugin_missing_module:Probe (from smoke-plugin-bad) did not run: ModuleNotFoundError"
    )


def test_a_plugin_that_kills_its_process_is_a_row(tmp_path):
    site = plugin_site(
        tmp_path,
        "suicidal = smoke_plugin_bad:Probe",
        textwrap.dedent("""
        import os
        class Probe:
            name = "suicidal"
            def run(self, ctx):
                os.kill(os.getpid(), 9)
    """),
    )
    r = run_cli(tmp_path, site, SMOKE_OK, "--probe", "suicidal", "--format", "json")
    assert r.returncode == 1, r.stderr
    (row,) = json.loads(r.stdout)["rows"]
    assert row["status"] == FAIL and "killed by SIGKILL" in row["reason"]


def test_a_plugins_rows_that_archaudit_cannot_read_are_fails_of_the_plugin(tmp_path):
    site = plugin_site(
        tmp_path,
        "careless = smoke_plugin_bad:Probe",
        textwrap.dedent("""
        from archaudit.smoke.report import Row
        class Probe:
            name = "careless"
            def run(self, ctx):
                yield Row("careless", "fine", "PASS", "read", details=(("n", 1),))
                yield Row("careless", "odd", "MAYBE", "a status archaudit has not")
                yield Row("careless", "broken", "PASS", "a duration", duration="soon")
    """),
    )
    r = run_cli(tmp_path, site, SMOKE_OK, "--probe", "careless", "--format", "json")
    assert r.returncode == 1, r.stderr
    rows = [(x["subject"], x["status"], x["reason"]) for x in json.loads(r.stdout)["rows"]]
    assert rows[:2] == [("fine", PASS, "read"), ("odd", FAIL, "a status archaudit has not")]
    subject, status, reason = rows[2]
    assert (subject, status) == ("smoke_ok", FAIL)
    assert reason.startswith("probe plugin smoke_plugin_bad:Probe returned a row archaudit cannot read: ValueError")


def test_a_plugin_that_returns_no_row_fails_and_a_builtin_declared_again_is_no_plugin(tmp_path):
    site = plugin_site(
        tmp_path,
        "silent = smoke_plugin_bad:Probe\nload-again = archaudit.smoke.load:LoadProbe",
        textwrap.dedent("""
        class Probe:
            name = "silent"
            description = "says nothing"
            def run(self, ctx):
                return []
    """),
    )
    r = run_cli(tmp_path, site, "--list-probes")
    assert r.returncode == 0, r.stderr
    names = [line.split()[0] for line in r.stdout.splitlines()]
    assert names == [*probes.discover(), "silent"]  # the built-ins from this process, then the plugin
    assert "load-again" not in names and "silent             says nothing" in r.stdout
    r = run_cli(tmp_path, site, SMOKE_OK, "--probe", "silent", "--format", "json")
    assert r.returncode == 1, r.stderr
    (row,) = json.loads(r.stdout)["rows"]
    assert (row["probe"], row["status"]) == ("silent", FAIL)
    assert row["reason"] == "probe plugin smoke_plugin_bad:Probe returned no row"
