"""Architecture model, CUDA compatibility rules, driver floor and GPU catalog."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from archaudit.gpus.cuda import (
    KNOWN_CCS,
    TEGRA_CCS,
    CudaTarget,
    canonical_cc,
    cuda_release_for_ptx_isa,
    gpu_catalog,
    is_tegra,
    lookup_gpu,
    min_driver,
    package_match,
    ptx_runs_on,
    runs_on,
    sass_runs_on,
)
from archaudit.gpus.drivers import UNKNOWN, driver_at_least, driver_key

T = CudaTarget.parse
CUDA_DRIVERS = json.loads(resources.files("archaudit").joinpath("data", "cuda.json").read_text())["drivers"]


# ---- CudaTarget ---------------------------------------------------------------------------


def test_target_properties():
    t = CudaTarget(9, 0, "a")
    assert t.cc == (9, 0)
    assert t.number == 90
    assert (t.sm, t.compute, t.label) == ("sm_90a", "compute_90a", "90a")
    assert str(t) == "sm_90a"
    assert CudaTarget(12, 1).number == 121


@pytest.mark.parametrize(
    "number, suffix, expected",
    [
        (90, "", (9, 0, "")),
        (100, "f", (10, 0, "f")),
        (121, "", (12, 1, "")),
        (75, "", (7, 5, "")),
        (110, "a", (11, 0, "a")),
    ],
)
def test_from_number(number, suffix, expected):
    t = CudaTarget.from_number(number, suffix)
    assert (t.major, t.minor, t.suffix) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("sm_90a", CudaTarget(9, 0, "a")),
        ("compute_90", CudaTarget(9, 0)),
        ("lto_80", CudaTarget(8, 0)),
        ("90a", CudaTarget(9, 0, "a")),
        ("9.0a", CudaTarget(9, 0, "a")),
        ("100f", CudaTarget(10, 0, "f")),
        ("12.1", CudaTarget(12, 1)),
        ("SM_120", CudaTarget(12, 0)),
        ("sm_103a", CudaTarget(10, 3, "a")),
        (" 8.6 ", CudaTarget(8, 6)),
    ],
)
def test_parse_spellings(text, expected):
    assert T(text) == expected


@pytest.mark.parametrize(
    "bad", ["", "sm_", "sm_9", "9", "90x", "gfx90a", "sm_90b", "9.10", "compute90", "8.6+PTX", "sm_90-real"]
)
def test_parse_rejects(bad):
    with pytest.raises(ValueError) as err:
        T(bad)
    assert repr(bad) in str(err.value)


def test_bad_suffix_and_cc():
    with pytest.raises(ValueError, match="suffix"):
        CudaTarget(9, 0, "x")
    with pytest.raises(ValueError):
        CudaTarget.from_number(9)


@pytest.mark.parametrize("label", ["75", "80", "86", "87", "90a", "100f", "103a", "110", "120a", "121f"])
def test_round_trips(label):
    t = T(label)
    assert T(t.sm) == t
    assert T(t.compute) == t
    assert T(t.label) == t
    assert T(f"{t.major}.{t.minor}{t.suffix}") == t
    assert CudaTarget.from_number(t.number, t.suffix) == t


def test_ordering_is_by_cc_then_suffix():
    assert sorted([T("100"), T("90a"), T("90"), T("80")]) == [T("80"), T("90"), T("90a"), T("100")]


# ---- compatibility --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, gpu, expected",
    [
        ("sm_80", (8, 0), True),
        ("sm_80", (8, 6), True),
        ("sm_80", (8, 9), True),
        ("sm_80", (9, 0), False),
        ("sm_86", (8, 0), False),
        ("sm_80", (8, 7), False),  # Orin is Tegra: only sm_87 runs there
        ("sm_87", (8, 7), True),
        ("sm_87", (8, 9), False),  # Tegra SASS runs only on its own CC
        ("sm_72", (8, 7), False),
        ("sm_53", (6, 2), False),
        ("sm_90a", (9, 0), True),
        ("sm_90a", (10, 0), False),
        ("sm_100a", (10, 3), False),
        ("sm_100f", (10, 0), True),
        ("sm_100f", (10, 3), True),
        ("sm_100f", (11, 0), False),
        ("sm_100f", (12, 0), False),
        ("sm_103f", (10, 0), False),
        ("sm_120", (12, 1), True),
        ("sm_120f", (12, 1), True),
        ("sm_121", (12, 0), False),
        ("sm_110", (11, 0), True),
        ("sm_101", (11, 0), False),  # Thor renamed by CUDA 13: not known to load, fail closed
        ("sm_101", (10, 1), True),  # ... but Thor under its old name, with a CUDA 12.9 driver
        ("sm_100", (11, 0), False),
    ],
)
def test_sass_runs_on(code, gpu, expected):
    assert sass_runs_on(T(code), gpu) is expected


@pytest.mark.parametrize(
    "code, gpu, expected",
    [
        ("compute_80", (8, 0), True),
        ("compute_80", (9, 0), True),
        ("compute_80", (12, 0), True),
        ("compute_80", (8, 7), True),  # PTX JITs on Tegra too
        ("compute_80", (7, 5), False),
        ("compute_89", (8, 6), False),  # never downward (fvdb-core#789)
        ("compute_90a", (9, 0), True),
        ("compute_90a", (10, 0), False),
        ("compute_90a", (8, 9), False),
        ("compute_100f", (10, 3), True),
        ("compute_100f", (12, 0), False),
        ("compute_120", (12, 1), True),
        ("compute_101", (12, 0), True),  # old Thor name is 11.0
    ],
)
def test_ptx_runs_on(code, gpu, expected):
    assert ptx_runs_on(T(code), gpu) is expected


def test_runs_on_kinds():
    assert runs_on("sass", T("sm_80"), (8, 6)) == "native"
    assert runs_on("sass", T("sm_80"), (9, 0)) is None
    assert runs_on("ptx", T("compute_80"), (9, 0)) == "jit"
    assert runs_on("ptx", T("compute_90"), (8, 0)) is None
    assert runs_on("lto", T("sm_80"), (8, 0)) is None
    assert runs_on("relocatable", T("sm_80"), (8, 0)) is None
    with pytest.raises(ValueError, match="cubin"):
        runs_on("cubin", T("sm_80"), (8, 0))


def test_tegra_data():
    assert {(7, 2), (8, 7), (11, 0), (5, 3), (6, 2)} <= TEGRA_CCS
    assert canonical_cc((10, 1)) == (11, 0)
    assert is_tegra((10, 1)) and is_tegra((8, 7))
    assert not is_tegra((12, 1)) and not is_tegra((9, 0))


def test_known_ccs():
    for cc in [(7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1)]:
        assert cc in KNOWN_CCS
    assert (10, 1) not in KNOWN_CCS  # an alias, not a separate GPU
    assert list(KNOWN_CCS) == sorted(KNOWN_CCS)


# ---- driver floor ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "isa, release",
    [
        ((7, 0), (11, 0)),
        ((7, 8), (11, 8)),
        ((8, 0), (12, 0)),
        ((8, 5), (12, 5)),
        ((8, 7), (12, 8)),
        ((8, 8), (12, 9)),
        ((9, 0), (13, 0)),
        ((9, 1), (13, 1)),
        ("9.0", (13, 0)),
    ],
)
def test_ptx_isa_to_release(isa, release):
    assert cuda_release_for_ptx_isa(isa) == release


def test_unknown_ptx_isa_fails_closed():
    with pytest.raises(LookupError, match="9.9"):
        cuda_release_for_ptx_isa((9, 9))


@pytest.mark.parametrize(
    "release, os, driver",
    [
        ((11, 0), "linux", "450.51.05"),
        ((11, 8), "windows", "520.06"),
        ((12, 0), "linux", "525.60.13"),
        ((12, 4), "linux", "550.54.14"),
        ((12, 8), "linux", "570.26"),
        ((12, 8), "windows", "570.65"),
        ((12, 9), "linux", "575.51.03"),
        ((13, 0), "linux", "580.65.06"),
        ((13, 1), "linux", "590.44.01"),
        ("13.0", "linux", "580.65.06"),
        ((12, 7), "linux", "570.26"),  # never shipped: the next release of the major
    ],
)
def test_min_driver_toolkit(release, os, driver):
    assert min_driver(release, os) == driver


def test_min_driver_minor_version_compatibility():
    assert min_driver((12, 8), kind="minor") == "525.60.13"
    assert min_driver((11, 4), "windows", kind="minor") == "452.39"
    # Table 2 says "13.x >= 580", a branch: its first driver is 13.0's own (Table 3), the floor
    # a cubin and a PTX of CUDA 13.0 share. A family floor Table 2 gives exactly stays its own
    # (11.x: 450.80.02, not 11.0's 450.51.05).
    assert CUDA_DRIVERS["minor"]["families"]["13"]["linux"] == "580"
    assert min_driver((13, 1), kind="minor") == min_driver((13, 0)) == "580.65.06"
    assert min_driver((11, 0), kind="minor") == "450.80.02" != min_driver((11, 0))
    # On Windows the release notes list no toolkit driver from 13.0 on: the branch is the floor.
    assert min_driver((13, 1), "windows", kind="minor") == "580"


def test_min_driver_unknowns():
    with pytest.raises(LookupError, match="windows"):
        min_driver((13, 0), "windows")
    with pytest.raises(LookupError):
        min_driver((14, 0))
    with pytest.raises(ValueError):
        min_driver((13, 0), "macos")
    with pytest.raises(ValueError):
        min_driver((13, 0), kind="newest")


def test_driver_table_covers_releases():
    data = json.loads(resources.files("archaudit").joinpath("data", "cuda.json").read_text())
    releases = data["drivers"]["toolkit"]["releases"]
    wanted = [f"11.{m}" for m in range(9)] + [f"12.{m}" for m in (0, 1, 2, 3, 4, 5, 6, 8, 9)] + ["13.0", "13.1"]
    for r in wanted:
        assert releases[r]["linux"], r
    versions = [tuple(int(p) for p in releases[r]["linux"].split(".")) for r in wanted]
    assert versions == sorted(versions)  # newer toolkits never need an older driver
    isa = data["ptx_isa"]["introduced_in"]
    pairs = sorted((tuple(map(int, k.split("."))), tuple(map(int, v["cuda"].split(".")))) for k, v in isa.items())
    assert [p[1] for p in pairs] == sorted(p[1] for p in pairs)


@pytest.mark.parametrize(
    "have, need, ok",
    [
        ("580.65.06", "580.65.06", True),
        ("580.65.6", "580.65.06", True),
        ("580.95.05", "580.65.06", True),
        ("575.57.08", "580.65.06", False),
        ("580", "580.65.06", False),
        ("580.65.06", "580", True),
        ("1000.1", "999.99.99", True),
        ("570.124.06", "570.26", True),  # numeric, not lexicographic
    ],
)
def test_driver_at_least(have, need, ok):
    assert driver_at_least(have, need) is ok


def test_driver_at_least_rejects_garbage():
    with pytest.raises(ValueError, match="r580"):
        driver_at_least("r580", "580")


def test_one_driver_order_puts_the_unknown_floor_above_every_known_one():
    """check's D002 line, the index's stored floor and `query driver-floor` take the most
    demanding floor by this one key: a floor archaudit cannot name is never hidden behind a known one."""
    floors = ["580.65.06", UNKNOWN, "525.60.13", "580", "575.57.08"]
    assert sorted(floors, key=driver_key) == ["525.60.13", "575.57.08", "580", "580.65.06", UNKNOWN]
    assert max(["580.65.06", "r580"], key=driver_key) == "r580"  # not a version: asks most too
    assert driver_key("580.65.06") == (580, 65, 6)


# ---- GPU catalog -------------------------------------------------------------------------------

REQUIRED = {
    "K80": (3, 7),
    "P100": (6, 0),
    "GTX 1080 Ti": (6, 1),
    "V100": (7, 0),
    "T4": (7, 5),
    "RTX 2080 Ti": (7, 5),
    "A100": (8, 0),
    "A10": (8, 6),
    "A30": (8, 0),
    "RTX 3090": (8, 6),
    "A40": (8, 6),
    "L4": (8, 9),
    "L40S": (8, 9),
    "RTX 4090": (8, 9),
    "H100": (9, 0),
    "H200": (9, 0),
    "GH200": (9, 0),
    "B200": (10, 0),
    "B300": (10, 3),
    "GB200": (10, 0),
    "RTX 5090": (12, 0),
    "RTX PRO 6000 Blackwell": (12, 0),
    "Jetson Nano": (5, 3),
    "Jetson Xavier": (7, 2),
    "Jetson Orin": (8, 7),
    "Jetson Thor": (11, 0),
    "GB10": (12, 1),
    "DGX Spark": (12, 1),
}


@pytest.mark.parametrize("name, cc", sorted(REQUIRED.items()))
def test_catalog_lookup_by_name(name, cc):
    found = lookup_gpu(name)
    assert len(found) == 1, (name, found)
    assert found[0].cc == cc
    assert lookup_gpu(name.lower().replace(" ", "-")) == found


def test_catalog_integrated_and_tegra():
    by_name = {g.name: g for g in gpu_catalog()}
    for name in ("Jetson Nano", "Jetson Xavier", "Jetson Orin", "Jetson Thor", "GB10"):
        assert by_name[name].integrated
    for name in ("H100", "A100", "GH200", "GeForce RTX 5090"):
        assert not by_name[name].integrated
    assert by_name["Jetson Orin"].tegra and not by_name["GB10"].tegra
    assert all(g.cc in KNOWN_CCS for g in gpu_catalog())


@pytest.mark.parametrize("query", ["sm_90", "9.0", "90", "compute_90", "sm_90a"])
def test_catalog_lookup_by_target(query):
    names = {g.name for g in lookup_gpu(query)}
    assert {"H100", "H200", "GH200"} <= names
    assert "A100" not in names


def test_catalog_lookup_nvml_names_and_misses():
    assert [g.name for g in lookup_gpu("NVIDIA A100-SXM4-80GB")] == ["A100"]
    assert [g.name for g in lookup_gpu("NVIDIA H200")] == ["H200"]
    assert [g.name for g in lookup_gpu("NVIDIA GeForce RTX 4090")] == ["GeForce RTX 4090"]
    assert lookup_gpu("Quadro T4000") == []  # not a T4
    assert lookup_gpu("Voodoo 3") == []
    assert lookup_gpu("") == []
    assert [g.name for g in lookup_gpu("sm_101")] == ["Jetson Thor", "Jetson T4000"]
    assert lookup_gpu("sm_88") == []


def test_package_match_normalises_the_name_as_pep_503_does():
    """One name match for the CUDA and ROCm package tables: `cupy_cuda12x`, `CuPy-CUDA12x` and
    `cupy.cuda12x` are `cupy-cuda12x`; the first matching row wins; no row, no match."""
    rows = [{"pattern": r"^cupy-cuda(?P<major>\d+)x$"}, {"pattern": r"^cupy-(?P<major>\d+)"}]
    for name in ("cupy_cuda12x", "CuPy-CUDA12x", "cupy.cuda12x"):
        m = package_match(name, rows)
        assert m is not None and m.re.pattern == rows[0]["pattern"] and m.group("major") == "12"
    assert package_match("cupy", rows) is None


def test_newest_known_is_the_newest_architecture_a_release_builds_for():
    """From data/cuda.json's row of that very release: 12.6 builds up to 9.0, 12.8 up to 12.0,
    12.9 up to 12.1, 11.8 up to 9.0; a release with no row (11.4, or the unpublished 12.7 that
    CUPTI 12.9's Perfworks cubins record) gives None: it may know more than its neighbours."""
    from archaudit.gpus.cuda import newest_known

    assert [newest_known(r) for r in ((12, 6), (12, 8), (12, 9), (11, 8))] == [(9, 0), (12, 0), (12, 1), (9, 0)]
    assert newest_known((11, 4)) is None and newest_known((12, 7)) is None and newest_known((9, 2)) is None
