"""archaudit smoke against a wheel whose code rewrites archaudit itself (issue 38, item 1).

The wheel ships a shared library whose constructor (run by the load probe's dlopen, in a smoke
child, as the same user) rewrites archaudit's `report/sarif.py` to write an empty SARIF, breaks
`data/cuda.json`, and drops a `.pth` file into the site-packages archaudit runs from. The attack
runs against a COPY of archaudit installed into a throwaway environment, never the repository's
files. The run must fail naming what changed, and leave the copy as it found it.

Nothing here needs a GPU: `--require-gpu` fails for want of one, and the rewrite is what is tested.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import archaudit
from reference_tools import needs_tool

HERE = Path(__file__).parents[1]
MAKE_WHEEL = HERE / "fixtures" / "smoke" / "make_wheel.py"
PACKAGE = Path(archaudit.__file__).resolve().parent

ATTACK = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void put(const char *dir, const char *rel, const char *mode, const char *text) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, mode);
    if (f) { fputs(text, f); fclose(f); }
}
__attribute__((constructor)) static void attack(void) {
    const char *site = getenv("HOSTILE_SITE"), *mark = getenv("HOSTILE_MARK");
    if (!site || !mark) return;
    put(site, "archaudit/report/sarif.py", "a",
        "\ndef render_smoke(*a, **k):\n    return '{\"version\": \"2.1.0\", \"runs\": []}'\n");
    put(site, "archaudit/data/cuda.json", "w", "{}\n");
    put(site, "archaudit/data/planted.json", "w", "{}\n");
    put(site, "zz_hostile.pth", "w", "import os; os.environ['ARCHAUDIT_OWNED'] = '1'\n");
    put(mark, "ran", "w", "the constructor ran\n");
}
int hostile_answer(void) { return 42; }
"""


def copy_of_archaudit(tmp: Path) -> tuple[Path, Path]:
    """(python, site-packages) of a fresh environment holding a copy of archaudit's package; its
    dependencies come from this interpreter's site-packages through a path line (whose own .pth
    files, the editable install's among them, are not run)."""
    env = tmp / "archaudit-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    shutil.copytree(PACKAGE, site / "archaudit", ignore=shutil.ignore_patterns("__pycache__"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = subprocess.run(
        [str(python), "-c", "import archaudit; print(archaudit.__file__)"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert Path(where).resolve().is_relative_to(site.resolve()), where  # the copy, never the repository
    return python, site


def attack_wheel(tmp: Path) -> Path:
    src = tmp / "attack.c"
    src.write_text(ATTACK)
    lib = tmp / "libattack.so"
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-Wl,--build-id=none", "-o", str(lib), str(src)], check=True)
    stage = tmp / "stage"
    (stage / "smoke_attack").mkdir(parents=True)
    (stage / "smoke_attack" / "__init__.py").write_text('"""a wheel whose library rewrites archaudit"""\n')
    shutil.copy(lib, stage / "smoke_attack" / "libattack.so")
    out = tmp / "wheels"
    out.mkdir()
    subprocess.run(
        [
            sys.executable,
            str(MAKE_WHEEL),
            str(out),
            "smoke_attack",
            "1.0",
            f"smoke_attack/__init__.py={stage / 'smoke_attack' / '__init__.py'}",
            f"smoke_attack/libattack.so={stage / 'smoke_attack' / 'libattack.so'}",
        ],
        check=True,
        capture_output=True,
    )
    (whl,) = out.glob("smoke_attack-1.0-*.whl")
    return whl


def files_of(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def untimed(text: str) -> object:
    """A JSON report without its timings."""

    def walk(x: object) -> object:
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items() if k != "seconds"}
        return [walk(v) for v in x] if isinstance(x, list) else x

    return walk(json.loads(text))


@needs_tool("gcc (apt-get install gcc)", shutil.which("gcc"))
def test_a_wheel_that_rewrites_archaudit_fails_the_run_and_is_undone(tmp_path):
    python, site = copy_of_archaudit(tmp_path)
    whl = attack_wheel(tmp_path)
    mark = tmp_path / "mark"
    mark.mkdir()
    before = files_of(site)
    example = [str(python), "-m", "archaudit", "check", "--example", "--format", "json"]
    check_before = subprocess.run(example, capture_output=True, text=True, cwd=tmp_path)
    out = tmp_path / "report.sarif"
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(HOSTILE_SITE=str(site), HOSTILE_MARK=str(mark), TMPDIR=str(work))
    r = subprocess.run(
        [
            str(python),
            "-m",
            "archaudit",
            "smoke",
            str(whl),
            "--probe",
            "load",
            "--require-gpu",
            "--format",
            "sarif",
            "-o",
            str(out),
            "--timeout",
            "120",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert (mark / "ran").exists(), "the attack never ran: the test proves nothing"
    assert r.returncode == 1, r.stdout + r.stderr
    sarif = json.loads(out.read_text())
    results = [res for run in sarif["runs"] for res in run["results"]]
    assert results, "an empty SARIF: the rewritten sarif.py wrote the verdict"
    said = " ".join(res["message"]["text"] for res in results)
    assert "archaudit's own installation changed" in said
    for name in ("report/sarif.py", "data/cuda.json", "data/planted.json", "zz_hostile.pth"):
        assert name in said, name
    # the environment is as it was found: every file back, nothing added
    assert files_of(site) == before
    assert not (site / "zz_hostile.pth").exists()
    check_after = subprocess.run(example, capture_output=True, text=True, cwd=tmp_path)
    assert (check_after.returncode, untimed(check_after.stdout)) == (
        check_before.returncode,
        untimed(check_before.stdout),
    )
    assert list(work.iterdir()) == []


def test_the_snapshot_names_and_restores_each_kind_of_change(tmp_path):
    from archaudit.smoke import integrity

    pkg = tmp_path / "pkg"
    (pkg / "data").mkdir(parents=True)
    (pkg / "a.py").write_text("A = 1\n")
    (pkg / "data" / "t.json").write_text("{}\n")
    site = tmp_path / "site"
    site.mkdir()
    (site / "keep.pth").write_text("/somewhere\n")
    snap = integrity.snapshot(str(pkg), sites=(str(site),))
    assert integrity.verify(snap) == ()
    (pkg / "a.py").write_text("A = 2\n")
    (pkg / "data" / "t.json").unlink()
    (pkg / "data" / "new.json").write_text("{}\n")
    (site / "evil.pth").write_text("import os\n")
    (site / "keep.pth").write_text("/elsewhere\n")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"planted")
    changes = integrity.verify(snap)
    said = {(Path(c.path).name, c.what, c.restored) for c in changes}
    assert said == {
        ("a.py", "changed", True),
        ("t.json", "removed", True),
        ("new.json", "added", True),
        ("evil.pth", "added", True),
        ("keep.pth", "changed", True),
    }
    assert (pkg / "a.py").read_text() == "A = 1\n" and (pkg / "data" / "t.json").read_text() == "{}\n"
    assert not (pkg / "data" / "new.json").exists() and not (site / "evil.pth").exists()
    assert not (pkg / "__pycache__").exists()  # planted bytecode goes too
    assert (site / "keep.pth").read_text() == "/somewhere\n"
    assert integrity.verify(snap) == ()
