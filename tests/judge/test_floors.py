"""Driver floors that are not the code's: the GPU's own first driver, a statically linked CUDA
runtime, and cubins that record no toolkit. nvcc-built fixtures (tests/fixtures/cuda/build_floors.sh)."""

from __future__ import annotations

import json
import shutil

import pytest

import oracle
from archaudit.cli import main
from archaudit.gpus import cuda as arch
from archaudit.read.artifacts import inventory

FLOORS = oracle.FIXTURES / "floors"


def run(capsys, *args: str) -> tuple[int, dict]:
    rc = main(["check", "-q", "--format", "json", "--no-config", *args])
    return rc, json.loads(capsys.readouterr().out)


def findings(report: dict, code: str) -> list[dict]:
    return [f for t in report["targets"] for f in t["findings"] if f["code"] == code]


# ---- the GPU's own floor ---------------------------------------------------------------------


def test_a_blackwell_gpu_is_no_on_a_driver_older_than_its_first_release(capsys):
    """compute_80 PTX of ISA 7.0 JIT-compiles from 450.51.05 on: an A100 (first supported by
    CUDA 11.0) runs it on 470.82.01, a B200 (CUDA 12.8, R570) does not, nor does an H100 (11.8)."""
    fixture = str(FLOORS / "lib_ptx70.so")
    rc, rep = run(capsys, fixture, "--gpu", "B200", "--driver", "470.82.01")
    (d,) = findings(rep, "D001")
    assert rc == 1 and d["data"]["driver"] == "570.26" and d["data"]["cuda"] == "12.8"
    assert "the GPU itself: Blackwell (10.0) is first supported by CUDA 12.8" in d["message"]
    assert "no CUDA-capable device is detected" in d["message"]
    rc, rep = run(capsys, fixture, "--gpu", "H100", "--driver", "470.82.01")
    (d,) = findings(rep, "D001")
    assert rc == 1 and d["data"]["driver"] == "520.61.05"
    rc, rep = run(capsys, fixture, "--gpu", "A100", "--driver", "470.82.01")
    assert rc == 0 and findings(rep, "D001") == []
    (d002,) = findings(rep, "D002")
    assert d002["data"]["driver"] == "450.51.05"  # the code's own floor, above the A100's
    assert run(capsys, fixture, "--gpu", "B200", "--driver", "570.26")[0] == 0


def test_a_claimed_gpu_brings_its_own_floor_to_the_published_one(capsys):
    """D002 on a claim is the floor a release publishes: with 10.0 claimed it is Blackwell's."""
    rc, rep = run(capsys, str(FLOORS / "lib_ptx70.so"), "--arch", "80;100")
    (d002,) = findings(rep, "D002")
    assert d002["data"]["gpus"] == {"80": "450.51.05", "100": "570.26"} and d002["data"]["driver"] == "570.26"


@pytest.mark.parametrize(
    "cc, cuda, driver",
    [
        ((8, 9), (11, 8), "520.61.05"),
        ((9, 0), (11, 8), "520.61.05"),
        ((10, 0), (12, 8), "570.26"),
        ((12, 0), (12, 8), "570.26"),
        ((10, 3), (12, 9), "575.51.03"),
    ],
)
def test_first_driver_rows(cc, cuda, driver):
    row = arch.first_driver(cc)
    assert row is not None and row.cuda == cuda and row.driver() == driver


def test_first_driver_rows_agree_with_what_nvcc_compiled_for():
    """No release before a generation's first one compiles for it (nvcc_targets and cmake_all),
    and its first one does: the row names the release that brought the GPU."""
    data = arch.cuda_data()
    lists = {arch._cc(r): v["all"] for r, v in data["nvcc_targets"]["releases"].items()}
    lists.update({arch._cc(r): v["all"] for r, v in data["cmake_all"]["releases"].items()})
    for row in arch.first_drivers():
        for cc in row.ccs:
            number = cc[0] * 10 + cc[1]
            assert number in lists.get(row.cuda, [number]), (row.generation, cc)
            assert all(number not in got for release, got in lists.items() if release < row.cuda), (row.generation, cc)
    assert arch.first_driver((8, 7)) is None  # Tegra: JetPack drives it


# ---- a statically linked CUDA runtime -----------------------------------------------------------


def test_a_static_cuda_13_runtime_is_read_from_its_own_bytes():
    """nvcc 13.0.88 -cudart static: cudaRuntimeGetVersion returns 13000 (CUDART_VERSION)."""
    (library,) = inventory(str(FLOORS / "lib_ptx84_static13.so"), decode=False).libraries
    assert library.runtimes == ("13.0",) and library.needed and not any("cudart" in n for n in library.needed)
    (plain,) = inventory(str(FLOORS / "lib_ptx70.so"), decode=False).libraries
    assert plain.runtimes == ()


def test_a_static_cuda_13_runtime_sets_the_floor_above_its_kernels(capsys):
    """Its only kernel is PTX of ISA 8.4 (CUDA 12.4: 550.54.14), but its CUDA 13.0 runtime refuses
    a 550 driver (35, cudaErrorInsufficientDriver): the floor is 580.65.06."""
    fixture = str(FLOORS / "lib_ptx84_static13.so")
    rc, rep = run(capsys, fixture, "--gpu", "H100", "--driver", "550.54.14")
    (d,) = findings(rep, "D001")
    assert rc == 1 and d["data"]["driver"] == "580.65.06"
    assert "the CUDA 13.0 runtime it links in statically" in d["message"]
    assert "CUDA driver version is insufficient for CUDA runtime version" in d["message"]
    rc, rep = run(capsys, fixture, "--gpu", "H100", "--driver", "580.65.06")
    assert rc == 0
    rc, rep = run(capsys, fixture, "--arch", "80")
    (d002,) = findings(rep, "D002")
    assert rc == 0 and d002["data"]["driver"] == "580.65.06"


# ---- what a package's name says ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, major",
    [
        ("nvidia-cuda-cupti-cu12", 12),
        ("nvidia_cuda_sanitizer_api_cu12", 12),
        ("nvidia-cublas-cu11", 11),
        ("cupy-cuda12x", 12),
        ("cupy_cuda13x", 13),
        ("nvidia-cublas", None),
        ("torch", None),
        ("mycu12", None),
        ("nvidia-cuda-runtime-cu12-extra", None),
    ],
)
def test_package_cuda(name, major):
    assert arch.package_cuda(name) == major


# ---- diff: container by container ------------------------------------------------------------------


def test_a_library_whose_object_lost_sm_90_runs_worse_though_its_union_is_the_same(capsys, tmp_path):
    """lib_two_8090.so -> lib_two_mul80.so: both carry sm_80 and sm_90, but mul.o lost sm_90, so
    launching mul on an H100 fails (209). It was 'unchanged, no GPU architecture lost'."""
    for side, name in (("old", "lib_two_8090.so"), ("new", "lib_two_mul80.so")):
        (tmp_path / side).mkdir()
        shutil.copy(FLOORS / name, tmp_path / side / "libtwo.so")
    rc = main(["diff", "--format", "json", "--no-config", str(tmp_path / "old"), str(tmp_path / "new")])
    doc = json.loads(capsys.readouterr().out)
    (lib,) = doc["libraries"]
    assert rc == 1 and lib["change"] == "changed" and lib["lost"] == [] and lib["fails"]
    assert [(w["gpu"], w["was"], w["now"], w["kernels"]) for w in lib["worse"]] == [
        ("9.0", "native", "native", ["_Z3mulPKfS0_Pfi"])
    ]
    rc = main(["diff", "--no-config", str(tmp_path / "new"), str(tmp_path / "old")])  # the way back gains it
    assert rc == 0 and "no GPU architecture lost" in capsys.readouterr().out


def test_noted_release_is_what_the_cubins_record_and_built_by_starts_there():
    """nvcc 13.0's cubins note toolkit 13.0 (lib_multiobj.so): noted_release reads it and built_by
    answers it; a library whose code carries no note (PTX alone) has no noted release, and
    built_by falls back to what its PTX shows."""
    from archaudit.gpus.selection import nv_codes
    from archaudit.judge.floors import built_by, noted_release

    lib = inventory(str(oracle.FIXTURES / "lib_multiobj.so")).libraries[0]
    codes = nv_codes(e for c in lib.containers for e in c.entries)
    assert noted_release(codes) == (13, 0) and built_by(codes, None) == (13, 0)
    ptx = nv_codes(
        e for c in inventory(str(oracle.FIXTURES / "lib_ptx90.so")).libraries[0].containers for e in c.entries
    )
    ptx_only = tuple(x for x in ptx if x.kind == "ptx")
    assert ptx_only and noted_release(ptx_only) is None and built_by(ptx_only, None) is not None
