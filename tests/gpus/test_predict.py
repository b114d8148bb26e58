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
from archaudit.model import Container, Entry
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


@pytest.mark.parametrize("cubin, gpu, outcome", [
    ("kern_sm90.cubin", (9, 0), P.Outcome.NATIVE),
    ("kern_sm90a.cubin", (9, 0), P.Outcome.NATIVE),
    ("kern_sm90a.cubin", (10, 0), P.Outcome.NONE),      # arch-specific: exactly 9.0
    ("kern_sm80.cubin", (8, 6), P.Outcome.NATIVE),       # same major, newer minor
    ("kern_sm80.cubin", (9, 0), P.Outcome.NONE),         # never across majors
    ("kern_sm100f.cubin", (10, 3), P.Outcome.NATIVE),    # family
    ("kern_sm100f.cubin", (12, 0), P.Outcome.NONE),
])
def test_sass_is_native_exactly_where_the_cubin_runs(cubin, gpu, outcome):
    p = P.predict(one(CUDA_BIN / cubin), P.Gpu(gpu, (13, 0)))
    assert p.outcome is outcome
    assert p.codes == ({P.SUCCESS} if outcome is P.Outcome.NATIVE else {P.NO_BINARY_FOR_GPU})


def test_ptx_only_is_jit_and_refused_with_the_jit_disabled():
    lib = wheel_library("libsmoke_ptx80.so")
    ptx = [c for c in lib if c.entries]
    assert len(ptx) == 1
    on, off = P.predict(ptx[0], H200), P.predict(ptx[0], H200_NOJIT)
    assert (on.outcome, on.codes) == (P.Outcome.JIT, {P.SUCCESS})
    assert (off.outcome, off.codes) == (P.Outcome.JIT, {P.JIT_COMPILATION_DISABLED})
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
        e = Entry("nvidia", "ptx", target, code_version=(9, 0), ptx_target=text)  # type: ignore[call-arg]
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


@pytest.mark.parametrize("driver, cuda", [("580.159.04", (13, 0)), ("580.65.06", (13, 0)),
                                          ("590.48.01", (13, 1)), ("575.57.08", (12, 9))])
def test_the_driver_version_names_its_cuda_release(driver, cuda):
    assert P.Gpu.from_driver((9, 0), driver).cuda == cuda


def test_an_amd_container_is_not_judged_here():
    with pytest.raises(ValueError):
        P.predict(Container("amd", "hip", ".hip_fatbin", 0, 0, ()), H200)
