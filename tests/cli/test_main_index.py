"""`archaudit index`: its summary (text and JSON), the reasons verdicts failed, and what it refuses
before it makes a database (a file that lists no wheel, --ray without Ray, a bad byte count)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from archaudit import core
from archaudit.cli import main
from archaudit.cli.main_index import byte_count
from helpers import db_rows, demo_corpus
from range_server import serving


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """demo 1.0, 2.0 and 3.0 (unreadable) and the example wheel (helpers.demo_corpus)."""
    return demo_corpus(tmp_path_factory.mktemp("wheels"))


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
    [(verdict, code)] = db_rows(
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


def test_index_says_which_codes_failed_its_verdicts(tmp_path, capsys):
    (tmp_path / "wh").mkdir()
    shutil.copy(core.example_wheel(), tmp_path / "wh")
    rc = main(["index", str(tmp_path / "wh"), "--db", str(tmp_path / "x.db"), "-q"])
    out = capsys.readouterr().out
    assert rc == 1
    assert (
        "verdicts: fail 1 (failed by C001 no claim in 1; C001: give the claim (--arch) or ask about GPUs "
        "(--gpu T4 --gpu H100)" in out
    )
    rc = main(
        [
            "index",
            str(tmp_path / "wh"),
            "--db",
            str(tmp_path / "y.db"),
            "-q",
            "--format",
            "json",
            "-o",
            str(tmp_path / "i.json"),
        ]
    )
    assert json.loads((tmp_path / "i.json").read_text())["failed_by"] == {"C001": 1}


@pytest.mark.parametrize("text, n", [("1", 1), ("500M", 500 * 10**6), ("2g", 2 * 10**9), ("3kB", 3000), ("1T", 10**12)])
def test_max_bytes_takes_a_count_with_a_unit_of_powers_of_ten(text, n):
    assert byte_count(text) == n


@pytest.mark.parametrize("text", ["0", "lots", "M", "1.5G", "-2k", "1\u0660"])
def test_anything_else_is_not_a_byte_count(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a byte count"):
        byte_count(text)
