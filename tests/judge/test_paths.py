"""archaudit.judge.paths: which containers of a library are judged as units, and what excuses a
kernel's gap on a GPU (its name, by its author's convention, or a sourced statement), on the
nvcc-built fixtures (tests/fixtures/cuda/build.sh, build_gaps.sh, build_vendor.sh).

How each GPU's path through the units agrees with its direct formulation is in
test_facts_sets.py.
"""

from __future__ import annotations

import pytest

from archaudit.claims import parse_claim
from archaudit.gpus.selection import nv_codes
from archaudit.judge.facts import library_facts
from archaudit.judge.paths import excused_on, judged_containers, named_for, specialised_only
from archaudit.judge.policy import Policy
from archaudit.model import Library
from archaudit.read.library import scan_file
from helpers import CUDA_BIN


def fixture(name: str) -> Library:
    return scan_file(str(CUDA_BIN / name), name.rsplit("/", 1)[-1])


@pytest.mark.parametrize(
    "name, judged",
    [
        ("lib_sm80.so", [1]),  # nvlink's kernel-less device-link stub is not judged
        ("lib_rdc.so", [0]),  # -rdc: the kernels are in the device-link container; relocatable code never is
        ("lib_multiobj_rdc.so", [0, 1]),
        ("lib_empty_sm75.so", []),  # a cubin with no .text and no symbols defines nothing
        ("lib_empty_beside_8090.so", [2]),
        ("two_sm80_then_sm90.fatbin", [0]),  # cuModuleLoad reads a bare file's first container only
    ],
)
def test_the_containers_judged_are_those_that_may_hold_kernels_a_loader_reads(name, judged):
    lib = fixture(name)
    assert [i for i, c in judged_containers(lib)] == judged
    assert all(c is lib.containers[i] for i, c in judged_containers(lib))


def test_a_name_excuses_a_gpu_older_than_it_names_only_where_its_code_is_not_older():
    """lib_archtag_sm80.so: GemmKernel<cutlass::arch::Sm80>, built for sm_80 alone, is not for a
    7.5 GPU; for 9.0, newer than the name, it is (209 on an H100). Beside code for sm_75 the
    name no longer excuses 7.5: its author built it there."""
    lib = fixture("lib_archtag_sm80.so")
    gemm = "_Z10GemmKernelIN7cutlass4arch4Sm80EEvPfi"
    (own,) = [c for c in lib.containers if gemm in (c.entries[0].kernels or ())]
    assert named_for(gemm, nv_codes(own.entries), (7, 5))
    assert not named_for(gemm, nv_codes(own.entries), (8, 0)) and not named_for(gemm, nv_codes(own.entries), (9, 0))
    assert not named_for(gemm, nv_codes(lib.containers[1].entries), (7, 5))  # sm_75, sm_80, sm_90
    assert not named_for("_Z4axpyfPKfPfi", nv_codes(own.entries), (7, 5))


def test_a_sourced_statement_excuses_only_the_kernels_it_speaks_for_below_its_range():
    """fp8_stated/libnccl.so.2 carries NCCL's "FP8 reduction support begins with sm90 capable
    devices.": its fp8 kernel is excused on 8.0, not on 9.0, and the f32 kernel never is; the
    same code without the string (fp8_unstated) excuses nothing."""
    claim = parse_claim("80;90", "--arch")
    stated = library_facts(fixture("fp8_stated/libnccl.so.2"), claim, Policy())
    unstated = library_facts(fixture("fp8_unstated/libnccl.so.2"), claim, Policy())
    kernels = [(u, k) for u in stated.units for k in sorted(u.kernels)]
    assert [k for _, k in kernels] == ["_Z14reduce_sum_f32PKfPfi", "_Z17reduce_sum_f8e4m3PKhPhi"]
    assert [excused_on((8, 0), stated.statements)(u, k) for u, k in kernels] == [False, True]
    assert [excused_on((9, 0), stated.statements)(u, k) for u, k in kernels] == [False, False]
    assert unstated.statements == ()
    assert [excused_on((8, 0), unstated.statements)(u, k) for u in unstated.units for k in u.kernels] == [False, False]


@pytest.mark.parametrize(
    "name, specialised",
    [
        ("lib_hopper_only.so", True),  # sm_90a
        ("lib_sm100a_ptx.so", True),  # sm_100a and compute_100a
        ("lib_sm100f.so", True),
        ("lib_sm80.so", False),
        ("lib_ptx90a.so", True),
        ("lib_mixed_specialised.so", False),  # sm_80, sm_90 beside sm_90a
        ("lib_host.so", False),  # no code at all is not specialised code
    ],
)
def test_only_code_all_arch_specific_or_family_is_specialised(name, specialised):
    assert specialised_only(nv_codes(fixture(name).entries)) is specialised
