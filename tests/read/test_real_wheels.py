"""Real GPU wheels from PyPI, read in place and compared with cuobjdump library by library.

cuobjdump is a reference, not the truth; every difference is asserted and explained here:
- it reads only .nv_fatbin (or __nv_relfatbin without -all): containers that libraries keep in
  other sections (cuBLAS's .cask_resource) are extra in archaudit's inventory;
- its -lelf listing drops the family suffix (sm_120f lists as sm_120);
- it refuses targets it no longer supports (sm_35 in CUDA 11 wheels) and stops.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

import oracle
from archaudit.cli import main
from archaudit.model import DEVICE_LINK, EXECUTABLE, LTO, PTX, RELOCATABLE, SASS
from archaudit.read.artifacts import inventory
from reference_tools import needs_tool
from wheels import extract_member, fetch

pytestmark = pytest.mark.slow
needs_cuobjdump = needs_tool("cuobjdump", oracle.find_cuobjdump())
census = pytest.mark.census  # wheels over wheels.TIER_BYTES: the census tier (README "Tests")

CUDA_WHEELS = [
    ("nvidia-curand", "10.4.0.35"),
    pytest.param("nvidia-cublas", "13.1.1.3", marks=census),
    pytest.param("torch", "2.14.1", marks=census),
]
VERSIONS = {"nvidia-curand": "10.4.0.35", "nvidia-cublas": "13.1.1.3", "torch": "2.14.1"}


def _listed(e) -> tuple[str, str]:
    if e.kind == SASS:
        return "ELF", e.target[:-1] if e.target.endswith("f") else e.target
    return "PTX", e.target


class _Inventories(dict):
    """Each wheel read once per module, when a test first asks for it (so inside that test's tier)."""

    def __missing__(self, name: str):
        self[name] = inventory(str(fetch(name, VERSIONS[name])))
        return self[name]


@pytest.fixture(scope="module")
def inventories():
    return _Inventories()


@needs_cuobjdump
@pytest.mark.parametrize("name,version", CUDA_WHEELS)
def test_every_library_agrees_with_cuobjdump(inventories, tmp_path, name, version):
    inv = inventories[name]
    wheel = fetch(name, version)
    assert inv.problems == ()
    device = [lib for lib in inv.libraries if lib.has_device_code]
    assert device, "a CUDA wheel carries device code"
    for lib in inv.libraries:
        assert lib.problems == (), lib.path
        path = extract_member(wheel, lib.path, tmp_path)
        nv = [c for c in lib.containers if c.section == ".nv_fatbin"]
        assert all(c.role in (EXECUTABLE, DEVICE_LINK) for c in nv)
        chosen = nv or [c for c in lib.containers if c.role == RELOCATABLE]
        mine = [_listed(e) for c in chosen for e in c.entries if e.kind != LTO]
        assert mine == oracle.list_entries(path), lib.path
        extra = [c for c in lib.containers if c not in chosen and c.role != RELOCATABLE]
        assert all(c.section not in (".nv_fatbin", "__nv_relfatbin") for c in extra)
        path.unlink()


@census
def test_cublaslt_keeps_device_code_outside_nv_fatbin(inventories):
    """Found by archaudit, invisible to cuobjdump: fatbin containers in .cask_resource."""
    lt = next(lib for lib in inventories["nvidia-cublas"].libraries if lib.path.endswith("libcublasLt.so.13"))
    sections = {c.section for c in lt.containers}
    assert ".nv_fatbin" in sections and sections - {".nv_fatbin"}, sections
    assert sum(len(c.entries) for c in lt.containers if c.section == ".nv_fatbin") == 5737


@needs_cuobjdump
def test_cuda11_targets_cuobjdump_refuses_are_read(tmp_path):
    wheel = fetch("nvidia-curand-cu11", "10.3.0.86")
    inv = inventory(str(wheel))
    (lib,) = [lib for lib in inv.libraries if lib.has_device_code]
    assert lib.problems == ()
    assert {"sm_35", "sm_50", "sm_60", "sm_70"} <= {e.target for e in lib.entries if e.kind == SASS}
    path = extract_member(wheel, lib.path, tmp_path)
    with pytest.raises(oracle.CuobjdumpError) as err:
        oracle.list_entries(path)
    assert "sm_35" in err.value.stderr  # "Support for 'sm_35' has been removed"


@census
def test_cpu_torch_is_a_cpu_wheel(capsys):
    rc = main(["check", "-q", "--no-config", str(fetch("torch", "2.13.0+cpu"))])
    assert rc == 0 and "CPU wheel: no device code to verify" in capsys.readouterr().out


@census
def test_torch_claims_its_own_architectures(capsys):
    main(["check", "-q", "--no-config", "--format", "json", str(fetch("torch", "2.14.1"))])
    rep = json.loads(capsys.readouterr().out)
    claim = rep["targets"][0]["claim"]
    assert claim["source"] == "embedded in libtorch_cuda.so"
    assert claim["gpus"] == ["75", "80", "86", "90", "100", "120"]


@census
def test_torch_against_a_claim_that_adds_110_names_every_library_lacking_it(capsys):
    rc = main(
        [
            "check",
            "-q",
            "--no-config",
            "--format",
            "json",
            str(fetch("torch", "2.14.1")),
            "--arch",
            "7.5 8.0 8.6 9.0 10.0 11.0 12.0",
        ]
    )
    rep = json.loads(capsys.readouterr().out)
    assert rc == 1
    lacking = {
        f["subject"] for f in rep["targets"][0]["findings"] if f["code"] == "G001" and "110" in f["data"]["missing"]
    }
    device = {lib["path"] for lib in rep["targets"][0]["libraries"] if lib["carries"]}
    assert lacking == device and len(device) == 3


@pytest.mark.parametrize(
    "name,version",
    [
        ("nvidia-curand", "10.4.5.25"),
        pytest.param("nvidia-cublas", "13.1.1.3", marks=census),
        pytest.param("torch", "2.14.1", marks=census),
    ],
)
def test_per_kernel_inventory_is_complete(name, version):
    """Every compressed entry decoded to its declared size, every cubin's symbols read."""
    inv = inventory(str(fetch(name, version)), decode=True)
    for lib in inv.libraries:
        assert lib.problems == (), lib.path
        for e in lib.entries:
            if e.kind in (SASS, PTX):
                assert e.decoded and e.kernels is not None, (lib.path, e)


@needs_cuobjdump
@pytest.mark.parametrize(
    "name,version,member",
    [
        ("nvidia-curand", "10.4.0.35", "nvidia/cu13/lib/libcurand.so.10"),
        pytest.param("nvidia-cublas", "13.1.1.3", "nvidia/cu13/lib/libcublas.so.13", marks=census),
        pytest.param("torch", "2.14.1", "torch/lib/libtorch_cuda_linalg.so", marks=census),
    ],
)
def test_kernel_names_match_cuobjdump(tmp_path, name, version, member):
    wheel = fetch(name, version)
    inv = inventory(str(wheel), decode=True)
    lib = next(lib for lib in inv.libraries if lib.path == member)
    mine: dict[str, set[str]] = {}
    for c in lib.containers:
        if c.section != ".nv_fatbin":
            continue
        for e in c.entries:
            key = e.target if e.kind == SASS else e.target.replace("sm_", "compute_")
            mine.setdefault(key, set()).update(e.kernels or ())
    assert mine == oracle.kernel_names(extract_member(wheel, member, tmp_path))


@pytest.mark.parametrize(
    "name,version", [("nvidia-curand", "10.4.0.35"), pytest.param("torch", "2.14.1", marks=census)]
)
def test_streaming_and_extract_then_read_give_identical_reports(tmp_path, capsys, name, version):
    wheel = fetch(name, version)
    with zipfile.ZipFile(wheel) as z:  # every member: members are chosen by content, not name
        z.extractall(tmp_path / "tree")
    reports = []
    for target in (str(wheel), str(tmp_path / "tree")):
        main(["check", "-q", "--no-config", "--format", "json", "--detail", "containers", target])
        reports.append(json.loads(capsys.readouterr().out)["targets"][0]["libraries"])
    assert reports[0] == reports[1]


@census
def test_peak_memory_on_torch_stays_under_256_mb():
    """Measured by the operating system for a child process running the CLI."""
    wheel = fetch("torch", "2.14.1")
    code = (
        "import resource, subprocess, sys;"
        "subprocess.run([sys.executable, '-m', 'archaudit', 'check', '-q', '--no-config', sys.argv[1]],"
        " stdout=subprocess.DEVNULL);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(wheel)], capture_output=True, text=True, check=True)
    peak_kb = int(out.stdout.strip())
    assert peak_kb < 256 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"
