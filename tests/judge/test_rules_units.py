"""Each rule alone, on libraries built by hand (model.Library/Container/Entry), no reader involved.

For every finding code decided by the rule layer there is an input that must produce it and a
clean input that must not. The end-to-end tests on nvcc-built fixtures are in test_check_rules.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from archaudit.claims import parse_claim
from archaudit.findings import CODES, ERROR, Code
from archaudit.judge import rules
from archaudit.judge.facts import library_facts
from archaudit.judge.policy import AmdGpu, Policy
from archaudit.model import DEVICE_LINK, HIP, PTX, RELOCATABLE, SASS, Container, Entry, Library, Problem
from helpers import CLEAN, KERN, amd, box, codes, found, lib, ptx, report, sass

# ---- hand-built inputs -------------------------------------------------------------------------


def test_clean_library_gives_no_error_and_exit_0():
    rep = report(CLEAN)
    assert rep.exit_code == 0 and [c for c in codes(rep) if CODES[Code(c)].severity == ERROR] == []


# ---- the registry ----------------------------------------------------------------------------


def test_every_code_has_exactly_one_producer():
    decided = set(rules.REGISTRY)
    assert decided.isdisjoint(rules.READER_CODES) and decided.isdisjoint(rules.OTHER_CODES)
    assert decided | set(rules.READER_CODES) | set(rules.OTHER_CODES) == set(CODES)


def test_every_rule_says_why_it_exists():
    for code, rule in rules.REGISTRY.items():
        assert rule.__doc__ and code in rule.__doc__, code


def test_library_rules_are_pure_over_facts():
    """The same facts give the same findings, whichever rule order or repetition."""
    f = library_facts(CLEAN, parse_claim("80;90;100", "x"), Policy(driver="575"))
    assert rules.judge_library_rules(f) == rules.judge_library_rules(f)


# ---- G001 / G012 / G002: library coverage ------------------------------------------------------------


def test_g001_claimed_gpu_without_code():
    (g,) = found(report(lib(box(sass("sm_80")))), "G001")
    assert g.get("missing") == ["90"] and g.get("carried") == ["sm_80"]
    assert found(report(lib(box(sass("sm_80"))), arch="80;86"), "G001") == []


def test_g001_relocatable_code_is_no_coverage():
    rep = report(lib(box(sass("sm_80"), sass("sm_90"), role=RELOCATABLE)))
    assert found(rep, "G001")[0].get("missing") == ["80", "90"] and "G007" in codes(rep)


def test_g001_ptx_judged_by_its_text_target():
    """compute_90 whose text says .target sm_90a compiles for 9.0 only (TensorFlow 2.20)."""
    rep = report(lib(box(sass("sm_80"), ptx("compute_90", text="sm_90a"))), arch="80;90;100")
    assert found(rep, "G001")[0].get("missing") == ["100"]
    rep = report(lib(box(sass("sm_80"), ptx("compute_90"))), arch="80;90;100")
    assert found(rep, "G001") == [] and found(rep, "G002")[0].get("jit") == ["90", "100"]


def test_g001_unreadable_ptx_text_target_runs_nowhere():
    rep = report(lib(box(sass("sm_80"), ptx("compute_90", text="sm_9x"))), arch="80;90")
    assert found(rep, "G001")[0].get("missing") == ["90"]


def test_g001_sm_101_cubin_is_not_native_on_thor_renamed_11_0():
    assert found(report(lib(box(sass("sm_101"))), arch="110"), "G001")[0].get("missing") == ["110"]
    assert found(report(lib(box(sass("sm_101"))), arch="101"), "G001") == []
    rep = report(lib(box(ptx("compute_101"))), arch="110")  # plain PTX still JITs
    assert found(rep, "G001") == [] and found(rep, "G002")[0].get("jit") == ["110"]


def test_g012_code_no_driver_for_the_gpu_can_run():
    """catboost 1.2.10: compute_35 PTX of ISA 7.8, while Kepler's last driver (R470) stops at 7.4."""
    rep = report(lib(box(ptx("compute_35", isa=(7, 8))), needed=("libcudart.so.11.0",)), arch="35")
    (g,) = found(rep, "G012")
    assert g.get("gpu") == "35" and g.get("last_cuda") == "11.4" and rep.exit_code == 1
    assert found(rep, "G001") == []
    rep = report(lib(box(ptx("compute_35", isa=(7, 4))), needed=("libcudart.so.11.0",)), arch="35")
    assert found(rep, "G012") == [] and rep.exit_code == 0
    rep = report(lib(box(ptx("compute_35", isa=(7, 4))), needed=("libcudart.so.12",)), arch="35")
    assert found(rep, "G012")  # the CUDA 12 runtime itself needs a driver Kepler never gets


def test_g012_a_runtime_newer_than_the_generation_kills_its_sass():
    rep = report(lib(box(sass("sm_35", toolkit=None)), needed=("libcudart.so.12",)), arch="35")
    assert found(rep, "G012")[0].get("gpu") == "35"
    assert found(report(lib(box(sass("sm_35", toolkit=None)), needed=("libcudart.so.11.0",)), arch="35"), "G012") == []


def test_g002_jit_only_and_native():
    assert found(report(lib(box(ptx("compute_80"))), arch="80"), "G002")[0].get("jit") == ["80"]
    assert found(report(lib(box(sass("sm_80"))), arch="80"), "G002") == []


# ---- AMD -------------------------------------------------------------------------------------


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


def test_c001_amd_code_without_an_amd_claim():
    rep = report(lib(box(amd("gfx90a"), role=HIP), needed=()), arch=None)
    assert [f.subject for f in found(rep, "C001")] == ["libx.so"] and rep.exit_code == 1
    assert found(report(lib(box(amd("gfx90a"), role=HIP), needed=()), arch=None, amd_claim=("gfx90a",)), "C001") == []


# ---- G011: a claim for a vendor with no code ------------------------------------------------------


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


# ---- G003 / G004 / G005 -----------------------------------------------------------------------------


def test_g003_exact():
    extra = lib(box(sass("sm_75"), sass("sm_80"), sass("sm_90")))
    assert found(report(extra, exact=True), "G003")[0].get("extra") == ["75"]
    assert found(report(CLEAN, exact=True), "G003") == []
    assert found(report(extra), "G003") == []


@pytest.mark.parametrize(
    "newest,ok",
    [
        (ptx("compute_90"), True),
        (ptx("compute_90a"), False),  # arch-specific PTX is not PTX future GPUs can JIT
        (ptx("compute_90", text="sm_90a"), False),  # nor is compute_90 whose text targets sm_90a
        (ptx("compute_80"), False),
    ],
)
def test_g004_require_ptx_newest(newest, ok):
    rep = report(lib(box(sass("sm_80"), sass("sm_90"), newest)), require_ptx="newest")
    assert bool(found(rep, "G004")) is not ok


def test_g005_says_a_library_is_specialised_and_excuses_nothing():
    """Only sm_90a code: G005 says it serves 9.0; the claimed 8.0 is G001 like any other gap."""
    hopper = lib(box(sass("sm_90a")))
    rep = report(hopper)
    assert found(rep, "G005")[0].get("serves") == ["9.0"] and rep.exit_code == 1
    assert found(rep, "G001")[0].get("missing") == ["80"]
    assert found(report(hopper, strict=True), "G001")[0].get("missing") == ["80"]
    rep = report(hopper, arch="90")
    assert found(rep, "G005") and rep.exit_code == 0
    assert found(report(CLEAN), "G005") == []


# ---- G006 / C001: GPU wheels ------------------------------------------------------------------------


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


# ---- G007 / G010 -----------------------------------------------------------------------------------


def test_g007_relocatable_entries_listed():
    rep = report(lib(box(sass("sm_80"), sass("sm_90")), box(sass("sm_80"), role=RELOCATABLE)))
    assert found(rep, "G007") and rep.exit_code == 0
    assert found(report(CLEAN), "G007") == []


def test_g010_only_for_kernel_less_device_link_stubs():
    stub = lib(box(Entry("nvidia", SASS, "sm_75", (1, 8), kernels=(), decoded=True), role=DEVICE_LINK))
    rep = report(stub)
    assert found(rep, "G010") and rep.exit_code == 0 and rep.targets[0].libraries[0].status == "host"
    assert found(report(CLEAN), "G010") == []


def test_g010_for_a_cubin_that_defines_nothing_wherever_it_sits():
    """NPP 13.2's libnppc.so.13: one sm_75 cubin with no .text and no symbols in .nv_fatbin."""
    empty = Entry("nvidia", SASS, "sm_75", (1, 8), kernels=(), decoded=True, toolkit=(13, 0), defines_nothing=True)
    rep = report(lib(box(empty)), arch="75;80", gpus=(("A100", (8, 0)),))
    assert found(rep, "G010") and not found(rep, "G001") and not found(rep, "G009") and rep.exit_code == 0
    rep = report(lib(box(empty), KERN), arch="80;90")
    assert codes(rep) == ["D002"] and rep.exit_code == 0  # beside other code it is not judged


def test_kernel_less_executable_code_is_still_judged_by_its_targets():
    """Issue 14: kernels whose entry flag was cleared; the sm_80 build fails on the H200."""
    hidden = Entry("nvidia", SASS, "sm_80", (1, 8), kernels=(), decoded=True, toolkit=(13, 0))
    rep = report(lib(box(hidden)), arch="90")
    assert found(rep, "G010") == [] and found(rep, "G001")[0].get("missing") == ["90"]


# ---- K001 / K002 / K003: kernels -------------------------------------------------------------------------


def test_k001_a_kernel_whose_object_lacks_a_claimed_architecture():
    """lib_multiobj: mul.o built for sm_80 only, beside kern.o for sm_80 and sm_90."""
    rep = report(lib(KERN, box(sass("sm_80", "_Z3mulv"))))
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["_Z3mulv"] and k.get("fails") == ["90"] and rep.exit_code == 1
    assert found(report(lib(KERN, box(sass("sm_80", "_Z3mulv"), sass("sm_90", "_Z3mulv")))), "K001") == []


def test_k001_unread_kernels_judge_the_container_whole():
    unread = Entry("nvidia", SASS, "sm_80", (1, 8), kernels=None, toolkit=(13, 0))
    (k,) = found(report(lib(KERN, box(unread))), "K001")
    assert k.get("containers") == 1 and k.get("fails") == ["90"] and k.get("kernels") == []


def test_k004_one_kernel_in_single_architecture_containers_fails_closed():
    """lib_dispatch: one kernel in an sm_80-only and an sm_90-only container. The binary cannot
    say whether the host picks the container by architecture: an error naming both containers and
    the entry that records the dispatch."""
    rep = report(lib(box(sass("sm_80", "_Z4workv")), box(sass("sm_90", "_Z4workv"))))
    k4 = found(rep, "K004")
    assert sorted(f.get("fails") for f in k4) == [["80"], ["90"]]  # type: ignore[type-var]
    assert found(rep, "K001") == [] and rep.exit_code == 1
    assert all('code = "K004"' in f.message and f.get("elsewhere") for f in k4)
    rep = report(lib(box(sass("sm_80", "_Z4workv")), box(sass("sm_90", "_Z4workv"))), strict_kernels=True)
    assert sorted(f.get("fails") for f in found(rep, "K001")) == [["80"], ["90"]]  # type: ignore[type-var]


def test_k004_a_kernel_is_its_container_and_its_name():
    """axpy<float> in a TU for sm_80 and one for 80;90: the sm_80 TU's launch fails on 9.0 (209 on
    the H200) whatever the other TU carries, in either order."""
    narrow, wide = box(sass("sm_80", "_Z4axpyv")), box(sass("sm_80", "_Z4axpyv"), sass("sm_90", "_Z4axpyv"))
    for order in ((narrow, wide), (wide, narrow)):
        rep = report(lib(*order))
        (k,) = found(rep, "K004")
        assert k.get("fails") == ["90"] and k.get("kernels") == ["_Z4axpyv"] and rep.exit_code == 1


def test_k001_the_driver_picks_one_entry_per_container():
    """The sm_90 cubin is the one loaded on 9.0; a kernel only in the compute_80 PTX is not there."""
    c = box(sass("sm_90", "_Z1av"), ptx("compute_80", "_Z1av", "_Z1bv"), sass("sm_80", "_Z1av", "_Z1bv"))
    rep = report(lib(c))
    (k,) = found(rep, "K003")  # the same unit was built for 9.0 without it: compiled out
    assert k.get("kernels") == ["_Z1bv"] and k.get("reason") == "compiled-out" and rep.exit_code == 0


def test_k002_specialised_kernels():
    """A kernel whose code is all sm_90a, named for 9.0 (and newer): not meant for 8.0 (K002)."""
    rep = report(lib(KERN, box(sass("sm_90a", "_Z11sm90_kernelv"))))
    (k,) = found(rep, "K002")
    assert k.get("kernels") == ["_Z11sm90_kernelv"] and rep.exit_code == 0
    assert found(report(lib(KERN)), "K002") == []


def test_k001_a_generic_kernel_of_arch_specific_code_beside_generic_code():
    """The same code with a name that names nothing: generic code of the library runs on 8.0, so
    the kernel may be meant for 8.0 too; its container's target excuses nothing (zero_fill for
    sm_100a beside code for 9.0 fails with 209 on an H100)."""
    rep = report(lib(KERN, box(sass("sm_90a", "_Z6hopperv"))))
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["_Z6hopperv"] and k.get("fails") == ["80"] and rep.exit_code == 1
    assert "K002" not in codes(rep)


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("sm80_xmma_gemm_f16", "sm_80"),
        ("ampere_sgemm_128x64_nn", "sm_80"),
        ("cutlass_80_tensorop_s1688gemm", "sm_80"),
        ("_ZN7cutlass6KernelINS_4arch4Sm80EEEvv", "sm_80"),
        ("_ZN4cute30SM80_16x8x16_F32F16F16F32_TN3fmaEv", "sm_80"),
    ],
)
def test_k003_kernels_named_for_an_architecture(name, target):
    """The kernel's own name names the architecture its code is for, and its author's convention
    means "this or newer": it excludes an older GPU (7.5), never a newer one (9.0: K001)."""
    older = lib(
        box(sass("sm_75", "_Z4axpyv"), sass("sm_80", "_Z4axpyv"), sass("sm_90", "_Z4axpyv")), box(sass(target, name))
    )
    rep = report(older, arch="75;80")
    (k,) = found(rep, "K003")
    assert k.get("reason") == "named" and k.get("kernels") == [name] and k.get("fails") == ["75"]
    assert "K001" not in codes(rep) and rep.exit_code == 0
    rep = report(older, arch="80;90")
    (k,) = found(rep, "K001")
    assert k.get("kernels") == [name] and k.get("fails") == ["90"] and rep.exit_code == 1 and "K003" not in codes(rep)


def test_k003_kernel_compiled_out_of_its_own_container():
    """NCCL's fp8 kernels exist only in the sm_90 cubin of their container (a __CUDA_ARCH__ guard)."""
    c = box(sass("sm_80", "_Z3allv"), sass("sm_90", "_Z3allv", "_Z8fp8_onlyv"))
    rep = report(lib(c), arch="80;90")
    (k,) = found(rep, "K003")
    assert k.get("reason") == "compiled-out" and k.get("fails") == ["80"] and rep.exit_code == 0


NCCL_FP8 = "FP8 reduction support begins with sm90 capable devices."


def _nccl(
    *containers: Container, said: tuple[str, ...] = (NCCL_FP8,), path: str = "nvidia/nccl/lib/libnccl.so.2"
) -> Library:
    return replace(lib(*containers, path=path), statements=said)


def test_k003_a_string_in_the_library_excuses_the_kernels_it_speaks_for_below_its_architecture():
    """NCCL's refusal below sm_90 excuses an fp8 kernel on 8.0, not on 9.0 (not below 9.0)."""
    c = box(sass("sm_80", "_Z3allv"), sass("sm_90", "_Z3allv"), sass("sm_100", "_Z3allv"))
    rep = report(_nccl(c, box(sass("sm_100", "_Z10red_f8e5m2v"))), arch="80;90;100")
    (k,) = found(rep, "K003")
    assert k.get("reason") == "stated" and k.get("fails") == ["80"] and k.get("kernels") == ["_Z10red_f8e5m2v"]
    (f,) = found(rep, "K001")
    assert f.get("fails") == ["90"] and rep.exit_code == 1


@pytest.mark.parametrize(
    "said, path",
    [((), "libnccl.so.2"), ((NCCL_FP8,), "libother.so"), (("FP8 reduction support begins with sm90",), "libnccl.so.2")],
)
def test_k001_a_string_speaks_only_whole_and_only_in_its_own_library(said, path):
    """No string, the string in a library the row is not for, or only part of it: K001 stands."""
    rep = report(_nccl(KERN, box(sass("sm_90", "_Z10red_f8e4m3v")), said=said, path=path))
    (f,) = found(rep, "K001")
    assert f.get("kernels") == ["_Z10red_f8e4m3v"] and rep.exit_code == 1 and "K003" not in codes(rep)


def test_k001_a_neighbour_named_for_an_architecture_excuses_nothing():
    """A kernel named for an architecture excuses its own gap, never another kernel's: a library
    with sm90_xmma_gemm still fails for an unnamed kernel built for fewer architectures."""
    rep = report(lib(KERN, box(sass("sm_90", "sm90_xmma_gemm")), box(sass("sm_90", "_Z5splitv"))))
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["_Z5splitv"] and k.get("fails") == ["80"] and rep.exit_code == 1
    (k,) = found(rep, "K003")
    assert k.get("kernels") == ["sm90_xmma_gemm"] and k.get("reason") == "named"


@pytest.mark.parametrize(
    "name", ["_ZN3cub20CUB_300001_SM_800_900E11EmptyKernelIvEEvv", "_ZN3cub21CUB_200800_SM_500_52011EmptyKernelIvEEvv"]
)
def test_k001_cccl_namespaces_name_no_architecture(name):
    """CCCL's namespace lists every architecture of the TU, not one the kernel is for."""
    rep = report(lib(KERN, box(sass("sm_80", name))))
    (k,) = found(rep, "K001")
    assert k.get("kernels") == [name] and "K003" not in codes(rep)


def test_k003_a_kernel_named_for_a_newer_architecture_is_not_for_an_older_gpu():
    """cuSPARSELt's sm86_xmma_* kernels carry sm_86, sm_87 and sm_90a code: named for 8.6 on, they
    are never for 8.0. A gap on a GPU newer than the name is not excused that way."""
    rep = report(
        lib(KERN, box(sass("sm_86", "sm86_xmma_k"), sass("sm_87", "sm86_xmma_k"), sass("sm_90a", "sm86_xmma_k"))),
        arch="80;90",
    )
    (k,) = found(rep, "K003")
    assert k.get("fails") == ["80"] and k.get("reason") == "named" and rep.exit_code == 0


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


def test_k001_a_name_excuses_only_code_for_what_it_names():
    """sm80_xmma_gemm with code for sm_80 and sm_86 is not 'built for what its name says'."""
    rep = report(
        lib(
            box(sass("sm_80", "_Z1av"), sass("sm_86", "_Z1av"), sass("sm_90", "_Z1av")),
            box(sass("sm_80", "sm80_xmma_gemm"), sass("sm_86", "sm80_xmma_gemm")),
        ),
        arch="80;86;90",
    )
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["sm80_xmma_gemm"] and k.get("fails") == ["90"]


def test_k001_arch_specific_units_alone_are_no_dispatch_evidence():
    """sm_90a-only code shows the library checks the GPU before using that code, not any other."""
    rep = report(lib(KERN, box(sass("sm_90a", "_Z11sm90_kernelv")), box(sass("sm_90", "_Z5splitv"))))
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["_Z5splitv"] and k.get("fails") == ["80"] and rep.exit_code == 1


def test_k_rules_silent_on_a_library_level_gap():
    rep = report(lib(box(sass("sm_80", "_Z1av")), box(sass("sm_80", "_Z1bv"))))
    assert "G001" in codes(rep) and not {"K001", "K002", "K003"} & set(codes(rep))


# ---- D001 / D002: the driver floor per path -----------------------------------------------------------------


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


# ---- G008 / G009 ------------------------------------------------------------------------------------------------


def test_g008_g009_named_gpus():
    rep = report(lib(box(sass("sm_80"))), gpus=(("A100", (8, 0)), ("H100", (9, 0))))
    assert [(f.code, f.get("runs")) for f in rep.findings if f.code in ("G008", "G009")] == [
        ("G008", "native"),
        ("G009", "none"),
    ]


def test_g008_g009_named_amd_gpus():
    rep = report(
        lib(box(amd("gfx942"), role=HIP)),
        arch=None,
        amd_claim=("gfx942",),
        amd_gpus=(AmdGpu("MI300X", "gfx942"), AmdGpu("MI250X", "gfx90a")),
    )
    assert [(f.code, f.get("gpu")) for f in rep.findings if f.code in ("G008", "G009")] == [
        ("G008", "MI300X"),
        ("G009", "MI250X"),
    ]


# ---- C002 / C003 / E codes -----------------------------------------------------------------------------------


def test_c002_unparseable_embedded_claim():
    rep = report(lib(box(sass("sm_80")), claims=("8x;9y",)), arch="80")
    assert found(rep, "C002") and rep.exit_code == 1
    assert found(report(lib(box(sass("sm_80")), claims=("8.0",)), arch="80"), "C002") == []


def test_c003_embedded_claim_disagrees():
    rep = report(lib(box(sass("sm_80"), sass("sm_90")), claims=("8.0",)), arch="80;90")
    assert found(rep, "C003") and rep.exit_code == 0
    assert found(report(lib(box(sass("sm_80"), sass("sm_90")), claims=("8.0 9.0",)), arch="80;90"), "C003") == []


def test_embedded_claim_judges_when_none_is_given():
    rep = report(lib(box(sass("sm_80")), claims=("8.0 9.0",)), arch=None)
    assert found(rep, "G001")[0].get("missing") == ["90"] and "C001" not in codes(rep)


@pytest.mark.parametrize("code", ["E010", "E011", "E012", "E013", "E014", "E099"])
def test_reader_problems_fail_closed(code):
    rep = report(lib(box(sass("sm_80"), sass("sm_90")), problems=(Problem(code, "bad", 0x40),)))
    (f,) = found(rep, code)
    assert f.severity == ERROR and "0x40" in f.message and rep.exit_code == 1
    assert rep.targets[0].libraries[0].status == "fail"


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


def test_g009_a_named_gpu_on_which_some_kernels_cannot_run():
    """TensorFlow 2.20 on an RTX 5090: its plain compute_90 PTX JITs there, the containers whose PTX
    text says .target sm_90a do not (CUDA_ERROR_INVALID_PTX)."""
    tf = lib(
        box(sass("sm_80", "_Z1av"), ptx("compute_90", "_Z1av")),
        box(sass("sm_80", "_Z7fusionv"), ptx("compute_90", "_Z7fusionv", text="sm_90a")),
    )
    rep = report(tf, arch="80;90", gpus=(("RTX 5090", (12, 0)), ("H100", (9, 0))))
    assert {f.get("gpu"): f.code for f in rep.findings if f.code in ("G008", "G009")} == {
        "RTX 5090": "G009",
        "H100": "G008",
    }
    assert "1 kernel cannot run there" in found(rep, "G009")[0].message


def test_k001_ptx_the_driver_picks_and_cannot_compile_is_never_by_design():
    """TensorFlow 2.20's XLA kernels: compute_90 PTX whose text says sm_90a, in a library that
    otherwise shows architecture dispatch (cuDNN-style names). On 10.0 the driver picks that PTX
    and fails with CUDA_ERROR_INVALID_PTX, as users of RTX 50xx GPUs report."""
    tf = lib(
        box(sass("sm_80", "sm80_xmma_gemm"), ptx("compute_90", "sm80_xmma_gemm")),
        box(sass("sm_80", "Abs_GPU_kernel"), ptx("compute_90", "Abs_GPU_kernel", text="sm_90a")),
    )
    rep = report(tf, arch="80;90;100")
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["Abs_GPU_kernel"] and k.get("fails") == ["100"] and rep.exit_code == 1


def test_a_clean_library_under_every_switch_produces_no_warning_or_error():
    """sm_80, sm_90 and compute_90 for a claim of 80;90, with --exact, --require-ptx newest,
    --driver and --gpu: every rule runs and none but the informational answers speaks."""
    rep = report(
        CLEAN,
        exact=True,
        require_ptx="newest",
        driver="999.1",
        strict=True,
        strict_kernels=True,
        gpus=(("H100", (9, 0)),),
    )
    assert set(codes(rep)) == {"D002", "G008"} and rep.exit_code == 0


UNLINKED = Entry(
    "nvidia", SASS, "sm_90", (1, 8), kernels=("_Z2opv",), toolkit=(13, 0), decoded=True, unresolved=("user_op",)
)  # cuModuleLoadData refuses it alone (predict: not-loadable-alone)


@pytest.mark.parametrize(
    "evidence",
    [{"needed": ("libnvJitLink.so.12",)}, {"linkers": ("nvJitLinkCreate",)}],
    ids=["needs-nvjitlink", "names-nvjitlink"],
)
def test_a_cubin_not_loadable_alone_covers_its_gpu_where_the_library_links_device_code(evidence):
    """cuSPARSE's kernels for user operators: the library links them with nvJitLink before loading
    (CUDA 12 NEEDs libnvJitLink.so.12; cuSPARSE 12.9 dlopens libnvJitLink.so.13 and looks up
    nvJitLinkCreate by name)."""
    linked = Library(
        "libx.so",
        1000,
        "elf",
        (box(sass("sm_80", "_Z2opv"), UNLINKED),),
        evidence.get("needed", ("libcudart.so.13",)),
        linkers=evidence.get("linkers", ()),
    )
    rep = report(linked)
    assert codes(rep) == ["D002"] and rep.exit_code == 0


def test_g013_a_cubin_not_loadable_alone_without_a_linker_covers_nothing():
    """Without nvJitLink the driver picks the sm_90 cubin on 9.0 and refuses it (CUDA_ERROR_NOT_FOUND):
    G013 says why, instead of G001's 'no code for 90'; sm_80 still covers 8.0."""
    f = library_facts(lib(box(sass("sm_80", "_Z2opv"), UNLINKED)), parse_claim("80;90", "--arch"), Policy())
    (g,) = rules.rule_g013(f)
    assert (g.code, g.severity, g.get("gpus"), g.get("unresolved"), g.get("kernels")) == (
        "G013",
        ERROR,
        ["90"],
        ["user_op"],
        ["_Z2opv"],
    )
    assert rules.rule_g001(f) == [] and f.missing == ((9, 0),)
    rep = report(lib(box(sass("sm_80", "_Z2opv"), UNLINKED)))
    assert codes(rep) == ["G013", "D002"] and rep.exit_code == 1


def test_g013_not_for_a_clean_library_nor_where_a_loadable_cubin_is_picked():
    assert rules.rule_g013(library_facts(CLEAN, parse_claim("80;90", "--arch"), Policy())) == []
    # on 8.0 the driver picks the sm_80 cubin, which loads: the unlinked sm_90 one is never picked
    f = library_facts(lib(box(sass("sm_80", "_Z2opv"), UNLINKED)), parse_claim("80", "--arch"), Policy())
    assert rules.rule_g013(f) == [] and f.missing == ()


def test_g013_kernels_of_an_unlinked_container_are_not_reported_again_as_k001():
    """One cause, one code: a library covering 9.0 through one container, with another whose
    cubin for 9.0 does not load alone, gets G013 for it and neither G001 nor K001."""
    rep = report(lib(box(sass("sm_80", "_Z1av"), sass("sm_90", "_Z1av")), box(sass("sm_80", "_Z2opv"), UNLINKED)))
    assert codes(rep) == ["G013", "D002"] and found(rep, "G013")[0].get("containers") == 1


def test_g009_names_code_not_loadable_alone():
    rep = report(lib(box(UNLINKED)), arch=None, gpus=(("H200", (9, 0)),))
    (g,) = found(rep, "G009")
    assert "not loadable alone" in g.message and rep.exit_code == 1


def test_on_gpu_is_checks_answer_for_one_gpu():
    """What smoke's device-load asks for the GPU it ran on: the same rule as check --gpu."""
    assert rules.on_gpu(lib(KERN, box(sass("sm_80", "_Z3mulv"))), "H200", (9, 0)).code == "G009"  # type: ignore[union-attr]
    assert rules.on_gpu(lib(KERN), "H200", (9, 0)).code == "G008"  # type: ignore[union-attr]
    assert rules.on_gpu(lib(box(amd("gfx90a"), role=HIP)), "H200", (9, 0)) is None


def test_g005_serves_what_the_ptx_text_compiles_for():
    rep = report(lib(box(ptx("compute_90", text="sm_90a"))), arch="90;100")
    assert found(rep, "G005")[0].get("serves") == ["9.0"]


def test_d002_a_kernel_served_natively_elsewhere_does_not_need_its_ptx_copy():
    """curand 10.4.5.25: one-architecture SASS containers beside a PTX-only copy of ISA 9.4."""
    curand = lib(box(sass("sm_90", "_Z3genv")), box(ptx("compute_75", "_Z3genv", isa=(9, 4))))
    (d,) = found(report(curand, arch="90"), "D002")
    assert d.get("driver") == "580.65.06"
    (d,) = found(report(curand, arch="75"), "D002")  # 7.5 has only the PTX
    assert d.get("cuda") == "13.4"


def test_stubs_beside_relocatable_code_are_judged_not_g010():
    stub = Entry("nvidia", SASS, "sm_75", (1, 8), kernels=(), decoded=True)
    rep = report(lib(box(stub, role=DEVICE_LINK), box(sass("sm_80"), role=RELOCATABLE)), arch="80")
    assert "G010" not in codes(rep) and found(rep, "G001")[0].get("missing") == ["80"]


def test_g006_relocatable_code_alone_is_not_loadable():
    rep = report(lib(box(sass("sm_80"), role=RELOCATABLE)), arch="80")
    assert "G006" in codes(rep) and "G001" in codes(rep)


def test_c001_not_for_amd_code_asked_about_by_gpu():
    rep = report(lib(box(amd("gfx942"), role=HIP), needed=()), arch=None, amd_gpus=(AmdGpu("MI300X", "gfx942"),))
    assert found(rep, "C001") == [] and found(rep, "G008")


def test_k002_an_unread_unit_of_ptx_whose_text_is_arch_specific():
    """An unread unit of PTX whose text targets sm_90a: specialised where no generic code runs on
    the GPU; beside generic code that runs there (KERN on 8.0) nothing shows it is not meant for
    it, so it fails closed (K001)."""
    unread = Entry("nvidia", PTX, "compute_90", (9, 0), kernels=None, ptx_target="sm_90a")
    rep = report(lib(KERN, box(unread)))
    assert found(rep, "K001") and "K002" not in codes(rep)
    rep = report(lib(box(sass("sm_100a", "_Z1kv")), box(unread)), arch="90a;100a")
    assert found(rep, "K002") and "K001" not in codes(rep)


def test_arch_specific_ptx_for_thor_under_its_old_name():
    assert found(report(lib(box(ptx("compute_101a"))), arch="110", strict=True), "G001")[0].get("missing") == ["110"]
    assert found(report(lib(box(ptx("compute_101a"))), arch="101", strict=True), "G001") == []


def test_an_unknown_floor_is_the_one_the_summary_shows():
    from archaudit.report.render import render_text

    known = lib(box(sass("sm_80"), sass("sm_90")), path="liba.so")
    bare = lib(box(sass("sm_80", toolkit=None), sass("sm_90", toolkit=None)), needed=(), path="libb.so")
    text = render_text(report(known, bare), detail="libraries", verbose=False, ascii_only=False)
    assert "D002 driver floor: unknown (archaudit cannot name it, from libb.so)" in text


# ---- what the loader reads: a bare container file's first container; AMD code ROCr refuses ----


def _bare(*containers: Container) -> Library:
    placed = tuple(replace(c, offset=64 * i, section="") for i, c in enumerate(containers))
    return replace(lib(*placed), format="fatbin")


def test_g017_a_kernel_only_in_a_later_container_of_a_bare_file():
    rep = report(_bare(box(sass("sm_80", "_Z4workv")), box(sass("sm_80", "_Z5otherv"))), arch="80")
    (g,) = found(rep, "G017")
    assert g.severity == ERROR and dict(g.data)["kernels"] == ["_Z5otherv"] and dict(g.data)["loader"] == "cuModuleLoad"


def test_g017_not_for_later_containers_the_first_covers_nor_in_a_library():
    """The same kernels in both (nothing out of reach); a shared library registers every container."""
    assert not found(report(_bare(box(sass("sm_80", "_Z4workv")), box(sass("sm_90", "_Z4workv"))), arch="80"), "G017")
    two = lib(box(sass("sm_80", "_Z4workv")), replace(box(sass("sm_80", "_Z5otherv")), offset=64))
    assert not found(report(two, arch="80"), "G017")


def test_g017_later_containers_count_for_no_gpu():
    """Only the first container's sm_80 code is read by cuModuleLoad: 9.0 is G001, whatever the second has."""
    rep = report(_bare(box(sass("sm_80", "_Z4workv")), box(sass("sm_90", "_Z4workv"))), arch="80;90")
    (g,) = found(rep, "G001")
    assert dict(g.data)["missing"] == ["90"]


def test_g018_an_amd_code_object_the_loader_refuses_covers_nothing():
    refused = replace(amd("gfx90a"), unloadable=True)
    rep = report(lib(box(refused, role=HIP), needed=()), arch=None, amd_claim=("gfx90a",))
    assert found(rep, "G018") and found(rep, "G001")
    assert "without a loadable segment" in found(rep, "G001")[0].message
    ok = report(lib(box(amd("gfx90a"), role=HIP), needed=()), arch=None, amd_claim=("gfx90a",))
    assert not found(ok, "G018") and not found(ok, "G001")
