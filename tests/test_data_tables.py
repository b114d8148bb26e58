"""Every row of every compatibility table names a source a reader can check, and the tables agree.

The tables in src/archaudit/data/*.json are what every verdict rests on; a row that cannot be
traced to a document or a repeatable measurement is a guess. These tests read the JSON directly
(not through archaudit's loaders) and then check that the loaders agree with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from importlib import resources
from typing import Any

import pytest

from archaudit.gpus import amd as gfx, cuda as arch

CC_RE = re.compile(r"[1-9]\d?\.\d")
DRIVER_RE = re.compile(r"\d{3}(\.\d{1,3}){0,2}")


def load(name: str) -> dict[str, Any]:
    return json.loads(resources.files("archaudit").joinpath("data", name).read_text("utf-8"))


CUDA, AMD, GPUS, VENDOR = load("cuda.json"), load("amd.json"), load("gpus.json"), load("vendor.json")
NAMES = load("names.json")


def cc(text: str) -> tuple[int, int]:
    assert CC_RE.fullmatch(text), text
    major, minor = text.split(".")
    return int(major), int(minor)


def rows(doc: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(where, row) for every row of every table of a data file."""
    if doc is CUDA:
        t = CUDA
        tables = {
            "compute_capabilities.known": t["compute_capabilities"]["known"],
            "compute_capabilities.tegra": t["compute_capabilities"]["tegra"],
            "compute_capabilities.aliases": t["compute_capabilities"]["aliases"],
            "ptx_isa.introduced_in": t["ptx_isa"]["introduced_in"],
            "drivers.toolkit.releases": t["drivers"]["toolkit"]["releases"],
            "drivers.toolkit.updates": t["drivers"]["toolkit"]["updates"],
            "drivers.minor.families": t["drivers"]["minor"]["families"],
            "last_driver.generations": t["last_driver"]["generations"],
            "cmake_all.releases": t["cmake_all"]["releases"],
            "torch_named_arches.names": t["torch_named_arches"]["names"],
            "runtime_sonames.patterns": t["runtime_sonames"]["patterns"],
            "first_driver.generations": t["first_driver"]["generations"],
            "package_names.patterns": t["package_names"]["patterns"],
            "nvcc_targets.suffixes": t["nvcc_targets"]["suffixes"],
            "nvcc_targets.releases": t["nvcc_targets"]["releases"],
        }
    elif doc is AMD:
        tables = {
            "processors": AMD["processors"],
            "generic_families": AMD["generic_families"],
            "gpus": dict(enumerate(AMD["gpus"])),
            "rocm_rules": AMD["rocm_rules"],
            "hip_lookups": AMD["hip_lookups"],
            "hip_runtimes": AMD["hip_runtimes"],
            "hip_releases": AMD["hip_releases"],
            "hip_loadings": AMD["hip_loadings"],
            "package_names.patterns": AMD["package_names"]["patterns"],
        }
    elif doc is NAMES:
        tables = {"conventions": NAMES["conventions"]}
    elif doc is VENDOR:
        tables = {
            "libraries": {
                f"{name}.rows[{i}]": row
                for name, lib in VENDOR["libraries"].items()
                for i, row in enumerate(lib["rows"])
            }
            | {
                f"{name}.identity": {"source": lib["identity_source"]}
                for name, lib in VENDOR["libraries"].items()
                if "identity_source" in lib
            }
            | {
                f"{name}.static_kernels": lib["static_kernels"]
                for name, lib in VENDOR["libraries"].items()
                if "static_kernels" in lib
            }
            | {
                f"{name}.toolkit_component": lib["toolkit_component"]
                for name, lib in VENDOR["libraries"].items()
                if "toolkit_component" in lib
            },
            "cuda": VENDOR["cuda"],
            "statements": VENDOR["statements"],
        }
    else:
        tables = {"gpus": dict(enumerate(GPUS["gpus"])), "generations": GPUS["generations"]}
    for table, body in tables.items():
        assert body, f"{table} is empty"
        for key, row in body.items():
            yield f"{table}[{key!r}]", row


DOCS = {"cuda.json": CUDA, "amd.json": AMD, "gpus.json": GPUS, "vendor.json": VENDOR, "names.json": NAMES}


# ---- sources ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(DOCS))
def test_every_row_names_a_known_source(name):
    doc = DOCS[name]
    sources = doc["sources"]
    for where, row in rows(doc):
        assert isinstance(row, dict), f"{name} {where}: a row must be an object with a 'source'"
        cited = row.get("source")
        cited = cited if isinstance(cited, list) else [cited]
        assert cited and all(c in sources for c in cited), f"{name} {where}: source {cited!r} is not in 'sources'"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_sources_are_checkable_and_all_used(name):
    doc = DOCS[name]
    used = {c for _, row in rows(doc) for c in (row["source"] if isinstance(row["source"], list) else [row["source"]])}
    for key, text in doc["sources"].items():
        assert isinstance(text, str) and len(text) > 20, key
        # a document a reader can open, or a measurement a reader can repeat
        assert "https://" in text or text.startswith("Measured:"), f"{name} source {key!r} names no URL or measurement"
        assert key in used, f"{name} source {key!r} is cited by no row (stale)"


@pytest.mark.parametrize("name", sorted(DOCS))
def test_every_table_is_checked(name):
    """A table added to a data file without a line in rows() would escape the source check."""
    doc = DOCS[name]
    checked = {where.split("[", 1)[0].split(".", 1)[0] for where, _ in rows(doc)}
    assert set(doc) - {"schema", "about", "sources", "cccl_namespace"} == checked


def test_no_machine_paths_in_tables():
    for name in DOCS:
        text = resources.files("archaudit").joinpath("data", name).read_text("utf-8")
        assert not re.search(r"/(work|tmp|root|home)/", text), name


# ---- cuda.json ---------------------------------------------------------------------------------


def test_compute_capabilities_well_formed():
    table = CUDA["compute_capabilities"]
    known = [cc(c) for c in table["known"]]
    assert known == sorted(known) and len(set(known)) == len(known)
    assert {cc(c) for c in table["tegra"]} <= set(known)
    for alias, row in table["aliases"].items():
        assert cc(alias) not in known and cc(row["canonical"]) in known
    assert tuple(known) == arch.KNOWN_CCS


def test_ptx_isa_rows_map_to_a_release_with_a_driver_row():
    isa = CUDA["ptx_isa"]["introduced_in"]
    releases = CUDA["drivers"]["toolkit"]["releases"]
    pairs = sorted((cc(k), cc(v["cuda"])) for k, v in isa.items())
    assert [p[1] for p in pairs] == sorted(p[1] for p in pairs), "a newer ISA never comes from an older release"
    for isa_v, release in pairs:
        assert arch.cuda_release_for_ptx_isa(isa_v) == release
        later = [cc(r) for r in releases if cc(r)[0] == release[0] and cc(r) >= release]
        assert later, f"PTX ISA {isa_v}: CUDA {release} has no driver row"
        row = releases[f"{min(later)[0]}.{min(later)[1]}"]
        if row["linux"] is None:  # an explicit unknown must say why, and stay unknown
            assert row.get("why"), f"CUDA {release}: a null driver needs a 'why'"
            with pytest.raises(LookupError):
                arch.min_driver(release)
        else:
            assert arch.min_driver(release) == row["linux"]


def test_ptx_isa_9_4_and_9_5_are_cuda_13_4_and_13_5():
    assert arch.cuda_release_for_ptx_isa("9.4") == (13, 4)
    assert arch.cuda_release_for_ptx_isa("9.5") == (13, 5)
    assert arch.min_driver((13, 4)) == "615.71.09"
    assert arch.min_driver((13, 5)) == "620.10.01"
    with pytest.raises(LookupError, match="windows"):  # NVIDIA lists no Windows toolkit driver from 13.0
        arch.min_driver((13, 5), "windows")


def test_driver_rows_well_formed_and_monotonic():
    releases = CUDA["drivers"]["toolkit"]["releases"]
    ordered = sorted(releases, key=cc)
    for os_name in ("linux", "windows"):
        seen: list[tuple[int, ...]] = []
        for r in ordered:
            v = releases[r][os_name]
            if v is None:
                continue
            assert DRIVER_RE.fullmatch(v), (r, os_name, v)
            seen.append(tuple(int(p) for p in v.split(".")))
        assert seen == sorted(seen), f"{os_name}: a newer toolkit never needs an older driver"
    for fam, row in CUDA["drivers"]["minor"]["families"].items():
        assert DRIVER_RE.fullmatch(row["linux"]) and fam.isdigit()
        # the family's floor is a driver of the branch its first release came with (450, 525, 580)
        first = min((r for r in releases if cc(r)[0] == int(fam)), key=cc)
        assert row["linux"].split(".")[0] == releases[first]["linux"].split(".")[0], fam
    for r, row in CUDA["drivers"]["toolkit"]["updates"].items():
        assert releases[r]["linux"] in row["linux"]  # the GA driver is the first of its updates


def test_last_driver_rows_agree_with_the_driver_and_isa_tables():
    releases = CUDA["drivers"]["toolkit"]["releases"]
    tegra = {cc(c) for c in CUDA["compute_capabilities"]["tegra"]}
    seen: set[tuple[int, int]] = set()
    for name, row in CUDA["last_driver"]["generations"].items():
        ccs = {cc(c) for c in row["ccs"]}
        assert ccs <= set(arch.KNOWN_CCS) and not ccs & seen, name
        seen |= ccs
        release = cc(row["cuda"])
        assert row["cuda"] in releases, name
        if ccs <= tegra:  # the last JetPack, not a desktop driver branch
            assert re.fullmatch(r"JetPack \d+\.\d+ \(L4T R\d+\.\d+\)", row["branch"]), name
        else:
            assert not ccs & tegra, name
            m = re.fullmatch(r"R(\d{3})", row["branch"])
            assert m is not None, name
            branch = int(m.group(1))
            # the branch's own toolkit is the newest it supports: the next release needs a newer branch
            assert releases[row["cuda"]]["linux"].startswith(f"{branch}."), name
            nxt = min((r for r in releases if cc(r) > release and releases[r]["linux"]), key=cc)
            assert int(releases[nxt]["linux"].split(".")[0]) > branch, name
        assert cc(row["ptx_isa"]) == arch.newest_ptx_isa(release), name
        for c in ccs:
            last = arch.last_driver(c)
            assert last is not None and last.ptx_isa == cc(row["ptx_isa"])


def test_kepler_stops_at_ptx_isa_7_4():
    """catboost 1.2.10's compute_35 PTX of ISA 7.8 can run on no driver a Kepler GPU gets."""
    kepler = arch.last_driver((3, 5))
    assert kepler is not None and kepler.branch == "R470" and kepler.ptx_isa == (7, 4)
    assert arch.cuda_release_for_ptx_isa((7, 8)) > kepler.cuda
    for old in ((5, 2), (6, 1), (7, 0)):
        last = arch.last_driver(old)
        assert last is not None and last.ptx_isa == (9, 0)
    assert arch.last_driver((7, 5)) is None and arch.last_driver((8, 7)) is None
    nano = arch.last_driver((5, 3))
    assert nano is not None and nano.ptx_isa == (6, 5)  # Jetson Nano: JetPack 4.6, CUDA 10.2


def test_cmake_all_lists_sorted_and_real():
    known = set(arch.KNOWN_CCS) | set(arch.CC_ALIASES)  # 12.8/12.9 still built sm_101 (Thor's old name)
    releases = CUDA["cmake_all"]["releases"]
    for r, row in releases.items():
        allx, major = row["all"], row["all-major"]
        assert allx == sorted(set(allx)) and major == sorted(set(major)), r
        assert all(arch.CudaTarget.from_number(n).cc in known for n in allx), r
        # nvcc: all-major is every X.0 architecture plus the oldest supported one (measured 13.x: 75)
        assert major == sorted({n for n in allx if n % 10 == 0} | {allx[0]}), r
        assert row["ptx"] == max(n for n in allx if n % 10 == 0), r
    for r in [f"12.{m}" for m in (0, 1, 2, 3, 4, 5, 6, 8, 9)] + [f"13.{m}" for m in range(6)]:
        assert r in releases, r
    assert 107 in releases["13.4"]["all"] and 107 not in releases["13.3"]["all"]
    assert 101 not in releases["13.0"]["all"] and 110 in releases["13.0"]["all"]


def test_torch_named_arches_parse():
    for name, row in CUDA["torch_named_arches"]["names"].items():
        for token in row["arches"].split(";"):
            assert arch.CudaTarget.parse(token.removesuffix("+PTX")).cc in arch.KNOWN_CCS, name


# ---- gpus.json ---------------------------------------------------------------------------------


def test_nvidia_catalog_rows_well_formed():
    known = set(arch.KNOWN_CCS)
    spellings: dict[str, str] = {}
    for g in GPUS["gpus"]:
        assert cc(g["cc"]) in known, g["name"]
        assert isinstance(g["integrated"], bool) and isinstance(g["aliases"], list)
        for n in (g["name"], *g["aliases"]):
            key = arch._norm(n)
            assert spellings.setdefault(key, g["name"]) == g["name"], f"{n!r} names two GPUs"
    assert len(arch.gpu_catalog()) == len(GPUS["gpus"])
    # every compute capability of the catalog has its architecture's name, and nothing else has one
    assert set(GPUS["generations"]) == {g["cc"] for g in GPUS["gpus"]}


@pytest.mark.parametrize(
    "name, want",
    [
        ("GeForce RTX 5060 Ti", (12, 0)),
        ("RTX 5070", (12, 0)),
        ("RTX 4060", (8, 9)),
        ("RTX 4070 SUPER", (8, 9)),
        ("RTX 3060", (8, 6)),
        ("RTX 3050", (8, 6)),
        ("RTX 2060", (7, 5)),
        ("GTX 1660 SUPER", (7, 5)),
        ("GTX 1650", (7, 5)),
        ("A2", (8, 6)),
        ("A16", (8, 6)),
        ("RTX A4000", (8, 6)),
        ("RTX A5000", (8, 6)),
        ("RTX 4000 Ada", (8, 9)),
        ("RTX PRO 4000 Blackwell", (12, 0)),
        ("RTX PRO 2000", (12, 0)),
        ("RTX PRO 5000 Blackwell", (12, 0)),
        ("L20", (8, 9)),
        ("Jetson T5000", (11, 0)),
        ("Jetson T4000", (11, 0)),
        ("NVIDIA RTX A4000", (8, 6)),
        ("Quadro RTX 4000", (7, 5)),
        ("NVIDIA GeForce GTX 1060 6GB", (6, 1)),
    ],
)
def test_popular_gpus_are_in_the_catalog(name, want):
    found = arch.lookup_gpu(name)
    assert len(found) == 1 and found[0].cc == want, (name, found)


# ---- amd.json ---------------------------------------------------------------------------------


NEW_AMD = [
    "gfx1154",
    "gfx1170",
    "gfx1171",
    "gfx1172",
    "gfx1250",
    "gfx1251",
    "gfx1310",
    "gfx11-7-generic",
    "gfx12-5-generic",
    "gfx13-generic",
]


def test_amd_processors_well_formed():
    machs = [int(p["mach"], 16) for p in AMD["processors"].values()]
    assert len(set(machs)) == len(machs), "two processors share an EF_AMDGPU_MACH value"
    for name, p in AMD["processors"].items():
        assert re.fullmatch(r"gfx(\d{1,2}[0-9a-f]{2}|\d+(-\d+)?-generic)", name), name
        assert isinstance(p["xnack"], bool) and isinstance(p["sramecc"], bool)
    for name in NEW_AMD:
        assert name in gfx.processors(), name
    assert gfx.processor_by_mach()[0x49].name == "gfx1250" and gfx.processor_by_mach()[0x63].name == "gfx13-generic"
    with pytest.raises(ValueError):  # clang: 'invalid target ID gfx1250:xnack+'
        gfx.parse_target("gfx1250:xnack+")


def test_amd_generic_families_consistent():
    procs = AMD["processors"]
    members_seen: dict[str, str] = {}
    for g, row in AMD["generic_families"].items():
        assert g.endswith("-generic") and g in procs
        for m in row["members"]:
            assert m in procs and not m.endswith("-generic"), (g, m)
            assert members_seen.setdefault(m, g) == g, f"{m} is in two generic families"
        for f in ("xnack", "sramecc"):  # a generic target offers no feature all its members lack
            if procs[g][f]:
                assert any(procs[m][f] for m in row["members"]), (g, f)
    assert gfx.family("gfx11-7-generic") == ("gfx1170", "gfx1171", "gfx1172")
    assert gfx.runs_on("gfx12-5-generic", "gfx1251") and not gfx.runs_on("gfx12-5-generic", "gfx1201")
    assert gfx.runs_on("gfx13-generic", "gfx1310") and gfx.runs_on("gfx11-generic", "gfx1154")


def test_amd_catalog_rows_well_formed():
    seen: dict[str, str] = {}
    for g in AMD["gpus"]:
        p = gfx.parse_target(g["target"])
        assert not gfx.processors()[p.processor].generic, g["name"]
        for n in (g["name"], *g["aliases"]):
            key = "".join(gfx._tokens(n))
            assert seen.setdefault(key, g["name"]) == g["name"], f"{n!r} names two GPUs"


@pytest.mark.parametrize(
    "name, target",
    [
        ("MI300X", "gfx942"),
        ("AMD Instinct MI300X", "gfx942"),
        ("instinct-mi250x", "gfx90a"),
        ("RX 9060 XT", "gfx1200"),
        ("Radeon RX 9060", "gfx1200"),
        ("RX 9070 GRE", "gfx1201"),
        ("RX 7700", "gfx1101"),
        ("RX 7900 XT", "gfx1100"),
        ("AMD Radeon RX 7900 XTX", "gfx1100"),
        ("R9700", "gfx1201"),
        ("MI355X", "gfx950"),
        ("AMD Radeon PRO W7900 Dual Slot", "gfx1100"),
        ("AMD Instinct MI300X VF", "gfx942"),
        ("AMD Radeon RX 7900 XT 20GB", "gfx1100"),
    ],
)
def test_amd_lookup_by_name(name, target):
    found = gfx.lookup_gpu(name)
    assert len(found) == 1 and found[0].target == target, (name, found)


def test_amd_lookup_processor_and_misses():
    assert {g.name for g in gfx.lookup_gpu("gfx942")} >= {"Instinct MI300X", "Instinct MI300A"}
    assert gfx.lookup_gpu("gfx90a:xnack+") == []  # a target ID is not a GPU name
    assert gfx.lookup_gpu("MI999") == [] and gfx.lookup_gpu("") == [] and gfx.lookup_gpu("   ") == []
    assert gfx.lookup_gpu("H100") == []  # NVIDIA names stay NVIDIA's
    assert [g.name for g in gfx.lookup_gpu("RX 7900 XT")] == ["Radeon RX 7900 XT"]  # not the XTX
    assert [g.name for g in gfx.lookup_gpu("AMD Radeon RX 7900 XTX 24GB")] == ["Radeon RX 7900 XTX"]
    assert gfx.lookup_gpu("AMD Radeon Graphics") == []  # an APU's generic name says nothing


@pytest.mark.parametrize(
    "name, want",
    [
        ("Orin (nvgpu)", "Jetson Orin"),
        ("NVIDIA Tegra X1", "Jetson Nano"),
        ("Xavier", "Jetson Xavier"),
        ("NVIDIA Thor", "Jetson Thor"),
        ("Tesla V100-SXM2-32GB", "Tesla V100"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", "GeForce RTX 4090"),
        ("NVIDIA A10G", "A10"),
    ],
)
def test_device_names_as_drivers_report_them(name, want):
    """deviceQuery/NVML names (Jetson ones differ from the product names) find the catalog GPU."""
    assert [g.name for g in arch.lookup_gpu(name)] == [want]


def test_nvcc_targets_are_what_this_nvcc_accepts():
    """The accepted set of the nvcc on this machine (13.0 here) is the table's, as sm_XX and
    compute_XX, and the 'a'/'f' rule refuses what this nvcc refuses (-dryrun, no GPU needed)."""
    import shutil
    import subprocess
    import tempfile

    from archaudit.gpus import cuda as arch
    from reference_tools import missing_tool

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        missing_tool("nvcc (the CUDA toolkit)")
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    major, minor = (int(x) for x in out.split("release ")[1].split(",")[0].split("."))
    release = (major, minor)
    codes = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True, check=True).stdout.split()
    listed = {arch.CudaTarget.parse(c).number for c in codes}
    table = {n for n in range(10, 1300) if arch.nvcc_accepts(arch.CudaTarget.from_number(n), release)}
    assert table == listed
    with tempfile.TemporaryDirectory() as d:
        src = f"{d}/k.cu"
        with open(src, "w") as f:
            f.write("__global__ void k() {}\n")
        for spelled in ("sm_90a", "sm_89a", "sm_100f", "sm_90f", "compute_120f", "sm_87a", "sm_121a"):
            ok = subprocess.run([nvcc, f"-arch={spelled}", "-dryrun", "-c", src], capture_output=True).returncode == 0
            assert arch.nvcc_accepts(arch.CudaTarget.parse(spelled), release) is ok, spelled


def test_vendor_rows_well_formed():
    """A vendor library: a file pattern, identity strings of at least 16 bytes (each one more needle
    of the search) or a version marker with its pattern, and rows oldest first with a known GPU
    range (their own or their CUDA major's); a statement: the exact string and the kernel-name
    pattern it speaks for (each compiles; the range is a known CC)."""
    for name, lib in VENDOR["libraries"].items():
        re.compile(lib["file"])
        assert all(len(s) >= 11 for s in lib["identity"]), name
        assert lib["identity"] or "version" in lib or lib.get("by_name"), name
        if "version" in lib:
            for v in lib["version"] if isinstance(lib["version"], list) else [lib["version"]]:
                assert len(v["marker"]) >= 12 and re.compile(v["pattern"]).groupindex, name
        for row in lib["rows"]:
            base = VENDOR["cuda"].get(row.get("range_of", ""), {})
            first, last = row.get("from", base.get("from")), row.get("to", base.get("to"))
            assert first and cc(first) and (last is None or cc(first) <= cc(last)), (name, row)
            assert row.get("driver") or "range_of" in row or lib.get("by_name"), (name, row)
        since = [tuple(map(int, r["since"].split("."))) for r in lib["rows"] if "since" in r]
        assert since == sorted(since), name
    for row in VENDOR["statements"].values():
        re.compile(row["file"]), re.compile(row["kernels"])
        assert cc(row["from"]) and len(row["string"]) >= 16 and row["speaks_for"]


# ---- names.json ---------------------------------------------------------------------------------


def test_name_conventions_well_formed():
    """Each row is a pattern that holds its word, means "from" (a name never excludes a newer
    GPU), and either captures the architecture's digits or lists the CCs its word spans; the
    loader reads the same rows."""
    from archaudit.judge import names

    assert re.compile(NAMES["cccl_namespace"])
    for key, row in NAMES["conventions"].items():
        pattern = re.compile(row["pattern"])
        assert row["means"] == "from", key
        assert row["word"] in key.lower() or row["word"] in row["pattern"], key
        if "ccs" in row:
            ccs = [cc(c) for c in row["ccs"]]
            assert ccs == sorted(ccs) and pattern.groups == 0, key
        else:
            assert pattern.groups == 1, key
    assert [c.name for c in names.conventions()] == list(NAMES["conventions"])
