"""The census (corpus/census.toml, records/census.md): loaded with the corpus, broad, sourced, and tabled.

The wheels themselves are checked by tests/test_corpus.py (those marked ``ci = true``, within CI's
budget) and all of them by ``python -m corpus.run``; here the census is held to its promise:
breadth over vendors, CUDA and ROCm versions and platforms, every expectation with its evidence,
and a table row for every wheel.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from corpus import census, manifest  # noqa: E402

CENSUS = manifest.load(manifest.CENSUS)
ALL = manifest.load()
MIN_WHEELS = 120  # the corpus and the census together (issue 26)
STACKS = ("CUDA 10", "CUDA 11", "CUDA 12", "CUDA 13", "ROCm 6", "ROCm 7")
FAMILIES = {
    "nvidia",
    "rapids",
    "pytorch",
    "jax",
    "tensorflow",
    "paddle",
    "cupy",
    "llm-kernels",
    "cuquantum",
    "dali",
    "onnxruntime",
}


def test_the_corpus_loads_both_manifests() -> None:
    """corpus.manifest.load() gives manifest.toml's wheels, then the census's, each once."""
    first = manifest.load(manifest.MANIFEST)
    assert [w.id for w in ALL] == [w.id for w in first] + [w.id for w in CENSUS]
    assert {w.manifest for w in first} == {"manifest"} and {w.manifest for w in CENSUS} == {"census"}
    assert len(ALL) >= MIN_WHEELS


def test_the_census_spans_vendors_toolkits_and_platforms() -> None:
    stacks = " ".join(w.stack for w in CENSUS)
    for needed in STACKS:
        assert needed in stacks, needed
    platforms = {
        "win_amd64"
        if "win_amd64" in w.platform
        else "aarch64"
        if "aarch64" in w.platform
        else "x86_64"
        if "x86_64" in w.platform
        else w.platform
        for w in CENSUS
    }
    assert {"x86_64", "aarch64", "win_amd64"} <= platforms, platforms
    families = {w.family for w in CENSUS}
    assert FAMILIES <= families, families
    assert any("tegra" in w.name for w in CENSUS), "a Jetson (tegra) wheel"
    assert all(w.family for w in CENSUS)
    assert max(w.size_mb for w in CENSUS) > 400  # the largest wheels are in it


def test_the_ci_subset_fits_its_budget() -> None:
    """CI checks the census wheels marked ci = true: small ones, a few hundred MB in all."""
    ci = [w for w in CENSUS if not w.slow]
    assert ci and sum(w.size_mb for w in ci) < 400


def test_every_census_wheel_has_a_table_row() -> None:
    text = census.table(CENSUS, {}, {})
    rows = [line for line in text.splitlines()[2:] if line.startswith("| ")]
    assert len(rows) == len(CENSUS)
    for w, row in zip(CENSUS, rows, strict=True):
        assert f"| {w.name} | {w.version} | {w.platform} |" in row


def test_the_index_key_of_a_wheel_file() -> None:
    """The census matches query rows to wheels by (project, release, tags), as the index names them."""
    assert census.key("torch-2.14.1-cp311-cp311-manylinux_2_28_aarch64.whl") == (
        "torch",
        "2.14.1",
        "cp311-cp311-manylinux_2_28_aarch64",
    )
    assert census.key("nvidia_cuda_runtime_cu11-11.8.89-py3-none-win_amd64.whl") == (
        "nvidia-cuda-runtime-cu11",
        "11.8.89",
        "py3-none-win_amd64",
    )
    assert census.key("foo-1.0-3-py3-none-any.whl") == ("foo", "1.0-3", "py3-none-any")


def test_the_tables_answers_are_query_runs_on(tmp_path: Path) -> None:
    """corpus.census answers every GPU in one process; the answers are archaudit query runs-on's."""
    import os

    import pytest
    from corpus.run import download

    from wheels import want

    wheel = next(w for w in CENSUS if w.id == "nvjpeg2k-tegra-cu12")
    want(wheel.name, wheel.version, wheel.platform, wheel.filename)
    problem = download(wheel, manifest.cache_dir())
    if problem:
        if os.environ.get("ARCHAUDIT_OFFLINE"):
            pytest.skip(problem)
        pytest.fail(problem)
    db = tmp_path / "census.db"
    census.index([wheel], db)
    gpus = (("Orin", "Jetson Orin"), ("A100", "A100"), ("MI300X", "MI300X"))
    answers = census.runs_on(db, gpus)
    assert answers == census.runs_on_query(db, gpus)
    assert answers["Orin"][census.key(wheel.filename)][0] == "yes"  # sm_87 SASS (corpus/evidence)
    assert answers["A100"][census.key(wheel.filename)][0] == "no"  # a Jetson build: Orin's code only
