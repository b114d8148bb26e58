"""archaudit.judge.rules.drivers: the driver floor of the code the claimed GPUs run (D001, D002),
on libraries built by hand (builders in helpers.py), no reader involved.
"""

from __future__ import annotations

from archaudit.findings import ERROR, INFO
from archaudit.model import HIP
from helpers import amd, box, codes, found, lib, ptx, report, sass, whole


def test_d002_floor_of_what_the_claimed_gpus_run():
    """torchaudio 2.11.1: SASS for every claimed GPU; its compute_120 PTX (ISA 9.2) runs on none of them."""
    ta = lib(box(sass("sm_90"), sass("sm_120"), ptx("compute_120", isa=(9, 2))))
    rep = report(ta, arch="90;120")
    (d,) = found(rep, "D002")
    assert d.get("driver") == "580.65.06" and d.get("cuda") == "13.0"
    assert found(report(ta, arch="90;120", driver="580.65.06"), "D001") == []
    (d,) = found(report(ta, arch="90;120;121", driver="580.65.06"), "D002")
    assert d.get("driver") == "580.65.06"  # sm_120 SASS runs on 12.1 too: the PTX is still not used


def test_d001_names_the_kernels_a_ptx_floor_is_for():
    """cuSOLVER 12.4.1.2: native SASS for 10.0, and a container of compute_90 PTX (ISA 9.4) whose
    kernels 10.0 gets only through the JIT. The floor is theirs: D001 names them, and says how
    many have native code in another container there."""
    rep = report(
        lib(box(sass("sm_100", "_Z1kv")), box(ptx("compute_90", "_Z1kv", "_Z1jv", isa=(9, 4)))),
        arch="100",
        driver="580.65.06",
    )
    (d,) = found(rep, "D001")
    assert d.get("kernels") == ["_Z1jv"] and d.get("per_gpu") == {"100": 1} and d.get("native_elsewhere") == 1
    assert "not the floor of the whole library" in d.message and "(not K003)" in d.message
    assert "1 more of those containers' kernels have native code there in another container" in d.message


def test_d001_a_name_sets_aside_no_ptx_floor_on_a_gpu_it_does_not_exclude():
    """A kernel named for sm_90 whose only code on 10.0 is compute_90 PTX of ISA 9.4: sm90_* means
    "9.0 or newer", so 10.0 may launch it and its PTX sets the floor there, as an unnamed one's does."""
    for name in ("sm90_tail", "_Z4tailv"):
        built = lib(box(sass("sm_100", "_Z1kv")), box(sass("sm_90", name), ptx("compute_90", name, isa=(9, 4))))
        (d,) = found(report(built, arch="90;100", driver="580.65.06"), "D001")
        assert d.get("kernels") == [name] and d.get("gpus") == ["100"]


def test_d002_says_which_floor_a_release_publishes():
    """With a claim: the floor of the code the claimed GPUs run, and beside it the higher floor of
    all the code (PTX only a GPU outside the claim would JIT); without a claim, all the code's."""
    code = lib(box(sass("sm_80"), sass("sm_90"), ptx("compute_90", isa=(9, 4))))
    (d,) = found(report(code, arch="80;90"), "D002")
    assert d.get("driver") == "580.65.06" and d.get("scope") == "claimed" and d.get("all_code_driver") == "615.71.09"
    assert "the floor a release publishes" in d.message and "no claimed GPU needs" in d.message
    (d,) = found(report(code, arch=None, gpus=()), "D002")
    assert d.get("driver") == "615.71.09" and d.get("scope") == "all-code" and "with no claim" in d.message


def test_d001_the_ptx_a_gpu_jit_compiles():
    rep = report(lib(box(ptx("compute_90", isa=(9, 2)))), arch="90", driver="580.159.04")
    (d,) = found(rep, "D001")
    assert d.get("driver") == "595.45.04" and "unsupported toolchain" in d.message and rep.exit_code == 1
    assert found(report(lib(box(ptx("compute_90", isa=(9, 0)))), arch="90", driver="580.159.04"), "D001") == []


def test_d001_from_the_linked_runtime_when_cubins_record_no_toolkit():
    """faiss-gpu-cu12: cubins without a toolkit note, NEEDED libcudart.so.12."""
    faiss = lib(box(sass("sm_80", toolkit=None), sass("sm_90", toolkit=None)), needed=("libcudart.so.12",))
    (d,) = found(report(faiss), "D002")
    assert d.get("driver") == "525.60.13"
    (d,) = found(report(faiss, driver="418.67"), "D001")
    assert d.get("driver") == "525.60.13" and report(faiss, driver="418.67").exit_code == 1
    assert found(report(faiss, driver="525.60.13"), "D001") == []


def test_d001_unknown_floor_fails_closed():
    """No toolkit note, no CUDA library linked, no PTX: no floor can be named, so --driver fails."""
    bare = lib(box(sass("sm_80", toolkit=None), sass("sm_90", toolkit=None)), needed=())
    (d,) = found(report(bare), "D002")
    assert d.get("driver") == "unknown" and d.severity != ERROR
    rep = report(bare, driver="999.99")
    (d,) = found(rep, "D001")
    assert d.severity == ERROR and d.get("driver") == "unknown" and rep.exit_code == 1


def test_d001_ptx_isa_newer_than_the_tables_fails_closed():
    rep = report(lib(box(ptx("compute_90", isa=(9, 9)))), arch="90", driver="999.99")
    assert found(rep, "D001")[0].get("driver") == "unknown" and rep.exit_code == 1


def test_d_rules_silent_without_nvidia_code():
    rep = report(lib(box(amd("gfx90a"), role=HIP)), arch=None, amd_claim=("gfx90a",), driver="400")
    assert not {"D001", "D002"} & set(codes(rep))


def test_d002_a_cubin_without_a_note_is_dated_by_its_containers_ptx():
    """cupy-cuda13x 14.2.0: sm_XX cubins with no toolkit note beside compute_XX PTX of ISA 9.2 (CUDA
    13.2), no CUDA library linked. On an H200 with driver 580.159 every container loads."""
    cupy = lib(
        box(sass("sm_90", toolkit=None), sass("sm_120", toolkit=None), ptx("compute_120", isa=(9, 2))), needed=()
    )
    (d,) = found(report(cupy, arch=None, gpus=(("H200", (9, 0)),)), "D002")
    assert d.get("driver") == "580.65.06" and d.get("cuda") == "13.2"
    assert found(report(cupy, arch=None, gpus=(("H200", (9, 0)),), driver="580.159.04"), "D001") == []
    assert found(report(cupy, arch=None, gpus=(("H200", (9, 0)),), driver="575.57.08"), "D001")


def test_d002_a_kernel_served_natively_elsewhere_does_not_need_its_ptx_copy():
    """curand 10.4.5.25: one-architecture SASS containers beside a PTX-only copy of ISA 9.4."""
    curand = lib(box(sass("sm_90", "_Z3genv")), box(ptx("compute_75", "_Z3genv", isa=(9, 4))))
    (d,) = found(report(curand, arch="90"), "D002")
    assert d.get("driver") == "580.65.06"
    (d,) = found(report(curand, arch="75"), "D002")  # 7.5 has only the PTX
    assert d.get("cuda") == "13.4"


def test_an_unknown_floor_is_the_one_the_summary_shows():
    from archaudit.report.render import render_text

    known = lib(box(sass("sm_80"), sass("sm_90")), path="liba.so")
    bare = lib(box(sass("sm_80", toolkit=None), sass("sm_90", toolkit=None)), needed=(), path="libb.so")
    text = render_text(report(known, bare), detail="libraries", verbose=False, ascii_only=False)
    assert "D002 driver floor: unknown (archaudit cannot name it, from libb.so)" in text


def test_d001_without_a_claim_judges_all_the_code():
    """--driver with no claim and no --gpu: C001, and the floor of all the library's code still
    fails the old driver (faiss-gpu-cu12's cubins without a toolkit note, NEEDED libcudart.so.12)."""
    rep = report(lib(box(sass("sm_80", toolkit=None)), needed=("libcudart.so.12",)), arch=None, driver="418.67")
    assert codes(rep) == ["D002", "D001", "C001"] and rep.exit_code == 1
    assert whole(found(rep, "D001")[0]) == (
        "D001",
        ERROR,
        "libx.so",
        "libx.so needs driver >= 525.60.13 (CUDA 12.0); 418.67 given. Fix: require driver "
        ">= 525.60.13, or build with an older toolkit. 'CUDA driver version is insufficient "
        "for CUDA runtime version' from links libcudart.so.12 (CUDA 12.x)",
        {"driver": "525.60.13", "cuda": "12.0", "gpus": []},
    )


def test_d001_d002_unknown_floor_per_claimed_gpu():
    bare = lib(box(sass("sm_80", toolkit=None), sass("sm_90", toolkit=None)), needed=())
    rep = report(bare, arch="80;90", driver="999")
    why = (
        "its cubin records no toolkit, and neither the library (its CUDA runtime, its other cubins) nor its "
        "package names the CUDA release that built it"
    )
    assert [whole(f) for f in rep.findings] == [
        (
            "D002",
            INFO,
            "libx.so",
            f"libx.so needs a driver archaudit cannot name (sm_80: {why})",
            {"cuda": "unknown", "driver": "unknown", "gpus": {"80": "unknown", "90": "unknown"}},
        ),
        (
            "D001",
            ERROR,
            "libx.so",
            f"libx.so needs a driver archaudit cannot name on 8.0, 9.0: 999 cannot be "
            f"verified. Fix: find the CUDA release that built it and require its driver. sm_80: "
            f"{why}; sm_90: {why}",
            {"driver": "unknown", "gpus": ["80", "90"]},
        ),
    ]


def test_d001_d002_known_floor_per_claimed_gpu():
    """sm_80 SASS (CUDA 13.0) and compute_90 PTX of ISA 9.2: 8.0 runs the cubin (driver 580.65.06 under
    minor version compatibility), 9.0 JIT-compiles the PTX, which needs CUDA 13.2's own driver."""
    code = lib(box(sass("sm_80"), ptx("compute_90", isa=(9, 2))))
    rep = report(code, arch="80;90", driver="580.65.06")
    assert [whole(f) for f in rep.findings if f.code.startswith("D")] == [
        (
            "D002",
            INFO,
            "libx.so",
            "libx.so needs driver >= 595.45.04 (linux, CUDA 13.2) on its claimed GPUs, the floor a release publishes",
            {
                "cuda": "13.2",
                "driver": "595.45.04",
                "gpus": {"80": "580.65.06", "90": "595.45.04"},
                "os": "linux",
                "scope": "claimed",
            },
        ),
        (
            "D001",
            ERROR,
            "libx.so",
            "libx.so needs driver >= 595.45.04 (CUDA 13.2) on 9.0; 580.65.06 given. Fix: "
            "require driver >= 595.45.04, or build with an older toolkit. 'the provided PTX was "
            "compiled with an unsupported toolchain' from compute_90 (PTX ISA 9.2)",
            {"driver": "595.45.04", "cuda": "13.2", "gpus": ["90"]},
        ),
    ]
    (d,) = found(report(code, arch="80;90", driver="575.57.08"), "D001")
    assert d.get("gpus") == ["80", "90"] and d.message.endswith(
        "from compute_90 (PTX ISA 9.2), sm_80 (built by CUDA 13.0)"
    )
    (d,) = found(report(lib(box(sass("sm_80"))), arch="80", driver="575.57.08"), "D001")
    assert d.message == (
        "libx.so needs driver >= 580.65.06 (CUDA 13.0) on 8.0; 575.57.08 given. Fix: require driver "
        ">= 580.65.06, or build with an older toolkit. 'CUDA driver version is insufficient for CUDA "
        "runtime version' from sm_80 (built by CUDA 13.0)"
    )
