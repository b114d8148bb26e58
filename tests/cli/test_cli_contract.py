"""What the command line promises whatever it is given: filters never hide a failure, a broken
configuration is never skipped, bad values and failed writes are exit 2 with one line, the
core's check() is what `archaudit check` renders, and text output says what it suppressed."""

from __future__ import annotations

import json
import shutil
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from archaudit import core
from archaudit.cli import main
from archaudit.judge.filters import never_hidden

HERE = Path(__file__).resolve().parents[1]
BIN = HERE / "fixtures" / "cuda" / "bin"
EXAMPLE = "gpu_example-1.0-py3-none-linux_x86_64.whl"


def run(*args: str) -> tuple[int, dict]:
    rc = main(["check", "--no-config", "-q", "--format", "json", "-o", "out.json", *args])
    doc = json.loads(Path("out.json").read_text(encoding="utf-8")) if rc != 2 else {}
    Path("out.json").unlink(missing_ok=True)
    return rc, doc


def codes(doc: dict) -> set[str]:
    return {f["code"] for t in doc["targets"] for f in t["findings"]}


def text(*args: str) -> tuple[int, str]:
    rc = main(["check", "--no-config", "-q", "--no-timings", "-o", "out.txt", *args])
    return rc, Path("out.txt").read_text(encoding="utf-8")


def broken_wheel(path: Path) -> Path:
    """The example wheel plus a member named like a library that is not an ELF (E010)."""
    shutil.copy(core.example_wheel(), path)
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("gpu_example/libbroken.so", b"INPUT(-lfoo)\n")
    return path


def cpu_wheel(path: Path) -> Path:
    """A wheel whose only library is a host ELF without device code (G006 under a claim)."""
    with zipfile.ZipFile(path, "w") as z:
        z.write(BIN / "lib_host.so", "cpu/libhost.so")
        z.writestr("cpu-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: cpu\nVersion: 1.0\n")
    return path


# ---- filters: what --select, --ignore and ignore-library hide, and what they never hide ----


def test_select_splits_on_commas(scratch):
    rc, doc = run("--arch", "80,90", "--select", "G001,K001", EXAMPLE)
    assert rc == 1 and codes(doc) == {"G001"}
    rc, doc = run("--arch", "80,90", "--select", "K001, D002", EXAMPLE)
    assert rc == 0 and codes(doc) == {"D002"}


@pytest.mark.parametrize(
    "flag, pattern, named",
    [
        ("--select", "", "empty code pattern"),
        ("--select", "G001,", "empty code pattern"),
        ("--ignore", ",", "empty code pattern"),
        ("--select", "GOO1", "matches no finding code"),  # letter O: would silently select nothing
        ("--ignore", "E", "cannot be ignored"),
        ("--ignore", "E013", "cannot be ignored"),
        ("--ignore", "C001", "cannot be ignored"),
    ],
)
def test_bad_patterns_exit_2(scratch, capsys, flag, pattern, named):
    rc, _ = run("--arch", "80,90", flag, pattern, EXAMPLE)
    err = capsys.readouterr().err
    assert rc == 2 and named in err and len(err.strip().splitlines()) == 1


def test_no_filter_hides_unreadable_input(scratch):
    broken_wheel(scratch / "b-1.0-py3-none-linux_x86_64.whl")
    for filters in (["--select", "G"], ["--select", "G001,K001"], ["--select", "D"], ["--ignore", "G,K,D,C002"]):
        rc, doc = run("--arch", "80", *filters, "b-1.0-py3-none-linux_x86_64.whl")
        assert rc == 1 and "E010" in codes(doc), filters


def test_no_filter_hides_missing_claim_or_device_code(scratch):
    rc, doc = run("--select", "G", EXAMPLE)
    assert rc == 1 and "C001" in codes(doc)
    cpu_wheel(scratch / "cpu-1.0-py3-none-linux_x86_64.whl")
    rc, doc = run("--arch", "80", "--ignore", "G", "cpu-1.0-py3-none-linux_x86_64.whl")
    assert rc == 1 and "G006" in codes(doc)
    assert all(never_hidden(c) for c in ("E002", "E099", "C001", "G006"))
    assert not any(never_hidden(c) for c in ("G001", "K001", "D001", "C002", "X001"))


def test_ignore_library_with_empty_code_exits_2(scratch, capsys):
    (scratch / "pyproject.toml").write_text(
        '[tool.archaudit]\ncuda-archs = "80;90"\n[[tool.archaudit.ignore-library]]\ncode = ""\nlibrary = "*"\n'
    )
    assert main(["check", "-q", EXAMPLE]) == 2
    assert "empty code" in capsys.readouterr().err


# ---- configuration discovery: which pyproject.toml is read ----


def test_broken_pyproject_is_not_skipped_in_discovery(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.archaudit]\ncuda-archs = "80"\n')
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[tool.archaudit\ncuda-archs = "80;90"\n')  # broken, nearer
    shutil.copy(core.example_wheel(), inner / EXAMPLE)
    monkeypatch.chdir(inner)
    assert main(["check", "-q", EXAMPLE]) == 2  # the parent's claim (80, which passes) is not used
    err = capsys.readouterr().err
    assert "not valid TOML" in err and str(inner / "pyproject.toml") in err


def test_config_format_is_validated(scratch, capsys):
    (scratch / "pyproject.toml").write_text('[tool.archaudit]\nformat = "xml"\n')
    assert main(["check", "-q", "--arch", "80", EXAMPLE]) == 2
    assert "format must be one of" in capsys.readouterr().err


# ---- errors in one line, numbers and claims refused at the door, core.check as the CLI renders it ----


@pytest.mark.parametrize("dest", ["/nonexistent/dir/x.json", "/dev/full"])
def test_unwritable_output_is_exit_2_in_one_line(scratch, capsys, dest):
    if not Path(dest).parent.exists() and dest == "/dev/full":
        pytest.skip("no /dev/full here")
    rc = main(["check", "--no-config", "-q", "--arch", "80", "-o", dest, EXAMPLE])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot write the report" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_internal_error_is_exit_2_in_one_line(scratch, capsys, monkeypatch):
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(core, "check", broken)  # an unexpected exception anywhere below the CLI
    rc = main(["check", "--no-config", "-q", "--arch", "80", EXAMPLE])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip() == "archaudit: internal error: RuntimeError: simulated bug (please report it)"


@pytest.mark.parametrize(
    "flag, value",
    [("--max-payload", "-1"), ("--max-payload", "0"), ("-j", "0"), ("-j", "-3"), ("--max-payload", "1\u0660")],
)
def test_numbers_must_be_positive(scratch, capsys, flag, value):
    with pytest.raises(SystemExit) as exit_:
        main(["check", "--no-config", "-q", "--arch", "80", flag, value, EXAMPLE])
    assert exit_.value.code == 2 and "positive whole number" in capsys.readouterr().err


def test_non_ascii_digit_claim_exits_2(scratch, capsys):
    rc, _ = run("--arch", "8\u0660", EXAMPLE)
    assert rc == 2 and "C002" in capsys.readouterr().err


# ---- one pipeline ----


def test_core_check_pauses_the_cyclic_collector_and_restores_it(scratch):
    """The collector is off while the readers run (as each library is read, seen through the
    progress counters the readers update), and afterwards as the caller had it."""
    import gc

    from archaudit.claims import parse_claim
    from archaudit.read.artifacts import Progress

    class Watched(Progress):
        states: list[bool] = []

        def add(self, nbytes: int = 0, libraries: int = 0) -> None:
            self.states.append(gc.isenabled())
            super().add(nbytes, libraries)

    claim = parse_claim("80,90", "--arch")
    watched = Watched()
    assert gc.isenabled()
    report = core.check([EXAMPLE], claim, progress=watched)
    assert report.exit_code == 1 and watched.states and not any(watched.states) and gc.isenabled()
    gc.disable()
    try:
        core.check([EXAMPLE], claim)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_command_freezes_what_the_run_leaves_for_the_exit(scratch):
    """`archaudit` (the console script, entry()) answers as main() does, then leaves the run's
    objects out of the collector's reach, so the interpreter's exit does not walk them."""
    import gc

    from archaudit.cli import entry

    args = ["check", "--no-config", "-q", "--arch", "80,90", EXAMPLE]
    before = gc.get_freeze_count()  # not 0 where the test process froze objects of its own (a mutation run's forks)
    assert main(args) == 1 and gc.get_freeze_count() == before
    try:
        assert entry(args) == 1 and gc.get_freeze_count() > before
    finally:
        gc.unfreeze()


def test_version_matches_the_package_metadata(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"archaudit {metadata.version('archaudit')}"


# ---- reports that must not mislead ----


@pytest.mark.parametrize("args, rule", [(["--ignore", "G001"], "ignore G001"), (["--select", "D"], "select D")])
def test_text_says_what_was_suppressed(scratch, args, rule):
    rc, out = text("--arch", "80;90", *args, EXAMPLE)
    assert rc == 0
    assert "✗ misses 90 (suppressed)" in out
    assert f"- suppressed by {rule}: G001 x1 (gpu_example/libshim.so)" in out
    last = out.strip().splitlines()[-1]
    assert last == f"✓ passes only because 1 error finding is suppressed (G001 x1 by {rule})"
    assert "device code covers every claimed GPU architecture" not in out


def test_text_says_what_ignore_library_suppressed(scratch):
    (scratch / "pyproject.toml").write_text(
        '[tool.archaudit]\ncuda-archs = "80;90"\n[[tool.archaudit.ignore-library]]\ncode = "G001"\n'
        'library = "libshim.so"\nreason = "loaded only on A100"\n'
    )
    assert main(["check", "-q", "-o", "out.txt", EXAMPLE]) == 0
    out = Path("out.txt").read_text(encoding="utf-8")
    assert "- suppressed by ignore-library G001 for libshim.so (loaded only on A100): G001 x1" in out
    assert "passes only because 1 error finding is suppressed" in out
    rc = main(["check", "-q", "--format", "json", "-o", "out.json", EXAMPLE])
    doc = json.loads(Path("out.json").read_text(encoding="utf-8"))
    assert rc == 0 and [s["suppressed_by"] for s in doc["suppressed"]] == [
        "ignore-library G001 for libshim.so (loaded only on A100)"
    ]
    rc = main(["check", "-q", "--format", "markdown", "-o", "out.md", EXAMPLE])
    md = Path("out.md").read_text(encoding="utf-8")
    assert "passes only because error findings are suppressed" in md and "misses 90 (suppressed)" in md


@pytest.mark.parametrize("gpu, rc", [("RTX 4090", 0), ("A100", 0), ("H100", 1), ("sm_90", 1)])
def test_gpu_question_without_claim_is_answered_by_the_exit_code(scratch, gpu, rc):
    code, doc = run("--gpu", gpu, EXAMPLE)
    assert code == rc and "C001" not in codes(doc)
    answers = {f["code"] for t in doc["targets"] for f in t["findings"] if f["code"] in ("G008", "G009")}
    assert answers == ({"G008"} if rc == 0 else {"G008", "G009"})


def test_gfx_targets_given_to_arch(scratch, capsys):
    code, doc = run("--arch", "gfx90a;gfx942", EXAMPLE)  # routed to the AMD claim
    assert code == 1 and doc["targets"][0]["claim"] is None and "C001" in codes(doc)  # CUDA code, no CUDA claim
    code, _ = run("--arch", "80;gfx90a", EXAMPLE)
    err = capsys.readouterr().err
    assert code == 2 and "'gfx90a' is an AMD target" in err and "--amd-arch" in err


def test_kernel_counts_are_grammatical(scratch):
    _, out = text("--arch", "80", "--detail", "kernels", EXAMPLE)
    assert "[1 kernel: axpy]" in out and "[1 kernels" not in out


def test_nothing_judged_is_not_shown_as_a_pass(scratch):
    """Without a claim (C001) the libraries were judged by nothing: no ✓ in their verdict."""
    rc, out = text(EXAMPLE)
    assert rc == 1 and "C001" in out
    rows = [line for line in out.splitlines() if line.startswith("  gpu_example/")]
    assert rows and all(line.endswith("? no claim to judge by") for line in rows)
    rc = main(["check", "--no-config", "-q", "--format", "markdown", "-o", "out.md", EXAMPLE])
    md = Path("out.md").read_text(encoding="utf-8")
    assert rc == 1 and "| ❓ no claim to judge by |" in md and "✅ no claim" not in md


# ---- imports: a subcommand imports what it runs, parsing imports options only ----


def _imported(code: str) -> set[str]:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE,
    )
    return set(out.stdout.split())


NOT_FOR_CHECK = {
    "archaudit.index.engine",
    "archaudit.index.sources",
    "archaudit.index.store",
    "archaudit.smoke.runner",
    "archaudit.smoke.child",
    "archaudit.report.formats",
    "archaudit.judge.diff",
    "http.client",
    "sqlite3",
    "multiprocessing",
    "xml.etree.ElementTree",
}


def test_parsing_the_command_line_imports_no_subcommand_machinery():
    mods = _imported("import archaudit.cli; archaudit.cli.build_parser().parse_args(['check', 'x.whl'])")
    assert not mods & (NOT_FOR_CHECK | {"archaudit.core", "archaudit.read.scan", "archaudit.judge.audit", "tomllib"})


def test_check_imports_neither_index_nor_smoke_nor_the_other_formats():
    target = str(BIN / "lib_multi.so")
    mods = _imported(
        f"import archaudit.cli, contextlib, io\nwith contextlib.redirect_stdout(io.StringIO()):\n"
        f"    archaudit.cli.main(['check', '--no-config', '-q', '--format', 'json', {target!r}])"
    )
    assert {"archaudit.core", "archaudit.read.scan", "archaudit.judge.audit", "archaudit.report.render"} <= mods
    assert not mods & NOT_FOR_CHECK
