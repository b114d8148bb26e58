"""Vendor libraries are judged by their vendor's documented, versioned contract (data/vendor.json):
identified by their file name AND their own bytes, a per-kernel gap inside the documented range is
the vendor's dispatch (K005), a GPU outside it is not supported (G016; G019 where nothing else of
the target runs there), a release newer than the table is judged by its line's newest row (G020),
and the driver floor is the vendor's documented minimum driver.

The fast tests use nvcc-built libraries (tests/fixtures/cuda/build_vendor.sh): two containers,
gemm_any for 80;90 and gemm_big for sm_90 only, under a vendor's file name with and without a
string of the table. The slow ones use NVIDIA's own wheels with the claims NVIDIA documents."""

from __future__ import annotations

import json
import shutil

import pytest

import oracle
from archaudit.cli import main
from archaudit.gpus import vendor
from wheels import fetch

VENDOR = oracle.FIXTURES / "vendor"
GAP = "_Z8gemm_bigPfi"  # the sm_90-only kernel


def run(capsys, *args: str) -> tuple[int, dict]:
    rc = main(["check", "-q", "--format", "json", "--no-config", *args])
    return rc, json.loads(capsys.readouterr().out)


def findings(report: dict, code: str) -> list[dict]:
    return [f for t in report["targets"] for f in t["findings"] if f["code"] == code]


# ---- identification: the file name AND the library's own bytes ----


def test_a_vendor_library_identified_by_name_and_bytes_dispatches_its_kernels(capsys):
    """libcublasLt.so.13 carrying "CUBLASLT_NVTX_LEVEL": gemm_big's gap on 8.0 is cuBLAS's
    dispatch (K005, information), named with the row; nothing fails."""
    rc, rep = run(capsys, str(VENDOR / "cublas/libcublasLt.so.13"), "--arch", "80;90")
    (k,) = findings(rep, "K005")
    assert rc == 0 and k["data"]["kernels"] == [GAP] and k["data"]["fails"] == ["80"]
    assert k["data"]["library"] == "cuBLAS for CUDA 13" and k["data"]["range"] == "7.5 and newer"
    assert "CUBLASLT_NVTX_LEVEL" in k["message"] and not findings(rep, "K001")


def test_the_same_name_without_the_string_is_the_projects_own_code(capsys):
    """The file name alone identifies nothing: the same containers under libcublasLt.so.13
    without cuBLAS's string are judged kernel by kernel (K001)."""
    rc, rep = run(capsys, str(VENDOR / "cublas_unsaid/libcublasLt.so.13"), "--arch", "80;90")
    (k,) = findings(rep, "K001")
    assert rc == 1 and k["data"]["kernels"] == [GAP] and not findings(rep, "K005")


def test_the_string_under_another_name_is_the_projects_own_code(capsys, tmp_path):
    """cuBLAS's string in a library whose name is not cuBLAS's identifies nothing: K001. The same
    library renamed by auditwheel (a hash in its name) is still cuBLAS."""
    rc, rep = run(capsys, str(VENDOR / "project/libgemm.so"), "--arch", "80;90")
    assert rc == 1 and [f["data"]["kernels"] for f in findings(rep, "K001")] == [[GAP]]
    renamed = tmp_path / "libcublasLt-0123abcd.so.13"  # auditwheel's hash: still cuBLAS
    shutil.copy(VENDOR / "cublas/libcublasLt.so.13", renamed)
    rc, rep = run(capsys, str(renamed), "--arch", "80;90")
    assert rc == 0 and len(findings(rep, "K005")) == 1


# ---- outside the documented range, and no loadable code inside it ----


def test_a_gpu_outside_the_range_is_not_supported_and_a_wheel_of_only_that_library_fails(capsys):
    """cuBLAS built by CUDA 13 on a V100 (7.0): CUDA 13 dropped 7.0. G016 for the library, G019
    for the target, whose only device code it is: exit 1."""
    rc, rep = run(capsys, str(VENDOR / "cublas/libcublasLt.so.13"), "--gpu", "V100")
    (g16,), (g17,) = findings(rep, "G016"), findings(rep, "G019")
    assert rc == 1 and g16["data"]["gpu"] == "Tesla V100" and g17["data"]["gpu"] == "70"
    assert g17["data"]["rows"] == ["cuBLAS for CUDA 13: 7.5 and newer"] and not findings(rep, "G009")


def test_a_claimed_gpu_outside_the_range_fails_a_wheel_of_only_that_library(capsys):
    rc, rep = run(capsys, str(VENDOR / "cusparselt/libcusparseLt.so.0"), "--arch", "75;80;90")
    (g16,) = findings(rep, "G016")
    assert rc == 1 and g16["data"]["gpus"] == ["75"]
    assert [(f["data"]["gpu"], f["data"]["asked"]) for f in findings(rep, "G019")] == [("75", "claimed")]


def test_cusparselt_on_t4_does_not_run_and_on_h100_runs(capsys):
    """cuSPARSELt is documented for 8.0 and newer: --gpu T4 is a no (it was a pass), --gpu H100
    a yes."""
    rc, rep = run(capsys, str(VENDOR / "cusparselt/libcusparseLt.so.0"), "--gpu", "T4")
    assert rc == 1 and findings(rep, "G019") and not findings(rep, "G008")
    rc, rep = run(capsys, str(VENDOR / "cusparselt/libcusparseLt.so.0"), "--gpu", "H100")
    assert rc == 0 and [f["data"]["gpu"] for f in findings(rep, "G008")] == ["H100"]


def test_a_gpu_in_the_range_with_no_loadable_code_still_fails(capsys):
    """T4 (7.5) is in cuBLAS 13's range, but the library carries nothing a T4 loads: G009, and a
    claim of 75 is G001. The vendor's range is no excuse for carrying no code."""
    rc, rep = run(capsys, str(VENDOR / "cublas/libcublasLt.so.13"), "--gpu", "T4")
    assert rc == 1 and [f["data"]["runs"] for f in findings(rep, "G009")] == ["none"]
    rc, rep = run(capsys, str(VENDOR / "cublas/libcublasLt.so.13"), "--arch", "75;80;90")
    assert rc == 1 and findings(rep, "G001")[0]["data"]["missing"] == ["75"]


# ---- versions: the row of the release, and a release newer than the table ----


def test_a_release_newer_than_the_table_is_judged_by_its_lines_newest_row_with_a_warning(capsys):
    """libnccl.so.2 whose bytes say "NCCL version 2.99.1+cuda13.0": the CUDA 13 row judges it
    (K005 for gemm_big) and G020 names the row to add."""
    rc, rep = run(capsys, str(VENDOR / "nccl_newer/libnccl.so.2"), "--arch", "80;90")
    (w,) = findings(rep, "G020")
    assert rc == 0 and w["severity"] == "warning" and w["data"]["release"] == "NCCL 2.99.1"
    assert w["data"]["library"] == "NCCL 2.0 for CUDA 13" and findings(rep, "K005")


def test_cudss_on_windows_is_identified_by_its_dll_name():
    """nvidia-cudss-cu12 1.0.0.35 win_amd64 ships cudss64_1.dll, whose bytes hold CUDSS_JIT_CACHE_DIR
    (measured in the census): the cuDSS row, as for libcudss.so.0. Before, only the .so spelling was
    in the table and the DLL's per-container gaps failed as a project's own code (K001, K004)."""
    row = vendor.identify("cudss64_1.dll", ("CUDSS_JIT_CACHE_DIR",), (12, 9))
    assert row is not None and row.library.startswith("cuDSS") and row.dispatches
    assert vendor.identify("cudss64_1.dll", (), (12, 9)) is None


def test_rows_by_release():
    """The row of a release: cuDNN by its version and the CUDA release that built it; a CUDA
    major the table does not know takes its newest line; a version it does not know, the newest
    row of the line; an older line than any row identifies nothing."""
    cudnn = "libcudnn_engines_precompiled.so.9"
    said = ("cudnn_version != (9 * 10000 + 5 * 100 + 1)",)
    row = vendor.identify(cudnn, said, (12, 6))
    assert row is not None and row.library == "cuDNN 9.0 for CUDA 12" and row.text == "5.0 to 9.0" and not row.newer
    row = vendor.identify(cudnn, ("cudnn_version != (9 * 10000 + 8 * 100 + 0)",), (12, 8))
    assert row is not None and row.text == "5.0 to 12.0" and row.row.driver("linux") == "570.26"
    row = vendor.identify(cudnn, ("cudnn_version != (9 * 10000 + 28 * 100 + 0)",), (12, 9))
    assert row is not None and row.library == "cuDNN 9.17 for CUDA 12" and row.newer == "cuDNN 9.28.0"
    row = vendor.identify("libcublas.so.14", ("CUBLAS_NVTX_LEVEL",), (14, 0))
    assert row is not None and row.library == "cuBLAS for CUDA 13" and row.newer == "cuBLAS built by CUDA 14"
    assert vendor.identify("libcublas.so.9", ("CUBLAS_NVTX_LEVEL",), (9, 2)) is None
    assert vendor.identify("libcublas.so.13", (), (13, 0)) is None
    assert vendor.identify(cudnn, ("cudnn_version != (8 * 10000 + 9 * 100 + 7)",), (12, 2)) is None


def test_the_driver_floor_is_the_vendors_documented_minimum():
    """cuBLAS for CUDA 12: the CUDA 12 family's floor (525.60.13), whatever PTX some kernel
    carries; cuDNN 9.10.2 built by 12.8: the 570.26 its matrix documents."""
    row = vendor.identify("libcublasLt.so.12", ("CUBLASLT_NVTX_LEVEL",), (12, 9))
    assert row is not None and row.row.driver("linux") == "525.60.13" and row.row.driver("windows") == "527.41"


def test_cuptis_profiling_library_is_identified_by_name_and_bytes(capsys, tmp_path):
    """libnvperf_host.so carrying "NVPW_CUDA_LoadDriver" is CUPTI's Profiling API library: its gap
    on 8.0 is its dispatch (K005); the same containers under that name without the string are
    judged kernel by kernel (K001)."""
    rc, rep = run(capsys, str(VENDOR / "nvperf/libnvperf_host.so"), "--arch", "80;90")
    (k,) = findings(rep, "K005")
    assert rc == 0 and k["data"]["library"] == "CUPTI Profiling API (NVPW) for CUDA 13"
    unsaid = tmp_path / "libnvperf_host.so"
    unsaid.write_bytes((VENDOR / "cublas_unsaid/libcublasLt.so.13").read_bytes())
    rc, rep = run(capsys, str(unsaid), "--arch", "80;90")
    assert rc == 1 and findings(rep, "K001") and not findings(rep, "K005")


# ---- a vendor's code linked statically into a project's library ----

STATIC = VENDOR / "static"  # libproject_blas.so: maxwell_sgemm_128x64_nn (sm_80 only) beside project_add (80;90)


def test_a_vendors_code_linked_statically_is_judged_by_its_row(capsys):
    """A project's library whose bytes hold cuBLAS's "CUBLAS_LOGINFO_DBG" and one of whose
    containers holds only kernels cuBLAS's convention names (maxwell_sgemm_128x64_nn, sm_80
    only): that container's gap on 9.0 is cuBLAS's dispatch (K005, naming the row and the
    library it is linked into); the project's own container is judged per kernel as ever."""
    rc, rep = run(capsys, str(STATIC / "libproject_blas.so"), "--arch", "80;90")
    (k,) = findings(rep, "K005")
    assert rc == 0 and k["data"]["kernels"] == ["maxwell_sgemm_128x64_nn"] and k["data"]["fails"] == ["90"]
    assert k["data"]["library"] == "cuBLAS for CUDA 13" and k["data"]["linked_into"] == "libproject_blas.so"
    assert "linked statically into libproject_blas.so" in k["message"] and not findings(rep, "K001")
    rc, rep = run(capsys, str(STATIC / "libproject_blas.so"), "--gpu", "H100")  # the same answer to --gpu
    assert rc == 0 and [f["data"]["gpu"] for f in findings(rep, "G008")] == ["H100"] and not findings(rep, "G009")
    rc, rep = run(capsys, str(VENDOR / "static_unsaid/libproject_blas.so"), "--gpu", "H100")
    assert rc == 1 and findings(rep, "G009")


def test_without_the_vendors_string_the_vendor_named_container_is_the_projects(capsys):
    """The same two objects without cuBLAS's string: a name is only a convention, so the
    vendor-named container is judged per kernel (K001 on 9.0, where an H100 would answer 209)."""
    rc, rep = run(capsys, str(VENDOR / "static_unsaid/libproject_blas.so"), "--arch", "80;90")
    (k,) = findings(rep, "K001")
    assert rc == 1 and k["data"]["kernels"] == ["maxwell_sgemm_128x64_nn"] and not findings(rep, "K005")


def test_a_project_kernel_in_the_vendor_named_container_keeps_it_the_projects(capsys):
    """cuBLAS's string, but the sm_80-only container also holds project_scale, which cuBLAS's
    convention does not name: the container stays the project's (fail closed), both kernels K001."""
    rc, rep = run(capsys, str(VENDOR / "static_mixed/libproject_blas.so"), "--arch", "80;90")
    (k,) = findings(rep, "K001")
    assert rc == 1 and k["data"]["kernels"] == ["maxwell_sgemm_128x64_nn", "project_scale"]
    assert not findings(rep, "K005")


def test_a_statically_linked_vendor_outside_its_range_is_judged_per_kernel(capsys):
    """cuBLAS for CUDA 13 documents 7.5 and newer: its contract says nothing of a 7.0 (and
    the library carries nothing a 7.0 loads): G001, not K005."""
    rc, rep = run(capsys, str(STATIC / "libproject_blas.so"), "--arch", "70;80;90")
    assert rc == 1 and findings(rep, "G001") and [f["data"]["fails"] for f in findings(rep, "K005")] == [["90"]]


# libproject_linalg.so: cuBLAS-named (sm_80), cuSOLVER-named (sm_90), a project's CUTLASS (sm_80)
STATIC12 = VENDOR / "static12"


def test_cuda12_cublas_and_cusolver_linked_statically_are_judged_by_their_rows(capsys):
    """As in open3d's libOpen3D.so: a container named as cuBLASLt names its own kernels
    (cutlass::Kernel2 over cutlass_80_tensorop_*, an xmma kernel with cuBLAS's suffix, a
    cask__5x_cublas kernel; sm_80 only) and one named as cuSOLVER's (cusolverDnXfill_kernel,
    kernel::batched_geqrf_warp_based; sm_90 only), in a library holding both vendors' strings: each
    gap is its vendor's dispatch (K005, one per row). A project's own cutlass::Kernel2 over a
    cutlass::gemm::kernel type (sm_80 only) is no vendor's: K001 on 9.0."""
    rc, rep = run(capsys, str(STATIC12 / "libproject_linalg.so"), "--arch", "80;90")
    rows = {f["data"]["library"]: f["data"] for f in findings(rep, "K005")}
    assert sorted(rows) == ["cuBLAS for CUDA 13", "cuSOLVER for CUDA 13"]
    blas, solver = rows["cuBLAS for CUDA 13"], rows["cuSOLVER for CUDA 13"]
    assert blas["fails"] == ["90"] and len(blas["kernels"]) == 3 and blas["linked_into"] == "libproject_linalg.so"
    assert any(k.startswith("_ZN7cutlass7Kernel2I50cutlass_80_tensorop_") for k in blas["kernels"])
    assert solver["fails"] == ["80"] and solver["kernel_count"] == 2
    (k,) = findings(rep, "K001")
    assert rc == 1 and k["data"]["kernels"] == ["_ZN7cutlass7Kernel2INS_4gemm6kernel11ProjectGemmEEEvNT_6ParamsE"]
    assert k["data"]["fails"] == ["90"]


def test_a_statically_linked_vendor_needs_its_own_string(capsys):
    """The same objects with only cuBLAS's string: cuBLAS's container is still K005, but nothing in
    the bytes says cuSOLVER is linked in, so its container is the project's (K001 on 8.0)."""
    rc, rep = run(capsys, str(VENDOR / "static12_blas_only/libproject_linalg.so"), "--arch", "80;90")
    assert [f["data"]["library"] for f in findings(rep, "K005")] == ["cuBLAS for CUDA 13"]
    failed = {f["data"]["fails"][0]: f["data"]["kernels"] for f in findings(rep, "K001")}
    assert rc == 1 and sorted(failed) == ["80", "90"]
    assert failed["80"] == [
        "_Z22cusolverDnXfill_kernelILi256EfEvPT0_l",
        "_ZN6kernel24batched_geqrf_warp_basedILi256EfEEvPT0_l",
    ]


def test_identify_static_rows():
    """The row of a vendor's code linked statically: the CUDA major that built the library, else
    one a vendor's version string in the same bytes names (NCCL's +cuda10.2 in torch 1.10.2's
    libtorch_cuda.so); cuDNN 7's version symbol; nothing dating it, no row."""
    found = dict(
        (lib.name, i)
        for lib, i in vendor.identify_static(
            (
                "CUBLAS_LOGINFO_DBG",
                "CUFFT_USE_64_BIT_KERNELS",
                "NCCL version 2.10.3+cuda10.2",
                "cudnn_version_7_6_5_32_c27521968_m0_e0",
            ),
            None,
        )
    )
    assert sorted(found) == ["cuBLAS", "cuDNN", "cuFFT"] and all(i.static for i in found.values())
    assert found["cuDNN"].library == "cuDNN 7.6 for CUDA 10" and found["cuDNN"].text == "3.0 to 7.5"
    assert found["cuBLAS"].library == "cuBLAS for CUDA 10"
    assert vendor.identify_static(("CUBLAS_LOGINFO_DBG",), None) == ()
    ((lib, row),) = vendor.identify_static(("CUBLAS_LOGINFO_DBG",), (12, 4))
    assert lib.name == "cuBLAS" and row.library == "cuBLAS for CUDA 12"
    assert lib.static_kernels is not None and lib.static_kernels.match("maxwell_sgemm_128x64_nn")
    assert not lib.static_kernels.match("project_add") and not lib.static_kernels.match("cudnn_maxwell_cgemm_32x32_cc")


# ---- NVIDIA's own wheels with their documented claims ----

CUDA13 = "75;80;86;89;90;100;103;120;121"


CENSUS = pytest.mark.census  # wheels over wheels.TIER_BYTES: the census tier (README "Tests")


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,version,filename,claim",
    [
        pytest.param(
            "nvidia-cublas",
            "13.1.1.3",
            "nvidia_cublas-13.1.1.3-py3-none-manylinux_2_27_x86_64.whl",
            CUDA13,
            marks=CENSUS,
        ),
        pytest.param(
            "nvidia-cufft",
            "12.5.0.14",
            "nvidia_cufft-12.5.0.14-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
            CUDA13,
            marks=CENSUS,
        ),
        pytest.param(
            "nvidia-cusparse",
            "12.6.3.3",
            "nvidia_cusparse-12.6.3.3-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
            CUDA13,
            marks=CENSUS,
        ),
        (
            "nvidia-curand",
            "10.4.5.25",
            "nvidia_curand-10.4.5.25-py3-none-manylinux_2_27_x86_64.whl",
            "75;80;86;87;89;90;100;103;110;120;121",
        ),
        pytest.param(
            "nvidia-cudnn-cu12",
            "9.28.0.42",
            "nvidia_cudnn_cu12-9.28.0.42-py3-none-manylinux_2_27_x86_64.whl",
            "75;80;86;89;90;100;120",
            marks=CENSUS,
        ),
    ],
)
def test_nvidias_wheels_pass_the_claims_nvidia_documents(capsys, name, version, filename, claim):
    """Each failed its documented claim with K001/K004 (cuDNN 9.28: K001 x17, K004 x31): their gaps
    are their dispatch (K005), inside the range NVIDIA documents."""
    rc, rep = run(capsys, str(fetch(name, version, filename=filename)), "--arch", claim)
    assert rc == 0 and findings(rep, "K005") and not findings(rep, "K001") and not findings(rep, "K004")


@CENSUS
def test_cublas_answers_gpus_by_its_contract(capsys):
    """--gpu A100, H100, T4 on cuBLAS 13.1 gave G009; they are in its range and it runs there.
    A V100 is outside CUDA 13's range: G016 and G019, exit 1. On a T4 the floor is the CUDA 13
    family's 580.65.06, not that of one PTX-only kernel."""
    whl = str(fetch("nvidia-cublas", "13.1.1.3", filename="nvidia_cublas-13.1.1.3-py3-none-manylinux_2_27_x86_64.whl"))
    rc, rep = run(capsys, whl, "--gpu", "A100", "--gpu", "H100", "--gpu", "T4")
    assert rc == 0 and not findings(rep, "G009") and len(findings(rep, "G008")) == 6
    assert {f["data"]["driver"] for f in findings(rep, "D002")} == {"580.65.06"}
    rc, rep = run(capsys, whl, "--gpu", "V100")
    assert rc == 1 and findings(rep, "G019") and len(findings(rep, "G016")) == 2


@CENSUS
def test_cusparselt_cu12_by_its_contract(capsys):
    """cuSPARSELt cu12 0.8.1: --gpu T4 exited 0 and --gpu H100 exited 1; both are now right."""
    whl = str(
        fetch(
            "nvidia-cusparselt-cu12", "0.8.1", filename="nvidia_cusparselt_cu12-0.8.1-py3-none-manylinux2014_x86_64.whl"
        )
    )
    rc, rep = run(capsys, whl, "--gpu", "T4")
    assert rc == 1 and findings(rep, "G019")
    rc, rep = run(capsys, whl, "--gpu", "H100")
    assert rc == 0 and findings(rep, "G008") and not findings(rep, "G009")


@CENSUS
def test_nccl_cu11_carries_no_hopper_code(capsys):
    """nvidia-nccl-cu11 2.21.5 ("NCCL version 2.21.5+cuda11.0"): H100 is inside CUDA 11.8's range,
    and the library carries nothing an H100 loads: still a failure."""
    whl = str(fetch("nvidia-nccl-cu11", "2.21.5", filename="nvidia_nccl_cu11-2.21.5-py3-none-manylinux2014_x86_64.whl"))
    rc, rep = run(capsys, whl, "--gpu", "H100")
    assert rc == 1 and [f["data"]["runs"] for f in findings(rep, "G009")] == ["none"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,version,filename",
    [
        ("nvidia-cuda-cupti-cu12", "12.9.79", "nvidia_cuda_cupti_cu12-12.9.79-py3-none-manylinux_2_25_x86_64.whl"),
        ("nvidia-cuda-cupti-cu12", "12.9.79", "nvidia_cuda_cupti_cu12-12.9.79-py3-none-win_amd64.whl"),
        (
            "nvidia-cuda-sanitizer-api-cu12",
            "12.9.79",
            "nvidia_cuda_sanitizer_api_cu12-12.9.79-py3-none-manylinux_2_25_x86_64.whl",
        ),
    ],
)
def test_cupti_and_compute_sanitizer_pass_cuda_12s_range(capsys, name, version, filename):
    """CUDA 12's GPUs, 5.0 to 12.0: CUPTI and Compute Sanitizer are NVIDIA's, identified by their
    bytes; their per-kernel gaps are their dispatch (K005, was K001 on the sanitizer). The
    Profiling API's libraries (libnvperf_*) are documented for 7.0 and newer: 5.0 and 6.0 are
    outside their range (G016), while the rest of the wheel runs there."""
    rc, rep = run(capsys, str(fetch(name, version, filename=filename)), "--arch", "50;60;70;75;80;86;89;90;100;120")
    assert rc == 0 and not findings(rep, "K001") and not findings(rep, "G001"), rep
    outside = sorted(f["subject"].rsplit("/", 1)[-1] for f in findings(rep, "G016"))
    if "cupti" in name:
        assert [n.removeprefix("lib").removesuffix(".so").removesuffix(".dll") for n in outside] == [
            "nvperf_host",
            "nvperf_target",
        ], outside
        assert all("the claimed 5.0, 6.0 are not supported" in f["message"] for f in findings(rep, "G016"))
    else:
        assert findings(rep, "K005") and not findings(rep, "G016")


@CENSUS  # torch 1.10.2: 882 MB
def test_torch_1_10_2_links_cublas_cufft_and_cudnn_statically(capsys):
    """torch 1.10.2 (PyPI's CUDA 10.2 build) links cuBLAS, cuFFT and cuDNN 7.6.5 statically into
    libtorch_cuda.so: their containers' gaps on its embedded claim (37;50;60;70) were K001/K004
    (3459 kernels in the census); they are each vendor's dispatch (K005, CUDA 10's 3.0 to 7.5).
    Four CUTLASS-named kernels (sm_61, 7.0, 7.5 only) are named by no vendor's convention, so
    they stay the project's: K001 on 3.7, 5.0, 6.0 (fail closed)."""
    whl = fetch("torch", "1.10.2", filename="torch-1.10.2-cp39-cp39-manylinux1_x86_64.whl")
    rc, rep = run(capsys, str(whl))
    assert {f["data"]["library"] for f in findings(rep, "K005")} == {
        "cuBLAS for CUDA 10",
        "cuFFT for CUDA 10",
        "cuDNN 7.6 for CUDA 10",
    }
    (k,) = findings(rep, "K001")
    assert rc == 1 and len(k["data"]["kernels"]) == 4 and all("cutlass" in n for n in k["data"]["kernels"])
    assert not findings(rep, "K004")


@CENSUS  # open3d 0.20.0: 401 MB
def test_open3d_0_20_0_links_cublas_and_cusolver_12_statically(capsys):
    """open3d 0.20.0 (CUDA 12.6) links cuBLAS, cuBLASLt and cuSOLVER statically into libOpen3D.so
    (Open3D 3rdparty/find_dependencies.cmake): their containers' gaps (xmma, ampere_*gemm*, cuBLASLt's
    cutlass::Kernel2<cutlass_80_*>, getrf_*, cusolverDnXfill_kernel) were K001/K004 as Open3D's own
    and are each vendor's dispatch (K005, CUDA 12's 5.0 to 12.1). Open3D's own kernels, built for
    7.5 (PTX) and newer, stay K001 on a V100, and nothing vendor-named is among them."""
    whl = fetch("open3d", "0.20.0", filename="open3d-0.20.0-cp311-cp311-manylinux_2_35_x86_64.whl")
    rc, rep = run(capsys, str(whl), "--arch", "70;75;80;90;100")
    rows = {f["data"]["library"]: f["data"] for f in findings(rep, "K005")}
    assert sorted(rows) == ["cuBLAS for CUDA 12", "cuSOLVER for CUDA 12"]
    assert rows["cuBLAS for CUDA 12"]["kernel_count"] > 4000 and rows["cuSOLVER for CUDA 12"]["kernel_count"] > 200
    (k,) = findings(rep, "K001")
    assert rc == 1 and k["data"]["fails"] == ["70"] and not findings(rep, "K004")
    conventions = [lib.static_kernels for lib in vendor.libraries() if lib.static_kernels is not None]
    assert not [n for n in k["data"]["kernels"] if any(p.match(n) for p in conventions)]
    rc, rep = run(capsys, str(whl), "--gpu", "T4", "--gpu", "A100", "--gpu", "H100", "--gpu", "B200")
    assert rc == 0 and not findings(rep, "G009")


@pytest.mark.slow
def test_faiss_gpu_1_7_2_links_cublas_statically(capsys):
    """faiss-gpu 1.7.2 (85 MB, built by CUDA 10.0) links cuBLAS statically into _swigfaiss.so:
    its maxwell_*gemm* containers (sm_50/60/61 only) were K001 on 7.0 and 7.5; they are cuBLAS's
    dispatch (K005). Its CUTLASS-named igemm kernels stay the project's (K001)."""
    whl = fetch(
        "faiss-gpu", "1.7.2", filename="faiss_gpu-1.7.2-cp39-cp39-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    )
    rc, rep = run(capsys, str(whl), "--arch", "35;50;60;70;75")
    (k5,) = findings(rep, "K005")
    assert k5["data"]["library"] == "cuBLAS for CUDA 10" and k5["data"]["kernel_count"] > 1000
    assert rc == 1 and all("cutlass" in n for f in findings(rep, "K001") for n in f["data"]["kernels"])


def test_a_toolkit_component_is_supported_only_on_the_gpus_its_building_release_knows():
    """cuBLAS ships with each toolkit release (ctk-components): one whose cubins record CUDA 12.6
    stops at 9.0 (Blackwell came with 12.8), one of 12.9 reaches 12.1, and without a recorded
    release the line's range stands. NCCL, released on its own for the whole CUDA 11 line and
    built by 11.0, keeps that line's range: a Hopper GPU is in it (nvidia-nccl-cu11 on 9.0)."""
    strings = ("CUBLAS_NVTX_LEVEL",)
    old = vendor.identify("libcublas.so.12", strings, (12, 6), noted=(12, 6))
    new = vendor.identify("libcublas.so.12", strings, (12, 9), noted=(12, 9))
    unnoted = vendor.identify("libcublas.so.12", strings, (12, 6))
    assert old is not None and new is not None and unnoted is not None
    assert old.text == "5.0 to 9.0" and not old.covers((10, 0)) and old.covers((9, 0))
    assert "this build is CUDA 12.6's" in old.source
    assert new.text == "5.0 to 12.1" and unnoted.text == "5.0 to 12.1"
    nccl = vendor.identify("libnccl.so.2", ("NCCL version 2.21.5+cuda11.0",), (11, 0), noted=(11, 0))
    assert nccl is not None and nccl.covers((9, 0))
