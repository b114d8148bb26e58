"""Hostile names through every renderer (issue 38, item 3).

A real wheel (nvcc-built libraries, tests/fixtures/cuda/bin) whose members are named to attack
each format: raw HTML, Markdown links and images, table pipes, code spans, emphasis, entities,
ANSI escapes, a bidirectional override, a percent-encoded newline and a workflow command. Each
name goes through check, diff, smoke (its renderers, on a report of the real load probe) and
index (query reports and the HTML atlas), every format, and each output must show the names
as text, never as markup of its format.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from archaudit.cli import main
from archaudit.printable import markdown
from archaudit.report import names

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
HOSTILE = [
    "x/lib<img src=x onerror=alert(1)><script>alert(2)</script>.so",
    "x/lib[click](http:/evil.example)![pixel](http:/evil.example/p.png).so",
    "x/lib|col|`code`*em*_u_~s~&amp;.so",
    "x/lib\x1b[2K\x1b]8;;http:/evil\x07\u202eos.so",
    "x/lib%0A::error::forged%0D.so",
]
CHECK_FORMATS = ("text", "json", "markdown", "github", "junit", "sarif")
LINK = re.compile(r"(?<!\\)\[[^\]]*(?<!\\)\]\(")  # a Markdown link or image: [text](


def hostile_wheel(dest: Path, version: str, lib: str) -> Path:
    """A wheel pip installs (RECORD and all), each hostile member a real nvcc-built library."""
    path = dest / f"evil-{version}-py3-none-manylinux_2_28_x86_64.whl"
    info = f"evil-{version}.dist-info"
    files = {
        "x/__init__.py": b"",
        **{m: (BIN / lib).read_bytes() for m in HOSTILE},
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: evil\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-any\n",
    }
    record = (
        "".join(
            f'"{n}",sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()},{len(d)}\n'
            for n, d in files.items()
        )
        + f"{info}/RECORD,,\n"
    )
    with zipfile.ZipFile(path, "w") as z:
        for n, d in files.items():
            z.writestr(n, d)
        z.writestr(f"{info}/RECORD", record)
    return path


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("hostile-names")
    return hostile_wheel(d, "1.0", "lib_multi.so"), hostile_wheel(d, "2.0", "lib_sm80.so")


def assert_text_safe(out: str, fmt: str) -> None:
    """What every format guarantees: no control or bidi character of a name reaches the output raw."""
    if fmt in ("text", "markdown", "github"):
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out and "\r" not in out


def assert_markdown_safe(out: str) -> None:
    out = re.sub(r"`[^`]*`", "`code`", out)  # a code span shows its text as written: HTML and links stay text
    assert "<img" not in out and "<script" not in out
    assert not LINK.search(out), LINK.search(out)
    for line in out.splitlines():
        if line.startswith("|"):  # a table row: only its own cell separators are unescaped pipes
            cells = re.split(r"(?<!\\)\|", line)
            header = re.split(r"(?<!\\)\|", next(x for x in out.splitlines() if x.startswith("|")))
            assert len(cells) == len(header) or "---" in line or line.count("`") % 2 == 0, line
    assert "&amp;.so" not in out.replace("&amp;amp;", "")  # the name's entity is shown as written


def assert_github_safe(out: str) -> None:
    for line in out.splitlines():
        if line.startswith("::"):
            assert re.match(r"^::(error|warning|notice)( [^:]*)?::", line), line
            assert "::error::forged" not in line.split("::", 2)[2] or "%250A" in line
        else:
            assert line.startswith("archaudit"), line  # no line of the log begins with a name


def check_format(out: str, fmt: str) -> None:
    assert_text_safe(out, fmt)
    if fmt == "markdown":
        assert_markdown_safe(out)
    elif fmt == "github":
        assert_github_safe(out)
    elif fmt == "junit":
        root = ET.fromstring(out)
        shown = " ".join(c.get("name", "") for c in root.iter("testcase"))
        assert "<img src=x" in shown and "[click](http:/evil.example)" in shown  # as text, parsed back
    elif fmt == "sarif":
        doc = json.loads(out)
        uris = [
            loc["physicalLocation"]["artifactLocation"]["uri"]
            for run in doc["runs"]
            for r in run["results"]
            for loc in r.get("locations", [])
        ]
        assert uris and all(not re.search(r"[<>|\[\] `\x00-\x1f]", u) for u in uris), uris
    elif fmt == "json":
        json.loads(out)


@pytest.mark.parametrize("fmt", CHECK_FORMATS)
def test_check_renders_hostile_member_names_as_text(wheels, tmp_path, fmt):
    out = tmp_path / f"check.{fmt}"
    assert main(["check", str(wheels[1]), "--arch", "90", "--no-config", "--format", fmt, "-o", str(out)]) == 1
    text = out.read_text(encoding="utf-8")
    check_format(text, fmt)
    if fmt == "markdown":
        assert markdown("lib[click](http:/evil.example)") in text  # the name is there, escaped


@pytest.mark.parametrize("fmt", CHECK_FORMATS)
def test_diff_renders_hostile_member_names_as_text(wheels, tmp_path, fmt):
    out = tmp_path / f"diff.{fmt}"
    assert main(["diff", str(wheels[0]), str(wheels[1]), "--no-config", "--format", fmt, "-o", str(out)]) == 1
    check_format(out.read_text(encoding="utf-8"), fmt)


def test_smoke_renders_hostile_member_names_as_text(wheels, tmp_path):
    from archaudit.report.smoke import render
    from archaudit.smoke import runner

    report = runner.run_smoke(str(wheels[1]), require_gpu=False, timeout=120.0, probes=["load"])
    subjects = {r.subject for r in report.rows}
    assert any("lib[click]" in s for s in subjects), subjects  # the hostile names made it into the rows
    from archaudit.cli.common import terminal_safe

    for fmt in CHECK_FORMATS:
        out = terminal_safe(render(report, fmt), fmt)
        assert_text_safe(out, fmt)
        if fmt == "markdown":
            assert_markdown_safe(out)
        elif fmt == "github":
            assert_github_safe(out)
        elif fmt == "junit":
            ET.fromstring(out)
        elif fmt in ("json", "sarif"):
            json.loads(out)


def test_index_queries_and_the_atlas_render_hostile_names_as_text(wheels, tmp_path):
    db = tmp_path / "i.db"
    assert (
        main(
            [
                "index",
                str(wheels[0].parent),
                "--arch",
                "90",
                "--db",
                str(db),
                "-q",
                "-j",
                "1",
                "-o",
                str(tmp_path / "s"),
            ]
        )
        == 1
    )
    for fmt in ("text", "json", "markdown"):
        out = tmp_path / f"lost.{fmt}"
        assert main(["query", "lost", "--project", "evil", "--db", str(db), "--format", fmt, "-o", str(out)]) in (0, 1)
        text = out.read_text(encoding="utf-8")
        assert "lib" in text
        assert_text_safe(text, fmt)
        if fmt == "markdown":
            assert_markdown_safe(text)
    page = tmp_path / "atlas.html"
    assert main(["query", "html", "--db", str(db), "-o", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert "<img src=x" not in html and "<script>alert" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html  # shown, escaped


def test_a_name_that_demangles_to_something_huge_is_shown_cut_with_its_mangled_form():
    # 300 nested template arguments: c++filt (or the pure reading) gives thousands of characters
    huge = "_ZN2ns1kI" + "N2ns1aI" * 150 + "iE" + "EE" * 150 + "EEvv"
    pathological = "_Z" + "9" * 5000 + "x"  # a length no identifier has: never parsed as a number
    too_long = "_Z1k" + "i" * (names.MAX_MANGLED + 1)
    for use in (True, False):
        short = names.short_names([huge, pathological, too_long], use_cxxfilt=use)
        assert all(len(v) <= names.MAX_SHOWN + names.MANGLED_SHOWN + 40 for v in short.values()), short
        assert len(short[too_long]) <= names.FALLBACK_CHARS
    wide = names.short_names(["_Z1k" + "PFvvE" * 3000], use_cxxfilt=True)  # a long parameter list
    assert all(len(v) <= names.MAX_SHOWN + names.MANGLED_SHOWN + 40 for v in wide.values())


def test_cxxfilt_is_given_at_most_the_report_bound():
    many = [f"_Z1k{'i' * (i % 50)}{i}" for i in range(names.MAX_CXXFILT_NAMES + 10)]
    assert len(names._for_cxxfilt(sorted(set(many)))) == names.MAX_CXXFILT_NAMES
