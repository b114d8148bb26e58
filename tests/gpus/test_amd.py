"""AMD target parsing and claims, pinned where mutation testing found them loose (docs/mutation.md).

Claims are written as ROCm projects write them: PYTORCH_ROCM_ARCH, CMake's AMDGPU_TARGETS /
GPU_TARGETS (with a cache type, as `-D` passes it), and clang's --offload-arch.
"""

from __future__ import annotations

import pytest

from archaudit.gpus import amd as gfx


@pytest.mark.parametrize(
    "text, want",
    [
        ("'--offload-arch=gfx90a'", ["gfx90a"]),  # a flag quoted whole, as a build log shows it
        ("--offload-arch='gfx90a,gfx942'", ["gfx90a", "gfx942"]),  # its value quoted
        ("--offload-arch gfx90a", ["gfx90a"]),  # the value as the next word, at the end
        ("--offload-arch=gfx942 --offload-arch gfx90a", ["gfx942", "gfx90a"]),  # ... after another flag
        ("-DAMDGPU_TARGETS:STRING=gfx90a;gfx942", ["gfx90a", "gfx942"]),  # a CMake cache entry with its type
    ],
)
def test_amd_claims_as_build_systems_write_them(text, want):
    assert gfx.parse_amd_claim(text) == want


@pytest.mark.parametrize(
    "text, why",
    [
        ("", "empty AMD target claim"),
        ("   ", "empty AMD target claim"),
        ("--offload-arch=", "--offload-arch with an empty value"),
        ('--offload-arch=""', "--offload-arch with an empty value"),
        ("--offload-arch", "--offload-arch without a value"),
        ("PYTORCH_ROCM_ARCH=", "PYTORCH_ROCM_ARCH is empty"),
        ("--offload-arch=native", "'native' in '--offload-arch=native' names no fixed target list"),
        ("all", "'all' in 'all' names no fixed target list"),
        ("DEFAULT", "'DEFAULT' in 'DEFAULT' names no fixed target list"),
        ("Native", "'Native' in 'Native' names no fixed target list"),
        ("CUDA_ARCH=gfx90a", "unknown setting 'CUDA_ARCH'"),
        ("--cuda-path=x", "unexpected flag '--cuda-path=x'"),
        ("-DGPU_TARGETS", "unexpected flag '-DGPU_TARGETS'"),
        ("gfx90a;;gfx942", "empty entry in AMD target list"),
        ("sm_80", "AMD target claim 'sm_80': unknown AMD processor 'sm_80'"),
        ("gfx1100:xnack-", "gfx1100 does not support the xnack feature"),
        ("gfx90a:foo+", "bad target feature 'foo\\+'"),
        ("gfx90a:xnack+:xnack-", "feature xnack given twice"),
    ],
)
def test_amd_claims_that_name_no_fixed_target_list_are_refused_with_the_reason(text, why):
    """A usage error must say what is wrong (the CLI prints it as the reason for exit 2)."""
    with pytest.raises(ValueError, match=why):
        gfx.parse_amd_claim(text)


def test_an_empty_target_is_refused_as_empty():
    for text in ("", "  "):
        with pytest.raises(ValueError, match="empty AMD target"):
            gfx.parse_target(text)


def test_generic_targets_are_told_from_processors():
    """--gpu refuses a generic target (it names a family, not a GPU): settings asks is_generic."""
    assert gfx.is_generic("gfx11-generic") and gfx.is_generic("gfx9-4-generic:xnack-")
    assert not gfx.is_generic("gfx1100") and not gfx.is_generic("gfx90a:xnack+")
    with pytest.raises(ValueError, match="is a generic target, not a GPU"):
        gfx.runs_on("gfx1100", "gfx11-generic")


def test_a_gpu_named_with_the_vendor_before_its_short_name():
    assert [g.name for g in gfx.lookup_gpu("AMD MI300X")] == ["Instinct MI300X"]
