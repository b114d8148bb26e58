"""archaudit.judge.rules.amd: AMD claims and bundle entries (G001 for an AMD claim, G014, G015,
G018), on libraries built by hand (builders in helpers.py), no reader involved.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from archaudit.findings import ERROR
from archaudit.model import CODE_OBJECT, HIP, Entry
from helpers import amd, box, codes, found, lib, ptx, report, sass, whole


@pytest.mark.parametrize(
    "carried,claim,ok",
    [
        (["gfx90a:xnack+"], "gfx90a", False),  # runs only with XNACK on; the claim says either mode
        (["gfx90a:xnack-"], "gfx90a", False),
        (["gfx90a:xnack+", "gfx90a:xnack-"], "gfx90a", True),
        (["gfx90a"], "gfx90a", True),
        (["gfx90a:xnack+"], "gfx90a:xnack+", True),
        (["gfx90a"], "gfx90a:xnack-", True),
        (["gfx942:sramecc+:xnack-"], "gfx942", False),
        (["gfx942"], "gfx942", True),
        (["gfx1100"], "gfx1100", True),
    ],
)
def test_g001_amd_claim_without_a_mode_needs_code_for_both(carried, claim, ok):
    rep = report(lib(box(*(amd(t) for t in carried), role=HIP)), arch=None, amd_claim=(claim,))
    assert bool(found(rep, "G001")) is not ok


def test_g018_an_amd_code_object_the_loader_refuses_covers_nothing():
    refused = replace(amd("gfx90a"), unloadable=True)
    rep = report(lib(box(refused, role=HIP), needed=()), arch=None, amd_claim=("gfx90a",))
    assert found(rep, "G018") and found(rep, "G001")
    assert "without a loadable segment" in found(rep, "G001")[0].message
    ok = report(lib(box(amd("gfx90a"), role=HIP), needed=()), arch=None, amd_claim=("gfx90a",))
    assert not found(ok, "G018") and not found(ok, "G001")


def test_an_amd_claim_does_not_judge_a_library_that_carries_only_nvidia_code():
    """A wheel with a CUDA library and a ROCm library (each vendor its own .so), claims for both:
    each library is judged by its own vendor's claim, and the run passes."""
    nv = lib(box(sass("sm_80"), sass("sm_90"), ptx("compute_90")), path="pkg/lib/libnv.so")
    rocm = lib(box(amd("gfx942"), role=HIP), needed=(), path="pkg/lib/libamd.so")
    rep = report(nv, rocm, amd_claim=("gfx942",))
    assert codes(rep) == ["D002"] and rep.exit_code == 0


def test_g001_for_an_amd_claim_says_what_is_missing_and_why_either_mode_needs_code():
    """Code for gfx90a with XNACK on and for gfx1100, claimed gfx90a (either mode), gfx1100 and gfx1101
    (PYTORCH_ROCM_ARCH): gfx90a with XNACK off and gfx1101 have nothing."""
    rep = report(
        lib(box(amd("gfx90a:xnack+"), amd("gfx1100"), role=HIP), needed=()),
        arch=None,
        amd_claim=("gfx90a", "gfx1100", "gfx1101"),
        amd_claim_source="PYTORCH_ROCM_ARCH",
    )
    (g,) = found(rep, "G001")
    assert whole(g) == (
        "G001",
        ERROR,
        "libx.so",
        "libx.so has no code for gfx90a, gfx1101 (claimed). Fix: build for gfx90a, gfx1101 "
        "(--offload-arch=gfx90a). It carries code only for gfx1100, gfx90a:xnack+ (a target without "
        "xnack/sramecc runs in either mode: it needs code for both) (claimed: gfx90a, gfx1100, "
        "gfx1101, from PYTORCH_ROCM_ARCH); 1 kernel (k) would fail there with 'no kernel image is "
        "available'",
        {
            "claimed": ["gfx90a", "gfx1100", "gfx1101"],
            "claim_source": "PYTORCH_ROCM_ARCH",
            "carried": ["gfx1100", "gfx90a:xnack+"],
            "missing": ["gfx90a", "gfx1101"],
            "kernels": ["k"],
        },
    )
    assert rep.exit_code == 1
    rep = report(lib(box(amd("gfx1100"), role=HIP), needed=()), arch=None, amd_claim=("gfx1101",))
    (g,) = found(rep, "G001")  # gfx1101 has no xnack or sramecc setting: no word about modes
    assert g.message == (
        "libx.so has no code for gfx1101 (claimed). Fix: build for gfx1101 (--offload-arch=gfx1101). "
        "It carries code only for gfx1100 (claimed: gfx1101, from --amd-arch); 1 kernel (k) would "
        "fail there with 'no kernel image is available'"
    )


def test_g001_for_an_amd_claim_whose_kernels_were_not_read():
    entry = Entry("amd", CODE_OBJECT, "gfx1100", kernels=None, decoded=True)
    (g,) = found(report(lib(box(entry, role=HIP), needed=()), arch=None, amd_claim=("gfx1101",)), "G001")
    assert g.get("kernels") is None and g.message.endswith(
        "its kernels cannot be named (its code defines none that could be read)"
    )
