"""Driver-version comparison, pinned where mutation testing found it loose (docs/mutation.md).

A driver given with fewer parts than the floor it is compared with stands for its .0 release:
580 is 580.0.0, below a floor of 580.0.5 (fail closed), and 580.0 is 580.
"""

from __future__ import annotations

import pytest

from archaudit.gpus import cuda as arch
from archaudit.gpus.cuda import CudaTarget
from archaudit.gpus.drivers import driver_at_least


@pytest.mark.parametrize(
    "have,need,ok",
    [
        ("580", "580.0.5", False),  # the missing parts are zeros, never more
        ("580.0", "580", True),  # and the floor's missing parts are zeros too
        ("580", "580", True),
        ("580.65.06", "580.65.6", True),  # numeric, not textual
        ("575.57.08", "580", False),
        ("580.65", "580.65.06", False),
    ],
)
def test_driver_versions_compare_part_by_part_with_missing_parts_zero(have, need, ok):
    assert driver_at_least(have, need) is ok


# ---- second pass: the survivors of arch.py (docs/mutation.md) --------------------------------


def test_the_compute_capability_table_as_the_cuda_guide_lists_it():
    """KNOWN_CCS, TEGRA_CCS and CC_ALIASES are read once at import, before a mutation run switches
    a mutant on; reading the table again here is what lets one see a broken reader. Tegra parts:
    TK1 3.2, TX1 5.3, TX2 6.2, Xavier 7.2, Orin 8.7, Thor 11.0 (10.1 before CUDA 13)."""
    known, tegra, aliases = arch._load_ccs()
    assert (known, tegra, aliases) == (arch.KNOWN_CCS, arch.TEGRA_CCS, arch.CC_ALIASES)
    assert tegra == {(3, 2), (5, 3), (6, 2), (7, 2), (8, 7), (11, 0)}
    assert aliases == {(10, 1): (11, 0)}
    assert known == tuple(sorted(known)) and {(7, 5), (8, 0), (8, 9), (9, 0), (10, 0), (12, 0), (12, 1)} <= set(known)
    assert arch.cuda_data()["compute_capabilities"]["aliases"]["10.1"]["canonical"] == "11.0"


def test_family_ptx_runs_on_its_own_gpu_and_the_rest_of_its_family():
    """compute_100f PTX: 10.0 and 10.3 (same major, minor at least its own), not 11.0 or 9.0."""
    f = CudaTarget(10, 0, "f")
    assert arch.ptx_runs_on(f, (10, 0)) and arch.ptx_runs_on(f, (10, 3))
    assert not arch.ptx_runs_on(f, (11, 0)) and not arch.ptx_runs_on(f, (9, 0))
    assert arch.runs_on("ptx", CudaTarget(10, 3, "f"), (10, 0)) is None


@pytest.mark.parametrize("major,minor", [(0, 0), (0, 5), (8, 10), (-1, 0), (8, -1)])
def test_a_compute_capability_is_a_positive_major_and_a_one_digit_minor(major, minor):
    with pytest.raises(ValueError, match="not a compute capability"):
        CudaTarget(major, minor)


def test_the_smallest_architecture_numbers():
    """sm_10 (Tesla, the first CUDA GPUs) is 1.0; a number below 10 names no architecture."""
    assert CudaTarget.from_number(10) == CudaTarget(1, 0) and CudaTarget.parse("sm_10") == CudaTarget(1, 0)
    assert CudaTarget(1, 0).sm == "sm_10"
    for bad in (9, 0):
        with pytest.raises(ValueError, match="not an architecture number"):
            CudaTarget.from_number(bad)


def test_the_last_cuda_release_of_retired_generations():
    """Kepler (3.5, 3.7): R470, CUDA 11.4; Maxwell (5.0): R580, CUDA 13.0; a
    current generation (9.0) and Thor under its old name (10.1 is 11.0) have no last release."""
    assert arch.last_cuda((3, 5)) == (11, 4) and arch.last_cuda((3, 7)) == (11, 4)
    assert arch.last_cuda((5, 0)) == (13, 0)
    assert arch.last_cuda((9, 0)) is None and arch.last_cuda((10, 1)) is None


@pytest.mark.parametrize(
    "soname,major",
    [
        ("libcudart.so.12", 12),
        ("libcudart.so.11.0", 11),
        ("libcublasLt.so.13", 13),
        ("libcublas.so.12.8.4", 12),
        ("libc.so.6", None),
        ("libcudart_static.a", None),
        ("libcuda.so.1", None),
        # Windows: major and minor up to CUDA 11 (one name for every 11.x), the major alone from 12
        ("cudart64_100.dll", 10),
        ("cudart64_101.dll", 10),
        ("cudart64_102.dll", 10),
        ("cudart64_110.dll", 11),
        ("cudart64_92.dll", 9),
        ("cudart64_12.dll", 12),
        ("cudart64_13.dll", 13),
        ("cublas64_100.dll", 10),
        ("cublas64_10.dll", 10),
        ("cublasLt64_11.dll", 11),
        ("cublas64_12.dll", 12),
        ("nvrtc64_112_0.dll", 11),
        ("nvrtc64_102_0.dll", 10),
        ("nvrtc64_130_0.dll", 13),
    ],
)
def test_the_cuda_major_a_needed_library_names(soname, major):
    assert arch.runtime_major(soname) == major


def test_a_gpu_name_written_without_its_separators():
    """ "A100SXM4" is the catalog's alias "A100 SXM4": names compare with spaces and dashes removed."""
    assert [g.name for g in arch.lookup_gpu("A100SXM4")] == ["A100"]
    assert [g.name for g in arch.lookup_gpu("a100-sxm4")] == ["A100"]


def test_releases_and_isas_may_be_written_as_text():
    """The tables are keyed by "13.0"; callers may pass that text or the (13, 0) pair."""
    assert arch.min_driver("13.0") == arch.min_driver((13, 0)) == "580.65.06"
    assert arch.newest_ptx_isa("12.8") == arch.newest_ptx_isa((12, 8)) == (8, 7)
    assert arch.cuda_release_for_ptx_isa("9.2") == (13, 2)
