"""archaudit.judge.names: what a word in a kernel's name says about the GPUs the kernel is for,
read by the conventions of data/names.json.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from archaudit.judge.names import conventions_of, excludes, name_floor, named_architectures, readings
from archaudit.read.library import scan_file
from helpers import CUDA_BIN, reference_named


def kernel_names(fixture: str) -> list[str]:
    """The kernels an nvcc-built fixture defines (tests/fixtures/cuda/build.sh), as read."""
    lib = scan_file(str(CUDA_BIN / fixture), fixture)
    return sorted({k for e in lib.entries for k in e.kernels or ()})


NAME_PIECES = (
    "sm",
    "SM",
    "Sm_",
    "_",
    "8",
    "0",
    "9",
    "1",
    "a",
    "f",
    "cutlass",
    "Cutlass3x_sm",
    "volta",
    "4arch",
    "arch::",
    "Ampere",
    "xturing",
    "hopperx",
    "blackwell",
    "kepler",
    "\u017fm",
    "\u212aepler",
    "x",
    "N5",
    "::",
    "CUB_",
    "thrust_",
    "300001",
    "_SM_",
    "_NS",
    "cub_2_",
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(NAME_PIECES), max_size=8).map("".join))
def test_named_architectures_is_the_patterns_on_every_name(name):
    """The substring shortcut (and the patterns compiled on first use) never changes an answer:
    not for upper case, not for non-ASCII letters that fold onto s and k (\u017f, \u212a)."""
    assert named_architectures(name) == reference_named(name)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("sm80_xmma_gemm", ((8, 0),)),
        ("volta_sgemm", ((7, 0), (7, 2))),
        ("_Z4axpyfPKfPfi", ()),
        ("cutlass_80_tensorop", ((8, 0),)),
        ("xsm80", ()),
        ("sm_90a_kernel", ((9, 0),)),
        ("sm_1000", ()),
        ("_Z10GemmKernelIN7cutlass4arch4Sm80EEvPfi", ((8, 0),)),
        ("_ZN4cute30SM80_16x8x16_F32F16F16F32_TN3fmaEv", ((8, 0),)),
        ("ampere_sgemm_128x64_nn", ((8, 0), (8, 6), (8, 7))),
        ("_ZN3cub20CUB_300001_SM_800_900E11EmptyKernelIvEEvv", ()),
        ("_ZN3cub21CUB_200800_SM_500_5206kernelEv", ()),
        ("_ZN6thrust20THRUST_200302_800_NS8cuda_cub4core8_kernelEv", ()),
        ("_ZN3cub20CUB_300001_SM_800_900E13sm90_xmma_gemmEv", ((9, 0),)),
    ],
)
def test_named_architectures_reads_names(name, expected):
    assert named_architectures(name) == expected == reference_named(name)


def test_a_cutlass_arch_tag_excludes_only_the_gpus_older_than_it():
    """lib_archtag_sm80.so's GemmKernel<cutlass::arch::Sm80> (CUTLASS: the kernel's minimum
    compute capability) is read by two conventions, both "8.0 or newer"; axpy names nothing."""
    gemm, axpy = kernel_names("lib_archtag_sm80.so")
    assert gemm == "_Z10GemmKernelIN7cutlass4arch4Sm80EEvPfi" and axpy == "_Z4axpyfPKfPfi"
    assert name_floor(gemm) == (8, 0) and [ccs for _, ccs in readings(gemm)] == [((8, 0),), ((8, 0),)]
    assert conventions_of(gemm)[0].startswith("CUTLASS ArchTag")
    assert excludes(gemm, (7, 5)) and not excludes(gemm, (8, 0)) and not excludes(gemm, (12, 0))
    assert (name_floor(axpy), conventions_of(axpy), excludes(axpy, (3, 5))) == (None, (), False)


def test_cccl_namespaces_name_no_architecture_in_a_real_library():
    """lib_thrust_layernorm.so (thrust::reduce for sm_80 and sm_90): every CUB/Thrust kernel's
    namespace lists the translation unit's architectures (CUB_300001_SM_800_900), which say
    nothing of any one kernel."""
    kernels = kernel_names("lib_thrust_layernorm.so")
    cccl = [k for k in kernels if "CUB_" in k]
    assert cccl and all("_SM_800_900" in k for k in cccl)
    assert [k for k in kernels if readings(k)] == []


def test_a_generation_word_spans_its_gpus_and_several_words_allow_the_oldest():
    """volta is 7.0 and 7.2, both "from": the floor is the first; a name with two words
    (sm90_..._volta) is read by both and allows what the older one allows (fail closed)."""
    assert named_architectures("volta_sgemm") == ((7, 0), (7, 2)) and name_floor("volta_sgemm") == (7, 0)
    assert name_floor("sm90_xmma_gemm_volta") == (7, 0) and conventions_of("sm90_xmma_gemm_volta")[1] == "volta"
    assert not excludes("sm90_xmma_gemm_volta", (8, 0))
    (zero_fill,) = [k for k in kernel_names("lib_sm100_zero_fill_100a.so") if "zero_fill" in k]
    assert name_floor(zero_fill) == (10, 0) and excludes(zero_fill, (9, 0))
