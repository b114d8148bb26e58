"""Reader facts on the real wheels where they were found wrong: CUDA 12.x `a` cubins marked in
e_flags (cuDNN, Transformer Engine, cuDF), aarch64 containers aligned to 256 bytes (cuRAND),
PTX whose text targets sm_90a under a compute_90 header (TensorFlow), checked against
cuobjdump where it reads the library."""

from __future__ import annotations

import pytest

import oracle
from archaudit.model import PTX, SASS
from archaudit.read.artifacts import inventory
from wheels import extract_member, fetch

pytestmark = pytest.mark.slow
census = pytest.mark.census  # wheels over wheels.TIER_BYTES: the census tier (README "Tests")
needs_cuobjdump = pytest.mark.skipif(oracle.find_cuobjdump() is None, reason="cuobjdump not installed")


def _listed(e) -> tuple[str, str]:
    if e.kind == SASS:
        return "ELF", e.target[:-1] if e.target.endswith("f") else e.target
    return "PTX", e.target


@needs_cuobjdump
def test_aarch64_curand_containers_aligned_to_256_bytes(tmp_path):
    """nvidia-curand 10.4.0.35 for aarch64 aligns each .nv_fatbin container to 256 bytes."""
    wheel = fetch("nvidia-curand", "10.4.0.35", "manylinux_2_27_aarch64")
    inv = inventory(str(wheel))
    (lib,) = [lib for lib in inv.libraries if lib.has_device_code]
    assert lib.problems == ()
    nv = [c for c in lib.containers if c.section == ".nv_fatbin"]
    gaps = [b.offset - (a.offset + a.size) for a, b in zip(nv, nv[1:])]
    assert max(gaps) >= 8 and all(g < 256 for g in gaps)  # padding the x86_64 build does not have
    path = extract_member(wheel, lib.path, tmp_path)
    assert [_listed(e) for c in nv for e in c.entries] == oracle.list_entries(path)


@pytest.mark.parametrize(
    "name,version,member",
    [
        ("xformers", "0.0.35", None),  # 3 MB: xformers/_C.so links libcudart.so.12, 11 sm_90a cubins
        pytest.param("nvidia-cudnn-cu12", "9.28.0.42", "nvidia/cudnn/lib/libcudnn_cnn.so.9", marks=census),
        pytest.param("transformer-engine-cu12", "2.20.2", None, marks=census),
        pytest.param("libcudf-cu12", "26.10.2", None, marks=census),
    ],
)
def test_cuda12_a_cubins_are_a_targets(name, version, member):
    """CUDA 12.x marks sm_90a/sm_100a cubins in e_flags only: decoded, they agree with their
    entry headers (no E014), and every `a` entry header decodes to an `a` cubin."""
    inv = inventory(str(fetch(name, version)))
    assert not [p for lib in inv.libraries for p in lib.problems if p.code == "E014"]
    a_cubins = [e for lib in inv.libraries for e in lib.entries if e.kind == SASS and e.target.endswith("a")]
    assert a_cubins and all(e.decoded for e in a_cubins)
    if member:
        lib = next(lib for lib in inv.libraries if lib.path == member)
        targets = {e.target for e in lib.entries if e.kind == SASS}
        assert {"sm_75", "sm_80", "sm_86", "sm_90a", "sm_100f", "sm_120f"} <= targets
        assert "sm_120f" in {e.target for e in lib.entries if e.kind == PTX}


@census
def test_tensorflow_ptx_says_sm_90a_under_a_compute_90_header():
    """tensorflow 2.20.0: PTX entries whose header says compute_90 while their text says
    `.target sm_90a` (what the JIT obeys); recorded in Entry.ptx_target for the rules."""
    inv = inventory(str(fetch("tensorflow", "2.20.0")))
    lib = next(lib for lib in inv.libraries if lib.path.endswith("libtensorflow_cc.so.2"))
    assert not [p for p in lib.problems if p.code == "E014"]
    relabelled = [
        c
        for c in lib.containers
        if any(e.kind == PTX and e.target == "sm_90" and e.ptx_target == "sm_90a" for e in c.entries)
    ]
    assert len(relabelled) == 1149
    assert {c.section for c in relabelled} == {".rodata"}
