"""The rules on the real wheels issue 11 names, each verdict with the fact that makes it true.

Every payload is decoded (kernel names and PTX `.target`s read), as check does by default.
"""

from __future__ import annotations

import pytest

from archaudit.claims import parse_claim
from archaudit.findings import Finding
from archaudit.judge.audit import Report, audit
from archaudit.judge.filters import IgnoreRule
from archaudit.judge.policy import Policy
from archaudit.read.artifacts import inventory
from wheels import fetch

pytestmark = pytest.mark.slow
census = pytest.mark.census  # wheels over wheels.TIER_BYTES: the census tier (README "Tests")


def check(name: str, version: str, arch: str | None, platform: str | None = None, **policy: object) -> Report:
    inv = inventory(str(fetch(name, version) if platform is None else fetch(name, version, platform)), decode=True)
    claim = parse_claim(arch, "--arch") if arch is not None else None
    return audit([inv], claim, Policy(**policy))  # type: ignore[arg-type]


def found(rep: Report, code: str) -> list[Finding]:
    return [f for f in rep.findings if f.code == code]


def test_catboost_kepler_claim_has_no_driver_that_runs_its_ptx():
    """compute_35 PTX of ISA 7.8 (CUDA 11.8); Kepler's last driver branch, R470, is CUDA 11.4."""
    rep = check("catboost", "1.2.10", "35;50;60;70;75;80;86")
    (g,) = found(rep, "G012")
    assert g.get("gpu") == "35" and rep.exit_code == 1
    assert check("catboost", "1.2.10", "50;60;70;75;80;86").exit_code == 0


def test_torchaudio_floor_is_what_its_claimed_gpus_run():
    """SASS (CUDA 13.x) for every claimed GPU: its compute_120 PTX of ISA 9.2 is used by none."""
    rep = check("torchaudio", "2.11.1", "75;80;86;90;100;120", driver="580.65.06")
    assert rep.exit_code == 0 and found(rep, "D001") == []


def test_cupy_cuda13x_loads_on_an_h200_with_driver_580():
    """records: every container of cupy-cuda13x 14.2.0 loads on the H200 with driver 580.159."""
    rep = check("cupy-cuda13x", "14.2.0", None, gpus=(("H200", (9, 0)),), driver="580.159.04")
    assert rep.exit_code == 0 and found(rep, "D001") == [] and found(rep, "G009") == []


def test_faiss_links_the_cuda_12_runtime():
    rep = check("faiss-gpu-cu12", "1.14.1.post1", "70;80", driver="418.67")
    (d,) = found(rep, "D001")
    assert d.get("driver") == "525.60.13" and rep.exit_code == 1


CURAND_DISPATCH = IgnoreRule("K004", "libcurand.so.10", "curand launches the container of the current GPU")


def test_curand_dispatch_containers_set_no_floor_above_their_sass():
    """curand 10.4.5.25 (CUDA 13.4): single-architecture SASS containers beside PTX-only copies
    of ISA 9.4. Its bytes identify it as cuRAND for CUDA 13, documented for 7.5 and newer: the
    dispatch between containers is its vendor's (K005), and its floor is the vendor's documented
    CUDA 13 driver, not one PTX container's ISA."""
    claim = "75;80;86;87;89;90;100;103;110;120;121"
    rep = check("nvidia-curand", "10.4.5.25", claim, driver="580.65.06")
    assert rep.exit_code == 0 and found(rep, "K005") and not found(rep, "K004") and not found(rep, "D001")
    rep = check("nvidia-curand", "10.4.5.25", claim, driver="580.65.06", ignore_rules=(CURAND_DISPATCH,))
    assert rep.exit_code == 0


@pytest.mark.parametrize(
    "name,version,claim",
    [
        pytest.param("nvidia-cublas", "13.1.1.3", "75;80;86;89;90;100;103;120;121", marks=census),
        pytest.param("nvidia-cudnn-cu12", "9.28.0.42", "75;80;86;89;90;100;103;120", marks=census),
    ],
)
def test_vendor_dispatch_is_recorded_not_guessed(name, version, claim):
    """cuBLAS and cuDNN pick kernels per GPU in host code, which the binary cannot show: their
    bytes identify them, and inside the range their vendor documents a per-kernel gap is that
    dispatch (K005, naming the row), not K001 (on the H100 every such library runs:
    records/h100/referee)."""
    rep = check(name, version, claim)
    assert rep.exit_code == 0 and found(rep, "K005") and not found(rep, "K001")


@census
def test_nccl_passes_on_the_evidence_of_its_own_containers():
    """NCCL's per-kernel gaps are all compiled out of their own containers (its fp8 kernels)."""
    rep = check("nvidia-nccl-cu12", "2.32.3", "70;75;80;86;89;90;100;103;120;121")
    assert rep.exit_code == 0, [f.message[:200] for f in rep.findings if f.severity == "error"]
    assert found(rep, "K003")


NCCL_FP8 = "FP8 reduction support begins with sm90 capable devices."


def _fp8_gaps(rep: Report) -> list[Finding]:
    return [f for f in found(rep, "K003") if any("oneRankReduce" in k and "fp8" in k for k in f.get("kernels") or ())]  # type: ignore[attr-defined]


@census
def test_nccl_fp8_kernels_are_excused_below_sm_90_by_the_string_its_host_code_carries():
    """libnccl.so.2 2.32.3 carries NCCL's refusal of fp8 reductions below sm_90 (taskAppend); its
    two fp8 oneRankReduce kernels have code only for sm_90, sm_100 and sm_120 in their container
    (its 56 ncclDevKernel_*_f8e4m3/f8e5m2 kernels have code for every claimed GPU: no gap)."""
    rep = check("nvidia-nccl-cu12", "2.32.3", "60;61;70;75;80;86;89;90;100;120")
    fp8 = _fp8_gaps(rep)
    assert rep.exit_code == 0 and fp8 and all(f.get("reason") == "stated" for f in fp8)
    assert fp8[0].get("statement") == NCCL_FP8 and fp8[0].get("fails") == ["60", "61", "70", "75", "80", "86", "89"]


@census
def test_nccl_cu13_aarch64_fp8_kernels_are_excused_by_the_same_string():
    rep = check("nvidia-nccl-cu13", "2.32.3", "75;80;86;89;90;100;103;110;120;121", platform="manylinux_2_27_aarch64")
    fp8 = _fp8_gaps(rep)
    assert rep.exit_code == 0 and fp8 and all(f.get("reason") == "stated" for f in fp8)
    assert fp8[0].get("fails") == ["75", "80", "86", "89"]


@census
def test_nccl_cu11_carries_no_fp8_string_and_its_9_0_gap_stays():
    """nvidia-nccl-cu11 2.21.5 predates NCCL's fp8 types: no fp8 kernel and no such string, and
    nothing of it runs on 9.0 (sm_35 to sm_80 SASS, no PTX): G001 stands."""
    rep = check("nvidia-nccl-cu11", "2.21.5", "35;50;60;70;75;80;86;89;90")
    assert not [f for f in found(rep, "K003") if f.get("reason") == "stated"]
    (g,) = found(rep, "G001")
    assert g.get("missing") == ["90"] and rep.exit_code == 1


@census
def test_tensorflow_fails_on_blackwell_where_its_sm_90a_ptx_cannot_compile():
    """libtensorflow_cc's XLA kernels: compute_90 PTX whose text says .target sm_90a (users of
    RTX 50xx GPUs report CUDA_ERROR_INVALID_PTX)."""
    rep = check("tensorflow", "2.20.0", "60;70;80;89;90", gpus=(("RTX 5090", (12, 0)),))
    assert "tensorflow/libtensorflow_cc.so.2" in {f.subject for f in found(rep, "G009")}
    assert rep.exit_code == 1


@census
def test_mxnet_floor_is_unknown_and_driver_fails_closed():
    """mxnet-cu112 1.9.1: cubins without a toolkit note, no PTX, no CUDA library linked."""
    rep = check("mxnet-cu112", "1.9.1", "50;60;70;75;80;86", driver="418.67")
    (d,) = found(rep, "D001")
    assert d.get("driver") == "unknown" and rep.exit_code == 1


@census
def test_npp_empty_cubins_define_no_kernel():
    """nvidia-npp 13.2.0.58: libnppc.so.13 and libnppisu.so.13 each carry one sm_75 cubin with no
    .text and no symbols, in an ordinary .nv_fatbin. They were G001 on every claimed GPU but 7.5
    and G009 'not at all' on an A100; code that defines no kernel leaves no kernel to fail."""
    rep = check("nvidia-npp", "13.2.0.58", "75;80;86;89;90;100;103;120;121", gpus=(("A100", (8, 0)),))
    assert {f.subject for f in found(rep, "G010")} >= {
        "nvidia/cu13/lib/libnppc.so.13",
        "nvidia/cu13/lib/libnppisu.so.13",
    }
    assert rep.exit_code == 0, [f.message[:200] for f in rep.findings if f.severity == "error"]


@census
def test_the_largest_wheel_tried_is_read_whole():
    """flashinfer-cubin 0.6.13: 458 MB, 15,970 .cubin members, once refused whole (E003 'more than
    10000 members ... more than any real wheel holds', then G006). The bound is bytes now: one
    library per 4 KiB of the wheel beyond 10,000 (docs/threat-model.md)."""
    inv = inventory(str(fetch("flashinfer-cubin", "0.6.13")), decode=True)
    cubins = [lib for lib in inv.libraries if lib.path.endswith(".cubin")]
    assert len(cubins) == 15_970 and not inv.problems
    assert sum(1 for lib in cubins for e in lib.entries if e.target == "sm_103a") >= 1_952


@census
def test_torch_2_5_1_bundled_cusparselt_is_judged_in_its_documented_range():
    """torch 2.5.1's libcusparseLt-294d6944.so.0 carries sm_80 and newer; the embedded claim starts
    at 5.0. NVIDIA documents cuSPARSELt for 8.0 and newer and torch calls it only there (the
    vendor table, data/vendor.json): G016, no G001."""
    rep = check("torch", "2.5.1", None)
    lt = "torch/lib/libcusparseLt-294d6944.so.0"
    assert [f.get("gpus") for f in found(rep, "G016") if f.subject == lt] == [["50", "60", "70", "75"]]
    assert not [f for f in rep.findings if f.subject == lt and f.severity == "error"]
    # the same on --gpu: torch 2.5.1 runs on a T4 (cuSPARSELt is not used there), by the same row
    rep = check("torch", "2.5.1", None, gpus=(("T4", (7, 5)),))
    assert [f.get("gpu") for f in found(rep, "G016") if f.subject == lt] == [None, "T4"]  # the embedded claim, T4
    assert not found(rep, "G009")


CUSOLVER_CLAIM = "75;80;86;89;90;100;103;120;121"


@census
def test_cusolver_ptx_floor_is_that_of_the_kernels_blackwell_reaches_only_through_ptx():
    """nvidia-cusolver 12.4.1.2 has SASS for every claimed GPU, and per-architecture containers
    (sm_90 + compute_90 of ISA 9.4, sm_100 + compute_100, ...). 208 geqr4/getf5 instantiations
    exist only in the sm_90 containers (cuobjdump -symbols: one sm_90 ELF each), so 10.0 reaches
    them only through that PTX, which 580.65.06 cannot JIT; nothing in the binary excuses them."""
    # Identified by its bytes as cuSOLVER for CUDA 13, it is judged by its vendor's contract: those
    # kernels are its host's dispatch (K005) and its floor is the documented CUDA 13 driver.
    rep = check("nvidia-cusolver", "12.4.1.2", CUSOLVER_CLAIM, driver="580.65.06")
    assert not [f for f in found(rep, "D001") if f.subject.endswith("libcusolver.so.12")]
    assert [f for f in found(rep, "K005") if f.subject.endswith("libcusolver.so.12")]


@census
def test_cusparselt_on_h100_says_what_it_reaches_only_through_ptx_and_what_that_needs():
    """nvidia-cusparselt-cu13 0.10.0 on an H100: native for all but its cutlass compression
    kernels (sm_75, sm_80, compute_75 of ISA 9.2): the --gpu answer and D001 say the same."""
    # cuSPARSELt for CUDA 13, identified by its bytes: an H100 is inside its documented range, so
    # it runs there (G008) with its vendor's CUDA 13 driver floor, as the H100 answered
    # (records/h100/referee: 994 containers, 0 disagreements, no FAIL).
    rep = check("nvidia-cusparselt-cu13", "0.10.0", None, gpus=(("H100", (9, 0)),), driver="580.65.06")
    assert rep.exit_code == 0 and found(rep, "G008") and not found(rep, "G009") and not found(rep, "D001")


def test_curand_states_both_floors_and_which_one_a_release_publishes():
    """nvidia-curand 10.4.5.25: its claimed GPUs need 580.65.06; all its code 615.71.09 (PTX of ISA
    9.4 only a GPU outside the claim would JIT-compile)."""
    # Identified as cuRAND for CUDA 13, its floor is its vendor's documented driver for all its code.
    (d,) = found(check("nvidia-curand", "10.4.5.25", CUSOLVER_CLAIM), "D002")
    assert d.get("driver") == "580.65.06" and d.get("scope") == "claimed" and d.get("all_code_driver") is None
    (d,) = found(check("nvidia-curand", "10.4.5.25", None), "D002")
    assert d.get("driver") == "580.65.06" and d.get("scope") == "all-code"
