"""Driver floors and --gpu answers on real wheels (issue 37): what a library's own bytes and its
package say of its CUDA release, statically linked runtimes, and answers per vendor and platform."""

from __future__ import annotations

import json
import re

import pytest

from archaudit.claims import parse_claim
from archaudit.cli import main
from archaudit.findings import Finding
from archaudit.judge.audit import Report, audit
from archaudit.judge.floors import runtime_floor
from archaudit.judge.policy import Policy
from archaudit.read.artifacts import inventory
from wheels import fetch

pytestmark = pytest.mark.slow
census = pytest.mark.census  # wheels over wheels.TIER_BYTES: the census tier (README "Tests")


def check(wheel: str, arch: str | None = None, **policy: object) -> Report:
    claim = parse_claim(arch, "--arch") if arch is not None else None
    return audit([inventory(wheel, decode=True)], claim, Policy(**policy))  # type: ignore[arg-type]


def found(rep: Report, code: str) -> list[Finding]:
    return [f for f in rep.findings if f.code == code]


def run(capsys, *args: str) -> tuple[int, dict]:
    rc = main([*args[:1], "-q", "--format", "json", "--no-config", *args[1:]])
    return rc, json.loads(capsys.readouterr().out)


# ---- code that records no toolkit ---------------------------------------------------------------


def test_cupti_tool_cubins_are_dated_by_the_library_and_its_package():
    """CUPTI 12.9.79's sm_90 tool cubins record no toolkit (its sm_100 ones record 12.9): on an
    H100 under 580.159.04 they used to be D001 'cannot name'; the library's own notes date them
    CUDA 12.x, whose floor is 525.60.13."""
    wheel = str(fetch("nvidia-cuda-cupti-cu12", "12.9.79"))
    rep = check(wheel, gpus=(("H100", (9, 0)),), driver="580.159.04")
    assert rep.exit_code == 0 and found(rep, "D001") == []
    floors = {f.subject.rsplit("/", 1)[-1]: f.get("driver") for f in found(rep, "D002")}
    assert floors == {"libcheckpoint.so": "525.60.13", "libcupti.so.12": "525.60.13"}
    rep = check(wheel, gpus=(("H100", (9, 0)),), driver="520.61.05")
    assert rep.exit_code == 1 and {f.get("driver") for f in found(rep, "D001")} == {"525.60.13"}


@census
def test_triton_bundled_cupti_is_dated_by_its_own_cubins():
    """Triton 3.6.0 bundles CUPTI (triton/backends/nvidia/lib/cupti): its package names no CUDA
    release, its other cubins do (CUDA 12.8)."""
    rep = check(str(fetch("triton", "3.6.0")), gpus=(("H100", (9, 0)),), driver="580.159.04")
    assert rep.exit_code == 0 and found(rep, "D001") == []
    cupti = [f for f in found(rep, "D002") if "/cupti/" in f.subject]
    assert cupti and {f.get("driver") for f in cupti} == {"525.60.13"}


# ---- statically linked CUDA runtimes ------------------------------------------------------------


@pytest.mark.parametrize(
    "name, version, member, runtime",
    [
        pytest.param("nvidia-nccl-cu11", "2.21.5", "libnccl.so.2", "11.0", marks=census),  # NCCL links cudart_static
        ("nvidia-cuda-runtime-cu12", "12.4.127", "libcudart.so.12", "12.4"),  # the runtime itself
    ],
)
def test_the_cuda_runtime_version_is_read_from_its_own_code(name, version, member, runtime):
    inv = inventory(str(fetch(name, version)), decode=False)
    (library,) = [lib for lib in inv.libraries if lib.path.endswith(member)]
    assert library.runtimes == (runtime,)


@pytest.mark.parametrize(
    "name, version, filename, member, runtime",
    [
        # NCCL links cudart_static (no libcudart NEEDed); its ncclGetVersion has the same shape and
        # returns 23203, which is not a CUDA runtime's version and is not read as one
        pytest.param(
            "nvidia-nccl-cu13",
            "2.32.3",
            "nvidia_nccl_cu13-2.32.3-py3-none-manylinux_2_27_aarch64.whl",
            "libnccl.so.2",
            "13.4",
            marks=census,
        ),  # 305 MB
        (
            "nvidia-cuda-runtime-cu12",
            "12.4.127",
            "nvidia_cuda_runtime_cu12-12.4.127-py3-none-manylinux2014_aarch64.whl",
            "libcudart.so.12",
            "12.4",
        ),  # the runtime itself
    ],
)
def test_the_cuda_runtime_version_is_read_from_its_own_aarch64_code(name, version, filename, member, runtime):
    inv = inventory(str(fetch(name, version, filename=filename)), decode=False)
    (library,) = [lib for lib in inv.libraries if lib.path.endswith(member)]
    assert library.runtimes == (runtime,)


@census
def test_nccl_cu11_floor_is_its_static_runtime_family():
    """libnccl.so.2 of nvidia-nccl-cu11 2.21.5 NEEDs no libcudart: the CUDA 11.0 runtime it carries
    needs CUDA 11's floor (450.80.02), which NCCL's documented contract states too."""
    rep = check(str(fetch("nvidia-nccl-cu11", "2.21.5")), "80", driver="450.51.05")
    (d,) = found(rep, "D001")
    assert d.get("driver") == "450.80.02"


def test_ctranslate2_static_cuda_12_8_runtime_is_no_driver_of_its_claimed_5_3():
    """ctranslate2 4.8.5 links the CUDA 12.8 runtime statically (no libcudart NEEDed): its claimed
    5.3 (Jetson Nano, TX1: JetPack 4.6, CUDA 10.2) has no driver that runs it, G012; the rest of
    its claim runs from 525.60.13."""
    wheel = str(fetch("ctranslate2", "4.8.5"))
    (library,) = [lib for lib in inventory(wheel, decode=False).libraries if lib.runtimes]
    assert library.runtimes == ("12.8",)
    rep = check(wheel, "5.3;6.0;6.1;7.0;7.5;8.0;8.6+PTX")
    (g,) = found(rep, "G012")
    assert g.get("gpu") == "53" and rep.exit_code == 1
    rep = check(wheel, "6.0;6.1;7.0;7.5;8.0;8.6+PTX", driver="520.61.05")
    (d,) = found(rep, "D001")
    assert d.get("driver") == "525.60.13"


@pytest.mark.parametrize(
    "name, version, filename",
    [
        ("ctranslate2", "4.8.5", "ctranslate2-4.8.5-cp311-cp311-win_amd64.whl"),
        ("cupy-cuda13x", "14.2.0", "cupy_cuda13x-14.2.0-cp312-cp312-win_amd64.whl"),
    ],
)
def test_a_windows_static_runtime_reads_as_the_linux_wheel_of_the_release(name, version, filename):
    """A Windows library that links cudart_static carries the same CUDA runtime as the Linux
    wheel of the same release: ctranslate2 4.8.5's DLL its CUDA 12.8 (where the linker dropped
    cudaRuntimeGetVersion itself, nothing calling it), cupy-cuda13x 14.2.0's modules CUDA 13.2."""
    win = _static(fetch(name, version, filename=filename))
    assert win and win == _static(fetch(name, version))


def _static(wheel) -> dict[str, tuple[str, ...]]:
    """The runtimes each library carries statically, by its name without "lib", suffixes and
    auditwheel's hash (libctranslate2-a7a60d30.so.4 ~ ctranslate2.dll)."""
    libs = inventory(str(wheel), decode=False).libraries
    names = {lib.path: lib.path.rsplit("/", 1)[-1].split(".")[0].removeprefix("lib") for lib in libs}
    return {re.sub(r"-[0-9a-f]{8}$", "", names[lib.path]): lib.runtimes for lib in libs if lib.runtimes}


def test_the_windows_floor_of_a_static_runtime_is_its_family_windows_driver(capsys):
    """ctranslate2 4.8.5 win_amd64 links the CUDA 12.8 runtime statically (it imports no
    cudart64): CUDA 12's Windows floor (527.41, not Linux's 525.60.13), the driver OS taken from
    the wheel's platform, and D001 below it (where its CUDA 12.8 cubins set the same floor)."""
    wheel = str(fetch("ctranslate2", "4.8.5", filename="ctranslate2-4.8.5-cp311-cp311-win_amd64.whl"))
    (library,) = [lib for lib in inventory(wheel, decode=False).libraries if lib.runtimes]
    floor = runtime_floor(library, "windows")
    assert floor is not None and (floor.cuda, floor.driver, floor.kind) == ((12, 8), "527.41", "runtime")
    claim = "6.0;6.1;7.0;7.5;8.0;8.6+PTX"
    for driver, floors in (("520.06", ["527.41"]), ("527.41", [])):
        rc, rep = run(capsys, "check", wheel, "--arch", claim, "--driver", driver)
        d001 = [f for t in rep["targets"] for f in t["findings"] if f["code"] == "D001"]
        assert [f["data"]["driver"] for f in d001] == floors and rc == (1 if floors else 0)


# ---- answers --------------------------------------------------------------------------------------


def test_bitsandbytes_cuda_question_is_not_failed_by_its_rocm_libraries(capsys):
    """bitsandbytes 0.50.2 runs natively on a T4 in every CUDA library; its ROCm libraries never load
    there, so C001 does not fail an NVIDIA question about them (query runs-on answers yes too)."""
    wheel = str(fetch("bitsandbytes", "0.50.2"))
    rc, rep = run(capsys, "check", wheel, "--gpu", "T4")
    codes = [f["code"] for t in rep["targets"] for f in t["findings"]]
    assert rc == 0 and "C001" not in codes and "G008" in codes
    rc, rep = run(capsys, "check", wheel, "--gpu", "MI300X", "--gpu", "T4")
    assert "C001" not in [f["code"] for t in rep["targets"] for f in t["findings"]]
    rc, rep = run(capsys, "check", wheel)  # no question: the AMD libraries still need their targets
    assert rc == 1 and "C001" in [f["code"] for t in rep["targets"] for f in t["findings"]]


def test_an_amd_gpu_on_a_cuda_only_wheel_is_a_no(capsys):
    rc, rep = run(capsys, "check", str(fetch("faiss-gpu-cu12", "1.14.1.post1")), "--gpu", "MI300X")
    (g,) = [f for t in rep["targets"] for f in t["findings"] if f["code"] == "G011"]
    assert rc == 1 and g["data"]["vendor"] == "amd" and g["data"]["gpus"] == ["MI300X"]


def test_a_jetson_on_an_x86_or_windows_wheel_is_a_no(capsys):
    for wheel in (fetch("catboost", "1.2.10"), fetch("catboost", "1.2.10", "win_amd64")):
        rc, rep = run(capsys, "check", str(wheel), "--gpu", "Orin")
        g = [f for t in rep["targets"] for f in t["findings"] if f["code"] == "G009"]
        assert rc == 1 and g and all("cannot be installed there" in f["message"] for f in g)


# ---- diff -----------------------------------------------------------------------------------------


def test_bitsandbytes_consolidated_variants_cost_no_gpu(capsys, tmp_path):
    """0.49.2 -> 0.50.2 drops five CUDA and two ROCm variants; every GPU they ran on still runs the
    new release natively (its other variants), so no library runs worse."""
    old, new = fetch("bitsandbytes", "0.49.2"), fetch("bitsandbytes", "0.50.2")
    rc, doc = run(capsys, "diff", str(old), str(new))
    removed = [d for d in doc["libraries"] if d["change"] == "removed"]
    assert rc == 0 and len(removed) == 7 and not any(d["fails"] for d in doc["libraries"])
    assert all(x["now"] == "native" for d in removed for x in d["lost"])


@census
def test_fast_gives_cublas_the_floor_of_a_full_read_and_says_what_it_did_not_read(capsys):
    """nvidia-cublas-cu12 12.9.1.4 on a T4: --fast gives each library the floor of a full read, and
    where its verdict differs it says what it did not read (E015, every entry not decoded)."""
    wheel = str(fetch("nvidia-cublas-cu12", "12.9.1.4"))
    rc_full, full = run(capsys, "check", wheel, "--gpu", "T4")
    rc_fast, fast = run(capsys, "check", wheel, "--gpu", "T4", "--fast")

    def floors(rep: dict) -> dict[str, str]:
        return {f["subject"]: f["data"]["driver"] for t in rep["targets"] for f in t["findings"] if f["code"] == "D002"}

    assert floors(fast) == floors(full) and floors(full)
    unread = [f for t in fast["targets"] for f in t["findings"] if f["code"] == "E015"]
    assert rc_fast == rc_full or (
        rc_fast == 1 and len(unread) == 2 and all("not decoded" in f["message"] for f in unread)
    )
    g009 = [f["message"] for t in fast["targets"] for f in t["findings"] if f["code"] == "G009"]
    assert not any("0 kernels" in m for m in g009)
