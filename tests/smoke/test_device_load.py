"""The device-load probe (archaudit.smoke.device_load): which containers it hands the driver and
how, its JIT spread over parts of a large PTX container, and check's verdict it holds each
answer to, on the nvcc-built fixtures. On a GPU, tests/smoke/test_smoke_gpu.py checks the
driver's answers themselves."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from archaudit.read.artifacts import inventory
from archaudit.read.library import scan_file
from archaudit.smoke import child, device_load as D
from archaudit.smoke.report import FAIL, SKIP
from helpers import CUDA_BIN
from smoke_helpers import H200

MULTI = Path(__file__).parents[1] / "fixtures" / "smoke" / "bin" / "multi_ptx90.fatbin"


def test_device_load_verdict_holds_the_driver_to_check_s_ptx_floor() -> None:
    """On the H200 (driver 580.159.04, CUDA 13.0) lib_ptx94_late.so's PTX of ISA 9.4 is refused
    with 222 (records/smoke-h200/ptx94.txt): late_fill has no other code for 9.0, so check's rule
    with that driver is D001 and the library does not run there; from CUDA 13.4 on it does.
    lib_ptx94_named.so's kernel is named sm80_tail_kernel, which by NVIDIA's naming means 8.0 and
    newer, so the name excuses nothing on 9.0: its PTX sets the floor there too, as the driver
    answered for both (222)."""
    (late,) = inventory(str(CUDA_BIN / "lib_ptx94_late.so"), decode=True).libraries
    (named,) = inventory(str(CUDA_BIN / "lib_ptx94_named.so"), decode=True).libraries
    runs, why, failing = D._coverage(late, H200, (13, 0))
    assert (runs, failing) == (False, ("D001",)) and "late_fill" in why
    assert D._coverage(late, H200, (13, 4))[0] and D._coverage(late, H200, None)[0]
    runs, why, failing = D._coverage(named, H200, (13, 0))
    assert (runs, failing) == (False, ("D001",)) and D._coverage(named, H200, (13, 4))[0]


def test_the_referee_loads_a_cubin_kept_as_a_zstd_frame_as_the_library_does(tmp_path):
    """device-load hands the driver what the library hands it: a cubin kept as a bare zstd frame
    (tests/fixtures/cuda/bin/lib_zstd_cubin_sm80.so) is decoded in archaudit's process into the
    scratch directory, and that file is the spec the child loads; other containers stay in place."""
    import zstandard

    framed, plain = str(CUDA_BIN / "lib_zstd_cubin_sm80.so"), str(CUDA_BIN / "lib_embedded_cubin_sm80.so")
    items = D.decoded(D.plan([(p, scan_file(p)) for p in (framed, plain)]), str(tmp_path))
    (spec, other) = [it.spec() for it in items]
    c = items[0].container
    with open(framed, "rb") as f:
        f.seek(c.offset)
        expected = zstandard.ZstdDecompressor().decompressobj().decompress(f.read(c.size))
    assert (spec["offset"], spec["size"]) == (0, len(expected))
    assert Path(str(spec["file"])).read_bytes() == expected and expected[:4] == b"\x7fELF"
    assert (other["file"], other["offset"]) == (plain, items[1].container.offset)


def _item(tmp_path):
    lib = scan_file(str(MULTI), decode=True)
    return D.Item(str(MULTI), 0, lib.containers[0], False)


def _fake_driver(part_code: int):
    """Stands in for the children: answers part_code for a part file, for a whole container
    its size (so an answer given to the wrong container shows)."""
    calls: list[list[str]] = []

    def run_task(task, specs, params, extra_env):
        calls.append([str(s["file"]) for s in specs])
        outs: list[child.Outcome | None] = [
            child.Outcome(
                "PASS",
                "",
                0.0,
                details={
                    "per_device": [{"code": part_code if "ptx-part-" in str(s["file"]) else s["size"], "seconds": 1.0}]
                },
            )
            for s in specs
        ]
        return child.TaskRun(outs, [{"driver": "13.0"}], [], 0.0)

    return run_task, calls


def test_a_split_container_answers_0_only_when_every_part_does(tmp_path, monkeypatch):
    monkeypatch.setattr(D, "SPLIT_BYTES", 1000)
    item = _item(tmp_path)
    off = {0: [D.Answer(223, 0.0)]}
    run_task, calls = _fake_driver(0)
    answers, _, _, split = D.load_jit(run_task, [item], off, 4, str(tmp_path))
    assert split == {0: 4} and [a.code for a in answers[0]] == [0]
    assert answers[0][0].seconds == 4.0  # the JIT time of the parts, summed
    assert all("ptx-part-" in f for c in calls for f in c)


def test_a_part_refused_means_the_whole_container_is_loaded_and_its_answer_counts(tmp_path, monkeypatch):
    monkeypatch.setattr(D, "SPLIT_BYTES", 1000)
    item = _item(tmp_path)
    run_task, calls = _fake_driver(218)
    answers, _, _, split = D.load_jit(run_task, [item], {0: [D.Answer(223, 0.0)]}, 4, str(tmp_path))
    assert split == {0: 0} and [a.code for a in answers[0]] == [item.container.size]
    assert calls[-1] == [str(MULTI)]  # reloaded whole


def test_only_a_container_the_driver_refused_for_want_of_the_jit_is_split(tmp_path, monkeypatch):
    monkeypatch.setattr(D, "SPLIT_BYTES", 1000)
    item = _item(tmp_path)
    for off in ({0: [D.Answer(209, 0.0)]}, {0: [D.Answer(None, 0.0, "died")]}, {}):
        run_task, calls = _fake_driver(0)
        _, _, _, split = D.load_jit(run_task, [item], off, 4, str(tmp_path))
        assert split == {} and calls == [[str(MULTI)]]
    monkeypatch.setattr(D, "SPLIT_BYTES", 10**9)
    run_task, calls = _fake_driver(0)
    assert D.load_jit(run_task, [item], {0: [D.Answer(223, 0.0)]}, 4, str(tmp_path))[3] == {}


def test_answers_of_containers_after_a_split_one_stay_theirs(tmp_path, monkeypatch):
    monkeypatch.setattr(D, "SPLIT_BYTES", 1000)
    big = _item(tmp_path)
    others = [D.Item(str(MULTI), k, replace(big.container, size=100 + k), False) for k in range(1, 6)]
    items = [big, *others]
    off = {0: [D.Answer(223, 0.0)], **{k: [D.Answer(209, 0.0)] for k in range(1, 6)}}
    run_task, _ = _fake_driver(0)
    answers, _, _, split = D.load_jit(run_task, items, off, 3, str(tmp_path))
    assert split == {0: 3} and answers[0][0].code == 0
    assert {k: answers[k][0].code for k in range(1, 6)} == {k: 100 + k for k in range(1, 6)}


def cuda_header() -> Path | None:
    """cuda.h of the CUDA toolkit beside nvcc, if there is one."""
    import shutil

    nvcc = shutil.which("nvcc")
    for base in ([Path(nvcc).resolve().parents[1]] if nvcc else []) + [Path("/usr/local/cuda")]:
        if (base / "include" / "cuda.h").is_file():
            return base / "include" / "cuda.h"
    return None


def test_each_driver_answer_is_named_as_cuda_h_names_it():
    import re

    import pytest

    header = cuda_header()
    if header is None:
        pytest.skip("no CUDA toolkit (cuda.h) here")
    enum = dict(
        (int(v), n) for n, v in re.findall(r"^\s*(CUDA_SUCCESS|CUDA_ERROR_\w+)\s*=\s*(\d+)", header.read_text(), re.M)
    )
    for code in D.ERROR_NAMES:
        assert D.code_name(code) == f"{enum[code]} ({code})"
    assert D.code_name(None) == "the loading process died"
    unnamed = next(c for c in enum if c not in D.ERROR_NAMES)
    assert D.code_name(unnamed) == f"CUresult ({unnamed})"


def test_shards_share_out_every_index_once_in_lists_of_about_equal_cost():
    costs = [5.0, 4.0, 3.0, 3.0, 3.0, 0.5, 9.0]
    for n in (1, 2, 3, 7, 20):
        lists = D.shards(costs, n)
        assert sorted(i for s in lists for i in s) == list(range(len(costs)))
        assert len(lists) == min(n, len(costs)) and all(lists)
        assert all([costs[i] for i in s] == sorted((costs[i] for i in s), reverse=True) for s in lists)
        loads = [sum(costs[i] for i in s) for s in lists]
        # LPT: no list exceeds the mean load by more than its own last (cheapest) cost
        assert all(load - costs[s[-1]] <= sum(costs) / len(lists) for load, s in zip(loads, lists))
    assert D.shards([], 4) == []


def test_the_plan_takes_every_cuda_container_and_loads_bare_ptx_as_text():
    lib_path, ptx_path = str(CUDA_BIN / "lib_embedded_two_cubins.so"), str(CUDA_BIN / "kern_80.ptx")
    lib, ptx = scan_file(lib_path), scan_file(ptx_path)
    items = D.plan([(lib_path, lib), (ptx_path, ptx)])
    assert [(it.path, it.index) for it in items] == [(lib_path, k) for k in range(len(lib.containers))] + [
        (ptx_path, k) for k in range(len(ptx.containers))
    ]
    assert [it.text for it in items] == [False] * len(lib.containers) + [True] * len(ptx.containers)
    for it in items:
        assert it.spec() == {"file": it.path, "offset": it.container.offset, "size": it.container.size, "text": it.text}
        ptx_bytes = sum(e.size for e in it.container.entries if e.kind == "ptx")
        assert it.cost(False) == 1e-4 and it.cost(True) == 1e-4 + ptx_bytes * D.JIT_COST_PER_BYTE


def test_without_a_gpu_each_library_is_a_skip_and_require_gpu_makes_it_a_fail(tmp_path):
    from smoke_helpers import probe_context

    files = tuple(str(CUDA_BIN / n) for n in ("lib_sm80.so", "lib_embedded_two_cubins.so", "lib_host.so"))
    c = probe_context(tmp_path, distribution="demo", location=str(CUDA_BIN), files=files)
    rows = D.DeviceLoadProbe().run(c)
    n = {name: sum(1 for k in scan_file(str(CUDA_BIN / name)).containers if k.vendor == "nvidia") for name in files}
    assert [(r.subject, r.status) for r in rows] == [("lib_embedded_two_cubins.so", SKIP), ("lib_sm80.so", SKIP)]
    for r in rows:
        assert r.reason == f"{n[str(CUDA_BIN / r.subject)]} fatbin container(s) not loaded: cuInit failed: no device"
    strict = D.DeviceLoadProbe().run(probe_context(tmp_path, location=str(CUDA_BIN), files=files, require_gpu=True))
    assert [r.status for r in strict] == [FAIL, FAIL]
    (none,) = D.DeviceLoadProbe().run(probe_context(tmp_path, distribution="demo", files=files[2:]))
    assert (none.status, none.reason) == (SKIP, "no file of the distribution carries CUDA device code")
