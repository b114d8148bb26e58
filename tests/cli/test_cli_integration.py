"""The command line end to end, and the pre-commit hook (.pre-commit-hooks.yaml's entry on
fixtures) exercised offline. The GitHub Action and the cibuildwheel example: tests/test_action.py."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archaudit.cli import build_parser, main
from archaudit.core import example_wheel
from archaudit.findings import CODES

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / "tests" / "fixtures" / "cuda" / "bin"
EXAMPLE = "gpu_example-1.0-py3-none-linux_x86_64.whl"
ARCHAUDIT = shutil.which("archaudit")


def check_json(*args: str) -> tuple[int, dict]:
    rc = main(["check", "--no-config", "-q", "--format", "json", "-o", "out.json", *args])
    return rc, json.loads(Path("out.json").read_text(encoding="utf-8"))


def codes(doc: dict) -> set[str]:
    return {f["code"] for t in doc["targets"] for f in t["findings"]}


# ---- the code table ----


def test_every_code_is_explained():
    for code in CODES.values():
        assert re.fullmatch(r"[ECGKDX]\d{3}", code.code)
        assert code.severity in ("error", "warning", "info")
        for part in (code.title, code.cause, code.example, code.fix):
            assert part.strip(), f"{code.code} lacks text"


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


# ---- --gpu ----


def gpu_answers(doc: dict) -> dict[str, tuple[str, str]]:
    return {
        f["subject"]: (f["code"], f["data"]["runs"])
        for t in doc["targets"]
        for f in t["findings"]
        if f["code"] in ("G008", "G009")
    }


@pytest.mark.parametrize(
    "gpu, kernels, shim, rc",
    [
        ("H100", "native", "none", 1),  # 9.0: libshim has only sm_80
        ("A100", "native", "native", 0),
        ("sm_80", "native", "native", 0),
        ("sm_86", "native", "native", 0),  # sm_80 SASS runs on 8.6
        ("RTX 5090", "jit", "none", 1),  # 12.0: only compute_90 PTX can serve it
        ("Jetson Orin", "none", "none", 1),  # Tegra 8.7 runs only its own SASS
    ],
)
def test_gpu_by_name_or_target(scratch, gpu, kernels, shim, rc):
    code, doc = check_json("--arch", "80", "--gpu", gpu, EXAMPLE)
    answers = gpu_answers(doc)
    assert answers["gpu_example/libkernels.so"][1] == kernels
    assert answers["gpu_example/libshim.so"][1] == shim
    assert code == rc


def test_gpu_text_answer(scratch, capsys):
    # -v: G008 is info
    main(["check", "--no-config", "-q", "-v", "--arch", "80", "--gpu", "H100", "-o", "o.txt", EXAMPLE])
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
    proc = subprocess.run(
        [sys.executable, "-m", "archaudit", "check", "--no-config", "-q", "--arch", "80", "--gpu", "local", EXAMPLE],
        capture_output=True,
        text=True,
    )
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
    from archaudit.gpus import cuda as arch

    nvml_name = answers[0]["data"]["gpu"].split(" ", 2)[2]
    found = arch.lookup_gpu(nvml_name)
    assert found, f"{nvml_name!r} is not in the GPU catalog"
    assert f"({found[0].cc[0]}.{found[0].cc[1]})" in answers[0]["message"]


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
    candidates = [
        f"dist/{EXAMPLE}",
        "kernels/kern_sm80.cubin",
        "kernels/kern_80.ptx",
        "kernels/kern.fatbin",
        "kernels/notes.txt",
    ]
    staged = [f for f in candidates if files.search(f)]
    assert len(staged) == 4
    ok = subprocess.run([*shlex.split(hook["entry"]), *staged], capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "4 of 4 targets pass" in ok.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.archaudit]\ncuda-archs = "80;90"\n')
    bad = subprocess.run([*shlex.split(hook["entry"]), *staged], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 1
    assert "G001 gpu_example/libshim.so has no code for 9.0" in bad.stdout
    assert "G001 kern_sm80.cubin has no code for 9.0" in bad.stdout


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
    m = re.search(r"```yaml\n(- uses: .*?)```", ci, re.S)
    assert m is not None
    snippet = m.group(1)
    import yaml

    assert set(yaml.safe_load(snippet)[0]["with"]) <= set(action["inputs"])
    from archaudit.config import KEYS

    m = re.search(r"```toml\n(\[tool\.archaudit\].*?)```", configuration, re.S)
    assert m is not None
    full = m.group(1)
    assert set(tomllib.loads(full)["tool"]["archaudit"]) == KEYS  # every key is documented
    m = re.search(r"```toml\n(\[tool\.archaudit\].*?)```", readme, re.S)
    assert m is not None
    short = m.group(1)
    assert set(tomllib.loads(short)["tool"]["archaudit"]) <= KEYS
