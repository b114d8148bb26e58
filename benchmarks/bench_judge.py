"""CPU time of the work `archaudit check` does in its main thread alone: judging (facts and
rules over a wheel's inventory) and importing what the command needs, for this checkout
against another revision, as ratios measured in one run.

Each measurement is a fresh child process (nothing cached from a previous round), timed by
its own CPU clock (time.process_time), and the two revisions alternate round by round, so a
busy machine slows both alike; medians are quoted. Both trees are compiled to bytecode first,
as an installed archaudit is, so that imports are not timed compiling sources.

    python benchmarks/bench_judge.py WHEEL [--arch LIST] [--base REV] [--rounds N]

- judge: `audit()` over the wheel's inventories (read once, untimed, by this checkout, and
  handed to every child pickled; the base revision must share this checkout's model classes,
  TargetInventory in archaudit.model included).
- parser: importing archaudit.cli and building the parser (`archaudit --help`).
- check: that, plus the modules `check` imports when it runs (core, settings, render).

Without --base only this checkout is measured.
"""

from __future__ import annotations

import argparse
import compileall
import os
import pickle
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

JUDGE = """
import pickle, sys, time
from archaudit.claims import parse_claim
try:
    from archaudit.judge.audit import audit
    from archaudit.judge.policy import Policy
except ImportError:  # a revision before the read/judge/report layout
    from archaudit.audit import audit
    from archaudit.policy import Policy
invs = pickle.load(open(sys.argv[1], "rb"))
claim = parse_claim(sys.argv[2], "--arch") if sys.argv[2] else None
t = time.process_time()
audit(invs, claim, Policy())
print(time.process_time() - t)
"""

PARSER = """
import time
t = time.process_time()
import archaudit.cli
archaudit.cli.build_parser()
print(time.process_time() - t)
"""

CHECK = """
import time
t = time.process_time()
import archaudit.cli
archaudit.cli.build_parser()
import archaudit.core
try:
    import archaudit.report.render, archaudit.cli.settings
except ImportError:  # a revision before the read/judge/report layout
    import archaudit.render, archaudit.settings
print(time.process_time() - t)
"""


def child(src: Path, code: str, *args: str) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(src)
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    return float(out.stdout.strip().splitlines()[-1])


def export(rev: str, into: Path) -> Path:
    """The src/ tree of a git revision."""
    archive = into / "src.tar"
    with open(archive, "wb") as f:
        subprocess.run(["git", "-C", str(REPO), "archive", rev, "src"], stdout=f, check=True)
    with tarfile.open(archive) as t:
        t.extractall(into, filter="data")
    return into / "src"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel")
    ap.add_argument("--arch", default="", help="the claim (default: the one the wheel embeds)")
    ap.add_argument("--base", metavar="REV", help="a git revision to measure against (e.g. main)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    from archaudit.read.artifacts import inventories

    with tempfile.TemporaryDirectory(prefix="bench-judge-") as tmp:
        work = Path(tmp)
        pickled = work / "inventories.pickle"
        with open(pickled, "wb") as f:
            pickle.dump(inventories([args.wheel]), f)
        versions = {"this": REPO / "src"}
        if args.base:
            versions = {"base": export(args.base, work), **versions}
        for src in versions.values():  # imports are timed from compiled bytecode, as installed
            compileall.compile_dir(src, quiet=1)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for name, src in versions.items():
                times.setdefault((name, "judge"), []).append(child(src, JUDGE, str(pickled), args.arch))
                times.setdefault((name, "parser"), []).append(child(src, PARSER))
                times.setdefault((name, "check"), []).append(child(src, CHECK))
    print(f"{os.path.basename(args.wheel)}, {args.rounds} rounds, CPU seconds (median; per round)")
    for what in ("judge", "parser", "check"):
        row = []
        for name in versions:
            t = times[(name, what)]
            row.append(f"{name} {statistics.median(t):.3f} ({', '.join(f'{x:.3f}' for x in t)})")
        if args.base:
            ratio = statistics.median(times[("this", what)]) / statistics.median(times[("base", what)])
            row.append(f"this/base {ratio:.2f}")
        print(f"  {what:7s} " + "; ".join(row))


if __name__ == "__main__":
    main()
