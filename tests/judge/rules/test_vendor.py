"""archaudit.judge.rules.vendor: vendor libraries judged by the range their vendor documents
(G016, G020, K005), on libraries built by hand (builders in helpers.py).
"""

from __future__ import annotations

from helpers import box, found, lib, report, sass

LT = ("CUSPARSELT_LOG_LEVEL",)  # cuSPARSELt's own bytes (data/vendor.json identity)


def test_g016_a_vendor_library_is_judged_in_the_range_its_vendor_documents():
    """torch 2.5.1 bundles cuSPARSELt as libcusparseLt-294d6944.so.0 (sm_80 and newer): NVIDIA
    documents it for 8.0 and newer, so the embedded claim's 5.0-7.5 are not held against it where
    another library serves them; alone, nothing of the wheel runs there (G019). The same code
    under another name, or without cuSPARSELt's string, keeps every gap."""
    code = box(sass("sm_80", "_Z1kv"), sass("sm_90", "_Z1kv"))
    own = lib(
        box(sass("sm_50", "_Z1ov"), sass("sm_75", "_Z1ov"), sass("sm_80", "_Z1ov"), sass("sm_90", "_Z1ov")),
        path="torch/lib/libtorch_cuda.so",
    )
    rep = report(lib(code, path="torch/lib/libcusparseLt-294d6944.so.0", statements=LT), own, arch="50;75;80;90")
    (g,) = found(rep, "G016")
    assert g.get("gpus") == ["50", "75"] and g.get("library") == "cuSPARSELt for CUDA 13" and rep.exit_code == 0
    rep = report(lib(code, path="torch/lib/libcusparseLt-294d6944.so.0", statements=LT), arch="50;75;80;90")
    assert [f.get("gpu") for f in found(rep, "G019")] == ["50", "75"] and rep.exit_code == 1
    for other in (
        lib(code, path="torch/lib/libmysparse.so", statements=LT),
        lib(code, path="torch/lib/libcusparseLt-294d6944.so.0"),
    ):
        rep = report(other, arch="50;75;80;90")
        assert found(rep, "G001")[0].get("missing") == ["50", "75"] and not found(rep, "G016") and rep.exit_code == 1


def test_g016_a_named_gpu_outside_the_vendor_range_is_not_a_g009():
    """--gpu T4 asks the claim's question for one GPU: cuSPARSELt (8.0+) is not supported on 7.5
    (G016, not G009; G019 as nothing else runs there), but is judged on 8.0; any other name keeps
    its G009."""
    code = box(sass("sm_80", "_Z1kv"), sass("sm_90", "_Z1kv"))
    gpus = (("T4", (7, 5)), ("A100", (8, 0)))
    rep = report(lib(code, path="torch/lib/libcusparseLt-294d6944.so.0", statements=LT), arch=None, gpus=gpus)
    (g,) = found(rep, "G016")
    assert (g.get("gpu"), g.get("gpus"), g.get("library")) == ("T4", ["75"], "cuSPARSELt for CUDA 13")
    assert [f.get("gpu") for f in found(rep, "G008")] == ["A100"] and not found(rep, "G009")
    assert [f.get("gpu") for f in found(rep, "G019")] == ["75"]
    rep = report(lib(code, path="torch/lib/libmysparse.so"), arch=None, gpus=gpus)
    assert [f.get("gpu") for f in found(rep, "G009")] == ["T4"] and not found(rep, "G016")


def test_k005_a_vendor_librarys_gap_in_its_range_is_its_dispatch():
    """A kernel of cuBLAS (identified by its name and CUBLASLT_NVTX_LEVEL) with no code for a
    claimed 8.0 in its own container: K005, information, naming the row; the driver floor is
    the CUDA 13 family's."""
    libs = (box(sass("sm_80", "_Z1av"), sass("sm_90", "_Z1av")), box(sass("sm_90", "_Z1bv")))
    rep = report(
        lib(*libs, path="nvidia/cu13/lib/libcublasLt.so.13", statements=("CUBLASLT_NVTX_LEVEL",)), arch="80;90"
    )
    (k,) = found(rep, "K005")
    assert k.get("kernels") == ["_Z1bv"] and k.get("fails") == ["80"] and k.get("library") == "cuBLAS for CUDA 13"
    assert rep.exit_code == 0 and not found(rep, "K001")
    assert found(rep, "D002")[0].get("driver") == "580.65.06"
    rep = report(lib(*libs, path="nvidia/cu13/lib/libcublasLt.so.13"), arch="80;90")
    assert found(rep, "K001") and not found(rep, "K005") and rep.exit_code == 1
