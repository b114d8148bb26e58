"""archaudit.gpus.catalog: what --gpu names resolve to (an NVIDIA GPU and its compute capability,
an AMD GPU and the settings it ships with), and which names are not GPUs at all.
"""

from __future__ import annotations

import pytest

from archaudit.errors import UsageError
from archaudit.gpus.catalog import AmdGpu, NvidiaGpu, is_gfx_name, resolve as gpus


def test_gpu_catalog_settings_as_shipped():
    _, amd = gpus(["MI250X", "MI300X", "gfx942", "gfx90a:sramecc+:xnack-", "RX 7900 XTX"])
    assert [g.ships for g in amd] == [
        "gfx90a:sramecc+:xnack-",
        "gfx942:sramecc+:xnack-",
        "",
        "gfx90a:sramecc+:xnack-",
        "gfx1100",
    ]
    assert amd[0].switch == (("xnack", "HSA_XNACK=1"),)


def test_a_catalog_name_is_its_gpu_and_an_architecture_keeps_the_name_typed():
    """A name of one catalog GPU shows as the catalog spells it (`RTX 4090` is the GeForce RTX
    4090); an architecture several GPUs share keeps what was typed, with their capability."""
    nvidia, amd = gpus(["H100", "RTX 4090", "sm_80", "9.0"])
    assert nvidia == (
        NvidiaGpu("H100", (9, 0)),
        NvidiaGpu("GeForce RTX 4090", (8, 9)),
        NvidiaGpu("sm_80", (8, 0)),
        NvidiaGpu("9.0", (9, 0)),
    )
    assert amd == ()


def test_an_architecture_is_refused_where_the_toolkit_asked_for_cannot_build_it():
    """nvcc 13.0 no longer builds sm_70 (tests/fixtures/cuda/build.sh: "Unsupported gpu
    architecture 'compute_70'"), nor 11.8 the 'a' variant Hopper brought in 12.0."""
    assert gpus(["sm_70"], release=(12, 0))[0] == (NvidiaGpu("sm_70", (7, 0)),)
    with pytest.raises(UsageError, match="'sm_70' is not an architecture nvcc 13.0 accepts"):
        gpus(["sm_70"], release=(13, 0))
    with pytest.raises(UsageError, match="nvcc 12.0 to 13.5 accepts it"):
        gpus(["sm_90a"], release=(11, 8))


def test_a_name_that_is_no_gpu_is_a_usage_error_naming_the_flag():
    with pytest.raises(UsageError, match=r"--gpu 'H10O': not in the GPU catalog .* did you mean 'H100'\?"):
        gpus(["H10O"])
    with pytest.raises(UsageError, match="--gpu 'gfx9-generic' is a generic code target, not a GPU"):
        gpus(["gfx9-generic"])
    with pytest.raises(UsageError, match="unknown AMD processor 'gfx9zz'"):
        gpus(["gfx9zz"])


def test_a_gfx_target_is_judged_in_the_setting_it_names():
    """A target ID naming every setting its processor has is the setting judged; a bare
    processor several catalog GPUs share names none."""
    _, amd = gpus(["gfx942:sramecc+:xnack-", "gfx1100"])
    assert amd == (
        AmdGpu("gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-"),
        AmdGpu("gfx1100", "gfx1100"),
    )


def test_only_a_gfx_spelling_is_an_amd_name():
    assert is_gfx_name("gfx942") and is_gfx_name("GFX90a:xnack-")
    assert not is_gfx_name("sm_90") and not is_gfx_name("MI300X")
