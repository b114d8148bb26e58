"""archaudit.gpus.selection: which of a container's entries the CUDA driver picks for a GPU, and
how that code runs there (native, through PTX JIT, or not at all).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from archaudit.gpus.cuda import KNOWN_CCS
from archaudit.gpus.selection import NOTHING, best, choose, nv_code, nv_codes, parse_target as T, runs
from archaudit.model import PTX, Entry, Library
from archaudit.read.library import scan_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fixture(path: str) -> Library:
    """An nvcc-built fixture as archaudit reads it (tests/fixtures/cuda/build.sh, smoke/build.sh)."""
    return scan_file(str(FIXTURES / path), path.rsplit("/", 1)[-1])


def served_ccs(pairs):
    """The known GPUs some of the entries run on (the library-wide union of archaudit.gpus.selection)."""
    codes = nv_codes(Entry("nvidia", kind, t.sm if kind == "sass" else t.compute) for kind, t in pairs)
    return [cc for cc in KNOWN_CCS if best(codes, cc) != "none"]


def test_served_ccs_from_pairs():
    served = served_ccs([("sass", T("sm_80")), ("ptx", T("compute_90"))])
    assert (8, 0) in served and (8, 6) in served and (8, 9) in served
    assert (8, 7) not in served  # Tegra, and compute_90 is newer than 8.7
    assert (7, 5) not in served
    assert (9, 0) in served and (12, 0) in served and (11, 0) in served


def test_coverage_prefers_native_and_reads_entries():
    entries = [
        Entry(vendor="nvidia", kind="ptx", target="compute_80"),
        Entry(vendor="nvidia", kind="sass", target="sm_90a"),
        Entry(vendor="amd", kind="code-object", target="gfx90a"),
        Entry(vendor="nvidia", kind="lto", target="sm_75"),
    ]
    codes = nv_codes(entries)
    assert best(codes, (9, 0)) == "native"
    assert best(codes, (8, 0)) == "jit"
    assert best(codes, (10, 0)) == "jit"
    assert best(codes, (7, 5)) == "none"


def test_specialised_library_serves_only_its_family():
    family = served_ccs([("sass", T("sm_100f")), ("ptx", T("compute_100f"))])
    assert {(10, 0), (10, 3)} <= set(family)
    assert all(cc[0] == 10 for cc in family)
    assert served_ccs([("sass", T("sm_90a"))]) == [(9, 0)]


def test_the_driver_picks_the_cubin_a_gpu_runs_and_else_the_ptx_it_compiles():
    """kern.fatbin (nvcc -fatbin, sm_80 and compute_90): 8.0 and 8.6 load the cubin, 9.0 and
    12.0 JIT-compile the PTX, 7.5 gets nothing."""
    (box,) = fixture("cuda/bin/kern.fatbin").containers
    codes = nv_codes(box.entries)
    picked = {gpu: choose(box, codes, gpu) for gpu in [(7, 5), (8, 0), (8, 6), (9, 0), (12, 0)]}
    assert {gpu: (c.runs, c.code and c.code.label) for gpu, c in picked.items()} == {
        (7, 5): ("none", None),
        (8, 0): ("native", "sm_80"),
        (8, 6): ("native", "sm_80"),
        (9, 0): ("jit", "compute_90"),
        (12, 0): ("jit", "compute_90"),
    }
    assert picked[(7, 5)] == NOTHING and picked[(7, 5)].kernels is None and not picked[(7, 5)].unlinked
    assert picked[(9, 0)].kernels == ("_Z4axpyfPKfPfi",)


def test_ptx_whose_text_is_arch_specific_compiles_only_for_its_own_gpu():
    """ptx90_as90a.fatbin: an entry header for sm_90 over PTX text saying `.target sm_90a`. The
    JIT obeys the text (an H200 loads it; for sm_100a it gives CUDA_ERROR_INVALID_PTX)."""
    (box,) = fixture("smoke/bin/ptx90_as90a.fatbin").containers
    (code,) = nv_codes(box.entries)
    assert (code.target.sm, code.effective.sm, code.label) == ("sm_90", "sm_90a", "compute_90a")
    assert runs(code, (9, 0)) == "jit" and runs(code, (10, 0)) == "none"
    (plain,) = [c for c in nv_codes(fixture("cuda/bin/kern.fatbin").entries) if c.kind == PTX]
    assert runs(plain, (10, 0)) == "jit"  # the same header over plain `.target sm_90` text


def test_a_ptx_text_target_that_is_no_cuda_architecture_runs_nowhere():
    (entry,) = [e for e in fixture("cuda/bin/kern.fatbin").entries if e.kind == PTX]
    code = nv_code(replace(entry, ptx_target="sm_9x"))
    assert code is not None and code.jit_target is None
    assert [runs(code, gpu) for gpu in [(9, 0), (10, 0)]] == ["none", "none"]


def test_a_cubin_calling_code_it_lacks_runs_only_where_its_library_links_it():
    """rdc_ext.fatbin (-rdc, calls rdc_helper it does not carry): the driver picks it on 9.0 and
    refuses it alone (CUDA_ERROR_NOT_FOUND on an H200) unless the library links device code;
    rdc_self.fatbin, relocatable but self-contained, loads alone."""
    (ext,) = fixture("smoke/bin/rdc_ext.fatbin").containers
    alone = choose(ext, nv_codes(ext.entries), (9, 0))
    assert (alone.runs, alone.unlinked, alone.kernels) == ("none", True, None)
    linked = choose(ext, nv_codes(ext.entries), (9, 0), linker=True)
    assert (linked.runs, linked.unlinked, linked.kernels) == ("native", False, ("rdc_needs_helper",))
    (own,) = fixture("smoke/bin/rdc_self.fatbin").containers
    assert choose(own, nv_codes(own.entries), (9, 0)).runs == "native"


def test_only_nvidia_sass_and_ptx_are_judged_code():
    lib = fixture("cuda/bin/lib_archtag_sm80.so")
    assert [c.label for c in nv_codes(lib.entries)] == [e.target for e in lib.entries]
    assert nv_code(Entry("nvidia", "lto", "sm_80")) is None and nv_code(Entry("amd", "code-object", "gfx90a")) is None
