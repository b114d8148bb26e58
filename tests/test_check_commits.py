"""tools/check_commits.py on a temporary git repository: every commit after the baseline has a
subject of at most 72 characters and a body; a merge needs only the subject; history up to the
baseline is not judged; a baseline the repository does not hold fails the check."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "check_commits.py"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@example.org",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@example.org",
        "HOME": str(repo),
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": "/usr/bin:/bin",
    }
    run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True)
    return run.stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "commit", "-q", "--allow-empty", "--cleanup=verbatim", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def check(repo: Path, base: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--repo", str(repo), "--base", base], capture_output=True, text=True, check=False
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "-b", "main")
    return tmp_path


def test_commits_that_keep_the_habit_pass(repo: Path) -> None:
    commit(repo, "an old subject that ran far past seventy-two characters, before the habit, no body")
    base = commit(repo, "the baseline")
    commit(repo, "x" * 72 + "\n\nA body that says why.")
    commit(repo, "Second change\n\nWhy it was needed.\n\nSigned-off-by: a <a@example.org>")
    run = check(repo, base)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout == f"check_commits: 2 commits after {base[:12]}, 0 break the habit\n"


@pytest.mark.parametrize(
    "message,why",
    [
        ("y" * 73 + "\n\nA body.", "subject of 73 characters (at most 72)"),
        ("A subject and nothing else", "no body (say why, after a blank line)"),
        ("A subject\nwrapped onto a second line without a blank one", "no body"),
        ("A subject\n\n   \n", "no body"),
    ],
)
def test_a_long_subject_or_a_missing_body_fails_and_is_named(repo: Path, message: str, why: str) -> None:
    base = commit(repo, "the baseline")
    commit(repo, "Fine\n\nBecause.")
    bad = commit(repo, message)
    run = check(repo, base)
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(bad[:12] + " ") and why in lines[0]
    assert lines[1] == f"check_commits: 2 commits after {base[:12]}, 1 break the habit"


def test_a_merge_needs_only_a_short_subject(repo: Path) -> None:
    base = commit(repo, "the baseline")
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "Side work\n\nWhy.")
    git(repo, "checkout", "-q", "main")
    commit(repo, "Main work\n\nWhy.")
    git(repo, "merge", "-q", "--no-ff", "--no-edit", "side")
    assert check(repo, base).returncode == 0
    git(repo, "commit", "-q", "--amend", "-m", "Merge " + "z" * 80)
    run = check(repo, base)
    assert run.returncode == 1 and "subject of 86 characters" in run.stdout


def test_an_unknown_baseline_or_no_repository_cannot_be_checked(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    commit(repo, "Only\n\nWhy.")
    run = check(repo, "0" * 40)
    assert run.returncode == 2 and re.match(r"check_commits: cannot check the commits after 000000000000: ", run.stderr)
    elsewhere = tmp_path_factory.mktemp("not_a_repo")
    assert check(elsewhere, "HEAD").returncode == 2


def test_the_baseline_is_a_full_commit_id() -> None:
    text = SCRIPT.read_text(encoding="utf-8")
    assert re.search(r'^BASELINE = "[0-9a-f]{40}"$', text, re.M)
