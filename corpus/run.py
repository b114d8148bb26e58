"""Run archaudit over the corpus and print, per wheel, whether its verdicts agree with the evidence.

    python -m corpus.run                  # every wheel (downloads what the cache lacks)
    python -m corpus.run --small          # the wheels CI checks (<= 100 MB)
    python -m corpus.run cudnn-cu12 tensorflow --detail-check
    python -m corpus.run --census --index census.db   # the census's wheels, judged by archaudit index

The corpus is both manifests (corpus/manifest.toml, then the census, corpus/census.toml). With
``--index DB`` the default check of each wheel is ``archaudit index WHEEL --arch CLAIM --db DB``
(one audit per wheel, stored: the same judgement as ``check``, kept for ``archaudit query``; see
``python -m corpus.census``); a wheel with an AMD claim, and every extra check, still runs ``check``.

Downloads go to $ARCHAUDIT_WHEEL_CACHE (default $XDG_CACHE_HOME/archaudit/wheels, else
~/.cache/archaudit/wheels), several at once, with retries, for the exact platform tag of each
manifest file name. Each check runs archaudit as a child process (``python -m archaudit check ...
--format json``), so a crash is a disagreement, not a crash of the runner.
Exit status: 0 when every wheel agrees, 1 otherwise.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus.manifest import ExtraCheck, Wheel, cache_dir, load

DOWNLOAD_TRIES = 3


@dataclass(frozen=True)
class LibraryResult:
    path: str
    expected: str  # runs | fails | unreviewed
    actual: str  # runs | fails | absent
    codes: tuple[str, ...]  # archaudit's error codes for this library
    missing_codes: tuple[str, ...]  # expected codes archaudit did not give
    issue: str = ""

    @property
    def agrees(self) -> bool:
        return self.expected == self.actual and not self.missing_codes


@dataclass
class WheelResult:
    wheel: Wheel
    exit: int | None = None
    seconds: float = 0.0
    libraries: list[LibraryResult] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # disagreements that are not a library's

    @property
    def agrees(self) -> bool:
        return not self.problems and all(r.agrees for r in self.libraries)


def _platform_args(filename: str) -> list[str]:
    """pip's --platform/--python-version/--abi for a wheel file name (its exact tags)."""
    parts = filename[:-4].split("-")
    py, abi, plats = parts[-3], parts[-2], parts[-1]
    args = ["--only-binary=:all:", "--no-deps"]
    for p in plats.split("."):
        args += ["--platform", p]
    pyver = py.split(".")[0]
    if pyver.startswith("cp") and abi == "abi3":  # cp38-abi3: any CPython from 3.8; the release may want newer
        args += ["--python-version", "3.12", "--implementation", "cp"]
    elif pyver.startswith("cp"):
        args += ["--python-version", pyver[2:3] + "." + pyver[3:], "--implementation", "cp"]
    else:
        args += ["--python-version", "3.11"]
    for a in abi.split("."):
        args += ["--abi", a]
    return args


def download(wheel: Wheel, dest: Path) -> str | None:
    """Fetch one wheel into the cache unless it is there; None on success, else pip's last line."""
    if (dest / wheel.filename).exists():
        return None
    last = ""
    for attempt in range(DOWNLOAD_TRIES):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                *_platform_args(wheel.filename),
                "-d",
                str(dest),
                wheel.spec,
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode == 0 and (dest / wheel.filename).exists():
            return None
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        time.sleep(2**attempt)
    return f"cannot download {wheel.spec} as {wheel.filename}: {last}"


def _archaudit(args: list[str], config: str = "") -> tuple[int, dict[str, Any] | None, str, float]:
    """One check in a child process; ``config``: a [tool.archaudit] table to run with (else none)."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="corpus-config-") as tmp:
        options = ["--no-config"]
        if config:
            path = Path(tmp) / "pyproject.toml"
            path.write_text(config)
            options = ["--config", str(path)]
        r = subprocess.run(
            [sys.executable, "-m", "archaudit", "check", *args, "--format", "json", *options, "-q"],
            capture_output=True,
            text=True,
        )
    seconds = time.perf_counter() - start
    try:
        report = json.loads(r.stdout)
    except json.JSONDecodeError:
        report = None
    return r.returncode, report, r.stderr.strip()[-400:], seconds


def _indexed(path: Path, claim: str, db: Path) -> tuple[int, dict[str, Any] | None, str, float]:
    """The default check of one wheel through ``archaudit index``: its stored row, as a check report."""
    start = time.perf_counter()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "archaudit",
            "index",
            str(path),
            *(["--arch", claim] if claim else []),
            "--db",
            str(db),
            "-j",
            "1",
            "-q",
        ],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if r.returncode not in (0, 1):
        return r.returncode, None, r.stderr.strip()[-400:], seconds
    with sqlite3.connect(db) as con:
        row = con.execute(
            "SELECT id, exit_code, claim FROM wheels WHERE file = ? ORDER BY judged_at DESC LIMIT 1", (path.name,)
        ).fetchone()
        if row is None:
            return r.returncode, None, f"not in the index database: {r.stderr.strip()[-300:]}", seconds
        wheel_id, exit_code, stored_claim = row
        libraries = [
            {"path": p, "status": st or "host"}
            for p, st in con.execute("SELECT path, status FROM libraries WHERE wheel_id = ?", (wheel_id,))
        ]
        findings = [
            {"code": c, "severity": sev, "subject": sub}
            for c, sev, sub in con.execute(
                "SELECT code, severity, subject FROM findings WHERE wheel_id = ?", (wheel_id,)
            )
        ]
    if claim and stored_claim == "":
        return exit_code, None, "the index row was judged without the claim (use a fresh --index DB)", seconds
    return exit_code, {"targets": [{"libraries": libraries, "findings": findings}]}, "", seconds


def _error_codes(report: dict[str, Any]) -> dict[str, set[str]]:
    """Error-severity finding codes by subject (a library path, or the wheel)."""
    out: dict[str, set[str]] = {}
    for target in report.get("targets", []):
        for f in target.get("findings", []):
            if f.get("severity") == "error":
                out.setdefault(f.get("subject") or "", set()).add(f["code"])
    return out


def _all_codes(report: dict[str, Any]) -> set[str]:
    return {f["code"] for t in report.get("targets", []) for f in t.get("findings", [])}


def _libraries(report: dict[str, Any]) -> dict[str, str]:
    return {lib["path"]: lib["status"] for t in report.get("targets", []) for lib in t.get("libraries", [])}


def judge(wheel: Wheel, report: dict[str, Any]) -> list[LibraryResult]:
    """Compare archaudit's per-library verdicts with the manifest's."""
    errors = _error_codes(report)
    kernel_less = {
        f.get("subject") for t in report.get("targets", []) for f in t.get("findings", []) if f["code"] == "G010"
    }  # device code that defines no kernel: it runs, launching nothing
    recorded_by = {
        x.get("subject")
        for x in report.get("suppressed", [])
        if x.get("severity") == "error" and str(x.get("suppressed_by", "")).startswith("ignore-library")
    }
    results = []
    seen: set[str] = set()
    for path, status in sorted(_libraries(report).items()):
        codes = tuple(sorted(errors.get(path, ())))
        if status == "host" and not codes and path not in kernel_less:
            continue  # no device code and nothing to say: not judged
        seen.add(path)
        # a library whose every error a recorded ignore-library entry hid runs by that record
        recorded = status == "fail" and path in recorded_by
        actual = "fails" if codes or status == "unverified" or (status == "fail" and not recorded) else "runs"
        exp = wheel.expectation(path)
        if exp is None:
            results.append(LibraryResult(path, "unreviewed", actual, codes, ()))
            continue
        missing = tuple(c for c in exp.codes if c not in codes)
        results.append(LibraryResult(path, exp.verdict, actual, codes, missing, exp.issue))
    for exp in wheel.libraries:
        if not any(ch in exp.path for ch in "*?[") and exp.path not in seen:
            results.append(LibraryResult(exp.path, exp.verdict, "absent", (), exp.codes, exp.issue))
    return results


def _extra(wheel: Wheel, path: Path, extra: ExtraCheck) -> tuple[list[str], float]:
    rc, report, err, seconds = _archaudit([str(path), *wheel.claim_args(), *extra.args], wheel.config())
    problems = []
    if rc != extra.exit:
        problems.append(f"{extra.name}: exit {rc}, expected {extra.exit}" + (f" ({err})" if report is None else ""))
    codes = _all_codes(report) if report else set()
    problems += [f"{extra.name}: {c} expected, not reported" for c in extra.codes if c not in codes]
    problems += [f"{extra.name}: {c} reported, not expected" for c in extra.absent if c in codes]
    return [p + (f" [issue 11 pt {extra.issue}]" if extra.issue else "") for p in problems], seconds


def check(wheel: Wheel, dest: Path, detail_check: bool = False, index: Path | None = None) -> WheelResult:
    """One wheel: the default check (by ``archaudit index`` into ``index`` when given, the claim is
    NVIDIA's alone and no ignore-library or gate entry applies: the index takes no configuration),
    its extra checks, and optionally the same under --detail kernels."""
    res = WheelResult(wheel)
    path = dest / wheel.filename
    if not path.exists():
        res.problems.append(f"not in the cache: {wheel.filename}")
        return res
    if index is not None and not wheel.amd_claim and not wheel.ignores and not wheel.gates:
        rc, report, err, res.seconds = _indexed(path, wheel.claim, index)
    else:
        rc, report, err, res.seconds = _archaudit([str(path), *wheel.claim_args()], wheel.config())
    res.exit = rc
    if report is None:
        res.problems.append(f"no JSON report (exit {rc}): {err}")
        return res
    if rc != wheel.exit:
        res.problems.append(f"exit {rc}, expected {wheel.exit}")
    if wheel.driver_floor_known:
        res.problems += [
            f"{f['subject']}: driver floor stated as unknown (CUDA {f['data'].get('cuda')}) [issue 11 pt 13]"
            for t in report.get("targets", [])
            for f in t.get("findings", [])
            if f["code"] == "D002" and (f.get("data") or {}).get("driver") == "unknown"
        ]
    res.libraries = judge(wheel, report)
    for extra in wheel.extra:
        problems, seconds = _extra(wheel, path, extra)
        res.problems += problems
        res.seconds += seconds
    if detail_check:
        for detail in ("containers", "kernels"):
            rc2, _, _, seconds = _archaudit([str(path), *wheel.claim_args(), "--detail", detail], wheel.config())
            res.seconds += seconds
            if rc2 != rc:
                res.problems.append(f"exit {rc2} with --detail {detail}, {rc} by default [issue 11 pt 2]")
    return res


def describe(res: WheelResult) -> list[str]:
    """The disagreements of one wheel, one line each."""
    lines = list(res.problems)
    for r in res.libraries:
        if r.agrees:
            continue
        said = f"archaudit: {r.actual}" + (f" ({', '.join(r.codes)})" if r.codes else "")
        want = f"evidence: {r.expected}" + (f", missing {', '.join(r.missing_codes)}" if r.missing_codes else "")
        lines.append(f"{r.path}: {said}; {want}" + (f" [issue 11 pt {r.issue}]" if r.issue else ""))
    return lines


def table(results: list[WheelResult]) -> str:
    """The agreement table (Markdown), as records/corpus.md and the status file show it."""
    rows = [
        "| id | wheel | platform | stack | libraries agreeing | exit (expected) | agrees | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        w = r.wheel
        n_ok = sum(1 for x in r.libraries if x.agrees)
        rows.append(
            f"| {w.id} | `{w.spec}` | {w.platform} | {w.stack} | {n_ok}/{len(r.libraries)} | "
            f"{r.exit} ({w.exit}) | {'yes' if r.agrees else '**no**'} | {r.seconds:.1f} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m corpus.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("ids", nargs="*", help="manifest ids to run (default: all)")
    ap.add_argument("--small", action="store_true", help="only the wheels CI checks (not slow)")
    ap.add_argument("--census", action="store_true", help="only the census's wheels (corpus/census.toml)")
    ap.add_argument(
        "--index",
        type=Path,
        metavar="DB",
        help="judge each wheel by archaudit index into this SQLite database (see corpus.census)",
    )
    ap.add_argument(
        "--detail-check",
        action="store_true",
        help="also run --detail containers and kernels, and require the same exit status",
    )
    ap.add_argument("--no-download", action="store_true", help="use only what the cache holds")
    ap.add_argument("-j", "--downloads", type=int, default=4, help="parallel downloads")
    ap.add_argument("--markdown", type=Path, help="also write the table and disagreements here")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    ap.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print every library: expected and archaudit's verdict, with archaudit's error codes",
    )
    args = ap.parse_args(argv)
    wheels = [
        w
        for w in load()
        if (not args.ids or w.id in args.ids)
        and not (args.small and w.slow)
        and not (args.census and w.manifest != "census")
    ]
    unknown = set(args.ids) - {w.id for w in load()}
    if unknown:
        ap.error(f"not in the manifest: {', '.join(sorted(unknown))}")
    dest = cache_dir()
    start = time.perf_counter()
    if not args.no_download:
        order = sorted(wheels, key=lambda w: -w.size_mb)  # the big ones first
        with concurrent.futures.ThreadPoolExecutor(args.downloads) as pool:
            for msg in pool.map(lambda w: download(w, dest), order):
                if msg:
                    print(msg, file=sys.stderr)
    results = []
    for w in wheels:
        res = check(w, dest, args.detail_check, args.index)
        results.append(res)
        mark = "✓" if res.agrees else "✗"
        n_ok = sum(1 for x in res.libraries if x.agrees)
        print(
            f"{mark} {w.id:28} exit {res.exit} (expected {w.exit})  libraries {n_ok}/{len(res.libraries)} agree"
            f"  {res.seconds:6.1f} s",
            flush=True,
        )
        for line in describe(res):
            print(f"    {line}", flush=True)
        if args.verbose:
            for lib in res.libraries:
                codes = f" ({', '.join(lib.codes)})" if lib.codes else ""
                mark = "=" if lib.agrees else "≠"
                print(f"      {mark} {lib.path}: expected {lib.expected}, archaudit {lib.actual}{codes}")
    total = time.perf_counter() - start
    checks = sum(r.seconds for r in results)
    agreeing = sum(1 for r in results if r.agrees)
    print(f"{agreeing}/{len(results)} wheels agree; archaudit time {checks:.1f} s, total {total:.1f} s")
    if args.markdown:
        body = [table(results), "", f"{agreeing}/{len(results)} wheels agree; archaudit time {checks:.1f} s.", ""]
        for r in results:
            for line in describe(r):
                body.append(f"- `{r.wheel.id}`: {line}")
        args.markdown.write_text("\n".join(body) + "\n")
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "id": r.wheel.id,
                        "spec": r.wheel.spec,
                        "file": r.wheel.filename,
                        "exit": r.exit,
                        "expected_exit": r.wheel.exit,
                        "agrees": r.agrees,
                        "seconds": round(r.seconds, 2),
                        "disagreements": describe(r),
                        "libraries": [
                            {"path": x.path, "expected": x.expected, "actual": x.actual, "codes": list(x.codes)}
                            for x in r.libraries
                        ],
                    }
                    for r in results
                ],
                indent=1,
            )
            + "\n"
        )
    return 0 if agreeing == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
