"""The README says what the code does: every command it shows parses, every command whose output
it shows prints exactly that output and exit status, and its list of finding codes is complete."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import pytest

from archaudit.cli import build_parser, main
from archaudit.findings import CODES

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, re.S)

sys.path.insert(0, os.path.dirname(__file__))
from wheels import fetch  # noqa: E402


def _command_lines() -> list[str]:
    """Every `archaudit ...` command the README shows in a shell or console block."""
    out = []
    for lang, body in BLOCKS:
        if lang not in ("sh", "console"):
            continue
        for line in body.splitlines():
            line = line.removeprefix("$ ")
            for part in line.split("&&"):
                part = part.strip()
                if part.startswith("archaudit "):
                    out.append(part)
    return out


def _console_blocks() -> list[tuple[str, str, int]]:
    """(command, output, exit status) of each console block: `$ archaudit ...`, what it prints,
    and a last line `[exit N]`."""
    out = []
    for lang, body in BLOCKS:
        if lang != "console":
            continue
        lines = body.rstrip("\n").splitlines()
        if not lines or not lines[0].startswith("$ archaudit "):
            continue
        status = re.fullmatch(r"\[exit (\d+)\]", lines[-1])
        assert status, f"a console block ends with its exit status as '[exit N]': {lines[0]}"
        out.append((lines[0][2:], "\n".join(lines[1:-1]) + "\n", int(status.group(1))))
    return out


def test_every_finding_code_is_documented() -> None:
    table = README[README.index("### Finding codes") :]
    for code in CODES:
        assert re.search(rf"\b{code}\b", table), code


def test_the_readme_shows_commands_and_their_output() -> None:
    assert len(_command_lines()) >= 10 and len(_console_blocks()) >= 2


@pytest.mark.parametrize("command", _command_lines())
def test_every_command_shown_parses(command: str) -> None:
    argv = shlex.split(command, comments=True)[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as e:  # --help and --version exit 0; a usage error exits 2
        assert e.code == 0, command


def _real_wheel(token: str) -> str:
    """A wheel file name the README shows, fetched into the test cache (the README shows no paths)."""
    m = re.fullmatch(r"([A-Za-z0-9_]+)-([^-]+)-.*\.whl", token)
    if not m or os.path.exists(token):
        return token
    return str(fetch(m.group(1).replace("_", "-"), m.group(2), filename=token))


def _console_param(command: str, output: str, status: int) -> object:
    """A block that reads a real wheel from the index (torch's, 555 MB) is the census tier's."""
    real = any(re.fullmatch(r"[A-Za-z0-9_]+-[^-]+-.*\.whl", t) and not os.path.exists(t) for t in shlex.split(command))
    return pytest.param(command, output, status, marks=[pytest.mark.census] if real else [])


@pytest.mark.parametrize("command,output,status", [_console_param(*block) for block in _console_blocks()])
def test_console_blocks_print_what_they_show(
    command: str, output: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [_real_wheel(t) for t in shlex.split(command)[1:]]
    if argv[0] in ("check", "diff") and "--no-config" not in argv:
        argv.insert(1, "--no-config")
    rc = main(argv)
    out = capsys.readouterr().out
    strip = lambda text: re.sub(r" in \d+\.\d+ s", "", text)  # noqa: E731
    assert strip(out) == strip(output)
    assert rc == status


# ---- the user docs guide users: history lives in git, measurements in records/ ----

USER_DOCS = [
    "README.md",
    "ARCHITECTURE.md",
    "CONTRIBUTING.md",
    "CHANGELOG.md",
    *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md")),
]
# A commit id, short or full, on its own, digits only included (not a library's auditwheel hash
# `libx-294d6944.so`, not `0x…`; counts are written with thousands separators);
# `uses: owner/action@<sha>` pins another project's action and is what the docs advise.
COMMIT_ID = re.compile(r"(?<![\w./@-])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/-])")
NOTEBOOK = {
    "a commit id": COMMIT_ID,
    "an issue number": re.compile(r"\bissues? #?\d+", re.I),
    "a date": re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b"),
    "a word of the workplace": re.compile(r"\bsessions?\b|\bhelper\b|\bworkplace\b|\bdevice tool\b|farm-bench", re.I),
}


def notebook_lines(text: str) -> list[str]:
    """Each line of a user doc that reads like a lab notebook, with what it names."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        for what, pattern in NOTEBOOK.items():
            if m := pattern.search(line):
                out.append(f"{n}: {what} {m.group(0)!r}: {line.strip()[:100]}")
    return out


@pytest.mark.parametrize("doc", USER_DOCS)
def test_user_docs_name_no_commit_issue_date_or_workplace(doc: str) -> None:
    text = (REPO / doc).read_text(encoding="utf-8")
    found = notebook_lines(text)
    if doc == "docs/mutation.md":  # mutation scores stay there: method plus numbers, dated, with their commit
        found = [entry for entry in found if not re.match(r"\d+: (a commit id|a date) ", entry)]
    assert found == [], f"{doc}: move measurements to records/, history to git"


@pytest.mark.parametrize(
    "line,what",
    [
        ("All 137 agreed at main 91ed825; since then", "a commit id"),
        ("fixed in `75d223e`.", "a commit id"),
        ("where main 6639437 held 546 MiB", "a commit id"),
        ("From a fresh clone of e7cdd90f1b2a3c4d5e6f7a8b9c0d1e2f3a4b5c6d, with", "a commit id"),
        ("see issue 37 for the floors", "an issue number"),
        ("(Issue #12)", "an issue number"),
        ("measured on 2026-12-01", "a date"),
        ("the helper that ran it", "a word of the workplace"),
    ],
)
def test_the_notebook_check_catches(line: str, what: str) -> None:
    assert [entry.split(" '")[0] for entry in notebook_lines(line)] == [f"1: {what}"]


@pytest.mark.parametrize(
    "line",
    [
        "torch/lib/libcusparseLt-294d6944.so.0 is cuSPARSELt",
        "offset 0x4a0c3f1",
        "524288 findings",
        "2,097,153 findings",
        "an effaced label",
        "a version 1.2.3456789",
        "uses: github/codeql-action/upload-sarif@8aad20d150bbac5944a9f9d289da16a4b0d87c1e  # v4.36.2",
        "tests/helpers.py builds records",
        "a sha256 of 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ],
)
def test_the_notebook_check_passes(line: str) -> None:
    assert notebook_lines(line) == []


RECORDS = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "records").rglob("*.md"))


@pytest.mark.parametrize("doc", USER_DOCS + RECORDS)
def test_every_relative_link_of_a_user_doc_resolves(doc: str) -> None:
    """A measurement moved to records/ leaves a link behind; each, and each of a record, must lead somewhere."""
    text = (REPO / doc).read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        assert ((REPO / doc).parent / target).exists(), f"{doc}: {target}"
