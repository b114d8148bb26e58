"""The library facts that judging computes by set operations (per distinct kernel list, per
container shape) agree with their direct formulation, kernel by kernel and GPU by GPU.

The direct formulations below are how archaudit computed these facts before they were made
fast (a membership test of every kernel on every GPU; a best rank per kernel). They are kept
here as the reference: on generated libraries and on the nvcc-built fixtures, the facts, the
kernel gaps and the driver floors must be the same.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from archaudit.claims import parse_claim
from archaudit.gpus import cuda as arch
from archaudit.gpus.cuda import label
from archaudit.gpus.selection import NOTHING, Choice, choose
from archaudit.judge import facts, paths, rules
from archaudit.judge.facts import KernelGap, LibraryFacts, labels_of, library_facts
from archaudit.judge.floors import entry_floor, unit_release
from archaudit.judge.policy import NvidiaGpu, Policy
from archaudit.model import CODE_OBJECT, DEVICE_LINK, EXECUTABLE, HIP, LTO, PTX, SASS, Container, Entry, Library, Role
from archaudit.read.library import scan_file
from helpers import reference_named

CC = tuple[int, int]
BIN = Path(__file__).parents[1] / "fixtures" / "cuda" / "bin"
_RANK = {"native": 2, "jit": 1, "none": 0}


# ---- the direct formulations -------------------------------------------------------------------


def reference_needed(
    units: list[facts.Unit], choices: list[Choice], excused: Callable[[facts.Unit, str], bool] = lambda u, k: False
) -> list[bool]:
    best: dict[str, int] = {}
    for u, c in zip(units, choices):
        if u.identified and c.runs != "none":
            for k in c.kernels or ():
                best[k] = max(best.get(k, 0), _RANK[c.runs])
    out = []
    for u, c in zip(units, choices):
        if c.runs == "none":
            out.append(False)
        elif not u.identified:
            out.append(True)
        else:  # a JIT unit's kernel that the binary shows is not launched on this GPU needs nothing
            out.append(
                any(best[k] == _RANK[c.runs] and (c.runs == "native" or not excused(u, k)) for k in c.kernels or ())
            )
    return out


def reference_excused(f: LibraryFacts, gpu: CC) -> Callable[[facts.Unit, str], bool]:
    """K003's evidence about a kernel of a unit on ``gpu``, formulated directly: a statement speaks
    for it, or its name (each convention "this or newer") names only architectures newer than
    ``gpu`` and its code in the unit is for none older than the oldest of them."""

    def excused(u: facts.Unit, k: str) -> bool:
        if any(s.excuses(k, gpu) for s in f.statements):
            return True
        named = reference_named(k)
        archs = [arch.canonical_cc(c.effective.cc) for c in u.codes if k in (c.entry.kernels or ())]
        return bool(named) and gpu < min(named) and all(a >= min(named) for a in archs)

    return excused


def reference_homes(f: LibraryFacts) -> dict[str, tuple[int, ...]]:
    homes: dict[str, list[int]] = defaultdict(list)
    for i, u in enumerate(f.units):
        if u.identified:
            for k in u.kernels:
                homes[k].append(i)
    return {k: tuple(v) for k, v in homes.items()}


def reference_available(f: LibraryFacts, gpu: CC) -> set[str]:
    have: set[str] = set()
    for i, u in enumerate(f.units):
        ks = f.paths[gpu].choices[i].kernels
        if u.identified and ks:
            have.update(ks)
    return have


def reference_floor(f: LibraryFacts, gpu: CC) -> facts.Floor | None:
    units = list(f.units)
    choices = list(f.paths[gpu].choices)
    built = unit_release(tuple(c for u in units for c in u.codes))
    floors = [
        entry_floor(c.code, f.undated, f.policy.driver_os, unit_release(u.codes) or built)
        for u, c, needed in zip(units, choices, reference_needed(units, choices, reference_excused(f, gpu)))
        if needed and c.code is not None
    ]
    if floors and f.runtime is not None:
        floors.append(f.runtime)
    row = arch.first_driver(gpu)
    if floors and row is not None:  # the GPU's own floor: the driver of its first release
        floors.append(facts.Floor(row.cuda, arch.min_driver(row.cuda, f.policy.driver_os), "", "gpu"))
    top = max(floors, key=lambda x: x.key) if floors else None
    return top


def reference_missing(f: LibraryFacts, gpus: tuple[CC, ...]) -> dict[tuple[int, str], tuple[str, ...]]:
    """For each kernel of each identified unit (a kernel is its container and its name), the
    labels of those of ``gpus`` that unit's own choice does not give it; not where the unit gets
    a cubin the driver refuses alone (G013 reports that)."""
    out = {}
    for i, u in enumerate(f.units):
        if not u.identified:
            continue
        for name in sorted(u.kernels):
            missing = tuple(
                label(cc)
                for cc in gpus
                if name not in (f.paths[cc].choices[i].kernels or ()) and not f.paths[cc].choices[i].unlinked
            )
            if missing:
                out[(i, name)] = missing
    return out


def gap_missing(gaps: tuple[KernelGap, ...], gpus: tuple[CC, ...]) -> dict[tuple[int, str], tuple[str, ...]]:
    """The same read from the gaps: a kernel's gaps in its unit, one per verdict, share out its GPUs."""
    out: dict[tuple[int, str], set[str]] = {}
    for g in gaps:
        assert g.name is not None
        (unit,) = g.units
        out.setdefault((unit, g.name), set()).update(g.fails)
    return {key: tuple(label(cc) for cc in gpus if label(cc) in where) for key, where in sorted(out.items())}


def assert_agrees(f: LibraryFacts) -> None:
    """Every fast fact of ``f`` equals its direct formulation."""
    assert list(f.kernel_homes.items()) == list(reference_homes(f).items())  # same kernels, same order
    for cc, path in f.paths.items():
        for u, choice, got in zip(f.units, path.choices, path.given):
            assert got == frozenset(choice.kernels or ())
            assert got <= u.kernels
            asked = choose(u.container, u.codes, cc, f.linker is not None)  # one per container shape is exact
            assert choice == asked or (choice == NOTHING and asked.code in path.dead)
        units, choices = list(f.units), list(path.choices)
        assert paths._needed(units, choices, list(path.given)) == reference_needed(units, choices)
        assert paths._needed(units, choices, list(path.given), paths.excused_on(cc, f.statements)) == reference_needed(
            units, choices, reference_excused(f, cc)
        )
        want = reference_floor(f, cc)
        if want is not None and want.kind == "gpu":  # the GPU's own floor: the same floor, in its own words
            assert path.floor is not None and (path.floor.cuda, path.floor.driver, path.floor.kind) == (
                want.cuda,
                want.driver,
                want.kind,
            )
        else:
            assert path.floor == want
        for name in f.kernel_homes:
            assert f.kernel_codes(name) == tuple(
                c for i in f.kernel_homes[name] for c in f.units[i].codes if name in (c.entry.kernels or ())
            )
    entries = [c.entry for u in f.units for c in u.codes]
    if entries and all(e.kernels is not None for e in entries):
        assert f.kernel_count == len({k for e in entries for k in e.kernels or ()})
    if f.units and all(u.identified for u in f.units) and not f.policy.strict_kernels:
        judged = tuple(cc for cc in f.claimed if cc not in f.missing)
        if judged and not f.specialised:
            gaps = facts._kernel_gaps(f, judged)
            assert gap_missing(gaps, judged) == reference_missing(f, judged)
            for g in gaps:  # each gap's own facts, as the verdicts read them
                (unit,) = g.units
                u = f.units[unit]
                assert g.carried == labels_of(c for c in u.codes if (g.name or "") in (c.entry.kernels or ()))
                if g.verdict == "elsewhere":
                    assert g.elsewhere and unit not in g.elsewhere
        for cc in f.paths:
            if f.paths[cc].runs != "none" and not f.specialised:
                gaps = f.kernel_gaps_on(cc)
                assert gap_missing(gaps, (cc,)) == reference_missing(f, (cc,))


# ---- generated libraries ------------------------------------------------------------------------

KERNELS = ("_Z1av", "_Z1bv", "_Z1cv", "sm80_xmma_k", "volta_sgemm")
SASS_TARGETS = ("sm_35", "sm_75", "sm_80", "sm_86", "sm_90", "sm_90a", "sm_100", "sm_100f", "sm_120")
PTX_TARGETS = ("compute_35", "compute_75", "compute_80", "compute_90", "compute_90a", "compute_100")
GPUS = ((3, 5), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0))

kernels = st.lists(st.sampled_from(KERNELS), max_size=4).map(tuple)


@st.composite
def entries(draw: st.DrawFn, identified: bool) -> Entry:
    names = draw(kernels) if identified or draw(st.booleans()) else None  # some entries of a unit unread
    if draw(st.booleans()):
        toolkit = draw(st.sampled_from([None, (11, 4), (12, 0), (13, 0)]))
        unresolved = ("_Z3extv",) if draw(st.integers(0, 5)) == 0 else ()
        return Entry(
            "nvidia",
            SASS,
            draw(st.sampled_from(SASS_TARGETS)),
            (1, 8),
            kernels=names,
            toolkit=toolkit,
            decoded=True,
            unresolved=unresolved,
        )
    target = draw(st.sampled_from(PTX_TARGETS))
    text = draw(st.sampled_from([None, target.replace("compute_", "sm_"), "sm_90a"]))
    isa = draw(st.sampled_from([(0, 0), (7, 4), (8, 0), (9, 0)]))
    return Entry("nvidia", PTX, target, isa, kernels=names, decoded=True, ptx_target=text)


@st.composite
def libraries(draw: st.DrawFn) -> Library:
    containers = []
    for _ in range(draw(st.integers(1, 6))):
        other = draw(st.integers(0, 14))
        if other == 0:  # a container without NVIDIA code to judge: LTO IR only
            containers.append(
                Container(
                    "nvidia", EXECUTABLE, ".nv_fatbin", 0, 0, (Entry("nvidia", LTO, "lto_80", (1, 0), kernels=()),)
                )
            )
            continue
        if other == 1:  # AMD code beside it
            containers.append(
                Container(
                    "amd",
                    HIP,
                    ".hip_fatbin",
                    0,
                    0,
                    (Entry("amd", CODE_OBJECT, "gfx90a", kernels=("k",), decoded=True),),
                )
            )
            continue
        identified = draw(st.integers(0, 9)) > 0
        box = draw(st.lists(entries(identified), min_size=1, max_size=4))
        role: Role = DEVICE_LINK if draw(st.integers(0, 9)) == 0 else EXECUTABLE
        containers.append(Container("nvidia", role, ".nv_fatbin", 0, 0, tuple(box)))
    needed = draw(st.sampled_from([(), ("libcudart.so.12",), ("libcudart.so.11.0",)]))
    return Library("libx.so", 1000, "elf", tuple(containers), needed)


@settings(max_examples=400, deadline=None)
@given(
    libraries(),
    st.lists(st.sampled_from(GPUS), min_size=1, max_size=5, unique=True),
    st.lists(st.sampled_from(GPUS), max_size=2, unique=True),
)
def test_fast_facts_agree_with_the_direct_formulation(lib, claimed, asked):
    claim = parse_claim(";".join(label(cc) for cc in claimed), "--arch")
    policy = Policy(gpus=tuple(NvidiaGpu(f"sm_{label(cc)}", cc) for cc in asked))
    assert_agrees(library_facts(lib, claim, policy))


def test_a_kernel_run_natively_elsewhere_keeps_a_jit_only_unit_unused():
    """curand's layout: a kernel in a single-architecture container and in a PTX-only one; on
    the GPU of the first, the PTX-only container is not loaded, so its floor does not count."""
    native = Container(
        "nvidia",
        EXECUTABLE,
        ".nv_fatbin",
        0,
        0,
        (Entry("nvidia", SASS, "sm_80", (1, 8), kernels=("_Z1av",), toolkit=(12, 0), decoded=True),),
    )
    jit = Container(
        "nvidia",
        EXECUTABLE,
        ".nv_fatbin",
        0,
        0,
        (Entry("nvidia", PTX, "compute_75", (9, 0), kernels=("_Z1av",), decoded=True, ptx_target="sm_75"),),
    )
    f = library_facts(Library("libx.so", 1, "elf", (native, jit)), parse_claim("80;86", "--arch"), Policy())
    assert_agrees(f)
    units, on80, on86 = list(f.units), f.paths[(8, 0)], f.paths[(8, 6)]
    assert [c.runs for c in on80.choices] == ["native", "jit"]
    assert paths._needed(units, list(on80.choices), list(on80.given)) == [True, False]
    assert [c.runs for c in on86.choices] == ["native", "jit"]  # sm_80 runs on 8.6 too
    assert on80.floor is not None and "PTX" not in on80.floor.evidence


def sass_box(target: str, *names: str, toolkit: tuple[int, int] | None = (12, 0)) -> Container:
    return Container(
        "nvidia",
        EXECUTABLE,
        ".nv_fatbin",
        0,
        0,
        (Entry("nvidia", SASS, target, (1, 8), kernels=names, toolkit=toolkit, decoded=True),),
    )


def test_containers_after_one_without_nvidia_code_are_judged():
    """A container holding LTO IR only (or AMD code) leaves no unit; the containers after it are
    still judged: kernel a, built for 8.0 alone, fails on the claimed 9.0."""
    lto = Container("nvidia", EXECUTABLE, ".nv_fatbin", 0, 0, (Entry("nvidia", LTO, "lto_80", (1, 0), kernels=()),))
    amd = Container("amd", HIP, ".hip_fatbin", 0, 0, (Entry("amd", CODE_OBJECT, "gfx90a", kernels=("k",)),))
    both = Container(
        "nvidia",
        EXECUTABLE,
        ".nv_fatbin",
        0,
        0,
        sass_box("sm_80", "_Z1bv").entries + sass_box("sm_90", "_Z1bv").entries,
    )
    for first in (lto, amd):
        lib = Library("libx.so", 1, "elf", (first, sass_box("sm_80", "_Z1av"), both))
        f = library_facts(lib, parse_claim("80;90", "--arch"), Policy())
        assert len(f.units) == 2
        assert [x.get("kernels") for x in rules.rule_k001(f)] == [["_Z1av"]]


def test_a_gpu_runs_natively_whatever_the_order_of_its_containers():
    """The best any container does: native from the first, JIT from the second is still native."""
    ptx = Container(
        "nvidia",
        EXECUTABLE,
        ".nv_fatbin",
        0,
        0,
        (Entry("nvidia", PTX, "compute_80", (8, 0), kernels=("_Z1bv",), decoded=True, ptx_target="sm_80"),),
    )
    for order in ((sass_box("sm_80", "_Z1av"), ptx), (ptx, sass_box("sm_80", "_Z1av"))):
        f = library_facts(Library("libx.so", 1, "elf", order), parse_claim("80", "--arch"), Policy())
        assert f.coverage == (((8, 0), "native"),) and rules.rule_g002(f) == []


def test_containers_of_one_shape_keep_their_own_driver_floors():
    """Two containers of the same targets whose PTX dates them differently (CUDA 12.0 and 13.0):
    their cubins, which record no toolkit, take the floor of their own container's PTX."""

    def dated(isa: tuple[int, int], name: str) -> Container:
        return Container(
            "nvidia",
            EXECUTABLE,
            ".nv_fatbin",
            0,
            0,
            (
                Entry("nvidia", SASS, "sm_80", (1, 8), kernels=(name,), toolkit=None, decoded=True),
                Entry("nvidia", PTX, "compute_80", isa, kernels=(name,), decoded=True, ptx_target="sm_80"),
            ),
        )

    f = library_facts(
        Library("libx.so", 1, "elf", (dated((8, 0), "_Z1av"), dated((9, 0), "_Z1bv"))),
        parse_claim("80", "--arch"),
        Policy(),
    )
    assert f.units[0].shape == f.units[1].shape
    floor = f.paths[(8, 0)].floor
    assert floor is not None and floor.cuda == (13, 0) and floor == reference_floor(f, (8, 0))


def test_ptx_the_driver_cannot_compile_on_a_retired_gpu_fails_even_when_named():
    """On 3.5 (last driver: CUDA 11.4) the driver picks compute_35 PTX whose text targets sm_90a
    and cannot compile it: its kernel fails there (K001), whatever its name says. The dead-code
    test applies to code that runs, not to that PTX."""
    ptx = Container(
        "nvidia",
        EXECUTABLE,
        ".nv_fatbin",
        0,
        0,
        (
            Entry("nvidia", SASS, "sm_80", (1, 8), kernels=("sm80_xmma_k",), toolkit=(12, 0), decoded=True),
            Entry("nvidia", PTX, "compute_35", (8, 0), kernels=("sm80_xmma_k",), decoded=True, ptx_target="sm_90a"),
        ),
    )
    lib = Library("libx.so", 1, "elf", (sass_box("sm_35", "_Z1av", toolkit=(11, 4)), ptx))
    f = library_facts(lib, parse_claim("35;80", "--arch"), Policy())
    assert f.paths[(3, 5)].choices[1].runs == "none" and f.paths[(3, 5)].dead == ()
    gap = next(g for g in f.kernel_gaps if g.name == "sm80_xmma_k")
    assert (gap.verdict, gap.fails) == ("fails", ("35",))


def test_a_generic_kernel_of_family_code_beside_generic_code_is_no_design():
    """A kernel whose only code is sm_100f, beside generic code that runs on 8.0: its name names
    nothing, so it may be meant for 8.0 too and its container's target excuses nothing there
    (K001; zero_fill for sm_100a beside code for 9.0 gives 209 on an H100). Named for 10.0, it is
    specialised by design (K002)."""

    def facts_of(name: str) -> LibraryFacts:
        lib = Library(
            "libx.so",
            1,
            "elf",
            (
                sass_box("sm_100f", name),
                Container(
                    "nvidia",
                    EXECUTABLE,
                    ".nv_fatbin",
                    0,
                    0,
                    sass_box("sm_80", "_Z1kv").entries + sass_box("sm_100", "_Z1kv").entries,
                ),
            ),
        )
        return library_facts(lib, parse_claim("80;100", "--arch"), Policy())

    f = facts_of("_Z1fv")
    assert [(g.verdict, g.name, g.fails) for g in f.kernel_gaps] == [("fails", "_Z1fv", ("80",))]
    assert len(rules.rule_k001(f)) == 1 and rules.rule_k002(f) == []
    f = facts_of("sm100_fill")
    assert [(g.verdict, g.name, g.fails) for g in f.kernel_gaps] == [("specialised", "sm100_fill", ("80",))]
    assert rules.rule_k001(f) == [] and len(rules.rule_k002(f)) == 1


def test_highest_keeps_the_first_of_equal_floors():
    a = facts.Floor((12, 0), "525.60.13", "a")
    b = facts.Floor((12, 0), "525.60.13", "b")
    low = facts.Floor((11, 0), "450.80.02", "low")
    assert facts.highest([low, a, b, a]) is a
    assert facts.highest([b, low, a]) is b
    top = facts.highest([low, facts.Floor(None, None, "unknown"), a])
    assert top is not None and top.driver is None  # unknown asks most
    assert facts.highest([]) is None


# ---- nvcc-built fixtures ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in BIN.glob("lib_*.so")))
def test_fast_facts_agree_on_the_fixtures(name):
    lib = scan_file(str(BIN / name))
    for claim in ("75;80;86;90;100;120", "80", "90a;100"):
        f = library_facts(lib, parse_claim(claim, "--arch"), Policy(gpus=(NvidiaGpu("sm_89", (8, 9)),)))
        assert_agrees(f)


def test_a_specialised_librarys_kernels_are_judged_like_any_other():
    """A library of arch-specific code only: G005 says so, and each kernel is judged in its own
    container (here each serves its own GPU only: K002, information)."""
    lib = Library("libx.so", 1, "elf", (sass_box("sm_90a", "_Z1av"), sass_box("sm_100a", "_Z1bv")))
    f = library_facts(lib, parse_claim("90;100", "--arch"), Policy())
    assert f.specialised and {(g.verdict, g.name, g.fails) for g in f.kernel_gaps} == {
        ("specialised", "_Z1av", ("100",)),
        ("specialised", "_Z1bv", ("90",)),
    }
    assert len(rules.rule_k002(f)) == 2 and len(rules.rule_g005(f)) == 1 and rules.rule_g001(f) == []
