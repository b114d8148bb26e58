"""`archaudit index` and `archaudit query`: wheels built from the nvcc-built fixture libraries and
the shipped example wheel, indexed from a directory, a URL list and a simple index served over
loopback; every stored fact is checked against what `archaudit check`/`diff` say of the same
wheels read directly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from archaudit.claims import parse_claim
from archaudit.cli import main
from archaudit.core import check
from archaudit.gpus.catalog import NvidiaGpu
from archaudit.judge import diff
from archaudit.judge.policy import Policy
from archaudit.read.artifacts import inventory
from helpers import db_rows, index_db, make_wheel
from range_server import serving

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cuda" / "bin"


def test_directory_every_wheel_a_row_with_facts_of_check(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    assert index_db(db, str(corpus), "-j", "1") == 1  # a failing and an unusable wheel: exit 1
    rows = {
        r[0]: r[1:]
        for r in db_rows(
            db, "SELECT file, verdict, exit_code, claim_source, project, version, sha256, sha256_checked FROM wheels"
        )
    }
    assert len(rows) == 4
    for f in sorted(corpus.iterdir()):
        report = check([str(f)], None, Policy(), jobs=1, decode=True)
        verdict, code, source, project, version, sha, checked = rows[f.name]
        assert code == report.exit_code
        assert verdict == {0: "pass", 1: "fail", 2: "unusable"}[report.exit_code]
        assert checked == 1 and sha == __import__("hashlib").sha256(f.read_bytes()).hexdigest()
        want = {(x.code, x.subject) for x in report.findings}
        got = set(
            db_rows(
                db, "SELECT code, subject FROM findings JOIN wheels ON wheels.id = wheel_id WHERE file = ?", (f.name,)
            )
        )
        assert got == {(c, s.replace(str(f), f.name)) for c, s in want}
    # the unreadable wheel is a row with its finding, not a gap
    assert rows["demo-3.0-py3-none-manylinux_2_28_x86_64.whl"][0] == "unusable"
    assert ("E002",) in db_rows(db, "SELECT code FROM findings JOIN wheels ON wheels.id = wheel_id WHERE version='3.0'")
    # no wheel here embeds a claim: each row says none
    assert {r[2] for r in rows.values()} == {"none"}


def test_given_claim_is_recorded_and_judged_as_check_judges_it(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    index_db(db, str(corpus), "-j", "1", "--arch", "7.5 8.0")
    claim = parse_claim("7.5 8.0", "--arch")
    for file, source, code in db_rows(db, "SELECT file, claim_source, exit_code FROM wheels"):
        r = check([str(corpus / str(file))], claim, Policy(), jobs=1, decode=True)
        assert (source, code) == ("given", r.exit_code)
    assert dict(db_rows(db, "SELECT version, verdict FROM wheels WHERE project = 'demo'")) == {
        "1.0": "pass",
        "2.0": "fail",
        "3.0": "unusable",
    }


def test_queries_agree_with_check_and_diff(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "i.db"
    index_db(db, str(corpus), "-j", "1")
    capsys.readouterr()
    # runs-on T4 (sm_75): what `check --gpu T4` answers per wheel
    assert main(["query", "runs-on", "--db", str(db), "--gpu", "T4", "--all", "--format", "json"]) == 0
    runs = {(r["project"], r["version"]): r["runs"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert runs[("demo", "1.0")] == "yes"
    assert runs[("demo", "2.0")] == "no"
    assert runs[("demo", "3.0")] == "unverified"
    for f in corpus.iterdir():
        if f.name.startswith("demo-1") or f.name.startswith("demo-2"):
            r = check([str(f)], None, Policy(gpus=(NvidiaGpu("T4", (7, 5)),)), jobs=1)
            assert (r.exit_code == 0) == (runs[("demo", f.name.split("-")[1])] == "yes")
    # without --all only the wheels that run are listed
    assert main(["query", "runs-on", "--db", str(db), "--gpu", "T4", "--format", "json"]) == 0
    assert {r["runs"] for r in json.loads(capsys.readouterr().out)["rows"]} == {"yes"}

    # lost between consecutive releases: exactly what `diff` says of 1.0 -> 2.0
    assert main(["query", "lost", "--db", str(db), "--project", "demo", "--format", "json"]) == 0
    lost = json.loads(capsys.readouterr().out)
    d = diff.compare(
        inventory(str(corpus / "demo-1.0-py3-none-manylinux_2_28_x86_64.whl")),
        inventory(str(corpus / "demo-2.0-py3-none-manylinux_2_28_x86_64.whl")),
    )
    want = {(x.target, x.now) for ld in d.losses for x in ld.lost}
    pair = [r for r in lost["rows"] if r["releases"] == "1.0 -> 2.0"]
    assert {(r["lost"], r["now"]) for r in pair if r["kind"] == "carried"} == want
    assert ("sm_75", "none") in want
    # and what a GPU sees: 2.0's sm_80 SASS still runs natively on 8.6, not on 7.5 or 9.0 (9.0 had SASS)
    runs_lost = {r["lost"]: r["now"] for r in pair if r["kind"] == "runs"}
    assert runs_lost["sm_75"] == "none" and runs_lost["sm_90"] == "none" and "sm_86" not in runs_lost
    assert {r["library"] for r in pair if r["kind"] == "runs"} == {"libkern.so"}
    assert any("not compared" in n for n in lost["notes"])  # 2.0 -> 3.0: 3.0 is unusable

    # coverage: sm_75 native in 1.0, not at all in 2.0; sm_86 native in both (sm_80 SASS runs on 8.6)
    assert main(["query", "coverage", "--db", str(db), "--project", "demo", "--format", "json"]) == 0
    cov = {r["version"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert (cov["1.0"]["sm_75"], cov["2.0"]["sm_75"]) == ("N", "-")
    assert (cov["1.0"]["sm_86"], cov["2.0"]["sm_86"]) == ("N", "N")
    assert cov["3.0"]["sm_80"] == "?"

    # driver floor: the D002 floor check reports
    assert main(["query", "driver-floor", "--db", str(db), "--project", "demo", "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    r = check([str(corpus / "demo-1.0-py3-none-manylinux_2_28_x86_64.whl")], None, Policy(), jobs=1)
    floor = next(v.driver_floor for v in r.targets[0].libraries if v.driver_floor)
    # Markdown shows each cell as text: its underscores escaped (printable.markdown)
    assert f"| 1.0 | py3-none-manylinux\\_2\\_28\\_x86\\_64 |  | {floor[0]} | {floor[1]} | libkern.so |" in md

    # text output, and a report asked without what it needs is a usage error (exit 2)
    assert main(["query", "coverage", "--db", str(db), "--project", "demo"]) == 0
    assert "Coverage of demo by release" in capsys.readouterr().out
    assert main(["query", "runs-on", "--db", str(db)]) == 2
    assert main(["query", "coverage", "--db", str(tmp_path / "missing.db"), "--project", "demo"]) == 2


def test_remote_wheels_read_by_ranges_store_what_local_ones_do(corpus: Path, tmp_path: Path) -> None:
    local, remote = tmp_path / "l.db", tmp_path / "r.db"
    index_db(local, str(corpus), "-j", "1")
    with serving(str(corpus)) as srv:
        urls = tmp_path / "urls.txt"
        urls.write_text("".join(f"{srv.url}/{f.name}#sha256={srv.digest(f.name)}\n" for f in sorted(corpus.iterdir())))
        assert index_db(remote, str(urls), "-j", "1") == 1
        sent = srv.sent
    q = (
        "SELECT file, sha256, verdict, (SELECT count(*) FROM entries e WHERE e.wheel_id = w.id), "
        "(SELECT count(*) FROM kernels k WHERE k.wheel_id = w.id) FROM wheels w ORDER BY file"
    )
    assert db_rows(local, q) == db_rows(remote, q)
    fetched = dict(db_rows(remote, "SELECT file, bytes_fetched FROM wheels"))
    sizes = dict(db_rows(remote, "SELECT file, size FROM wheels"))
    assert sum(fetched.values()) == sent  # every byte the server sent is counted
    for name in ("demo-1.0-py3-none-manylinux_2_28_x86_64.whl", "demo-2.0-py3-none-manylinux_2_28_x86_64.whl"):
        assert sizes[name] == (corpus / name).stat().st_size
        assert fetched[name] < sizes[name] / 2  # the padding members are never fetched
    assert all(fetched[n] <= sizes[n] for n in fetched)  # no byte fetched twice
    assert (
        dict(db_rows(remote, "SELECT file, sha256_checked FROM wheels"))["demo-1.0-py3-none-manylinux_2_28_x86_64.whl"]
        == 0
    )


def test_server_without_ranges_is_an_unreadable_row_not_a_download(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    name = "demo-1.0-py3-none-manylinux_2_28_x86_64.whl"
    with serving(str(corpus), ranges=False) as srv:
        assert index_db(db, f"{srv.url}/{name}") == 1
    [(verdict, fetched)] = db_rows(db, "SELECT verdict, bytes_fetched FROM wheels")
    assert (verdict, fetched) == ("unusable", 0)
    [(code, message)] = db_rows(db, "SELECT code, message FROM findings")
    assert code == "E001" and "ignores Range" in message


def test_runs_on_an_amd_gpu_agrees_with_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A HIP library built for gfx942 and gfx9/10-3/11/12 generic targets (clang-built fixture): runs
    on gfx942, not on gfx1100 (ROCm's comgr does not select a generic entry for it: docs/amd.md)
    nor gfx90a, as `check --gpu` answers."""
    wheels = tmp_path / "w"
    wheels.mkdir()
    amd = Path(__file__).parents[1] / "fixtures" / "amd" / "bin" / "hip_ccob_generic.so"
    whl = make_wheel(wheels, "hipdemo", "1.0", {"hipdemo/lib/libhip.so": amd})
    db = tmp_path / "i.db"
    index_db(db, str(wheels), "-j", "1")
    capsys.readouterr()
    for gpu in ("gfx942", "gfx1100", "gfx90a"):
        assert main(["query", "runs-on", "--db", str(db), "--gpu", gpu, "--all", "--format", "json"]) == 0
        [row] = json.loads(capsys.readouterr().out)["rows"]
        r = main(["check", str(whl), "--gpu", gpu, "--no-config", "-q", "-o", os.devnull])
        assert (row["runs"] == "yes") == (r == 0)
        assert row["runs"] == ("yes" if gpu == "gfx942" else "no")
