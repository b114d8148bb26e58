"""archaudit.judge.rules.target: the rules of a whole target (C001, C002, C003, G006, G011,
G019), on targets built by hand (builders in helpers.py), no reader involved.
"""

from __future__ import annotations

from archaudit.findings import ERROR
from archaudit.judge.policy import AmdGpu
from archaudit.model import HIP, RELOCATABLE
from helpers import CLEAN, amd, box, codes, found, lib, report, sass, whole


def test_c001_amd_code_without_an_amd_claim():
    rep = report(lib(box(amd("gfx90a"), role=HIP), needed=()), arch=None)
    assert [f.subject for f in found(rep, "C001")] == ["libx.so"] and rep.exit_code == 1
    assert found(report(lib(box(amd("gfx90a"), role=HIP), needed=()), arch=None, amd_claim=("gfx90a",)), "C001") == []


def test_g011_amd_claim_on_nvidia_only_code():
    rep = report(CLEAN, amd_claim=("gfx942",))
    (g,) = found(rep, "G011")
    assert g.get("vendor") == "amd" and rep.exit_code == 1


def test_g011_cuda_claim_on_amd_only_code():
    rep = report(lib(box(amd("gfx942"), role=HIP)), arch="80", amd_claim=("gfx942",))
    (g,) = found(rep, "G011")
    assert g.get("vendor") == "nvidia" and rep.exit_code == 1


def test_g011_not_for_both_vendors_present():
    both = lib(box(sass("sm_80"), sass("sm_90")), box(amd("gfx942"), role=HIP))
    assert found(report(both, amd_claim=("gfx942",)), "G011") == []


def test_a_library_that_only_links_the_cuda_runtime_makes_a_gpu_wheel():
    rep = report(lib(needed=("libcudart.so.12",)), arch=None)
    assert rep.targets[0].gpu_wheel and "G006" in codes(rep) and "C001" in codes(rep) and rep.exit_code == 1
    rep = report(lib(needed=("libc.so.6",)), arch=None)
    assert not rep.targets[0].gpu_wheel and codes(rep) == [] and rep.exit_code == 0


def test_c001_nvidia_code_without_a_claim_even_without_a_linked_runtime():
    rep = report(lib(box(sass("sm_80")), needed=()), arch=None)
    assert "C001" in codes(rep) and rep.exit_code == 1
    assert found(report(lib(box(sass("sm_80")), needed=()), arch="80"), "C001") == []


def test_c001_not_when_a_gpu_is_asked_about():
    rep = report(lib(box(sass("sm_80"))), arch=None, gpus=(("A100", (8, 0)),))
    assert found(rep, "C001") == [] and found(rep, "G008")[0].get("runs") == "native"


def test_g006_claim_without_device_code_and_required_library():
    assert "G006" in codes(report(lib(needed=()), arch="80"))
    assert found(report(CLEAN), "G006") == []
    rep = report(CLEAN, require_device_code=("libmissing.so",))
    assert "is not shipped" in found(rep, "G006")[0].message


def test_c002_unparseable_embedded_claim():
    rep = report(lib(box(sass("sm_80")), claims=("8x;9y",)), arch="80")
    assert found(rep, "C002") and rep.exit_code == 1
    assert found(report(lib(box(sass("sm_80")), claims=("8.0",)), arch="80"), "C002") == []


def test_c003_embedded_claim_disagrees():
    rep = report(lib(box(sass("sm_80"), sass("sm_90")), claims=("8.0",)), arch="80;90")
    assert found(rep, "C003") and rep.exit_code == 0
    assert found(report(lib(box(sass("sm_80"), sass("sm_90")), claims=("8.0 9.0",)), arch="80;90"), "C003") == []


def test_g006_relocatable_code_alone_is_not_loadable():
    rep = report(lib(box(sass("sm_80"), role=RELOCATABLE)), arch="80")
    assert "G006" in codes(rep) and "G001" in codes(rep)


def test_c001_not_for_amd_code_asked_about_by_gpu():
    rep = report(lib(box(amd("gfx942"), role=HIP), needed=()), arch=None, amd_gpus=(AmdGpu("MI300X", "gfx942"),))
    assert found(rep, "C001") == [] and found(rep, "G008")


def test_c003_names_the_library_the_list_is_embedded_in():
    rep = report(
        lib(box(sass("sm_80"), sass("sm_90")), claims=("8.0",), path="torch/lib/libtorch_cuda.so"), arch="80;90"
    )
    (c,) = found(rep, "C003")
    assert c.subject == "t.whl" and c.message == (
        "libtorch_cuda.so embeds 8.0 but --arch says 8.0, 9.0. Fix: make "
        "the build's arch list and the release's claim the same list"
    )


def test_require_device_code_matches_a_nested_library_by_its_file_name():
    rep = report(
        lib(box(sass("sm_80"), sass("sm_90")), path="pkg/_native/lib/libx.so"),
        lib(needed=(), path="pkg/_native/lib/libhost.so"),
        require_device_code=("libx.so", "libhost.so", "libnone.so"),
    )
    assert [whole(f) for f in found(rep, "G006")] == [
        (
            "G006",
            ERROR,
            "t.whl",
            "t.whl: required library 'libhost.so' carries no device code. Fix: check the build "
            "compiled it and the wheel ships it",
            {},
        ),
        (
            "G006",
            ERROR,
            "t.whl",
            "t.whl: required library 'libnone.so' is not shipped. Fix: check the build compiled "
            "it and the wheel ships it",
            {},
        ),
    ]


def test_g006_says_why_the_wheel_is_a_gpu_wheel():
    (g,) = found(report(lib(needed=("libcudart.so.12",)), arch=None), "G006")
    fix = ". Fix: check the build compiled device code (CUDA or HIP enabled) and the wheel ships it"
    assert whole(g) == (
        "G006",
        ERROR,
        "t.whl",
        "t.whl: GPU wheel (links a GPU runtime) but no library carries loadable device code" + fix,
        {},
    )
    (g,) = found(report(lib(needed=()), arch="80"), "G006")
    assert whole(g) == (
        "G006",
        ERROR,
        "t.whl",
        "t.whl: GPU wheel (a claim was given) but no library carries loadable device code" + fix,
        {},
    )


def test_g011_and_c001_for_amd_without_a_named_source():
    rep = report(CLEAN, arch="80;90", amd_claim=("gfx942",))
    assert found(rep, "G011")[0].message == (
        "t.whl: claims AMD targets gfx942 (--amd-arch) but no library "
        "carries AMD device code. Fix: ship the ROCm build, or stop claiming AMD "
        "targets"
    )
    rep = report(lib(box(amd("gfx90a"), amd("gfx942"), role=HIP), needed=()), arch=None)
    assert [whole(f) for f in found(rep, "C001")] == [
        (
            "C001",
            ERROR,
            "libx.so",
            "libx.so: no claimed gfx target reached the check. Fix: give its targets "
            "(--amd-arch 'gfx90a;gfx942') or ask about a GPU (--gpu MI300X). It carries AMD "
            "device code (gfx90a, gfx942)",
            {},
        )
    ]


def test_g011_names_the_claim_without_code():
    rep = report(CLEAN, arch="80;90", amd_claim=("gfx942",), amd_claim_source="PYTORCH_ROCM_ARCH")
    assert [whole(f) for f in found(rep, "G011")] == [
        (
            "G011",
            ERROR,
            "t.whl",
            "t.whl: claims AMD targets gfx942 (PYTORCH_ROCM_ARCH) but no library carries "
            "AMD device code. Fix: ship the ROCm build, or stop claiming AMD targets",
            {"vendor": "amd", "missing": ["gfx942"]},
        )
    ]
    rep = report(lib(box(amd("gfx942"), role=HIP)), arch="80", amd_claim=("gfx942",))
    assert [whole(f) for f in found(rep, "G011")] == [
        (
            "G011",
            ERROR,
            "t.whl",
            "t.whl: claims CUDA architectures 8.0 (--arch) but no library carries NVIDIA "
            "device code. Fix: ship the CUDA build, or stop claiming CUDA architectures",
            {"vendor": "nvidia", "missing": ["80"]},
        )
    ]
