"""`archaudit index` and `archaudit query`: wheels built from the nvcc-built fixture libraries and
the shipped example wheel, indexed from a directory, a URL list and a simple index served over
loopback; every stored fact is checked against what `archaudit check`/`diff` say of the same
wheels read directly."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from archaudit.claims import parse_claim
from archaudit.cli import main
from archaudit.core import check
from archaudit.gpus.catalog import NvidiaGpu
from archaudit.index import engine, reports, sources
from archaudit.index.store import Store, inventory_of
from archaudit.index.task import TaskOptions, failed
from archaudit.judge import diff
from archaudit.judge.policy import Policy
from archaudit.read.artifacts import inventory
from helpers import DEMO_LIB as LIB, make_wheel
from range_server import serving

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cuda" / "bin"


def _index(db: Path, *args: str) -> int:
    return main(["index", *args, "--db", str(db), "-q", "-o", os.devnull])


def _rows(db: Path, sql: str, params: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as c:
        return list(c.execute(sql, params))


def test_directory_every_wheel_a_row_with_facts_of_check(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    assert _index(db, str(corpus), "-j", "1") == 1  # a failing and an unusable wheel: exit 1
    rows = {
        r[0]: r[1:]
        for r in _rows(
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
            _rows(
                db, "SELECT code, subject FROM findings JOIN wheels ON wheels.id = wheel_id WHERE file = ?", (f.name,)
            )
        )
        assert got == {(c, s.replace(str(f), f.name)) for c, s in want}
    # the unreadable wheel is a row with its finding, not a gap
    assert rows["demo-3.0-py3-none-manylinux_2_28_x86_64.whl"][0] == "unusable"
    assert ("E002",) in _rows(db, "SELECT code FROM findings JOIN wheels ON wheels.id = wheel_id WHERE version='3.0'")
    # no wheel here embeds a claim: each row says none
    assert {r[2] for r in rows.values()} == {"none"}


def test_given_claim_is_recorded_and_judged_as_check_judges_it(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    _index(db, str(corpus), "-j", "1", "--arch", "7.5 8.0")
    claim = parse_claim("7.5 8.0", "--arch")
    for file, source, code in _rows(db, "SELECT file, claim_source, exit_code FROM wheels"):
        r = check([str(corpus / str(file))], claim, Policy(), jobs=1, decode=True)
        assert (source, code) == ("given", r.exit_code)
    assert dict(_rows(db, "SELECT version, verdict FROM wheels WHERE project = 'demo'")) == {
        "1.0": "pass",
        "2.0": "fail",
        "3.0": "unusable",
    }


def test_entries_and_kernels_round_trip(corpus: Path, tmp_path: Path) -> None:
    """What the database holds rebuilds the inventory `check` reads (every entry and kernel)."""
    db = tmp_path / "i.db"
    _index(db, str(corpus), "-j", "1")
    with sqlite3.connect(db) as c:
        for wid, file in c.execute("SELECT id, file FROM wheels"):
            direct = inventory(str(corpus / file), jobs=1, decode=True)
            stored = inventory_of(c, wid)
            assert stored.libraries == direct.libraries
            assert [p.code for p in stored.problems] == [p.code for p in direct.problems]
            assert stored.unusable == direct.unusable
    kernels = _rows(db, "SELECT DISTINCT name FROM kernels")
    assert kernels  # the fixtures' kernels were decoded and stored
    n_entries = sum(len(lib.entries) for f in corpus.iterdir() for lib in inventory(str(f), jobs=1).libraries)
    assert _rows(db, "SELECT count(*) FROM entries")[0][0] == n_entries


def test_rerun_skips_and_newer_version_marks_changed_verdicts(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    refs = sources.resolve([str(corpus)], [], sources.Filters())
    store = Store(str(db))
    first = engine.run(refs, store, TaskOptions(), jobs=1)
    again = engine.run(refs, store, TaskOptions(), jobs=1)
    store.close()
    assert (first.judged, first.skipped) == (4, 0)
    assert (again.judged, again.skipped) == (0, 4)
    # an older archaudit had judged demo 2.0 a pass: the current one re-judges every wheel and says which changed
    with sqlite3.connect(db) as c:
        c.execute("UPDATE wheels SET archaudit_version = '0.0.1', verdict = 'pass' WHERE file LIKE 'demo-2.0%'")
        c.execute("UPDATE wheels SET archaudit_version = '0.0.1' WHERE file LIKE 'demo-1.0%'")
    store = Store(str(db))
    third = engine.run(refs, store, TaskOptions(), jobs=1)
    store.close()
    assert (third.judged, third.skipped) == (2, 2)
    assert [(ch.file.split("-")[1], ch.before, ch.before_version, ch.after) for ch in store.changes] == [
        ("2.0", "pass", "0.0.1", "fail")
    ]
    got = dict(
        (r[0], r[1:])
        for r in _rows(
            db, "SELECT version, previous_verdict, previous_version, verdict_changed FROM wheels WHERE project = 'demo'"
        )
    )
    assert got["2.0"] == ("pass", "0.0.1", 1)
    assert got["1.0"] == ("fail", "0.0.1", 0)
    assert got["3.0"] == (None, None, 0)
    assert _rows(db, "SELECT count(*) FROM verdicts")[0][0] == 6
    with sqlite3.connect(db) as c:
        t = reports.changed(c)
    assert [r[1:] for r in t.rows] == [
        ("2.0", "py3-none-manylinux_2_28_x86_64", "pass (0.0.1)", f"fail ({__import__('archaudit').__version__})")
    ]


def test_process_pool_stores_what_one_process_stores(corpus: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    _index(a, str(corpus), "-j", "1")
    _index(b, str(corpus), "-j", "2")
    q = (
        "SELECT file, sha256, verdict, (SELECT count(*) FROM entries e WHERE e.wheel_id = w.id), "
        "(SELECT count(*) FROM kernels k WHERE k.wheel_id = w.id) FROM wheels w ORDER BY file"
    )
    assert _rows(a, q) == _rows(b, q)


def test_queries_agree_with_check_and_diff(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "i.db"
    _index(db, str(corpus), "-j", "1")
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
    _index(local, str(corpus), "-j", "1")
    with serving(str(corpus)) as srv:
        urls = tmp_path / "urls.txt"
        urls.write_text("".join(f"{srv.url}/{f.name}#sha256={srv.digest(f.name)}\n" for f in sorted(corpus.iterdir())))
        assert _index(remote, str(urls), "-j", "1") == 1
        sent = srv.sent
    q = (
        "SELECT file, sha256, verdict, (SELECT count(*) FROM entries e WHERE e.wheel_id = w.id), "
        "(SELECT count(*) FROM kernels k WHERE k.wheel_id = w.id) FROM wheels w ORDER BY file"
    )
    assert _rows(local, q) == _rows(remote, q)
    fetched = dict(_rows(remote, "SELECT file, bytes_fetched FROM wheels"))
    sizes = dict(_rows(remote, "SELECT file, size FROM wheels"))
    assert sum(fetched.values()) == sent  # every byte the server sent is counted
    for name in ("demo-1.0-py3-none-manylinux_2_28_x86_64.whl", "demo-2.0-py3-none-manylinux_2_28_x86_64.whl"):
        assert sizes[name] == (corpus / name).stat().st_size
        assert fetched[name] < sizes[name] / 2  # the padding members are never fetched
    assert all(fetched[n] <= sizes[n] for n in fetched)  # no byte fetched twice
    assert (
        dict(_rows(remote, "SELECT file, sha256_checked FROM wheels"))["demo-1.0-py3-none-manylinux_2_28_x86_64.whl"]
        == 0
    )


def test_server_without_ranges_is_an_unreadable_row_not_a_download(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    name = "demo-1.0-py3-none-manylinux_2_28_x86_64.whl"
    with serving(str(corpus), ranges=False) as srv:
        assert _index(db, f"{srv.url}/{name}") == 1
    [(verdict, fetched)] = _rows(db, "SELECT verdict, bytes_fetched FROM wheels")
    assert (verdict, fetched) == ("unusable", 0)
    [(code, message)] = _rows(db, "SELECT code, message FROM findings")
    assert code == "E001" and "ignores Range" in message


@pytest.mark.parametrize("accept_json", [True, False])
def test_simple_index_with_version_range(
    corpus: Path, tmp_path: Path, accept_json: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not accept_json:  # a PEP 503 (HTML) index: the client's JSON preference is not honoured
        monkeypatch.setattr(sources, "JSON_TYPE", "application/x-not-asked")
    with serving(str(corpus)) as srv:
        srv.upload_times["demo-2.0-py3-none-manylinux_2_28_x86_64.whl"] = "2025-01-02T03:04:05Z"
        refs = sources.resolve([f"{srv.url}/simple/"], ["demo>=2,<3"], sources.Filters(platforms=("manylinux*",)))
        assert [r.file for r in refs] == ["demo-2.0-py3-none-manylinux_2_28_x86_64.whl"]
        assert refs[0].sha256 == srv.digest(refs[0].file)
        assert refs[0].upload_time == ("2025-01-02T03:04:05Z" if accept_json else None)
        assert sources.resolve([f"{srv.url}/simple/"], ["demo"], sources.Filters(platforms=("win*",))) == []


def test_max_bytes_starts_no_wheel_past_the_cap(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    store = Store(str(db))
    refs = sources.resolve([str(corpus)], [], sources.Filters())
    s = engine.run(refs, store, TaskOptions(), jobs=1, max_bytes=1)
    store.close()
    assert (s.judged, s.not_started) == (1, 3)


def test_runs_on_depends_on_the_gpu_asked(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    _index(db, str(corpus), "-j", "1")
    with sqlite3.connect(db) as c:
        hopper = reports.runs_on(c, "H100", [("H100", (9, 0))], [], "demo", every=True)
        ampere = reports.runs_on(c, "A10", [("A10", (8, 6))], [], "demo", every=True)
    # sm_80 SASS runs on 8.6 (same major), not on 9.0; 1.0 carries sm_90 and PTX
    assert {r[1]: r[3] for r in hopper.rows} == {"1.0": "yes", "2.0": "no", "3.0": "unverified"}
    assert {r[1]: r[3] for r in ampere.rows} == {"1.0": "yes", "2.0": "yes", "3.0": "unverified"}


def test_runs_on_a_gpu_outside_a_vendor_range(tmp_path: Path) -> None:
    """An nvcc-built cuSPARSELt (its file name and CUSPARSELT_LOG_LEVEL; documented for 8.0 and
    newer): a wheel of it alone does not run on a T4 (G019, the row named as the reason, not 'no
    device code'); beside a library that runs there it is not held against the wheel (torch 2.5.1
    on a T4), in the coverage row too. The identity string survives the database (schema 6)."""
    wheels = tmp_path / "w"
    wheels.mkdir()
    lt = FIXTURES / "vendor" / "cusparselt" / "libcusparseLt.so.0"
    make_wheel(wheels, "ltalone", "1.0", {"ltalone/libcusparseLt.so.0": lt})
    make_wheel(
        wheels,
        "ltbundled",
        "1.0",
        {"ltbundled/lib/libcusparseLt-294d6944.so.0": lt, "ltbundled/lib/libtorchish.so": FIXTURES / "lib_all.so"},
    )
    db = tmp_path / "i.db"
    _index(db, str(wheels), "-j", "1")
    with sqlite3.connect(db) as c:
        t4 = reports.runs_on(c, "T4", [("T4", (7, 5))], [], None, every=True)
        bundled = reports.coverage(c, "ltbundled")
    answers = {r[0]: (r[3], r[4]) for r in t4.rows}
    assert answers["ltalone"] == ("no", "outside its vendor's range (cuSPARSELt for CUDA 13: 8.0 and newer)")
    assert answers["ltbundled"][0] == "yes"
    assert bundled.rows[0][bundled.columns.index("sm_75")] == "N"


def test_coverage_cell_follows_g009_when_only_part_of_a_library_runs(tmp_path: Path) -> None:
    """lib_multiobj.so carries sm_90 and compute_90 for one object but only sm_80 for another: the
    library as a whole does not run on 9.0 (check --gpu says G009), so its cell is '-', not 'N'."""
    wheels = tmp_path / "w"
    wheels.mkdir()
    make_wheel(wheels, "part", "1.0", {LIB: FIXTURES / "lib_multiobj.so"})
    db = tmp_path / "i.db"
    _index(db, str(wheels), "-j", "1")
    gpus = (NvidiaGpu("sm_90", (9, 0)), NvidiaGpu("sm_86", (8, 6)))
    r = check([str(next(wheels.iterdir()))], None, Policy(gpus=gpus), jobs=1, decode=True)
    g009 = {str(f.get("gpu")) for f in r.findings if f.code == "G009"}
    with sqlite3.connect(db) as c:
        [row] = reports.coverage(c, "part").rows
        cols = reports.coverage(c, "part").columns
    cells = dict(zip(cols, row))
    assert "sm_90" in g009 and cells["sm_90"] == "-"
    assert cells["sm_86"] == ("-" if "sm_86" in g009 else "N")


def test_cli_simple_index_json_summary_and_missing_paths(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "i.db"
    with serving(str(corpus)) as srv:
        assert (
            main(["index", f"{srv.url}/simple/", "--project", "demo<2", "--db", str(db), "-q", "--format", "json"]) == 1
        )
    out = json.loads(capsys.readouterr().out)
    assert (out["listed"], out["judged"], out["verdicts"]) == (1, 1, {"fail": 1})
    assert 0 < out["fetched_bytes"] < out["wheel_bytes"]
    # a list naming a file that is not there: a row with E001, not a crash and not a gap
    listing = tmp_path / "list.txt"
    listing.write_text("# wheels\n\nmissing-1.0-py3-none-any.whl\n")
    assert main(["index", str(listing), "--db", str(db), "-q", "-o", os.devnull]) == 1
    [(verdict, code)] = _rows(
        db, "SELECT verdict, code FROM wheels JOIN findings ON wheel_id = wheels.id WHERE project = 'missing'"
    )
    assert (verdict, code) == ("unusable", "E001")
    # usage errors: an index without --project, a bad claim, a bad byte count
    assert main(["index", "http://127.0.0.1:9/simple/", "--db", str(db)]) == 2
    assert main(["index", str(corpus), "--db", str(db), "--arch", "banana"]) == 2
    with pytest.raises(SystemExit):
        main(["index", str(corpus), "--db", str(db), "--max-bytes", "lots"])


def test_a_file_that_is_neither_a_wheel_nor_a_list_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a plain zip (binary, not UTF-8) given where a wheel or a list of wheel URLs is expected
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(plain, "w") as z:
        z.writestr("a.py", "x = 1\n")
    db = tmp_path / "i.db"
    assert main(["index", str(plain), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "not a list of wheel URLs" in err and "internal error" not in err
    assert not db.exists()


def test_ray_missing_is_refused_before_the_database_is_made(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed, whether or not it is here
    db = tmp_path / "i.db"
    assert main(["index", str(corpus), "--db", str(db), "--ray", "auto"]) == 2
    assert "--ray needs Ray" in capsys.readouterr().err
    assert not db.exists()


def test_a_dead_worker_is_a_row_judged_again_on_rerun(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    [ref] = [r for r in sources.resolve([str(corpus)], [], sources.Filters()) if r.file.startswith("demo-1.0")]
    store = Store(str(db))
    store.put(failed(ref, TaskOptions(), None, "killed"), "")
    assert _rows(db, "SELECT verdict, file FROM wheels") == [("unusable", ref.file)]
    assert not store.done(ref, "")
    again = engine.run([ref], store, TaskOptions(), jobs=1)
    store.close()
    assert again.judged == 1
    assert _rows(db, "SELECT verdict FROM wheels") == [("fail",)]
    assert _rows(db, "SELECT count(*) FROM findings WHERE code = 'E099'") == [(0,)]


def test_libraries_scope_reads_only_matching_members_and_is_part_of_the_key(tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    wheels.mkdir()
    make_wheel(
        wheels,
        "two",
        "1.0",
        {"two/lib/liba.so": FIXTURES / "lib_multi.so", "two/lib/libb.so": FIXTURES / "lib_sm80.so"},
    )
    db = tmp_path / "i.db"
    _index(db, str(wheels), "-j", "1", "--libraries", "*/liba.so")
    assert _rows(db, "SELECT l.path, w.scope FROM libraries l JOIN wheels w ON w.id = l.wheel_id") == [
        ("two/lib/liba.so", "*/liba.so")
    ]
    # the same wheel over every library is another question: judged again, both libraries read
    refs = sources.resolve([str(wheels)], [], sources.Filters())
    store = Store(str(db))
    assert store.done(refs[0], "*/liba.so") and not store.done(refs[0], "")
    store.close()
    _index(db, str(wheels), "-j", "1")
    assert [r[0] for r in _rows(db, "SELECT path FROM libraries ORDER BY path")] == [
        "two/lib/liba.so",
        "two/lib/libb.so",
    ]


def test_runs_on_an_amd_gpu_agrees_with_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A HIP library built for gfx942 and gfx9/10-3/11/12 generic targets (clang-built fixture): runs
    on gfx942, not on gfx1100 (ROCm's comgr does not select a generic entry for it: docs/amd.md)
    nor gfx90a, as `check --gpu` answers."""
    wheels = tmp_path / "w"
    wheels.mkdir()
    amd = Path(__file__).parents[1] / "fixtures" / "amd" / "bin" / "hip_ccob_generic.so"
    whl = make_wheel(wheels, "hipdemo", "1.0", {"hipdemo/lib/libhip.so": amd})
    db = tmp_path / "i.db"
    _index(db, str(wheels), "-j", "1")
    capsys.readouterr()
    for gpu in ("gfx942", "gfx1100", "gfx90a"):
        assert main(["query", "runs-on", "--db", str(db), "--gpu", gpu, "--all", "--format", "json"]) == 0
        [row] = json.loads(capsys.readouterr().out)["rows"]
        r = main(["check", str(whl), "--gpu", gpu, "--no-config", "-q", "-o", os.devnull])
        assert (row["runs"] == "yes") == (r == 0)
        assert row["runs"] == ("yes" if gpu == "gfx942" else "no")


def test_html_without_matplotlib_is_a_usage_error(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "i.db"
    _index(db, str(corpus), "-j", "1")
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)  # as if not installed
    out = tmp_path / "page.html"
    assert main(["query", "html", "--db", str(db), "--project", "demo", "-o", str(out)]) == 2
    assert not out.exists()
    assert main(["query", "changed", "--db", str(db)]) == 0


def test_own_target_and_defines_nothing_round_trip(tmp_path: Path) -> None:
    """An AMD code object's own target (its e_flags) and an empty cubin's 'defines nothing' survive
    the database: a query judges them as check does (an xnack+ object, a cubin with no kernel)."""
    fix = Path(__file__).resolve().parents[1] / "fixtures"
    corpus = tmp_path / "wheels"
    corpus.mkdir()
    make_wheel(
        corpus,
        "rt",
        "1.0",
        {
            "rt/lib_empty_sm75.so": fix / "cuda" / "bin" / "lib_empty_sm75.so",
            "rt/hip_xnack.so": fix / "amd" / "bin" / "hip_xnack.so",
        },
    )
    db = tmp_path / "i.db"
    _index(db, str(corpus), "-j", "1")
    with sqlite3.connect(db) as c:
        ((wid, file),) = c.execute("SELECT id, file FROM wheels").fetchall()
        stored = inventory_of(c, wid)
    direct = inventory(str(corpus / file), jobs=1, decode=True)
    assert stored.libraries == direct.libraries
    entries = [e for lib in stored.libraries for e in lib.entries]
    assert any(e.defines_nothing for e in entries) and any(e.own_target for e in entries)


def test_statements_round_trip(tmp_path: Path) -> None:
    """A library's sourced statements (schema 4, libraries.statements) survive the database, so a
    query excuses NCCL's fp8 kernels below sm_90 as check does."""
    fix = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
    corpus = tmp_path / "wheels"
    corpus.mkdir()
    make_wheel(corpus, "st", "1.0", {"st/lib/libnccl.so.2": fix / "fp8_stated" / "libnccl.so.2"})
    db = tmp_path / "i.db"
    _index(db, str(corpus), "-j", "1", "--arch", "80;90")
    with sqlite3.connect(db) as c:
        ((wid, file),) = c.execute("SELECT id, file FROM wheels").fetchall()
        stored = inventory_of(c, wid)
        (said,) = c.execute("SELECT statements FROM libraries WHERE wheel_id = ?", (wid,)).fetchone()
    assert stored.libraries == inventory(str(corpus / file), jobs=1, decode=True).libraries
    assert json.loads(said) == ["FP8 reduction support begins with sm90 capable devices."]
    assert _rows(db, "SELECT verdict FROM wheels") == [("pass",)]


def test_a_finding_flood_is_one_folded_row_and_an_older_database_is_refused(tmp_path: Path) -> None:
    """A member of 32-byte bundle headers that declare no entries (one E030 each, E032 once the
    look-ahead is spent) is stored as check reports it, one row per code with its count and first
    messages (schema 5), and its inventory's folded problems round trip. A database of schema 4,
    whose rows cannot say so, is refused, not read."""
    import struct

    member = tmp_path / "data.hsaco"
    member.write_bytes((b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", 0)) * (1 << 15))  # 1 MiB
    corpus = tmp_path / "wheels"
    corpus.mkdir()
    make_wheel(corpus, "fl", "1.0", {"fl/data.hsaco": member})
    db = tmp_path / "i.db"
    assert _index(db, str(corpus), "-j", "1", "--arch", "80") == 1
    rows = _rows(db, "SELECT code, count, examples FROM findings")
    assert sum(n for _, n, _ in rows) == (1 << 15) + 1 and len(rows) <= 3  # every header, and G006
    assert all(len(json.loads(e)) == (5 if n > 5 else 0) for _, n, e in rows)
    with sqlite3.connect(db) as c:
        ((wid, file),) = c.execute("SELECT id, file FROM wheels").fetchall()
        stored = inventory_of(c, wid)
    assert stored.libraries == inventory(str(corpus / file), jobs=1, decode=True).libraries
    assert sum(p.count for p in stored.libraries[0].problems) == 1 << 15
    with sqlite3.connect(db) as c:
        c.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    assert main(["query", "--db", str(db), "changed"]) == 2


def test_lost_and_diff_agree_kernel_by_kernel(tmp_path: Path) -> None:
    """1.0 links kern.o and mul.o, each for 80;90; 2.0 links mul.o for sm_80 only. The library
    carries sm_80 and sm_90 in both, but mul's launch fails on 9.0 in 2.0: diff and query lost
    both name it."""
    floors = FIXTURES / "floors"
    wheels = tmp_path / "w"
    wheels.mkdir()
    make_wheel(wheels, "two", "1.0", {LIB: floors / "lib_two_8090.so"})
    make_wheel(wheels, "two", "2.0", {LIB: floors / "lib_two_mul80.so"})
    db = tmp_path / "i.db"
    _index(db, str(wheels), "-j", "1")
    old, new = sorted(wheels.iterdir())
    d = diff.compare(inventory(str(old)), inventory(str(new)))
    (lib,) = d.losses
    assert lib.lost == () and [(w.cc, w.kernels) for w in lib.worse] == [("9.0", ("_Z3mulPKfS0_Pfi",))]
    with sqlite3.connect(db) as c:
        rows = reports.lost(c, "two").rows
    assert [(r[2], r[4], r[5]) for r in rows if r[2] == "kernels"] == [("kernels", "sm_90", "_Z3mulPKfS0_Pfi")]
    assert ("runs", "sm_90", "none") in {(r[2], r[4], r[5]) for r in rows}  # check --gpu H100: G009
