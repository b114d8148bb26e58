#!/usr/bin/env python3
"""The commit habit, checked: every commit after BASELINE has a subject of at most 72 characters
and a body that says why (a merge commit needs only the subject: the commits it merges carry the
why). Commits up to BASELINE are history and are not judged.

    python tools/check_commits.py                 # the commits of HEAD after BASELINE
    python tools/check_commits.py --base REV      # after another commit

Exit 0: every commit keeps the habit; 1: each one that does not is named, with what it lacks;
2: the check could not run (not a git repository, BASELINE not in its history: a shallow clone
needs `git fetch --unshallow`). .ci/run runs it; tests/test_check_commits.py checks it on a
temporary repository.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# main when the habit was adopted; every later commit is checked.
BASELINE = "c6f69599600c0f57851aa220cadf9fa0070b67e0"
MAX_SUBJECT = 72


@dataclass(frozen=True)
class Commit:
    sha: str
    parents: int
    message: str

    @property
    def subject(self) -> str:
        """The first paragraph, its lines joined, as git's %s shows it."""
        return " ".join(line.strip() for line in self.message.split("\n\n", 1)[0].splitlines())

    @property
    def body(self) -> str:
        """What follows the first blank line."""
        return self.message.split("\n\n", 1)[1].strip() if "\n\n" in self.message else ""


def problems(commit: Commit) -> list[str]:
    """What a commit lacks, in words; none when it keeps the habit."""
    out = []
    if len(commit.subject) > MAX_SUBJECT:
        out.append(f"subject of {len(commit.subject)} characters (at most {MAX_SUBJECT})")
    if not commit.subject.strip():
        out.append("no subject")
    if commit.parents < 2 and not commit.body:
        out.append("no body (say why, after a blank line)")
    return out


def _git(repo: Path, *args: str) -> str:
    run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(run.stderr.strip() or f"git {' '.join(args)} failed")
    return run.stdout


def commits(repo: Path, base: str, head: str = "HEAD") -> list[Commit]:
    """The commits of `head` that `base` does not hold, oldest first."""
    _git(repo, "cat-file", "-e", f"{base}^{{commit}}")
    log = _git(repo, "log", "--reverse", "--format=%H %P%x00%B%x1e", f"{base}..{head}")
    out = []
    for record in log.split("\x1e"):
        if not record.strip():
            continue
        ids, message = record.lstrip("\n").split("\x00", 1)
        sha, *parents = ids.split()
        out.append(Commit(sha, len(parents), message.strip("\n")))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=BASELINE, help="check the commits after this one (default: BASELINE)")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the repository (default: here)")
    args = parser.parse_args(argv)
    try:
        checked = commits(args.repo, args.base)
    except (RuntimeError, OSError) as e:
        print(f"check_commits: cannot check the commits after {args.base[:12]}: {e}", file=sys.stderr)
        return 2
    bad = [(c, p) for c in checked if (p := problems(c))]
    for c, p in bad:
        print(f"{c.sha[:12]} {c.subject[:60]!r}: {'; '.join(p)}")
    print(f"check_commits: {len(checked)} commits after {args.base[:12]}, {len(bad)} break the habit")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
