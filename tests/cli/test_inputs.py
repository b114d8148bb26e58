"""What `check` and `smoke` say of inputs that are not what they look like (issue 27, items 1
and 4): a missing file, a .whl pip would refuse, a zip, an sdist or a text file given as a
target, and an ELF header whose class is neither 32- nor 64-bit. Each is exit 2 with words
that are true, or, for a library inside a wheel, a code whose title its message repeats."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from archaudit import core
from archaudit.cli import main
from archaudit.findings import CODES, Code

HERE = Path(__file__).resolve().parents[1]
HOST = HERE / "fixtures" / "cuda" / "bin" / "lib_host.so"


def check_json(tmp_path: Path, *args: str) -> tuple[int, dict]:
    out = tmp_path / "out.json"
    rc = main(["check", "--no-config", "-q", "--format", "json", "-o", str(out), *args])
    return rc, json.loads(out.read_text(encoding="utf-8"))


def target_problems(doc: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for t in doc["targets"] for f in t["findings"]]


def wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


# ---- 4: a missing file ----


@pytest.mark.parametrize("name", ["nope.whl", "dist/nope-1.0-py3-none-any.whl", "libnope.so"])
def test_a_missing_file_is_no_such_file_exit_2(tmp_path, monkeypatch, capsys, name):
    monkeypatch.chdir(tmp_path)
    rc = main(["check", "--no-config", "-q", "--no-timings", name])
    out = capsys.readouterr().out
    assert rc == 2
    assert f"E001 {name}: cannot read: no such file" in out
    assert "(distribution)" not in out


def test_a_bare_name_that_is_nothing_says_all_it_looked_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, doc = check_json(tmp_path, "no-such-thing-archaudit")
    assert rc == 2
    assert target_problems(doc) == [
        (
            "E001",
            "no-such-thing-archaudit: cannot read: no such file, directory or "
            "installed distribution 'no-such-thing-archaudit'. Fix: check the path "
            "and its permissions",
        )
    ]


# ---- 1: not a wheel ----


def test_a_whl_without_dist_info_is_refused_as_pip_refuses_it(tmp_path):
    """pip: '.dist-info directory not found'; check says the same, exit 2, and reads nothing."""
    p = wheel(tmp_path / "notawheel-1.0-py3-none-any.whl", {"notawheel/__init__.py": b""})
    rc, doc = check_json(tmp_path, str(p))
    assert rc == 2 and doc["passed"] is False
    ((code, message),) = target_problems(doc)
    assert code == "E004" and CODES[Code(code)].title == "not a wheel"
    assert message.endswith(
        "not a wheel: .dist-info directory not found (pip refuses to install it). Fix: check "
        "the built wheel (python -m build --wheel) or the library itself"
    )
    assert doc["targets"][0]["libraries"] == []


def test_a_whl_with_a_library_but_no_dist_info_is_refused_too(tmp_path):
    p = wheel(tmp_path / "x-1.0-py3-none-linux_x86_64.whl", {"x/libhost.so": HOST.read_bytes()})
    rc, doc = check_json(tmp_path, str(p))
    assert rc == 2 and [c for c, _ in target_problems(doc)] == ["E004"]


def test_a_whl_with_two_dist_info_directories_is_refused(tmp_path):
    p = wheel(tmp_path / "x-1.0-py3-none-any.whl", {"a-1.0.dist-info/WHEEL": b"", "b-1.0.dist-info/WHEEL": b""})
    rc, doc = check_json(tmp_path, str(p))
    ((code, message),) = target_problems(doc)
    assert rc == 2 and code == "E004"
    assert "multiple .dist-info directories found (a-1.0.dist-info, b-1.0.dist-info" in message


def test_the_example_wheel_is_a_wheel():
    assert core.example_wheel().endswith(".whl")
    rc = main(
        ["check", "--no-config", "-q", "--arch", "80;90", "--format", "json", "-o", "/dev/null", core.example_wheel()]
    )
    assert rc != 2


def _sdist(path: Path) -> Path:
    """An sdist as `python -m build --sdist` lays it out: name-version/ with PKG-INFO, gzipped tar."""
    with tarfile.open(path, "w:gz") as t:
        for name, data in {
            "pkg-1.0/PKG-INFO": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
            "pkg-1.0/pyproject.toml": b"[project]\nname = 'pkg'\nversion = '1.0'\n",
            "pkg-1.0/pkg/__init__.py": b"",
        }.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize(
    "name, make, words",
    [
        (
            "plain.zip",
            lambda p: wheel(p, {"a.txt": b"hello"}),
            "not a wheel: a zip archive whose name does not end in .whl",
        ),
        ("pkg-1.0.tar.gz", _sdist, "not a wheel: a gzip archive (an sdist?)"),
        ("notes.txt", lambda p: p.write_text("hello\n"), "not a wheel, library or device-code file"),
    ],
)
def test_a_file_that_is_no_wheel_and_no_library_is_exit_2_and_not_malformed_elf(tmp_path, name, make, words):
    p = tmp_path / name
    make(p)
    rc, doc = check_json(tmp_path, str(p))
    ((code, message),) = target_problems(doc)
    assert rc == 2 and code == "E004" and words in message, message
    assert "ELF" not in message.split(":")[1]
    assert doc["targets"][0]["libraries"] == []


def test_a_library_in_a_directory_is_still_read_however_it_is_named(tmp_path):
    """The refusal is for a file given by name only: a directory's files are chosen by content."""
    (tmp_path / "d").mkdir()
    shutil.copy(HOST, tmp_path / "d" / "kernels.dat")
    (tmp_path / "d" / "notes.txt").write_text("hello\n")
    rc, doc = check_json(tmp_path, str(tmp_path / "d"))
    assert rc == 0 and [lib["path"] for lib in doc["targets"][0]["libraries"]] == ["kernels.dat"]


@pytest.mark.parametrize(
    "ident, code, words",
    [
        (b"\x7fELF" + bytes(60), "E010", "malformed ELF: ELF class 0 is neither 32-bit (1) nor 64-bit (2)"),
        (b"\x7fELF\x01\x01" + bytes(58), "E010", "malformed ELF: 32-bit ELF header of version 0 and size 0"),
        (b"\x7fELF\x02\x02" + bytes(58), "E020", "unsupported library format: big-endian ELF is not supported"),
        (b"\x7fELF\x02\x07" + bytes(58), "E010", "malformed ELF: ELF data encoding 7 is neither"),
    ],
)
def test_a_short_elf_gets_a_code_whose_title_its_words_repeat(tmp_path, ident, code, words):
    p = wheel(
        tmp_path / "tiny-1.0-py3-none-linux_x86_64.whl",
        {"tiny/libfoo.so": ident, "tiny-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\n"},
    )
    rc, doc = check_json(tmp_path, str(p))
    (lib,) = doc["targets"][0]["libraries"]
    found = [(f["code"], f["message"]) for f in doc["targets"][0]["findings"]]
    assert rc == 1 and lib["path"] == "tiny/libfoo.so"
    assert [c for c, _ in found] == [code] and words in found[0][1], found
    title = CODES[Code(code)].title
    assert found[0][1].split(": ", 2)[1] == title, (found, title)


# ---- 6: a repeated --arch adds up ----


@pytest.mark.parametrize(
    "flags, claimed",
    [
        (["--arch", "80", "--arch", "90"], ["80", "90"]),
        (["--arch", "80;90-real", "--arch", "-gencode arch=compute_100,code=compute_100"], ["80", "90", "100"]),
        (["--arch", "8.0", "--arch", "80"], ["80"]),
    ],
)
def test_a_repeated_arch_claims_every_architecture_given(tmp_path, flags, claimed):
    rc, doc = check_json(tmp_path, *flags, core.example_wheel())
    assert doc["targets"][0]["claim"]["gpus"] == claimed, doc["targets"][0]["claim"]


def test_a_repeated_arch_keeps_sass_and_ptx_from_each(tmp_path):
    """`--arch 90-real --arch 90-virtual` claims SASS and PTX for 90, as `90-real;90-virtual` does."""
    _, both = check_json(tmp_path, "--arch", "90-real", "--arch", "90-virtual", core.example_wheel())
    _, one = check_json(tmp_path, "--arch", "90-real;90-virtual", core.example_wheel())
    assert one["targets"][0]["claim"]["archs"] == [{"target": "90", "sass": True, "ptx": True}]
    assert both["targets"][0]["claim"]["archs"] == one["targets"][0]["claim"]["archs"]


def test_an_amd_target_in_a_repeated_arch_beside_a_cuda_one_is_a_usage_error(tmp_path, capsys):
    rc = main(["check", "--no-config", "-q", "--arch", "80", "--arch", "gfx90a", core.example_wheel()])
    assert rc == 2 and "'gfx90a' is an AMD target" in capsys.readouterr().err


# ---- 3: what is not printable is escaped in every text format ----

HOSTILE = "pkg/lib\r\x1b[2K\x1b[1A\x1b[8m\u202eevil.so"


def _hostile_wheel(tmp_path: Path) -> Path:
    """A real nvcc-built sm_80 library under a name that, printed raw, would erase the line
    before it and hide what follows; claimed for 90, so it fails (G001)."""
    lib = (HERE / "fixtures" / "cuda" / "bin" / "lib_sm80.so").read_bytes()
    return wheel(
        tmp_path / "evil-1.0-py3-none-linux_x86_64.whl",
        {HOSTILE: lib, "evil-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\n"},
    )


@pytest.mark.parametrize("fmt", ["text", "markdown", "github"])
def test_a_member_name_cannot_move_the_cursor_or_hide_a_failure(tmp_path, fmt):
    p = _hostile_wheel(tmp_path)
    out = tmp_path / "out.txt"
    rc = main(["check", "--no-config", "-q", "--format", fmt, "--arch", "80;90", "-o", str(out), str(p)])
    text = out.read_text(encoding="utf-8")
    assert rc == 1
    assert not any(ch in text for ch in "\r\x1b\u202e"), repr(text)
    assert "pkg/lib\\r\\x1b[2K\\x1b[1A\\x1b[8m\\u202eevil.so" in text
    assert "G001" in text


def test_json_keeps_the_name_escaped_as_json_does(tmp_path):
    rc, doc = check_json(tmp_path, "--arch", "80;90", str(_hostile_wheel(tmp_path)))
    (lib,) = doc["targets"][0]["libraries"]
    assert rc == 1 and lib["path"] == "pkg/lib\\r\\x1b[2K\\x1b[1A\\x1b[8m\\u202eevil.so"


# ---- 11: the conventions of the tools users already run ----


def test_output_to_a_json_file_without_format_writes_json(tmp_path):
    out = tmp_path / "report.json"
    rc = main(["check", "--no-config", "-q", "-o", str(out), core.example_wheel()])
    assert rc == 1 and json.loads(out.read_text(encoding="utf-8"))["schema"] == "archaudit-report"
    md = tmp_path / "report.md"
    main(["check", "--no-config", "-q", "-o", str(md), core.example_wheel()])
    assert md.read_text(encoding="utf-8").startswith("#")
    txt = tmp_path / "report.txt"
    main(["check", "--no-config", "-q", "--format", "json", "-o", str(txt), core.example_wheel()])
    assert json.loads(txt.read_text(encoding="utf-8"))  # --format wins over the suffix


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """archaudit's stdout as a terminal (a pseudo-terminal) shows it."""
    import os
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-m", "archaudit", *args],
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
        timeout=120,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            block = os.read(leader, 65536)
        except OSError:
            break
        if not block:
            break
        chunks.append(block)
    os.close(leader)
    assert proc.returncode == 1
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pseudo-terminal")
def test_colour_on_a_terminal_unless_no_color_or_never():
    args = ["check", "--no-config", "-q", "--arch", "80;90", core.example_wheel()]
    env = {"NO_COLOR": "", "TERM": "xterm"}
    assert "\x1b[31m✗\x1b[0m G001" in _on_a_terminal(args, env)
    assert "\x1b[" not in _on_a_terminal(args, {**env, "NO_COLOR": "1"})
    assert "\x1b[" not in _on_a_terminal([*args, "--color", "never"], env)
    assert "\x1b[31m" in _on_a_terminal([*args, "--color", "always"], {**env, "NO_COLOR": "1"})


def test_no_colour_into_a_pipe_or_a_file(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "archaudit", "check", "--no-config", "-q", "--arch", "80;90", core.example_wheel()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "\x1b" not in r.stdout and "✗ G001" in r.stdout


@pytest.mark.parametrize(
    "argv, words",
    [
        (["chek", "x.whl"], "unknown command 'chek'; did you mean 'check'?"),
        (["check", "--no-config", "--example", "--gpu", "RTX 4099"], "not sm_XX; did you mean 'RTX 4090'?"),
    ],
)
def test_did_you_mean(capsys, argv, words):
    assert main(argv) == 2
    assert words in capsys.readouterr().err


def test_did_you_mean_a_config_key(tmp_path, capsys):
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text('[tool.archaudit]\ncuda_archs = "80"\n')
    assert main(["check", "--config", str(cfg), "--example"]) == 2
    assert "unknown key(s) in [tool.archaudit]: cuda_archs; did you mean 'cuda-archs'" in capsys.readouterr().err


def _flags(parser) -> list[tuple[str, str, object]]:
    import argparse

    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += [(f"{name} {flag}", flag, h) for _, flag, h in _flags(sub)]
        elif action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            out.append(("", action.option_strings[-1], action.help))
    return out


def test_every_flag_has_help_and_none_does_nothing():
    from archaudit.cli import build_parser

    flags = _flags(build_parser())
    assert [where for where, _, h in flags if not h] == []
    assert not any(flag == "--decode" for _, flag, _ in flags)
    assert any(where == "check --arch-style" for where, _, _ in flags)


def test_messages_hold_no_python_list_reprs(tmp_path):
    out = tmp_path / "out.txt"
    main(
        [
            "check",
            "--no-config",
            "-q",
            "-v",
            "--arch",
            "80;90",
            "-o",
            str(out),
            "--format",
            "text",
            core.example_wheel(),
        ]
    )
    text = out.read_text(encoding="utf-8")
    assert "['" not in text and "covers every claimed GPU architecture (80, 90)" in text


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is an optional extra (archaudit[ray])")
def test_ray_auto_without_a_cluster_is_one_usage_line_naming_ray_local(tmp_path):
    (tmp_path / "wh").mkdir()
    shutil.copy(core.example_wheel(), tmp_path / "wh")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "archaudit",
            "index",
            str(tmp_path / "wh"),
            "--db",
            str(tmp_path / "x.db"),
            "--ray",
            "auto",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "RAY_ADDRESS": ""},
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("archaudit: --ray auto: no Ray cluster to connect to") and "--ray local" in line


# ---- 7: C001 says what to do ----


def test_c001_on_a_third_party_wheel_says_to_ask_about_gpus(tmp_path):
    from wheels import fetch

    wheel_path = fetch("nvidia-curand", "10.4.5.25")
    rc, doc = check_json(tmp_path, str(wheel_path))
    c001 = [f["message"] for f in doc["targets"][0]["findings"] if f["code"] == "C001"]
    assert rc == 1 and len(c001) == 1
    assert "--gpu T4 --gpu H100" in c001[0] and "--arch '80;90'" in c001[0]
    rc, doc = check_json(tmp_path, "--gpu", "T4", "--gpu", "H100", str(wheel_path))
    assert "C001" not in {f["code"] for f in doc["targets"][0]["findings"]}


# ---- 5: what nvcc accepts, for --arch and --gpu alike ----


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--arch", "85"], "'sm_85' is not an architecture any nvcc from 10.0 to"),
        (["--arch", "compute_85"], "'compute_85' is not an architecture any nvcc"),
        (["--arch", "sm_800"], "'sm_800' is not an architecture any nvcc"),
        (["--arch", "sm_87a"], "'sm_87a' is not an architecture any nvcc"),
        (
            ["--arch", "50", "--cuda-version", "13.0"],
            "'sm_50' is not an architecture nvcc 13.0 accepts (it accepts sm_75",
        ),
        (["--gpu", "sm_85"], "--gpu 'sm_85': 'sm_85' is not an architecture any nvcc"),
        (["--gpu", "sm_61", "--cuda-version", "13.0"], "nvcc 10.0 to 12.9 accepts it (--cuda-version)"),
    ],
)
def test_an_architecture_nvcc_refuses_is_refused_with_true_words(capsys, flags, words):
    assert main(["check", "--no-config", "-q", *flags, core.example_wheel()]) == 2
    err = capsys.readouterr().err
    assert words in err and "not sm_XX" not in err, err


@pytest.mark.parametrize(
    "flags",
    [
        ["--arch", "sm_90a;sm_100f;80"],
        ["--arch", "50;61", "--cuda-version", "12.9"],
        ["--arch", "35;50"],
        ["--gpu", "sm_61"],
        ["--gpu", "sm_90"],
    ],
)
def test_what_nvcc_accepts_is_accepted(tmp_path, flags):
    rc, _ = check_json(tmp_path, *flags, core.example_wheel())
    assert rc in (0, 1)


# ---- 9: a directory of wheels gets one verdict and one time per wheel ----


def test_a_wheelhouse_is_one_target_per_wheel_with_its_own_time(tmp_path):
    """A directory of wheels (dist/, a wheelhouse) is judged as twine judges dist/*: each wheel
    its own target, verdict and time; the small wheel is not stamped with the large one's time."""
    from wheels import fetch

    house = tmp_path / "wheelhouse"
    house.mkdir()
    big = fetch("nvidia-curand", "10.4.5.25")
    shutil.copy(big, house / big.name)
    shutil.copy(core.example_wheel(), house)
    rc, doc = check_json(tmp_path, "--arch", "80;90", str(house))
    names = [t["distribution"] for t in doc["targets"]]
    assert names == ["gpu_example-1.0", "nvidia_curand-10.4.5.25"]
    assert all(t["kind"] == "wheel" for t in doc["targets"])
    # each its own: the bytes each target read are those it reads alone (a count, not a time, so a
    # loaded machine cannot fail it); each has a time of its own
    alone = [
        check_json(tmp_path, "--arch", "80;90", str(w))[1]["targets"][0]["bytes_read"]
        for w in (core.example_wheel(), big)
    ]
    assert [t["bytes_read"] for t in doc["targets"]] == alone and alone[0] < alone[1]
    assert all(isinstance(t["seconds"], float) for t in doc["targets"])
    _, globbed = check_json(tmp_path, "--arch", "80;90", *sorted(str(p) for p in house.iterdir()))
    assert [t["distribution"] for t in globbed["targets"]] == names


def test_a_tree_with_libraries_and_a_wheel_stays_one_directory(tmp_path):
    (tmp_path / "d").mkdir()
    shutil.copy(HOST, tmp_path / "d" / "libhost.so")
    shutil.copy(core.example_wheel(), tmp_path / "d")
    rc, doc = check_json(tmp_path, str(tmp_path / "d"))
    assert [t["kind"] for t in doc["targets"]] == ["directory"]


# ---- 8 (in part) and 2 (the text's flood): the default fits a screen ----

GPUS = ["--gpu", "H100", "--gpu", "H200", "--gpu", "GH200", "--gpu", "RTX 5090", "--gpu", "B200", "--gpu", "L4"]


def _text(tmp_path: Path, *args: str) -> str:
    out = tmp_path / "out.txt"
    main(["check", "--no-config", "-q", "--no-timings", "--format", "text", "-o", str(out), *args])
    return out.read_text(encoding="utf-8")


def test_findings_of_one_code_on_one_library_are_listed_three_times_then_counted(tmp_path):
    text = _text(tmp_path, *GPUS, core.example_wheel())
    g009 = [line for line in text.splitlines() if line.startswith("✗ G009 gpu_example/libshim.so on ")]
    assert len(g009) == 3
    assert "✗ G009 gpu_example/libshim.so: 2 more G009 findings (-v or --format json lists them)" in text
    assert "· 7 information findings (G008 x7; -v lists them)" in text
    verbose = _text(tmp_path, "-v", *GPUS, core.example_wheel())
    assert len([line for line in verbose.splitlines() if line.startswith("✗ G009 ")]) == 5
    assert verbose.count("· G008 ") == 7
    rc, doc = check_json(tmp_path, *GPUS, core.example_wheel())
    assert [f["code"] for f in doc["targets"][0]["findings"]].count("G009") == 5  # JSON keeps every one


def test_default_lines_are_cut_at_240_characters_and_verbose_keeps_them(tmp_path):
    long_name = "pkg/" + "x" * 300 + ".so"
    lib = (HERE / "fixtures" / "cuda" / "bin" / "lib_sm80.so").read_bytes()
    p = wheel(tmp_path / "long-1.0-py3-none-linux_x86_64.whl", {long_name: lib, "long-1.0.dist-info/WHEEL": b""})
    text = _text(tmp_path, "--arch", "80;90", str(p))
    g001 = [line for line in text.splitlines() if line.startswith("✗ G001")]
    assert g001 and all(len(line) <= 240 for line in g001) and g001[0].endswith("…")
    assert any(len(line) > 300 for line in _text(tmp_path, "-v", "--arch", "80;90", str(p)).splitlines())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a pseudo-terminal")
def test_on_a_terminal_lines_are_cut_to_its_width():
    text = _on_a_terminal(
        ["check", "--no-config", "-q", "--arch", "80;90", core.example_wheel()],
        {"NO_COLOR": "1", "COLUMNS": "100", "TERM": "xterm"},
    )
    g001 = [line.rstrip("\r") for line in text.splitlines() if line.startswith("✗ G001")]
    assert g001 and all(len(line) <= 100 for line in g001) and g001[0].endswith("…"), g001
