"""[tool.archaudit] in the project root's pyproject.toml (black's root: the nearest directory with
.git, .hg or pyproject.toml), overridden by flags, validated, named in every report format, and
stale ignore entries reported (X001)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from archaudit.cli import main
from archaudit.config import ConfigError, find_project_root, find_pyproject, load
from archaudit.core import example_wheel

EXAMPLE = "gpu_example-1.0-py3-none-linux_x86_64.whl"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """tmp/proj/pyproject.toml (written by each test) with the example wheel in tmp/proj/dist;
    the working directory is tmp/proj/src/deep."""
    proj = tmp_path / "proj"
    (proj / "dist").mkdir(parents=True)
    (proj / "src" / "deep").mkdir(parents=True)
    shutil.copy(example_wheel(), proj / "dist" / EXAMPLE)
    monkeypatch.chdir(proj / "src" / "deep")
    return proj


WHEEL = f"../../dist/{EXAMPLE}"


def write(proj: Path, body: str, name: str = "pyproject.toml") -> Path:
    path = proj / name
    path.write_text(body, encoding="utf-8")
    return path


def check_json(*args: str) -> tuple[int, dict]:
    rc = main(["check", "-q", "--format", "json", "-o", "out.json", *args])
    return rc, json.loads(Path("out.json").read_text(encoding="utf-8"))


def test_discovered_upward(project):
    write(project, '[project]\nname = "x"\n\n[tool.archaudit]\ncuda-archs = "80;90"\n')
    assert find_pyproject() == str(project / "pyproject.toml")
    rc, doc = check_json(WHEEL)
    assert rc == 1
    claim = doc["targets"][0]["claim"]
    assert claim["gpus"] == ["80", "90"] and "[tool.archaudit] cuda-archs" in claim["source"]
    assert [f["code"] for f in doc["targets"][0]["findings"] if f["severity"] == "error"] == ["G001"]


def test_only_the_project_roots_pyproject_is_read(project):
    """The root is the nearest directory holding .git, .hg or pyproject.toml (black's rule); a
    root without a [tool.archaudit] table means no configuration, whatever a parent holds."""
    write(project, '[tool.archaudit]\ncuda-archs = "80;90"\n')
    write(project / "src", '[project]\nname = "inner"\n')  # the root: a pyproject without our table
    assert find_project_root() == str(project / "src")
    assert find_pyproject() is None
    rc, doc = check_json(WHEEL)
    assert rc == 1 and doc["config"] is None and doc["targets"][0]["claim"] is None  # C001: no claim
    write(project / "src", '[tool.archaudit]\ncuda-archs = ["80"]\n')  # list spelling, in the root
    assert find_pyproject() == str(project / "src" / "pyproject.toml")
    rc, doc = check_json(WHEEL)
    assert rc == 0 and doc["targets"][0]["claim"]["gpus"] == ["80"]
    assert doc["config"] == str(project / "src" / "pyproject.toml")


@pytest.mark.parametrize("marker", [".git", ".hg"])
def test_a_repository_root_stops_the_search(project, marker):
    write(project, '[tool.archaudit]\ncuda-archs = "80"\n')
    (project / "src" / marker).mkdir()
    assert find_project_root() == str(project / "src") and find_pyproject() is None
    (project / "src" / marker).rmdir()
    (project / "src" / ".git").write_text("gitdir: elsewhere\n")  # a worktree's or submodule's .git file
    assert find_project_root() == str(project / "src")


def test_a_parent_directorys_ignore_no_longer_hides_g001(tmp_path, monkeypatch):
    """Issue 30 item 7: a pyproject.toml above the project (a shared directory) used to hide
    every G001 of `check --example --arch "80;90"` with a bare library glob."""
    write(
        tmp_path,
        '[tool.archaudit]\n\n[[tool.archaudit.ignore-library]]\ncode = "G"\nlibrary = "*"\n'
        'reason = "a stranger\'s file"\n',
    )
    (tmp_path / "work" / ".git").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    rc = main(["check", "-q", "--example", "--arch", "80;90", "--format", "json", "-o", "out.json"])
    doc = json.loads(Path("out.json").read_text(encoding="utf-8"))
    assert rc == 1 and doc["config"] is None and doc["suppressed"] == []
    assert "G001" in {f["code"] for f in doc["targets"][0]["findings"]}


@pytest.mark.parametrize("code, library", [("G", "*"), ("G00", "**"), ("G001,K", "*/*")])
def test_a_bare_glob_over_a_code_prefix_needs_a_reason(project, capsys, code, library):
    write(
        project,
        f'[tool.archaudit]\ncuda-archs = "80;90"\n\n[[tool.archaudit.ignore-library]]\n'
        f'code = "{code}"\nlibrary = "{library}"\n',
    )
    assert main(["check", "-q", WHEEL]) == 2
    assert "hides a whole code prefix in every library; give it a reason" in capsys.readouterr().err
    write(
        project,
        f'[tool.archaudit]\ncuda-archs = "80;90"\n\n[[tool.archaudit.ignore-library]]\n'
        f'code = "{code}"\nlibrary = "{library}"\nreason = "measured on every GPU we ship"\n',
    )
    rc, doc = check_json(WHEEL)
    assert rc == 0 and [s["code"] for s in doc["suppressed"]] == ["G001"]
    assert doc["config"] == str(project / "pyproject.toml")


def test_a_whole_code_over_every_library_needs_no_reason(project):
    write(
        project,
        '[tool.archaudit]\ncuda-archs = "80;90"\n\n[[tool.archaudit.ignore-library]]\ncode = "G001"\nlibrary = "*"\n',
    )
    rc, doc = check_json(WHEEL)
    assert rc == 0 and [s["code"] for s in doc["suppressed"]] == ["G001"]


@pytest.mark.parametrize(
    "fmt, expect",
    [
        ("text", "config: {path} [tool.archaudit]"),
        ("markdown", "<sub>Configuration: `{path}` [tool.archaudit]</sub>"),
        ("github", "; config {path}"),
        ("junit", '<property name="config" value="{path}" />'),
        ("json", '"config": "{path}"'),
        ("sarif", '"config": "{path}"'),
    ],
)
def test_every_format_names_the_config_file(project, fmt, expect):
    path = write(project, '[tool.archaudit]\ncuda-archs = "80;90"\nignore = ["G001"]\n')
    main(["check", "-q", "--format", fmt, "-o", "out", WHEEL])
    assert expect.format(path=path) in Path("out").read_text(encoding="utf-8")
    main(["check", "-q", "--no-config", "--arch", "80", "--format", fmt, "-o", "none", WHEEL])
    assert str(path) not in Path("none").read_text(encoding="utf-8")


def test_flags_override_the_file(project):
    write(project, '[tool.archaudit]\ncuda-archs = "80;90"\nformat = "markdown"\nignore = ["G001"]\n')
    rc = main(["check", "-q", "-o", "o.md", WHEEL])
    assert rc == 0  # G001 ignored by the file
    assert Path("o.md").read_text().startswith("## ")  # format from the file
    rc, doc = check_json("--arch", "80", WHEEL)  # flag claim and flag format win
    assert doc["targets"][0]["claim"]["source"] == "--arch"
    rc, doc = check_json("--ignore", "D", WHEEL)  # --ignore replaces the file's ignore list
    assert rc == 1 and {f["code"] for f in doc["suppressed"]} == {"D002"}


def test_no_config_and_explicit_config(project, tmp_path):
    write(project, '[tool.archaudit]\ncuda-archs = "80;90"\n')
    rc, doc = check_json("--no-config", WHEEL)
    assert rc == 1 and doc["targets"][0]["claim"] is None
    assert "C001" in {f["code"] for f in doc["targets"][0]["findings"]}
    other = write(tmp_path, '[tool.archaudit]\ncuda-archs = "80"\n', "other.toml")
    rc, doc = check_json("--config", str(other), WHEEL)
    assert rc == 0 and doc["targets"][0]["claim"]["gpus"] == ["80"]


def test_ignore_library_rule_and_stale_entry(project):
    write(
        project,
        """
[tool.archaudit]
cuda-archs = "80;90"

[[tool.archaudit.ignore-library]]
code = "G001"
library = "libshim.so"
reason = "shim only ever loaded on A100"

[[tool.archaudit.ignore-library]]
code = "K"
library = "*/libold.so"
reason = "libold was removed in 0.9"
""",
    )
    rc, doc = check_json(WHEEL)
    assert rc == 0  # G001 on libshim ignored; the stale entry is only a warning
    assert [f["code"] for f in doc["suppressed"]] == ["G001"]
    stale = [f for f in doc["targets"][0]["findings"] if f["code"] == "X001"]
    assert len(stale) == 1 and stale[0]["severity"] == "warning"
    assert "K for */libold.so matches nothing" in stale[0]["message"]
    assert "libold was removed in 0.9" in stale[0]["message"]
    main(["check", "-q", "-o", "out.txt", WHEEL])
    assert "! X001 ignore entry K for */libold.so matches nothing" in Path("out.txt").read_text()


def test_select_and_ignore_from_file(project):
    write(project, '[tool.archaudit]\ncuda-archs = "80;90"\nselect = ["D"]\n')
    rc, doc = check_json(WHEEL)
    assert rc == 0 and {f["code"] for f in doc["targets"][0]["findings"]} == {"D002"}
    rc, doc = check_json("--select", "G00", WHEEL)  # the flag replaces the file's select
    assert rc == 1 and {f["code"] for f in doc["targets"][0]["findings"]} == {"G001"}


def test_policy_keys(project):
    write(
        project,
        '[tool.archaudit]\ncuda-archs = "80"\nexact = true\nrequire-ptx = "newest"\n'
        'require-device-code = ["libmissing*.so"]\ngpus = ["H100"]\ncosts = true\n',
    )
    rc, doc = check_json(WHEEL)
    codes = {f["code"] for f in doc["targets"][0]["findings"]}
    assert {"G003", "G004", "G006", "G009"} <= codes  # sm_90 carried but unclaimed; no compute_80 PTX
    assert rc == 1
    main(["check", "-q", "-o", "out.txt", WHEEL])
    assert "DEVICE CODE BY TARGET" in Path("out.txt").read_text()  # costs = true


@pytest.mark.parametrize(
    "body, message",
    [
        ('[tool.archaudit]\ncuda-arch = "80"\n', "unknown key(s) in [tool.archaudit]: cuda-arch"),
        ('[tool.archaudit]\nexact = "yes"\n', "exact must be true or false"),
        ("[tool.archaudit]\nallow-loss = 1\n", "allow-loss must be true or false"),
        ('[tool.archaudit]\nignore = "G001"\n', "ignore must be a list of strings"),
        ("[tool.archaudit]\ncuda-archs = 80\n", "cuda-archs must be a string or a list"),
        ('[[tool.archaudit.ignore-library]]\ncode = "G001"\n', "needs code and library"),
        ('[[tool.archaudit.data]]\nmember = "x/*.whl"\n', "needs a member glob and a reason"),
        ('[[tool.archaudit.data]]\nmember = "x/*.whl"\nreason = " "\n', "needs a member glob and a reason"),
        ('[[tool.archaudit.data]]\nmember = "*/*"\nreason = "all"\n', "names no member"),
        ('[tool.archaudit]\ndata = "x.whl"\n', "data must be a list of tables"),
        ('[[tool.archaudit.library]]\npath = "libx.so"\narch = "80"\n', "each library entry needs path"),
        ('[[tool.archaudit.library]]\npath = "libx.so"\narch = ""\nreason = "r"\n', "each library entry needs path"),
        ('[[tool.archaudit.library]]\npath = "*"\narch = "80"\nreason = "r"\n', "names no library"),
        ('[[tool.archaudit.library]]\npath = "libx.so"\narch = "sm_8x"\nreason = "r"\n', "library 'libx.so'"),
        (
            '[[tool.archaudit.library]]\npath = "libx.so"\nkernels = []\narch = "80"\nreason = "r"\n',
            "kernel-name globs",
        ),
        (
            '[[tool.archaudit.library]]\npath = "libx.so"\nkernels = "mul"\narch = "80"\nreason = "r"\n',
            "kernel-name globs",
        ),
        (
            '[[tool.archaudit.library]]\npath = "libx.so"\nkernels = ["**"]\narch = "80"\nreason = "r"\n',
            "names every kernel",
        ),
        (
            '[[tool.archaudit.library]]\npath = "libx.so"\nkernel = ["mul"]\narch = "80"\nreason = "r"\n',
            "each library entry needs path",
        ),
        ('[[tool.archaudit.library-group]]\npaths = ["a*.so"]\n', "each library-group entry needs paths"),
        ('[[tool.archaudit.library-group]]\npaths = []\nreason = "r"\n', "each library-group entry needs paths"),
        ('[[tool.archaudit.library-group]]\npaths = ["**"]\nreason = "r"\n', "glob names no library"),
        ('[tool.archaudit]\nlibrary = "x"\n', "library must be a list of tables"),
        ("[tool.archaudit\n", "not valid TOML"),
    ],
)
def test_bad_config_exits_2(project, capsys, body, message):
    write(project, body)
    if "not valid TOML" in message:  # an unparseable file is not discovered; name it
        rc = main(["check", "-q", "--config", str(project / "pyproject.toml"), WHEEL])
    else:
        rc = main(["check", "-q", WHEEL])
    assert rc == 2
    assert message in capsys.readouterr().err


def test_bad_claim_in_file_exits_2(project, capsys):
    write(project, '[tool.archaudit]\ncuda-archs = "sm_8x"\n')
    assert main(["check", "-q", WHEEL]) == 2
    assert "C002 unparseable claim from" in capsys.readouterr().err


def test_load_api(tmp_path):
    path = write(tmp_path, '[tool.archaudit]\ncuda-archs = ["80", "90"]\n')
    cfg = load(str(path))
    assert cfg.path == str(path) and cfg.get("cuda-archs") == ["80", "90"] and cfg.get("missing", 3) == 3
    assert load(None, discover=False).values == {}
    with pytest.raises(ConfigError):
        load(str(tmp_path / "absent.toml"))


def test_a_data_member_is_left_out_of_the_verdict_with_its_reason(project):
    """A wheel shipping the example wheel as data: without the entry C001 (its code needs a
    claim); with it, the nested wheel's libraries are left out, and X002 says so and why."""
    import zipfile

    with zipfile.ZipFile(project / "dist" / "host-1.0-py3-none-any.whl", "w") as z:
        z.write(example_wheel(), f"host/examples/{EXAMPLE}")
        z.writestr("host/__init__.py", "")
        z.writestr("host-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    wheel = "../../dist/host-1.0-py3-none-any.whl"
    write(project, "[tool.archaudit]\n")
    rc, doc = check_json(wheel)
    assert rc == 1 and "C001" in [f["code"] for f in doc["targets"][0]["findings"]]
    write(project, '[[tool.archaudit.data]]\nmember = "host/examples/*.whl"\nreason = "read by the self-test"\n')
    rc, doc = check_json(wheel)
    (target,) = doc["targets"]
    assert rc == 0 and target["libraries"] == []
    (note,) = target["findings"]
    assert note["code"] == "X002" and note["severity"] == "info" and note["subject"] == f"host/examples/{EXAMPLE}"
    assert "read by the self-test" in note["message"]
    # a claim judges what is left, and no device code is left: G006, never a pass on the data's code
    rc, doc = check_json(wheel, "--arch", "80;90")
    assert rc == 1 and [f["code"] for f in doc["targets"][0]["findings"]] == ["G006", "X002"]
