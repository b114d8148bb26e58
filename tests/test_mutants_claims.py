"""Claim parsing branches that mutation testing showed no test pinned (docs/mutation.md).

Each claim is written as a project writes it (CMake's CUDA_ARCHITECTURES, TORCH_CUDA_ARCH_LIST,
nvcc flags); what nvcc itself does with the flags was measured with nvcc 13.0 and cuobjdump.
"""

from __future__ import annotations

import pytest

from archaudit.claims import Claim, guess_style, parse_claim


def flags(claim: Claim) -> dict[str, tuple[bool, bool]]:
    """label -> (sass, ptx)."""
    return {a.target.label: (a.sass, a.ptx) for a in claim.archs}


SP = (True, True)
S = (True, False)
P = (False, True)


@pytest.mark.parametrize("text, style, want", [
    # CUDA_ARCHITECTURES: bare numbers split by ';' are SASS and PTX each; -real SASS, -virtual PTX
    ("80;90", "cmake", {"80": SP, "90": SP}),
    ("90-virtual", "cmake", {"90": P}),  # one value, no ';': still CMake's spelling
    ("80-real", "cmake", {"80": S}),
    # TORCH_CUDA_ARCH_LIST
    ("9.0+PTX", "torch", {"90": SP}),
    ("9.0a;10.0a", "torch", {"90a": S, "100a": S}),  # vLLM / FlashAttention 3 builds
    (";8.0;9.0+PTX", "torch", {"80": S, "90": SP}),  # "$TORCH_CUDA_ARCH_LIST;9.0+PTX" with the variable empty
    # a plain list of nvcc code names, split by ';' as CMake lists are
    ("sm_80;sm_90;compute_90", "list", {"80": S, "90": SP}),
    ("sm_80;sm_90", "list", {"80": S, "90": S}),
    ("compute_80;compute_90", "list", {"80": P, "90": P}),
    ("80,90", "list", {"80": S, "90": S}),  # split by ',' or spaces: SASS each
])
def test_each_spelling_is_recognised_and_read_as_its_tool_reads_it(text, style, want):
    assert guess_style(text) == style
    assert flags(parse_claim(text, "--arch")) == want


def test_a_list_naming_all_major_keeps_the_targets_after_it():
    """Every token of a CMake list counts, wherever `all-major` stands in it."""
    after = parse_claim("all-major;121", "--arch", cuda_version=(13, 0))
    before = parse_claim("121;all-major", "--arch", cuda_version=(13, 0))
    assert flags(after) == flags(before) and (12, 1) in after.gpus and (7, 5) in after.gpus


def test_torch_lists_are_split_as_torch_splits_them():
    """torch.utils.cpp_extension splits TORCH_CUDA_ARCH_LIST on ';' and spaces, not on ','."""
    with pytest.raises(ValueError, match="bad TORCH_CUDA_ARCH_LIST entry '8.0,9.0'"):
        parse_claim("8.0,9.0", "--arch")


@pytest.mark.parametrize("text", ["lto_80,sm_90", "lto_80;sm_90", "lto_80;lto_90",
                                  "-gencode arch=compute_80,code=lto_80"])
def test_lto_targets_in_any_spelling_are_refused_with_the_reason(text):
    """lto_XY is link-time IR: no GPU loads it, so it claims nothing (a ValueError, never a crash)."""
    with pytest.raises(ValueError, match="link-time IR, which no GPU loads"):
        parse_claim(text, "--arch")


def test_a_gencode_value_with_anything_after_its_pairs_is_refused():
    with pytest.raises(ValueError, match="bad -gencode value"):
        parse_claim("-gencode arch=compute_80,code=sm_80,X", "--arch")


def test_repeated_arch_flags_each_keep_their_own_codes():
    """nvcc 13.0 keeps only the last of several -arch options ("incompatible redefinition for option
    'gpu-architecture', the last value of this option was used": `-arch=sm_80 -arch=sm_90` embeds
    sm_90 and compute_90 alone). The claim reads every -arch the text names, with the -code options
    that follow it: a claim never names fewer GPUs than its text does (the wheel is then judged for
    8.0 too, and G001 says when it lacks code for it)."""
    assert flags(parse_claim("-arch=sm_80 -arch=sm_90", "--arch")) == {"80": SP, "90": SP}
    assert flags(parse_claim("-arch=compute_80 -code=sm_80 -arch=sm_90", "--arch")) == {"80": S, "90": SP}
    assert flags(parse_claim("-arch=sm_80 -arch=compute_90 -code=sm_90", "--arch")) == {"80": SP, "90": S}
    every = parse_claim("-arch=all-major -arch=sm_121", "--arch", cuda_version=(13, 0))
    assert flags(every) == {**flags(parse_claim("all-major", "--arch", cuda_version=(13, 0))), "121": SP}
