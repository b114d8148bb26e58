"""archaudit.suggest: "did you mean" over the names archaudit knows: the GPU catalog
(data/gpus.json) and the [tool.archaudit] keys (config.KEYS)."""

from __future__ import annotations

from archaudit.config import KEYS
from archaudit.gpus import cuda as arch
from archaudit.suggest import close_matches, did_you_mean

GPU_NAMES = [n for g in arch.gpu_catalog() for n in (g.name, *g.aliases)]


def test_a_misspelt_gpu_gets_the_closest_catalog_names_closest_first():
    assert did_you_mean("RTX 4099", GPU_NAMES) == "; did you mean 'RTX 4090'?"
    assert close_matches("H10", GPU_NAMES) == ["H100"]
    assert close_matches("a100", GPU_NAMES)[0] == "A100"  # case is ignored
    assert len(close_matches("a100", GPU_NAMES)) <= 3


def test_case_hyphens_underscores_and_spaces_do_not_count():
    assert close_matches("geforce_rtx_4090", GPU_NAMES)[0] == "GeForce RTX 4090"
    assert close_matches("rtx-4090", GPU_NAMES)[0] == "RTX 4090"
    assert did_you_mean("cuda_archs", KEYS).startswith("; did you mean 'cuda-archs'")
    assert did_you_mean("driverOs", KEYS).startswith("; did you mean 'driver-os'")


def test_a_word_close_to_nothing_known_gets_no_suggestion():
    assert close_matches("xyz", GPU_NAMES) == [] and did_you_mean("xyz", GPU_NAMES) == ""
    assert did_you_mean("exactt", KEYS) == "; did you mean 'exact'?"
    assert did_you_mean("exact", []) == ""
