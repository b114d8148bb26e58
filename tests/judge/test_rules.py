"""Rule-layer branches that mutation testing showed no test pinned (docs/mutation.md).

Hand-built libraries as in test_rules_units.py (the rule layer reads model.Library, not bytes);
each case names the real situation it stands for.
"""

from __future__ import annotations

from dataclasses import replace

from archaudit.claims import parse_claim
from archaudit.findings import ERROR, INFO, Code, Finding
from archaudit.gpus.catalog import resolve as gpus
from archaudit.judge.audit import Report, judge
from archaudit.judge.policy import AmdGpu, Policy
from archaudit.judge.rules import LIBRARY_RULES, on_gpu
from archaudit.model import CODE_OBJECT, DEVICE_LINK, HIP, RELOCATABLE, SASS, Entry, Problem, TargetInventory
from helpers import CLEAN, KERN, amd, box, codes, found, lib, ptx, report, sass

KEPLER_RUNTIME = ("libcudart.so.11.0",)  # Kepler (3.5): its last driver, R470, supports CUDA 11.4


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


def test_on_gpu_judges_with_the_policy_it_is_given():
    """smoke asks on_gpu with the run's policy: under --strict-kernels a kernel that carries only
    sm_90a code cannot run on an A100, and the answer must say so (G009), not the default's G008."""
    hopper = lib(box(sass("sm_80", "_Z1kv"), sass("sm_90", "_Z1kv")), box(sass("sm_90a", "_Z11sm90_hopperv")))
    answer = on_gpu(hopper, "A100", (8, 0))
    assert answer is not None and answer.code == "G008"
    strict = on_gpu(hopper, "A100", (8, 0), Policy(strict_kernels=True))
    assert strict is not None and strict.code == "G009" and "sm_90a" in strict.message


def test_a_problem_of_the_archive_is_a_finding_of_its_code_on_the_target():
    """A wheel whose zip is damaged (E002 from the reader, for the archive as a whole): the finding
    keeps the reader's code, names the wheel, and fails the run whatever its libraries say."""
    inv = TargetInventory("t.whl", "wheel", (CLEAN,), problems=(Problem(Code.E002, "CRC mismatch in demo/libk.so"),))
    pol = Policy()
    rep = Report((judge(inv, parse_claim("80;90", "--arch"), pol),), pol)
    (f,) = found(rep, "E002")
    assert (f.subject, f.message) == (
        "t.whl",
        "t.whl: CRC mismatch in demo/libk.so. Fix: rebuild or re-download the wheel",
    ) and rep.exit_code == 1


def test_g012_is_reported_for_every_claimed_gpu_after_one_that_only_misses_code():
    """Claim 3.0 and 3.5 for a cubin for sm_35 built by CUDA 12: 3.0 has no code at all (G001),
    3.5 has only code Kepler's last driver cannot run (G012). Both are reported."""
    rep = report(lib(box(sass("sm_35", toolkit=(12, 0))), needed=KEPLER_RUNTIME), arch="30;35")
    assert codes(rep) == ["G001", "G012"] and found(rep, "G012")[0].get("gpu") == "35" and rep.exit_code == 1


# ---- second pass: the survivors of rules.py read one by one (docs/mutation.md) ----------------

LIBRARY_CODES = {code for code, _ in LIBRARY_RULES if code != "E*"}


def whole(f: Finding) -> tuple[str, str, str, str, dict[str, object]]:
    return f.code, f.severity, f.subject, f.message, dict(f.data)


def unread_sass(target: str) -> Entry:
    """A cubin whose kernels could not be read (its symbol table is damaged or stripped)."""
    return Entry("nvidia", SASS, target, (1, 8), kernels=None, toolkit=(13, 0))


def test_every_finding_names_the_library_or_target_it_is_about():
    """Filters (`ignore library=`), the index's runs-on table and every reader of the JSON find a
    finding by its subject: a library's findings name its path, a target's the target, and each
    message begins with what it is about. Inputs that together make every finding code."""
    nested = "pkg/_native/lib/libk.so"
    stub = Entry("nvidia", SASS, "sm_75", (1, 8), kernels=(), decoded=True)
    reports = [
        report(
            lib(box(sass("sm_75"), sass("sm_80"), ptx("compute_80")), path=nested),
            lib(box(stub, role=DEVICE_LINK), path="s.so"),
            lib(box(sass("sm_80"), role=RELOCATABLE), path="r.so"),
            lib(box(sass("sm_90a")), path="h.so"),
            arch="80;90",
            exact=True,
            require_ptx="newest",
            driver="418.67",
            gpus=(("H100", (9, 0)),),
        ),
        report(
            lib(KERN, box(sass("sm_80", "_Z3mulv")), box(sass("sm_90a", "_Z11sm90_hopperv")), path=nested),
            lib(KERN, box(sass("sm_90", "sm90_gemm")), path="d.so"),
        ),
        report(
            lib(
                box(sass("sm_35", toolkit=(12, 0))),
                needed=KEPLER_RUNTIME,
                path=nested,
                problems=(Problem(Code.E013, "bad", 0x40),),
                claims=("8.0",),
            ),
            arch="35",
            gpus=(("K80", (3, 7)),),
        ),
        report(
            lib(box(amd("gfx90a:xnack+"), role=HIP), needed=(), path=nested),
            arch="80",
            amd_claim=("gfx90a",),
            amd_gpus=(AmdGpu("MI300X", "gfx942"), AmdGpu("MI250X", "gfx90a")),
        ),
        report(
            lib(box(amd("gfx90a"), role=HIP), needed=(), path=nested),
            lib(claims=("8x",), path="e.so"),
            arch=None,
            require_device_code=("libnone.so",),
        ),
        report(CLEAN, lib(needed=("libcudart.so.12",), path=nested), arch=None, amd_claim=("gfx942",)),
        report(lib(box(replace(sass("sm_90"), unresolved=("_Z3extv",))), path=nested), arch="90"),
        report(
            lib(
                box(
                    Entry(
                        "amd",
                        CODE_OBJECT,
                        "gfx90a",
                        identifier="hipv4-amdgcn-amd-amdhsa--gfx90a",
                        kernels=("k",),
                        decoded=True,
                        own_target="gfx90a:xnack+",
                    ),
                    Entry(
                        "amd",
                        CODE_OBJECT,
                        "gfx942",
                        identifier="openmp-amdgcn-amd-amdhsa--gfx942",
                        kernels=("k",),
                        decoded=True,
                        own_target="gfx942",
                    ),
                    role=HIP,
                ),
                needed=(),
                path=nested,
            ),
            arch=None,
            amd_claim=("gfx90a:xnack+",),
        ),
        report(lib(box(sass("sm_80", "_Z4workv")), box(sass("sm_90", "_Z4workv")), path=nested), arch="80;90"),
        report(
            lib(
                box(sass("sm_80", "_Z4workv")), path="pkg/lib/libcusparseLt.so.0", statements=("CUSPARSELT_LOG_LEVEL",)
            ),
            arch="50;80",
        ),
        report(
            lib(
                box(sass("sm_80", "_Z4workv")),
                box(sass("sm_90", "_Z5otherv")),
                path="pkg/lib/libnccl.so.2",
                statements=("NCCL version 2.99.1+cuda13.0",),
            ),
            arch="80;90",
        ),
        # a bare .fatbin whose second container alone defines a kernel (G017); an AMD code object
        # without a loadable segment (G018)
        report(
            replace(
                lib(box(sass("sm_80", "_Z4workv")), replace(box(sass("sm_80", "_Z5otherv")), offset=64), path=nested),
                format="fatbin",
            ),
            arch="80",
        ),
        report(
            lib(box(replace(amd("gfx90a"), unloadable=True), role=HIP), needed=(), path=nested),
            arch=None,
            amd_claim=("gfx90a",),
        ),
    ]
    seen = set()
    for rep in reports:
        libraries = {lib.path for lib in rep.targets[0].inventory.libraries}
        for f in rep.findings:
            seen.add(f.code)
            per_library = (
                f.code in LIBRARY_CODES
                or f.code.startswith("E")
                or f.code == "C002"
                or (f.code == "C001" and f.subject != "t.whl")
            )
            assert (f.subject in libraries) if per_library else f.subject == "t.whl", whole(f)
            assert isinstance(f.message, str) and f.message.startswith(f.subject) or f.code == "C003", whole(f)
    assert seen >= LIBRARY_CODES | {"E013", "C001", "C002", "C003", "G006", "G011", "G019"}, sorted(seen)


def test_c003_names_the_library_the_list_is_embedded_in():
    rep = report(
        lib(box(sass("sm_80"), sass("sm_90")), claims=("8.0",), path="torch/lib/libtorch_cuda.so"), arch="80;90"
    )
    (c,) = found(rep, "C003")
    assert c.subject == "t.whl" and c.message == (
        "libtorch_cuda.so embeds 8.0 but --arch says 8.0, 9.0. Fix: make "
        "the build's arch list and the release's claim the same list"
    )


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


def test_g008_g009_for_amd_gpus_say_how_the_code_runs():
    """Code for gfx90a with XNACK on: an MI250X, which ships with XNACK off, does not run it and
    the finding names the setting that would (HSA_XNACK=1); a GPU named gfx90a:xnack+ runs it in
    either SRAMECC setting; an MI300X (gfx942) not at all; a GPU whose setting is not recorded
    (gfx90a) must run it in every setting. The index's runs-on table reads `gpu` and `runs`."""
    _, amd_gpus = gpus(["MI250X", "gfx90a:xnack+", "MI300X", "gfx90a"])
    rep = report(
        lib(box(amd("gfx90a:xnack+"), role=HIP), needed=()), arch=None, amd_claim=("gfx90a:xnack+",), amd_gpus=amd_gpus
    )
    assert [whole(f) for f in rep.findings] == [
        (
            "G008",
            INFO,
            "libx.so",
            "libx.so on gfx90a:xnack+ (gfx90a:xnack+): native",
            {"gpu": "gfx90a:xnack+", "runs": "native", "setting": None},
        ),
        (
            "G009",
            ERROR,
            "libx.so",
            "libx.so on MI250X (gfx90a:sramecc+:xnack-, as it ships): not at all. Fix: build "
            "for gfx90a (--offload-arch=gfx90a:sramecc+:xnack-). It runs only as "
            "gfx90a:sramecc+:xnack+, gfx90a:sramecc-:xnack+, which is not how MI250X ships: "
            "that takes xnack (HSA_XNACK=1)",
            {"gpu": "MI250X", "runs": "none", "setting": "gfx90a:sramecc+:xnack-"},
        ),
        (
            "G009",
            ERROR,
            "libx.so",
            "libx.so on MI300X (gfx942:sramecc+:xnack-, as it ships): not at all. Fix: build "
            "for gfx942 (--offload-arch=gfx942:sramecc+:xnack-)",
            {"gpu": "MI300X", "runs": "none", "setting": "gfx942:sramecc+:xnack-"},
        ),
        (
            "G009",
            ERROR,
            "libx.so",
            "libx.so on gfx90a (gfx90a): only as gfx90a:sramecc+:xnack+, "
            "gfx90a:sramecc-:xnack+, not as gfx90a:sramecc+:xnack-, gfx90a:sramecc-:xnack-. "
            "Fix: build for gfx90a (--offload-arch=gfx90a). How gfx90a is set up is not "
            "recorded, so every setting must run (name one: --gpu gfx90a:sramecc+:xnack+)",
            {"gpu": "gfx90a", "runs": "native", "setting": None},
        ),
    ]
    assert rep.exit_code == 1


def test_g008_g009_for_nvidia_gpus_say_how_the_code_runs():
    rep = report(
        lib(box(sass("sm_80", "_Z1av"), ptx("compute_80", "_Z1av"))),
        arch=None,
        gpus=(("A100", (8, 0)), ("H100", (9, 0))),
    )
    assert [whole(f) for f in rep.findings if f.code in ("G008", "G009")] == [
        ("G008", INFO, "libx.so", "libx.so on A100 (8.0): native", {"gpu": "A100", "runs": "native"}),
        ("G008", INFO, "libx.so", "libx.so on H100 (9.0): only through PTX JIT", {"gpu": "H100", "runs": "jit"}),
    ]
    rep = report(
        lib(box(sass("sm_35", toolkit=(12, 0))), needed=KEPLER_RUNTIME), arch=None, gpus=(("Tesla K80", (3, 7)),)
    )
    assert [whole(f) for f in rep.findings] == [
        (
            "G009",
            ERROR,
            "libx.so",
            "libx.so on Tesla K80 (3.7): not at all (its code needs a newer driver than any "
            "for this GPU). Fix: build for sm_37",
            {"gpu": "Tesla K80", "runs": "none"},
        )
    ]
    rep = report(lib(box(sass("sm_80", "_Z1av"))), arch=None, gpus=(("H100", (9, 0)),))
    assert found(rep, "G009")[0].message == (
        "libx.so on H100 (9.0): not at all. Fix: build for sm_90, or record its "
        'gate: [[tool.archaudit.library]] path = "libx.so" arch = "80" '
        'reason = "<file:line>". It carries only sm_80'
    )


def test_on_gpu_answers_for_the_nvidia_gpu_alone():
    """smoke's policy may name AMD GPUs too; on_gpu's answer is about the one NVIDIA GPU it ran on."""
    pol = Policy(amd_gpus=(AmdGpu("MI300X", "gfx942"),))
    assert on_gpu(lib(box(amd("gfx942"), role=HIP), needed=()), "H200", (9, 0), pol) is None
    g = on_gpu(lib(box(sass("sm_90"))), "H200", (9, 0), pol)
    assert g is not None and (g.code, g.get("gpu"), g.message) == ("G008", "H200", "libx.so on H200 (9.0): native")


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


def test_k001_groups_kernels_and_unread_containers_largest_first():
    """Three kernels in two sm_80-only containers and two unread sm_80-only containers, beside KERN
    (sm_80, sm_90, compute_90): two K001 findings, the three kernels first."""
    rep = report(
        lib(
            KERN,
            box(unread_sass("sm_80")),
            box(unread_sass("sm_80")),
            box(sass("sm_80", "_Z1av", "_Z1bv")),
            box(sass("sm_80", "_Z1cv")),
        )
    )
    assert [whole(f) for f in found(rep, "K001")] == [
        (
            "K001",
            ERROR,
            "libx.so",
            "libx.so: 3 kernels fail on 9.0. Fix: build for sm_90 or record: "
            '[[tool.archaudit.library]] path = "libx.so" arch = "80" reason = '
            '"<file:line>". Their own container lacks the claimed 9.0, carrying only sm_80: 3 '
            "kernels (a, b, c)",
            {"kernels": ["_Z1av", "_Z1bv", "_Z1cv"], "containers": 2, "carried": ["sm_80"], "fails": ["90"]},
        ),
        (
            "K001",
            ERROR,
            "libx.so",
            "libx.so: 2 containers without identifiable kernels fail on 9.0. Fix: build for "
            'sm_90 or record: [[tool.archaudit.library]] path = "libx.so" arch = "80" '
            'reason = "<file:line>". Their own container lacks the claimed 9.0, carrying only '
            "sm_80: 2 containers without identifiable kernels",
            {"kernels": [], "containers": 2, "carried": ["sm_80"], "fails": ["90"]},
        ),
    ]


def test_k003_compiled_out_names_the_code_the_gpus_do_get():
    """A kernel absent from the sm_90 cubin of its own container, which 9.0 runs: the text says
    which GPU, which code it runs and why that is by design."""
    c = box(sass("sm_80", "_Z1av", "_Z1bv"), sass("sm_90", "_Z1av"))
    rep = report(lib(c), arch="80;90")
    (k,) = found(rep, "K003")
    assert k.get("reason") == "compiled-out" and k.get("fails") == ["90"]
    assert "not meant for 9.0 (claimed), as designed: 9.0 runs sm_90 of their own container" in k.message


def test_k001_a_kernel_missing_from_the_ptx_a_gpu_jit_compiles():
    """onnxruntime's shape: a kernel absent from the compute_75 PTX its container gives 9.0
    through the JIT, present in the sm_80 SASS: the source left it out of 7.5's code, not 9.0's
    (a >= 8.0 guard passes on 9.0), so 9.0 fails it (lib_guard_75ptx_80.so: 500 on an H100)."""
    c = box(sass("sm_75", "_Z1av"), ptx("compute_75", "_Z1av"), sass("sm_80", "_Z1av", "_Z1bv"))
    rep = report(lib(c), arch="75;80;86;90")
    (k,) = found(rep, "K001")
    assert k.get("kernels") == ["_Z1bv"] and k.get("fails") == ["90"]
    (k,) = found(rep, "K003")
    assert k.get("reason") == "compiled-out" and k.get("fails") == ["75"]


def test_k002_k003_name_what_the_kernels_carry():
    rep = report(
        lib(
            box(sass("sm_75", "_Z4axpyv"), sass("sm_80", "_Z4axpyv"), sass("sm_90", "_Z4axpyv")),
            box(sass("sm_90a", "_Z11sm90_kernelv")),
            box(sass("sm_80", "sm80_gemm")),
        ),
        arch="75;80;90",
    )
    assert [whole(f) for f in rep.findings if f.code in ("K002", "K003")] == [
        (
            "K002",
            INFO,
            "libx.so",
            "libx.so: 1 kernel not meant for 7.5, 8.0 (claimed), as designed: all their code is "
            "arch-specific or family code (sm_90a), and their names say so or no generic code "
            "of the library runs there: 1 kernel (sm90_kernel)",
            {"kernels": ["_Z11sm90_kernelv"], "carried": ["sm_90a"], "fails": ["75", "80"]},
        ),
        (
            "K003",
            INFO,
            "libx.so",
            "libx.so: 1 kernel not meant for 7.5 (claimed), as designed: their names mean 8.0 "
            "or newer (architecture prefix (CuTe SM80_* atoms, cuBLAS/cuDNN sm80_xmma_*, "
            "sm_90a_*), data/names.json), and their code is for no older GPU (only sm_80): "
            "1 kernel (sm80_gemm)",
            {"kernels": ["sm80_gemm"], "carried": ["sm_80"], "fails": ["75"], "reason": "named"},
        ),
    ]


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


def test_g009_counts_containers_whose_kernels_were_not_read_as_what_they_are():
    """--fast reads no kernel names: an sm_80-only container unread beside KERN is 'a container
    whose kernels were not read' on an H100, never '0 kernels in 1 container'; with names, kernels."""
    rep = report(lib(KERN, box(unread_sass("sm_80"))), arch=None, gpus=(("H100", (9, 0)),))
    (g,) = found(rep, "G009")
    assert (
        "on H100 (9.0): 1 container whose kernels were not read cannot run there (native for the rest)" in g.message
        and "They carry only sm_80" in g.message
    )
    rep = report(lib(KERN, box(unread_sass("sm_80")), box(sass("sm_80", "_Z1av"))), arch=None, gpus=(("H100", (9, 0)),))
    (g,) = found(rep, "G009")
    assert ": 1 kernel in 1 container and 1 container whose kernels were not read cannot run there" in g.message
