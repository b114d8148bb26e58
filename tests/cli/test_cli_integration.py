"""The command line end to end, and the drop-in integrations exercised offline: the GitHub
Action (action.yml's script steps run with a fake $GITHUB_STEP_SUMMARY), the pre-commit hook
(.pre-commit-hooks.yaml's entry on fixtures) and the cibuildwheel example (its test-command
against the example wheel installed as cibuildwheel would)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from archaudit.cli import build_parser, example_wheel, main
from archaudit.findings import CODES

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / "tests" / "fixtures" / "cuda" / "bin"
EXAMPLE = "gpu_example-1.0-py3-none-linux_x86_64.whl"
ARCHAUDIT = shutil.which("archaudit")


def check_json(*args: str) -> tuple[int, dict]:
    rc = main(["check", "--no-config", "-q", "--format", "json", "-o", "out.json", *args])
    return rc, json.loads(Path("out.json").read_text(encoding="utf-8"))


def codes(doc: dict) -> set[str]:
    return {f["code"] for t in doc["targets"] for f in t["findings"]}


# ---- explain ----

def test_every_code_is_explained():
    for code in CODES.values():
        assert re.fullmatch(r"[ECGKDX]\d{3}", code.code)
        assert code.severity in ("error", "warning", "info")
        for part in (code.title, code.cause, code.example, code.fix):
            assert part.strip(), f"{code.code} lacks text"


@pytest.mark.parametrize("code", sorted(CODES))
def test_explain_prints_cause_example_fix(capsys, code):
    assert main(["explain", code.lower()]) == 0
    out = capsys.readouterr().out
    c = CODES[code]
    assert out.startswith(f"{code} ({c.severity}): {c.title}")
    assert f"Cause: {c.cause}" in out and f"Example: {c.example}" in out and f"Fix: {c.fix}" in out


def test_explain_lists_and_rejects(capsys):
    assert main(["explain"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(CODES)
    assert main(["explain", "Z999"]) == 2
    assert "unknown code 'Z999'" in capsys.readouterr().err


# ---- --select / --ignore ----

def test_ignore_by_code_and_prefix(scratch):
    rc, doc = check_json("--arch", "80,90", EXAMPLE)
    assert rc == 1 and "G001" in codes(doc)
    for pattern in ("G001", "G", "G0"):
        rc, doc = check_json("--arch", "80,90", "--ignore", pattern, EXAMPLE)
        assert rc == 0, pattern
        assert "G001" not in codes(doc) and "G001" in {f["code"] for f in doc["suppressed"]}
    rc, doc = check_json("--arch", "80,90", "--ignore", "K", EXAMPLE)
    assert rc == 1


def test_select_by_code_and_prefix(scratch):
    rc, doc = check_json("--arch", "80,90", "--select", "D", EXAMPLE)
    assert rc == 0 and codes(doc) == {"D002"}
    rc, doc = check_json("--arch", "80,90", "--select", "G001", "--select", "D002", EXAMPLE)
    assert rc == 1 and codes(doc) == {"G001", "D002"}
    rc, doc = check_json("--arch", "80,90", "--select", "G", "--ignore", "G001", EXAMPLE)
    assert rc == 0 and codes(doc) == set()


# ---- --gpu and gpus ----

def gpu_answers(doc: dict) -> dict[str, tuple[str, str]]:
    return {f["subject"]: (f["code"], f["data"]["runs"]) for t in doc["targets"] for f in t["findings"]
            if f["code"] in ("G008", "G009")}


@pytest.mark.parametrize("gpu, kernels, shim, rc", [
    ("H100", "native", "none", 1),  # 9.0: libshim has only sm_80
    ("A100", "native", "native", 0),
    ("sm_80", "native", "native", 0),
    ("sm_86", "native", "native", 0),  # sm_80 SASS runs on 8.6
    ("RTX 5090", "jit", "none", 1),  # 12.0: only compute_90 PTX can serve it
    ("Jetson Orin", "none", "none", 1),  # Tegra 8.7 runs only its own SASS
])
def test_gpu_by_name_or_target(scratch, gpu, kernels, shim, rc):
    code, doc = check_json("--arch", "80", "--gpu", gpu, EXAMPLE)
    answers = gpu_answers(doc)
    assert answers["gpu_example/libkernels.so"][1] == kernels
    assert answers["gpu_example/libshim.so"][1] == shim
    assert code == rc


def test_gpu_text_answer(scratch, capsys):
    main(["check", "--no-config", "-q", "--arch", "80", "--gpu", "H100", "-o", "o.txt", EXAMPLE])
    text = Path("o.txt").read_text()
    assert "G008 gpu_example/libkernels.so on H100 (9.0): native" in text
    assert "G009 gpu_example/libshim.so on H100 (9.0): not at all" in text


def test_gpu_unknown_exits_2(scratch, capsys):
    assert main(["check", "--no-config", "-q", "--gpu", "Voodoo 5", EXAMPLE]) == 2
    assert "not in the GPU catalog" in capsys.readouterr().err


def _nvml_gpu_present() -> bool:
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount() > 0
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no module, no driver, no GPU
        return False


def test_gpu_local_without_gpu_is_a_clear_usage_error(scratch):
    if _nvml_gpu_present():
        pytest.skip("this machine has a GPU that NVML sees")
    proc = subprocess.run([sys.executable, "-m", "archaudit", "check", "--no-config", "-q", "--arch", "80",
                           "--gpu", "local", EXAMPLE], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stdout == ""
    err = proc.stderr.strip()
    assert err.startswith("archaudit: --gpu local")
    assert ("nvidia-ml-py" in err) or ("no NVIDIA GPU" in err) or ("sees no GPU" in err), err
    assert "Traceback" not in err


@pytest.mark.gpu
def test_gpu_local_finds_the_gpu(scratch):
    """On the device machine: NVML names the GPU and the answer is per library."""
    if not _nvml_gpu_present():
        pytest.skip("no GPU visible to NVML")
    rc, doc = check_json("--arch", "80", "--gpu", "local", EXAMPLE)
    answers = [f for t in doc["targets"] for f in t["findings"] if f["code"] in ("G008", "G009")]
    assert answers and all(f["data"]["gpu"].startswith("GPU 0 ") for f in answers[:2])
    print("\n".join(f["message"] for f in answers))
    # the NVML name (e.g. "NVIDIA H200") is a GPU of the catalog, with the capability NVML reports
    from archaudit import arch
    nvml_name = answers[0]["data"]["gpu"].split(" ", 2)[2]
    found = arch.lookup_gpu(nvml_name)
    assert found, f"{nvml_name!r} is not in the GPU catalog"
    assert f"({found[0].cc[0]}.{found[0].cc[1]})" in answers[0]["message"]


def test_gpus_catalog(capsys):
    assert main(["gpus"]) == 0
    text = capsys.readouterr().out
    for name in ("A100", "H100", "H200", "B200", "RTX 4090", "RTX 5090", "Jetson Orin", "Jetson Thor", "GB10"):
        assert name in text, name
    assert main(["gpus", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by = {r["name"]: r for r in rows}
    assert by["H100"]["cc"] == "9.0" and by["H100"]["kind"] == "discrete"
    assert any("Orin" in n and r["kind"] == "integrated" for n, r in by.items())
    assert all(re.fullmatch(r"\d+\.\d", r["cc"]) for r in rows if r["vendor"] == "nvidia")
    amd = {r["name"]: r for r in rows if r["vendor"] == "amd"}
    assert amd["Instinct MI300X"]["target"] == "gfx942" and "Radeon RX 9070 XT" in text


def test_gpu_amd_by_name(capsys):
    """--gpu takes an AMD catalog name (it was a usage error before gfx.lookup_gpu existed)."""
    rc = main(["check", "--no-config", "-q", "--amd-arch", "gfx942", "--gpu", "MI300X", "--example"])
    err = capsys.readouterr().err
    assert rc != 2 and "not in the GPU catalog" not in err, err
    assert main(["check", "--no-config", "-q", "--amd-arch", "gfx942", "--gpu", "MI999", "--example"]) == 2
    assert "not in the GPU catalog" in capsys.readouterr().err


def test_usage_errors_exit_2(scratch, capsys):
    assert main(["check", "--no-config"]) == 2
    assert main(["check", "--no-config", "-q", "--arch", "sm_8x", EXAMPLE]) == 2
    assert "C002" in capsys.readouterr().err
    assert main(["check", "--no-config", "-q", "missing.whl"]) == 2


# ---- GitHub Action ----

def load_yaml(path: Path):
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _expr(value: str, inputs: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        expr = m.group(1).strip()
        if expr.startswith("inputs."):
            return inputs[expr[len("inputs."):]]
        if expr == "github.action_path":
            return str(REPO)
        raise AssertionError(f"unexpected expression {expr}")
    return re.sub(r"\$\{\{(.*?)\}\}", sub, str(value))


def run_action_step(step_id: str, inputs: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess, str, str]:
    """Run one step of the composite action as the runner would (bash -eo pipefail, inputs
    through the step's env), with $GITHUB_STEP_SUMMARY and $GITHUB_OUTPUT as files."""
    action = load_yaml(REPO / "action.yml")
    values = {k: str(v.get("default", "")) for k, v in action["inputs"].items()}
    values.update(inputs)
    step = next(s for s in action["runs"]["steps"] if s.get("id") == step_id)
    summary, output = cwd / "summary.md", cwd / "github_output"
    summary.write_text("")
    output.write_text("")
    env = {**os.environ, "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(output),
           **{k: _expr(v, values) for k, v in step.get("env", {}).items()}}
    script = cwd / f"{step_id}.sh"
    script.write_text(step["run"])
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    return proc, summary.read_text(), output.read_text()


def test_action_metadata_is_consistent():
    action = load_yaml(REPO / "action.yml")
    assert action["runs"]["using"] == "composite"
    text = (REPO / "action.yml").read_text()
    used = set(re.findall(r"inputs\.([A-Za-z0-9_-]+)", text))
    assert used == set(action["inputs"]), used ^ set(action["inputs"])
    for step in action["runs"]["steps"]:
        assert step["shell"] == "bash"
        assert "${{" not in step["run"], "inputs must reach scripts through env, not be pasted in"
        syntax = subprocess.run(["bash", "-n"], input=step["run"], capture_output=True, text=True)
        assert syntax.returncode == 0, syntax.stderr
    for out in action["outputs"].values():
        assert re.fullmatch(r"\$\{\{ steps\.(install|audit)\.outputs\.[a-z-]+ \}\}", out["value"])


@pytest.mark.skipif(ARCHAUDIT is None, reason="the archaudit command is not on PATH")
def test_action_fails_with_summary_and_annotations(scratch):
    proc, summary, output = run_action_step("audit", {"wheels": "*.whl", "arch": "80;90"}, scratch)
    assert proc.returncode == 1, proc.stderr
    assert summary.startswith("## ❌ archaudit: 1 of 1 target fails")
    assert "| `gpu_example/libshim.so` | sm_80 | ❌ misses 90 |" in summary
    assert re.search(r"^::error file=gpu_example-1\.0-py3-none-linux_x86_64\.whl,title=archaudit G001%3A .*::"
                     r"gpu_example/libshim\.so has no code for 90", proc.stdout, re.M)
    assert "✗ G001" in proc.stdout  # the text report in the log
    assert "exit-code=1" in output.splitlines()


@pytest.mark.skipif(ARCHAUDIT is None, reason="the archaudit command is not on PATH")
def test_action_passes_and_writes_junit(scratch):
    proc, summary, output = run_action_step(
        "audit", {"wheels": "nothing-*.whl *.whl", "arch": "80", "format": "junit", "output": "report.xml",
                  "args": "--costs --exact"}, scratch)
    assert proc.returncode == 1  # --exact: libkernels carries sm_90, which "80" does not claim
    assert "G003" in summary and "Device code by target" in summary
    from xml.etree import ElementTree as ET
    root = ET.parse(scratch / "report.xml").getroot()
    assert root.tag == "testsuites" and root.get("failures") == "1"
    assert "report=report.xml" in output and "exit-code=1" in output
    proc, summary, output = run_action_step("audit", {"wheels": "*.whl", "arch": "80", "fail": "false",
                                                      "annotations": "false", "summary": "false"}, scratch)
    assert proc.returncode == 0 and summary == "" and "::" not in proc.stdout
    assert "exit-code=0" in output


@pytest.mark.skipif(ARCHAUDIT is None, reason="the archaudit command is not on PATH")
def test_action_without_matching_wheels(scratch):
    proc, _, output = run_action_step("audit", {"wheels": "dist/*.whl"}, scratch)
    assert proc.returncode == 2
    assert "::error title=archaudit::nothing matches wheels: 'dist/*.whl'" in proc.stdout
    assert "exit-code=2" in output


@pytest.mark.skipif(ARCHAUDIT is None, reason="the archaudit command is not on PATH")
def test_action_install_none_uses_path(scratch):
    proc, _, _ = run_action_step("install", {"install": "none"}, scratch)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("archaudit")


def test_workflow_example_uses_real_inputs_and_flags():
    action = load_yaml(REPO / "action.yml")
    workflow = load_yaml(REPO / "examples" / "github" / "archaudit.yml")
    steps = workflow["jobs"]["audit"]["steps"]
    uses = [s for s in steps if str(s.get("uses", "")).endswith("/archaudit@v0")]
    assert len(uses) == 1 and set(uses[0]["with"]) <= set(action["inputs"])
    parser = build_parser()
    for step in steps:
        for line in str(step.get("run", "")).splitlines():
            line = line.split("||")[0].strip()
            if line.startswith("archaudit "):
                parser.parse_args(shlex.split(line)[1:])  # exits on an unknown flag
    args = shlex.split(uses[0]["with"]["args"])
    parser.parse_args(["check", *args, "x.whl"])


# ---- pre-commit hook ----

def test_pre_commit_hook_runs_on_fixtures(tmp_path):
    hooks = load_yaml(REPO / ".pre-commit-hooks.yaml")
    assert [h["id"] for h in hooks] == ["archaudit"]
    hook = hooks[0]
    assert hook["language"] == "python" and hook["entry"].split()[0] == "archaudit"
    files = re.compile(hook["files"])
    for name in ("dist/x-1.0-py3-none-any.whl", "k.cubin", "k.ptx", "kern.fatbin", "gfx90a.hsaco"):
        assert files.search(name), name
    for name in ("src/x.py", "lib/libhost.so", "x.whl.txt", "README.md"):
        assert not files.search(name), name
    if ARCHAUDIT is None:
        pytest.skip("the archaudit command is not on PATH")
    # pre-commit runs the entry from the repository root with the matching staged files
    (tmp_path / "pyproject.toml").write_text('[tool.archaudit]\ncuda-archs = "80"\n')
    (tmp_path / "dist").mkdir()
    (tmp_path / "kernels").mkdir()
    shutil.copy(example_wheel(), tmp_path / "dist" / EXAMPLE)
    for name in ("kern_sm80.cubin", "kern_80.ptx", "kern.fatbin"):
        shutil.copy(BIN / name, tmp_path / "kernels" / name)
    (tmp_path / "kernels" / "notes.txt").write_text("not audited")
    candidates = [f"dist/{EXAMPLE}", "kernels/kern_sm80.cubin", "kernels/kern_80.ptx", "kernels/kern.fatbin",
                  "kernels/notes.txt"]
    staged = [f for f in candidates if files.search(f)]
    assert len(staged) == 4
    ok = subprocess.run([*shlex.split(hook["entry"]), *staged], capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "4 of 4 targets pass" in ok.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.archaudit]\ncuda-archs = "80;90"\n')
    bad = subprocess.run([*shlex.split(hook["entry"]), *staged], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 1
    assert "G001 gpu_example/libshim.so has no code for 90" in bad.stdout
    assert "G001 kern_sm80.cubin has no code for 90" in bad.stdout


# ---- cibuildwheel ----

def test_cibuildwheel_test_command(tmp_path):
    """cibuildwheel installs the built wheel into a test environment and runs test-command
    from a temporary directory, with {project} replaced by the project directory."""
    project = REPO / "examples" / "cibuildwheel"
    config = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
    cibw = config["tool"]["cibuildwheel"]
    assert any(Requirement(r).name == "archaudit" for r in cibw["test-requires"])
    assert config["tool"]["archaudit"]["cuda-archs"]
    site = tmp_path / "venv-site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet",
                          "--disable-pip-version-check", "--target", str(site), example_wheel()],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        pytest.skip(f"pip cannot install a local wheel here: {pip.stderr[-300:]}")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "archaudit"
    launcher.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m archaudit \"$@\"\n")
    launcher.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    run_dir = tmp_path / "test-cwd"
    run_dir.mkdir()

    def run(project_dir: Path) -> subprocess.CompletedProcess:
        command = cibw["test-command"].replace("{project}", str(project_dir)).replace("{package}", str(project_dir))
        return subprocess.run(command, shell=True, capture_output=True, text=True, env=env, cwd=run_dir)

    proc = run(project)  # the example claims 80;90 and the example wheel's libshim lacks sm_90
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpu_example-1.0 (distribution)" in proc.stdout
    assert "G001 gpu_example/libshim.so has no code for 90 (claimed: 80, 90" in proc.stdout
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    (fixed / "pyproject.toml").write_text(
        (project / "pyproject.toml").read_text(encoding="utf-8").replace('cuda-archs = "80;90"', 'cuda-archs = "80"'))
    proc = run(fixed)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- documentation ----

def test_docs_commands_parse():
    """Every `archaudit ...` command in the README and the CI and configuration docs is accepted
    by the parser, the action snippet uses only real inputs, the configuration page documents
    every key and the README's shorter table uses only real ones."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    configuration = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    parser = build_parser()
    commands = []
    for block in re.findall(r"```(?:sh|toml|yaml|console)\n(.*?)```", readme + ci + configuration, re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line.removeprefix("$ ")).strip()
            if line.startswith("archaudit "):
                commands.append(line)
            m = re.search(r"(?:entry: |test-command = \")(archaudit [^\"]*)", line)
            if m:
                commands.append(m.group(1))
    assert len(commands) >= 12
    for command in commands:
        args = shlex.split(command)[1:]
        if args[:1] == ["check"] and not any(not a.startswith("-") for a in args[1:]):
            args.append("x.whl")
        parser.parse_args(args)
    action = load_yaml(REPO / "action.yml")
    snippet = re.search(r"```yaml\n(- uses: .*?)```", ci, re.S).group(1)
    import yaml
    assert set(yaml.safe_load(snippet)[0]["with"]) <= set(action["inputs"])
    from archaudit.config import KEYS
    full = re.search(r"```toml\n(\[tool\.archaudit\].*?)```", configuration, re.S).group(1)
    assert set(tomllib.loads(full)["tool"]["archaudit"]) == KEYS  # every key is documented
    short = re.search(r"```toml\n(\[tool\.archaudit\].*?)```", readme, re.S).group(1)
    assert set(tomllib.loads(short)["tool"]["archaudit"]) <= KEYS
