"""Reading the trace probe's records (archaudit.smoke.trace_records): what each traced process's
tracer wrote (cupti.Recorder, through its callback), summed over the processes, and every file
that is not records said as a problem, never read past its bound.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from archaudit.smoke import cupti, trace_records
from archaudit.smoke.trace_records import AsyncError, Launch, Module, parse_records, read_trace
from smoke_helpers import BF16, SM80, SM90, api_exit, cubins, load_module


def written(rec: cupti.Recorder, directory: Path, pid: int) -> Path:
    """The recorder's records as the traced process `pid` would leave them."""
    path = Path(rec.write(str(directory)))
    return path.rename(directory / f"{pid}.json")


def test_two_processes_records_are_summed_per_kernel_result_and_layer(tmp_path):
    images = [i for i in cubins("lib_trace_sm90.so", tmp_path) if SM90 in cupti.cubin_functions(i)]
    out = tmp_path / "out"
    out.mkdir()
    for pid, launches in ((101, 3), (102, 2)):
        rec = cupti.Recorder()
        load_module(rec, images[0], 1)
        for _ in range(launches):
            api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, SM90, 0)
        api_exit(rec, cupti.DOMAIN_RUNTIME_API, 211, SM80, 209)
        written(rec, out, pid)
    t = read_trace(str(out))
    assert t.processes == 2 and t.problems == ()
    digest = hashlib.sha256(images[0]).hexdigest()
    assert t.launches == (Launch(SM90, 0, 5, "driver", (digest,)), Launch(SM80, 209, 2, "runtime", ()))  # by kernel
    assert t.modules == (Module(digest, len(images[0])),)  # the same image in both: one module
    # each process mapped this interpreter's files: each path once
    assert len(t.mapped) == len(set(t.mapped)) and any(os.path.basename(p).startswith("libc") for p in t.mapped)


def test_asynchronous_errors_keep_the_kernel_launched_before_them(tmp_path):
    rec = cupti.Recorder()
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, BF16, 0)
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 17, "", 719)  # cuCtxSynchronize
    written(rec, tmp_path, 7)
    assert read_trace(str(tmp_path)).async_errors == (AsyncError("cuCtxSynchronize", 719, BF16),)


def test_files_that_are_not_records_are_problems_and_the_rest_is_read(tmp_path):
    rec = cupti.Recorder()
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, SM90, 0)
    written(rec, tmp_path, 10)
    (tmp_path / "11.json").write_text("[1, 2")  # cut short
    (tmp_path / "12.json").write_text("[1, 2]")  # not an object
    (tmp_path / "13.json").write_text(json.dumps({"launches": [{"kernel": "k"}]}))  # no code, no count
    (tmp_path / "14.json").write_text(json.dumps({"launches": ["k"]}))
    (tmp_path / "15.error").write_text("no libcupti could be loaded")
    (tmp_path / "16.json.99.tmp").write_text("{")  # a write under way: not a records file yet
    t = read_trace(str(tmp_path))
    assert t.processes == 1 and [launch.kernel for launch in t.launches] == [SM90]
    assert [p.split(":")[0] for p in t.problems] == [
        "process 11",
        "process 12",
        "process 13",
        "process 14",
        "process 15",
    ]
    assert "JSONDecodeError" in t.problems[0] and "ValueError: not a JSON object" in t.problems[1]
    assert "KeyError" in t.problems[2] and "a launch record is not an object" in t.problems[3]
    assert t.problems[4] == "process 15: the tracer did not start: no libcupti could be loaded"


def test_a_records_file_over_the_bound_is_refused_unread(tmp_path, monkeypatch):
    rec = cupti.Recorder()
    api_exit(rec, cupti.DOMAIN_DRIVER_API, 307, SM90, 0)
    path = written(rec, tmp_path, 20)
    monkeypatch.setattr(trace_records, "MAX_RECORD_BYTES", path.stat().st_size - 1)
    t = read_trace(str(tmp_path))
    assert t.processes == 0 and t.launches == ()
    assert t.problems == (
        f"process 20: its records cannot be read: ValueError: {path.stat().st_size} bytes, "
        f"more than the {path.stat().st_size - 1}-byte bound",
    )


def test_dropped_launches_and_callback_errors_are_carried(tmp_path):
    raw = cupti.Recorder().records()
    (tmp_path / "1.json").write_text(json.dumps({**raw, "dropped": 3, "callback_errors": ["OSError: x"]}))
    (tmp_path / "2.json").write_text(json.dumps({**raw, "dropped": 4}))
    t = read_trace(str(tmp_path))
    assert t.dropped == 7 and t.problems == ("process 1: the tracer's callback raised OSError: x",)


def test_a_missing_directory_is_an_empty_trace(tmp_path):
    t = read_trace(str(tmp_path / "absent"))
    assert (t.processes, t.launches, t.problems) == (0, (), ())


@pytest.mark.parametrize("raw", [[], "x", {"modules": [{"sha256": "a"}]}, {"async_errors": [{"code": 1}]}])
def test_parse_records_refuses_what_is_not_one_processs_records(raw):
    with pytest.raises((ValueError, KeyError, TypeError)):
        parse_records(raw)


def test_parse_records_keeps_only_path_strings_of_the_mapped_files():
    launches, modules, errors, mapped = parse_records({"mapped": ["/lib/a.so", 3, None, "/lib/b.so"]})
    assert (launches, modules, errors, mapped) == ([], [], [], ["/lib/a.so", "/lib/b.so"])
