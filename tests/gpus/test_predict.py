"""archaudit.gpus.predict on real nvcc-built containers (tests/fixtures/smoke, tests/fixtures/cuda).

What the driver really answers for each of these containers on an H200 is pinned by
tests/smoke/test_smoke_gpu.py and by the referee run in records/smoke-h200/; here the prediction
itself is checked, for that GPU and for others.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from archaudit.gpus import predict as P
from archaudit.model import PTX, Container, Entry
from archaudit.read.library import library_from_bytes, scan_file

HERE = Path(__file__).parents[1]
SMOKE_BIN = HERE / "fixtures" / "smoke" / "bin"
CUDA_BIN = HERE / "fixtures" / "cuda" / "bin"
WHEEL = HERE / "fixtures" / "smoke" / "wheels" / "smoke_cuda-1.0-py3-none-linux_x86_64.whl"
H200 = P.Gpu((9, 0), (13, 0))
H200_NOJIT = H200.with_jit(False)


def containers(path: Path) -> list[Container]:
    lib = scan_file(str(path), decode=True)
    assert not lib.problems, lib.problems
    return [c for c in lib.containers if c.entries]


def wheel_library(name: str) -> list[Container]:
    with zipfile.ZipFile(WHEEL) as z:
        lib = library_from_bytes(name, z.read(f"smoke_cuda/{name}"), decode=True)
    assert not lib.problems, lib.problems
    return list(lib.containers)


def one(path: Path) -> Container:
    (c,) = containers(path)
    return c


@pytest.mark.parametrize(
    "cubin, gpu, outcome",
    [
        ("kern_sm90.cubin", (9, 0), P.Outcome.NATIVE),
        ("kern_sm90a.cubin", (9, 0), P.Outcome.NATIVE),
        ("kern_sm90a.cubin", (10, 0), P.Outcome.NONE),  # arch-specific: exactly 9.0
        ("kern_sm80.cubin", (8, 6), P.Outcome.NATIVE),  # same major, newer minor
        ("kern_sm80.cubin", (9, 0), P.Outcome.NONE),  # never across majors
        ("kern_sm100f.cubin", (10, 3), P.Outcome.NATIVE),  # family
        ("kern_sm100f.cubin", (12, 0), P.Outcome.NONE),
    ],
)
def test_sass_is_native_exactly_where_the_cubin_runs(cubin, gpu, outcome):
    p = P.predict(one(CUDA_BIN / cubin), P.Gpu(gpu, (13, 0)))
    assert p.outcome is outcome
    assert p.codes == ({P.SUCCESS} if outcome is P.Outcome.NATIVE else {P.NO_BINARY_FOR_GPU})


def test_ptx_only_is_jit_and_refused_with_the_jit_disabled():
    lib = wheel_library("libsmoke_ptx80.so")
    ptx = [c for c in lib if c.entries]
    assert len(ptx) == 1
    on, off = P.predict(ptx[0], H200), P.predict(ptx[0], H200_NOJIT)
    assert (on.outcome, on.codes) == (P.Outcome.JIT, frozenset({P.SUCCESS}))
    assert (off.outcome, off.codes) == (P.Outcome.JIT, frozenset({P.JIT_COMPILATION_DISABLED}))
    assert on.entry is not None and on.entry.kind == "ptx"
    # the device-link container nvcc adds to a PTX-only build holds no entry: nothing to run
    empty = [c for c in lib if not c.entries]
    assert len(empty) == 1 and P.predict(empty[0], H200).outcome is P.Outcome.NONE


def test_sass_is_preferred_over_ptx_and_the_exact_cc_over_an_older_minor():
    fat = containers(CUDA_BIN / "kern.fatbin")
    best = [P.predict(c, P.Gpu((8, 6), (13, 0))) for c in fat]
    assert all(p.outcome is P.Outcome.NATIVE for p in best)
    targets = {e.target for c in fat for e in c.entries}
    if "sm_86" in targets:
        assert all(p.entry is not None and p.entry.target == "sm_86" for p in best)


def test_a_wheel_library_for_sm80_has_nothing_for_sm90():
    for c in wheel_library("libsmoke_sm80.so"):
        p = P.predict(c, H200)
        assert p.outcome is P.Outcome.NONE and p.codes == {P.NO_BINARY_FOR_GPU}
        assert "sm_80" in p.reason


def test_relocatable_code_that_calls_what_it_does_not_carry_is_not_loadable_alone():
    p = P.predict(one(SMOKE_BIN / "rdc_ext.fatbin"), H200)
    assert p.outcome is P.Outcome.NOT_LOADABLE
    assert p.codes == {P.INVALID_IMAGE, P.NOT_FOUND}
    assert "_Z10rdc_helperf" in p.reason
    assert p.agrees(None)  # a driver that crashes on it agrees: it is not loadable alone
    assert not p.agrees(P.SUCCESS)


def test_relocatable_code_with_only_the_linkers_own_symbols_loads_natively():
    c = one(SMOKE_BIN / "rdc_self.fatbin")
    assert c.entries[0].unresolved == ()
    p = P.predict(c, H200)
    assert p.outcome is P.Outcome.NATIVE and not p.agrees(None)


def test_the_rodata_library_holds_both_kinds_of_relocatable_code():
    outcomes = sorted(P.predict(c, H200).outcome.value for c in wheel_library("libsmoke_rdc.so") if c.entries)
    assert outcomes == ["native", "native", "native", "not-loadable-alone"]


def test_lto_ir_is_never_loaded():
    p = P.predict(one(SMOKE_BIN / "lto90.fatbin"), H200)
    assert p.outcome is P.Outcome.NONE and "LTO" in p.reason and p.codes == {P.NO_BINARY_FOR_GPU}


def test_ptx_of_an_isa_newer_than_the_driver_is_refused_by_its_jit():
    c = one(SMOKE_BIN / "ptx90_isa91.fatbin")
    assert c.entries[0].code_version == (9, 1)
    assert P.predict(c, H200).codes == {P.UNSUPPORTED_PTX_VERSION}
    assert P.predict(c, H200_NOJIT).codes == {P.JIT_COMPILATION_DISABLED}
    assert P.predict(c, P.Gpu((9, 0), (13, 1))).outcome is P.Outcome.JIT


def _ptx(target: str, text: str | None) -> Container:
    e = Entry("nvidia", "ptx", target, code_version=(9, 0))
    if text is not None and "ptx_target" in Entry.__dataclass_fields__:
        e = Entry("nvidia", "ptx", target, code_version=(9, 0), ptx_target=text)
    return Container("nvidia", "executable", ".nv_fatbin", 0, 64, (e,))


def test_arch_specific_ptx_text_is_compiled_only_for_its_own_gpu():
    if "ptx_target" not in Entry.__dataclass_fields__:
        pytest.skip("the inventory does not record the PTX text's .target yet")
    assert P.predict(_ptx("sm_90", "sm_90a"), H200).outcome is P.Outcome.JIT
    p = P.predict(_ptx("sm_90", "sm_100a"), H200)
    assert p.outcome is P.Outcome.NONE and p.codes == {P.INVALID_PTX}


def test_ptx_of_a_newer_gpu_does_not_serve_an_older_one():
    p = P.predict(_ptx("sm_120", None), H200)
    assert p.outcome is P.Outcome.NONE and p.codes == {P.NO_BINARY_FOR_GPU}


@pytest.mark.parametrize(
    "driver, cuda", [("580.159.04", (13, 0)), ("580.65.06", (13, 0)), ("590.48.01", (13, 1)), ("575.57.08", (12, 9))]
)
def test_the_driver_version_names_its_cuda_release(driver, cuda):
    assert P.Gpu.from_driver((9, 0), driver).cuda == cuda


def test_an_amd_container_is_not_judged_here():
    with pytest.raises(ValueError):
        P.predict(Container("amd", "hip", ".hip_fatbin", 0, 0, ()), H200)


# ---- the entry the driver picks, branch by branch -------------------------------------------------
# archaudit.gpus.predict's branches that mutation testing showed no test pinned (docs/mutation.md).
#
# Every prediction names the entry the driver uses: paths.choose finds the library's code by that
# entry (identity), so a prediction that loses its entry makes a GPU the code runs on look
# unserved. The containers are nvcc's (tests/fixtures/cuda, tests/fixtures/smoke); the driver's
# answers to the smoke fixtures are the H200's (tests/smoke/test_smoke_gpu.py's EDGE, run there and
# logged in records/smoke-h200/pytest-gpu.log).

HERE = Path(__file__).parents[1]
SMOKE_BIN = HERE / "fixtures" / "smoke" / "bin"
CUDA_BIN = HERE / "fixtures" / "cuda" / "bin"
H200 = P.Gpu((9, 0), (13, 0))


def executable(path: Path) -> Container:
    lib = scan_file(str(path), decode=True)
    assert not lib.problems, lib.problems
    (c,) = [c for c in lib.containers if c.role in ("executable", "standalone") and c.entries]
    return c


def entry(c: Container, kind: str, target: str) -> Entry:
    (e,) = [e for e in c.entries if e.kind == kind and e.target == target]
    return e


@pytest.mark.parametrize(
    "gpu, kind, target",
    [
        ((7, 5), "sass", "sm_75"),
        ((9, 0), "sass", "sm_90"),  # sm_75 ... sm_89 come first and do not run on 9.0: the search goes on
        ((10, 3), "sass", "sm_100"),  # same major, older minor
        ((12, 1), "sass", "sm_120"),
        ((11, 0), "ptx", "sm_90"),  # no cubin for 11.0: the highest PTX not above it (sm_120's is above)
    ],
)
def test_the_entry_chosen_from_a_container_for_seven_architectures(gpu, kind, target):
    """lib_multi.so (nvcc -gencode for sm_75 ... sm_120, PTX for 90 and 120): each GPU gets the
    entry the driver loads, named as that very entry (paths.choose matches it by identity)."""
    c = executable(CUDA_BIN / "lib_multi.so")
    p = P.predict(c, P.Gpu(gpu, (13, 0)))
    want = P.Outcome.NATIVE if kind == "sass" else P.Outcome.JIT
    assert (p.outcome, p.codes) == (want, frozenset({P.SUCCESS}))
    assert p.entry is entry(c, kind, target)


@pytest.mark.parametrize("gpu, target", [((8, 0), "sm_80"), ((8, 6), "sm_86"), ((8, 9), "sm_86")])
def test_the_gpus_own_cubin_before_an_older_minor(gpu, target):
    """lib_sm80_86.so carries sm_80 and sm_86, both of which run on an 8.6 GPU: the driver takes
    the exact match; on 8.9 the newest minor that runs."""
    c = executable(CUDA_BIN / "lib_sm80_86.so")
    p = P.predict(c, P.Gpu(gpu, (13, 0)))
    assert p.outcome is P.Outcome.NATIVE and p.entry is entry(c, "sass", target)


def test_orin_takes_only_its_own_cubin():
    """8.7 is Tegra (Orin): desktop sm_80 and sm_86 cubins do not load there."""
    p = P.predict(executable(CUDA_BIN / "lib_sm80_86.so"), P.Gpu((8, 7), (13, 0)))
    assert (p.outcome, p.entry, p.codes) == (P.Outcome.NONE, None, frozenset({P.NO_BINARY_FOR_GPU}))


def test_a_cubin_for_another_gpu_listed_before_the_ptx_does_not_hide_it():
    """multi_ptx90.fatbin: sm_80 SASS first, then compute_90 PTX. The H200 answered 0 with the
    JIT on and 223 (CUDA_ERROR_JIT_COMPILATION_DISABLED) with it off."""
    c = executable(SMOKE_BIN / "multi_ptx90.fatbin")
    assert [e.kind for e in c.entries] == ["sass", "ptx"]
    on, off = P.predict(c, H200), P.predict(c, H200.with_jit(False))
    assert (on.outcome, on.codes, on.entry) == (P.Outcome.JIT, frozenset({P.SUCCESS}), c.entries[1])
    assert on.entry is c.entries[1]
    assert (off.outcome, off.codes) == (P.Outcome.JIT, frozenset({P.JIT_COMPILATION_DISABLED}))
    assert off.entry is c.entries[1]


def test_of_several_ptx_entries_the_highest_the_gpu_takes():
    """lib_multi.so's two PTX entries (90 and 120, as nvcc wrote them), listed with the newer
    first: a 9.0 GPU skips the 120 PTX and takes the 90 one; 12.0 takes 120 over 90."""
    multi = executable(CUDA_BIN / "lib_multi.so")
    ptx90, ptx120 = entry(multi, PTX, "sm_90"), entry(multi, PTX, "sm_120")
    c = Container("nvidia", "executable", ".nv_fatbin", 0, 0, (ptx120, ptx90))
    on_h200 = P.predict(c, H200)
    assert on_h200.outcome is P.Outcome.JIT and on_h200.entry is ptx90
    on_12 = P.predict(c, P.Gpu((12, 0), (13, 0)))
    assert on_12.outcome is P.Outcome.JIT and on_12.entry is ptx120
    on_8 = P.predict(c, P.Gpu((8, 0), (13, 0)))
    assert (on_8.outcome, on_8.entry, on_8.codes) == (P.Outcome.NONE, None, frozenset({P.NO_BINARY_FOR_GPU}))


def test_refused_ptx_is_still_the_entry_the_driver_picked():
    """ptx90_isa91.fatbin (ISA 9.1, newer than a CUDA 13.0 driver compiles: the H200 answered
    222): the outcome is none, and the entry is that PTX (the report says which code failed)."""
    c = executable(SMOKE_BIN / "ptx90_isa91.fatbin")
    p = P.predict(c, H200)
    assert (p.outcome, p.codes) == (P.Outcome.NONE, frozenset({P.UNSUPPORTED_PTX_VERSION})) and p.entry is c.entries[0]
    assert "ISA 9.1" in p.reason and "CUDA 13.0" in p.reason


def test_ptx_whose_text_targets_another_gpu_with_the_jit_off():
    """ptx90_as100a.fatbin: header compute_90, text .target sm_100a. The H200 answered 218
    (CUDA_ERROR_INVALID_PTX) with the JIT on and 223 with it off. The scanner refuses that
    container (E014), so the entry is the one its decoded header and text give."""
    lib = scan_file(str(SMOKE_BIN / "ptx90_as100a.fatbin"), decode=False)
    (c,) = lib.containers
    (e,) = c.entries
    e = Entry(e.vendor, e.kind, e.target, e.code_version, ptx_target="sm_100a")
    c = Container(c.vendor, c.role, c.section, c.offset, c.size, (e,))
    on, off = P.predict(c, H200), P.predict(c, H200.with_jit(False))
    assert (on.outcome, on.codes) == (P.Outcome.NONE, frozenset({P.INVALID_PTX})) and on.entry is e
    assert (off.outcome, off.codes) == (P.Outcome.NONE, frozenset({P.JIT_COMPILATION_DISABLED})) and off.entry is e
    assert "sm_100a" in on.reason


def test_relocatable_code_that_is_not_loadable_names_its_cubin():
    """rdc_ext.fatbin (the H200 answered 500): smoke collects the missing symbols from the
    prediction's entry."""
    c = executable(SMOKE_BIN / "rdc_ext.fatbin")
    p = P.predict(c, H200)
    assert p.outcome is P.Outcome.NOT_LOADABLE and p.entry is c.entries[0]
    assert P.unresolved(p.entry) == ("_Z10rdc_helperf",)


def test_a_gpu_from_its_driver_keeps_its_capability_and_jit_switch():
    assert P.Gpu.from_driver((9, 0), "580.159.04") == P.Gpu((9, 0), (13, 0), True)
    assert P.Gpu.from_driver((12, 0), "590.48.01", jit=False) == P.Gpu((12, 0), (13, 1), False)
    assert H200.with_jit(False) == P.Gpu((9, 0), (13, 0), False)
    assert H200.with_jit(False).with_jit(True) == H200


def test_a_driver_older_than_every_release_is_refused():
    with pytest.raises(LookupError, match="older than every CUDA release"):
        P.Gpu.from_driver((9, 0), "100.0")
