"""archaudit.judge.rules.coverage: whether the claimed GPUs get code they can run (G001, G002,
G003, G004, G005, G007, G010, G012, G013, G017), on libraries built by hand (model.Library,
Container, Entry; builders in helpers.py), no reader involved.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from archaudit.claims import parse_claim
from archaudit.findings import ERROR, INFO
from archaudit.judge import rules
from archaudit.judge.facts import library_facts
from archaudit.judge.policy import Policy
from archaudit.model import DEVICE_LINK, RELOCATABLE, SASS, Container, Entry, Library
from helpers import CLEAN, KEPLER_RUNTIME, KERN, UNLINKED, box, codes, found, lib, ptx, report, sass, unread_sass, whole


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


def test_g005_serves_what_the_ptx_text_compiles_for():
    rep = report(lib(box(ptx("compute_90", text="sm_90a"))), arch="90;100")
    assert found(rep, "G005")[0].get("serves") == ["9.0"]


def test_stubs_beside_relocatable_code_are_judged_not_g010():
    stub = Entry("nvidia", SASS, "sm_75", (1, 8), kernels=(), decoded=True)
    rep = report(lib(box(stub, role=DEVICE_LINK), box(sass("sm_80"), role=RELOCATABLE)), arch="80")
    assert "G010" not in codes(rep) and found(rep, "G001")[0].get("missing") == ["80"]


def test_arch_specific_ptx_for_thor_under_its_old_name():
    assert found(report(lib(box(ptx("compute_101a"))), arch="110", strict=True), "G001")[0].get("missing") == ["110"]
    assert found(report(lib(box(ptx("compute_101a"))), arch="101", strict=True), "G001") == []


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


def test_g012_ptx_newer_than_every_known_release_runs_on_no_retired_gpu():
    """PTX of an ISA no CUDA release in the tables has produced cannot be JIT-compiled by
    Kepler's last driver: unknown is dead (fail closed), never alive."""
    rep = report(lib(box(ptx("compute_35", isa=(99, 0))), needed=KEPLER_RUNTIME), arch="35")
    (g,) = found(rep, "G012")
    assert g.get("gpu") == "35" and g.get("dead") == ["compute_35"] and rep.exit_code == 1


def test_g012_sass_built_by_the_generations_last_toolkit_still_runs():
    """A cubin built by CUDA 11.4 (the last toolkit for Kepler) loads on Kepler's last driver; one
    built by CUDA 12 does not."""
    rep = report(lib(box(sass("sm_35", toolkit=(11, 4))), needed=KEPLER_RUNTIME), arch="35")
    assert found(rep, "G012") == [] and rep.exit_code == 0, codes(rep)
    rep = report(lib(box(sass("sm_35", toolkit=(12, 0))), needed=KEPLER_RUNTIME), arch="35")
    assert found(rep, "G012")[0].get("gpu") == "35" and rep.exit_code == 1


def test_g012_is_reported_for_every_claimed_gpu_after_one_that_only_misses_code():
    """Claim 3.0 and 3.5 for a cubin for sm_35 built by CUDA 12: 3.0 has no code at all (G001),
    3.5 has only code Kepler's last driver cannot run (G012). Both are reported."""
    rep = report(lib(box(sass("sm_35", toolkit=(12, 0))), needed=KEPLER_RUNTIME), arch="30;35")
    assert codes(rep) == ["G001", "G012"] and found(rep, "G012")[0].get("gpu") == "35" and rep.exit_code == 1


def test_specialised_code_is_held_to_exact_and_require_ptx_like_any_other():
    """sm_90a SASS and compute_90a PTX only (a Hopper-only library, as FlashAttention 3 ships): a
    claim of 9.0 is covered, but --require-ptx newest asks for plain PTX it does not carry (G004)."""
    rep = report(lib(box(sass("sm_90a"), ptx("compute_90a"))), arch="90", exact=True, require_ptx="newest")
    assert codes(rep) == ["G005", "G004", "D002"] and rep.exit_code == 1
    rep = report(lib(box(ptx("compute_90", text="sm_90a"))), arch="90")
    assert codes(rep) == ["G005", "G002", "D002"] and rep.exit_code == 0  # runs on 9.0 through the JIT


def test_a_host_library_beside_device_code_is_not_held_to_require_ptx():
    rep = report(CLEAN, lib(needed=("libc.so.6",), path="libhost.so"), require_ptx="newest", exact=True)
    assert codes(rep) == ["D002"] and rep.exit_code == 0


def test_exact_without_a_claim_lists_nothing_as_extra():
    """--exact with --gpu and no claim: there is no list to be exact about (G008 answers)."""
    rep = report(
        lib(box(sass("sm_75"), sass("sm_80"), sass("sm_100"))), arch=None, exact=True, gpus=(("A100", (8, 0)),)
    )
    assert codes(rep) == ["D002", "G008"] and rep.exit_code == 0


def test_g003_and_g001_list_architectures_in_numeric_order():
    rep = report(lib(box(sass("sm_75"), sass("sm_80"), sass("sm_90"), sass("sm_100"))), arch="80;90", exact=True)
    (g,) = found(rep, "G003")
    assert (g.get("extra"), g.message) == (
        ["75", "100"],
        "libx.so carries 7.5, 10.0, which the claim does not "
        "list (--exact). Fix: build with the release's list, or "
        "claim them",
    )
    (g,) = found(report(lib(box(sass("sm_80"), sass("sm_100"))), arch="80;90;100"), "G001")
    assert whole(g) == (
        "G001",
        ERROR,
        "libx.so",
        "libx.so has no code for 9.0 (claimed). Fix: build for sm_90, or record its gate: "
        '[[tool.archaudit.library]] path = "libx.so" arch = "80;100" reason = "<file:line>". It '
        "carries code only for sm_80, sm_100 (claimed: 80, 90, 100, from --arch); 1 kernel (k) would "
        "fail there with 'no kernel image is available'",
        {
            "claimed": ["80", "90", "100"],
            "claim_source": "--arch",
            "carried": ["sm_80", "sm_100"],
            "missing": ["90"],
            "kernels": ["_Z1kv"],
        },
    )


def test_g001_names_no_kernels_when_a_container_was_not_read():
    rep = report(lib(box(sass("sm_80", "_Z1av")), box(unread_sass("sm_80"))))
    (g,) = found(rep, "G001")
    assert g.get("kernels") is None and g.message.endswith(
        "its kernels cannot be named (its code defines none that could be read)"
    )
    (g,) = found(report(lib(box(sass("sm_80", "_Z1av")), box(sass("sm_80", "_Z1bv")))), "G001")
    assert g.get("kernels") == ["_Z1av", "_Z1bv"]


def test_g001_relocatable_code_alone_names_the_claim_and_no_carried_code():
    rep = report(lib(box(sass("sm_80"), role=RELOCATABLE)), arch="80")
    (g,) = found(rep, "G001")
    assert whole(g) == (
        "G001",
        ERROR,
        "libx.so",
        "libx.so has no code for 8.0 (claimed). Fix: link its device code (nvcc -dlink, or build "
        "without -rdc). It carries only relocatable device code, which never loads on its own "
        "(claimed: 80, from --arch); its kernels cannot be named (its code defines none that could be "
        "read)",
        {"claimed": ["80"], "claim_source": "--arch", "carried": [], "missing": ["80"], "kernels": None},
    )


def test_g002_g004_name_the_ptx_and_the_newest_claimed_architecture():
    rep = report(lib(box(sass("sm_80"), ptx("compute_80"))), arch="80;90", require_ptx="newest")
    assert [whole(f) for f in rep.findings if f.code in ("G002", "G004")] == [
        ("G002", INFO, "libx.so", "libx.so runs on 9.0 only through PTX JIT (compute_80)", {"jit": ["90"]}),
        (
            "G004",
            ERROR,
            "libx.so",
            "libx.so carries no PTX for compute_90, the newest claimed (--require-ptx "
            "newest). Fix: add it ('90' or '9.0+PTX')",
            {"newest": "90"},
        ),
    ]
