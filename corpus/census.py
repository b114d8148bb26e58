"""The census table (records/census.md): every corpus wheel's verdict for popular GPUs.

    python -m corpus.census --results results.json --markdown table.md

The engine is ``archaudit index``: every census wheel (``--all``: the corpus's too) that the
cache holds is audited once into an SQLite database (``--db``, default in the cache: a rerun skips what this archaudit
judged already), then ``archaudit query runs-on --gpu NAME --all`` answers each GPU of ``GPUS`` for
every wheel (the same rule as ``archaudit check --gpu NAME``: G009 says no; a wheel whose census entry
records its host gates is judged with them, as ``check`` with that pyproject.toml). The verdict against
each project's documented claim comes from ``python -m corpus.run --json results.json``, which
checks each wheel with its claim and compares every library with the evidence.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from corpus.manifest import Wheel, cache_dir, load

# The GPUs of the census table: (column, the name archaudit's catalog answers to).
GPUS: tuple[tuple[str, str], ...] = (
    ("T4", "T4"),
    ("V100", "V100"),
    ("A100", "A100"),
    ("L4", "L4"),
    ("H100", "H100"),
    ("B200", "B200"),
    ("3090", "RTX 3090"),
    ("4090", "RTX 4090"),
    ("5090", "RTX 5090"),
    ("Orin", "Jetson Orin"),
    ("MI250X", "MI250X"),
    ("MI300X", "MI300X"),
)
MARKS = {"yes": "yes", "no": "**no**", "unverified": "?", "no device code": "-"}


def key(filename: str) -> tuple[str, str, str]:
    """(normalised project, release, tags) of a wheel file, as the index's reports name a wheel."""
    parts = filename[:-4].split("-")
    build = parts[2] if len(parts) == 6 else ""
    release = parts[1] + (f"-{build}" if build else "")
    return re.sub(r"[-_.]+", "-", parts[0]).lower(), release, "-".join(parts[-3:])


def _archaudit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "archaudit", *args], capture_output=True, text=True)


def index(wheels: list[Wheel], db: Path, jobs: int = 1) -> None:
    """Audit every cached wheel into the database (a rerun skips what is there)."""
    paths = [str(cache_dir() / w.filename) for w in wheels if (cache_dir() / w.filename).exists()]
    r = _archaudit("index", *paths, "--db", str(db), "-j", str(jobs), "-q")
    if r.returncode not in (0, 1):
        raise SystemExit(f"archaudit index failed ({r.returncode}): {r.stderr.strip()[-400:]}")


Answers = dict[str, dict[tuple[str, str, str], tuple[str, str]]]  # column -> wheel key -> (answer, how)


def runs_on_query(db: Path, gpus: tuple[tuple[str, str], ...] = GPUS) -> Answers:
    """Each GPU's answers from ``archaudit query runs-on --gpu NAME --all`` (a process per GPU)."""
    out: Answers = {}
    for column, gpu in gpus:
        r = _archaudit("query", "runs-on", "--gpu", gpu, "--all", "--db", str(db), "--format", "json")
        if r.returncode != 0:
            raise SystemExit(f"archaudit query runs-on --gpu {gpu!r} failed: {r.stderr.strip()[-400:]}")
        rows = json.loads(r.stdout)["rows"]
        out[column] = {(x["project"], x["version"], x["tags"]): (x["runs"], x["how"]) for x in rows}
    return out


def _recorded(wheel: Wheel | None) -> dict[str, Any]:
    """The Policy fields of the wheel's recorded [tool.archaudit] table (its host gates and
    ignore-library entries, corpus/census.toml), read as ``check`` reads pyproject.toml: the index
    stores no configuration, so a gated wheel's answer is judged here with it. Empty: none."""
    import tempfile

    from archaudit import config
    from archaudit.cli.settings import recorded

    text = wheel.config() if wheel is not None else ""
    if not text:
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pyproject.toml"
        path.write_text(text, encoding="utf-8")
        return dict(recorded(config.load(str(path), discover=False)))


def runs_on(db: Path, gpus: tuple[tuple[str, str], ...] = GPUS, wheels: list[Wheel] | None = None) -> Answers:
    """The same answers as runs_on_query, in one process: each stored inventory is rebuilt once and
    judged for every GPU by the rule ``query runs-on`` applies (tests/test_census.py compares them),
    with the wheel's recorded gates where ``wheels`` (the manifest entries) holds them."""
    import dataclasses

    from archaudit.gpus.catalog import resolve
    from archaudit.index import reports, schema
    from archaudit.index.store import inventory_of
    from archaudit.judge.audit import judge
    from archaudit.judge.policy import Policy

    by_key = {key(w.filename): w for w in wheels or ()}
    policies = []
    for column, name in gpus:
        nvidia, amd = resolve([name])
        policies.append((column, Policy(gpus=nvidia, amd_gpus=amd)))
    out: Answers = {column: {} for column, _ in gpus}
    con = schema.connect(str(db), create=False)
    try:
        for w in reports.wheels(con):
            inv = inventory_of(con, w.id)
            k = (w.project, w.release, w.tags)
            fields = _recorded(by_key.get(k))  # once per wheel, for every GPU
            for column, policy in policies:
                judged = judge(inv, None, dataclasses.replace(policy, **fields))
                out[column][k] = reports.answer_of(judged, inv.unusable)
    finally:
        con.close()
    return out


def table(
    wheels: list[Wheel],
    answers: dict[str, dict[tuple[str, str, str], tuple[str, str]]],
    results: dict[str, dict[str, Any]],
) -> str:
    """One row per wheel: what it is, its claim, archaudit's verdict on it, and each GPU's answer."""
    head = ["project", "version", "platform", "stack", "claim", "verdict (claim)", *(c for c, _ in GPUS)]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for w in wheels:
        k = key(w.filename)
        res = results.get(w.id)
        if res is None:
            verdict = "not run"
        else:
            verdict = "pass" if res["exit"] == 0 else "fail" if res["exit"] == 1 else f"exit {res['exit']}"
            verdict += "" if res["agrees"] else " (disputed)"
        claim = w.claim or w.amd_claim or ("embedded" if "embedded" in w.claim_source else "none")
        cells = []
        for column, _ in GPUS:
            answer, how = answers.get(column, {}).get(k, ("", ""))
            mark = MARKS.get(answer, "n/a")
            cells.append(mark + (" (jit)" if answer == "yes" and how == "jit" else ""))
        rows.append(
            f"| {w.name} | {w.version} | {w.platform} | {w.stack} | `{claim}` | {verdict} | " + " | ".join(cells) + " |"
        )
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m corpus.census", description=__doc__.split("\n\n")[0])
    ap.add_argument("ids", nargs="*", help="manifest ids (default: every census wheel)")
    ap.add_argument("--all", action="store_true", help="the wheels of manifest.toml too")
    ap.add_argument("--db", type=Path, default=None, help="the index database (default: census.db in the cache)")
    ap.add_argument("--results", type=Path, help="python -m corpus.run --json output: the claim verdicts")
    ap.add_argument("--markdown", type=Path, help="write the table here (default: standard output)")
    ap.add_argument("--no-index", action="store_true", help="query the database as it is")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="wheels indexed at once")
    args = ap.parse_args(argv)
    wheels = [w for w in load() if (w.id in args.ids if args.ids else args.all or w.manifest == "census")]
    db = args.db or cache_dir() / "census.db"
    if not args.no_index:
        index(wheels, db, args.jobs)
    results = {r["id"]: r for r in json.loads(args.results.read_text())} if args.results else {}
    text = table(wheels, runs_on(db, wheels=wheels), results)
    if args.markdown:
        args.markdown.write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
