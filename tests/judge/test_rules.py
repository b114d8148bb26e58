"""archaudit.judge.rules as a whole: one producer per finding code, every rule documented and
pure over its facts, the order the package states, and findings that name what they are about.

Each rule's own cases are in tests/judge/rules/ (test_coverage.py, test_kernels.py, ...), on
libraries built by hand (model.Library/Container/Entry; builders in helpers.py); the end-to-end
tests on nvcc-built fixtures are in test_check_rules.py.
"""

from __future__ import annotations

from dataclasses import replace

from archaudit.claims import parse_claim
from archaudit.findings import CODES, ERROR, Code
from archaudit.judge import rules
from archaudit.judge.facts import library_facts
from archaudit.judge.policy import AmdGpu, LibraryClaim, Policy
from archaudit.judge.rules import LIBRARY_RULES
from archaudit.model import CODE_OBJECT, DEVICE_LINK, HIP, RELOCATABLE, SASS, Entry, Problem
from helpers import CLEAN, KEPLER_RUNTIME, KERN, amd, box, codes, found, lib, ptx, report, sass, whole

LIBRARY_CODES = {code for code, _ in LIBRARY_RULES if code != "E*"}


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
        # a kernel the project's host code gates to 8.0 (K006)
        report(
            lib(KERN, box(sass("sm_80", "_Z3mulv")), path=nested),
            arch="80;90",
            library_claims=(LibraryClaim("*.so", parse_claim("80", "library"), "ops.py:7", ("mul",)),),
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


def test_clean_library_gives_no_error_and_exit_0():
    rep = report(CLEAN)
    assert rep.exit_code == 0 and [c for c in codes(rep) if CODES[Code(c)].severity == ERROR] == []


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


def test_embedded_claim_judges_when_none_is_given():
    rep = report(lib(box(sass("sm_80")), claims=("8.0 9.0",)), arch=None)
    assert found(rep, "G001")[0].get("missing") == ["90"] and "C001" not in codes(rep)


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
