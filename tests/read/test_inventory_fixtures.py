"""archaudit's own fatbin reader against cuobjdump, entry by entry, on nvcc-built fixtures."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import oracle
from archaudit.model import DEVICE_LINK, EXECUTABLE, LTO, PTX, RELOCATABLE, SASS, STANDALONE
from archaudit.read.library import scan_file
from reference_tools import needs_tool

BIN = oracle.FIXTURES
ELF_LIKE = sorted(p.name for p in BIN.iterdir() if p.suffix in (".so", ".o", ".fatbin"))
CUBINS = sorted(p.name for p in BIN.glob("*.cubin"))
PTXS = sorted(p.name for p in BIN.glob("*.ptx"))
# Fixtures built to fail closed, with the finding each must give (cuobjdump lists none of their
# entries either): a fatbin container inside a bare zstd frame (tests/read/test_zstd_frames.py).
FAILS_CLOSED = {"lib_zstd_fatbin.so": ["E011"]}

needs_cuobjdump = needs_tool("cuobjdump", oracle.find_cuobjdump())


def _walk(lib, all_sections: bool):
    """Entries in the order cuobjdump walks them: .nv_fatbin if present, else __nv_relfatbin;
    with -all, every fatbin section in file order."""
    executable = [c for c in lib.containers if c.role in (EXECUTABLE, DEVICE_LINK, STANDALONE)]
    reloc = [c for c in lib.containers if c.role == RELOCATABLE]
    if all_sections:
        chosen = sorted(executable + reloc, key=lambda c: c.offset)
    else:
        chosen = executable or reloc
    return [e for c in chosen for e in c.entries]


def _as_listed(e) -> tuple[str, str]:
    target = e.target
    if e.kind == SASS:
        target = target.rstrip("f") if target.endswith("f") else target  # -lelf drops the family suffix
        return "ELF", target
    return "PTX", target


@needs_cuobjdump
@pytest.mark.parametrize("name", ELF_LIKE)
@pytest.mark.parametrize("all_sections", [False, True], ids=["default", "all"])
def test_listing_matches_cuobjdump(name, all_sections):
    path = BIN / name
    lib = scan_file(str(path))
    assert [p.code for p in lib.problems] == FAILS_CLOSED.get(name, [])
    mine = [_as_listed(e) for e in _walk(lib, all_sections) if e.kind != LTO]
    assert mine == oracle.list_entries(path, all_sections=all_sections)


@needs_cuobjdump
@pytest.mark.parametrize("name", ELF_LIKE)
def test_entry_fields_match_cuobjdump_dump(name):
    """Kind, target with a/f, code version, compression, identifier and debug flag."""
    path = BIN / name
    lib = scan_file(str(path))
    mine = [
        {
            "kind": {SASS: "elf", PTX: "ptx", LTO: "nvvm"}[e.kind],
            "arch": e.target,
            "code_version": e.code_version,
            "compressed": e.compression != "none",
            "identifier": e.identifier or None,
            "debug": e.debug,
        }
        for e in _walk(lib, all_sections=True)
    ]
    theirs = oracle.dump_entries(path, all_sections=True)
    for t in theirs:
        t["identifier"] = t["identifier"].strip() if t["identifier"] else None
        t["code_version"] = tuple(t["code_version"])
    assert mine == theirs


@needs_cuobjdump
@pytest.mark.parametrize("name", CUBINS)
def test_bare_cubin_target_matches_cuobjdump(name):
    lib = scan_file(str(BIN / name))
    assert lib.format == "cubin" and lib.problems == ()
    (entry,) = lib.entries
    assert [_as_listed(entry)] == oracle.list_entries(BIN / name)


@pytest.mark.parametrize("name", PTXS)
def test_bare_ptx_target_is_the_one_nvcc_was_asked_for(name):
    """cuobjdump does not read bare .ptx (exit 255); build.sh names each file after its
    -arch=compute_XX, which is the ground truth here."""
    lib = scan_file(str(BIN / name))
    (entry,) = lib.entries
    m = re.fullmatch(r"kern_(\d+[af]?)\.ptx", name)
    assert m is not None
    asked = m.group(1)
    assert entry.kind == PTX and entry.target == f"sm_{asked}"
    assert entry.kernels == ("_Z4axpyfPKfPfi",)


@needs_cuobjdump
@pytest.mark.parametrize("name", [n for n in ELF_LIKE if n.endswith(".so")])
def test_kernel_names_match_cuobjdump_symbols(name):
    path = BIN / name
    lib = scan_file(str(path), decode=True)
    mine: dict[str, set[str]] = {}
    for e in _walk(lib, all_sections=False):
        if e.kind == LTO:
            continue
        assert e.decoded, e
        key = e.target if e.kind == SASS else e.target.replace("sm_", "compute_")
        mine.setdefault(key, set()).update(e.kernels)
    assert mine == oracle.kernel_names(path)


def test_device_link_container_is_recognised():
    """Every nvcc link adds a device-link container (wrapper version 2), listed first."""
    lib = scan_file(str(BIN / "lib_multiobj.so"), decode=True)
    roles = [c.role for c in lib.containers]
    assert roles[0] == DEVICE_LINK and roles.count(DEVICE_LINK) == 1
    dlink = lib.containers[0]
    assert all(e.kernels == () for e in dlink.entries)  # kernel-less dlink cubins
    tus = [c for c in lib.containers if c.role == EXECUTABLE]
    assert len(tus) == 2


def test_relocatable_code_is_listed_but_separate():
    lib = scan_file(str(BIN / "lib_rdc.so"))
    reloc = [e for c in lib.containers if c.role == RELOCATABLE for e in c.entries]
    assert {(e.kind, e.target) for e in reloc} == {(SASS, "sm_80"), (PTX, "sm_90")}
    assert all(c.section == "__nv_relfatbin" for c in lib.containers if c.role == RELOCATABLE)


def test_host_only_library_has_no_device_code():
    lib = scan_file(str(BIN / "lib_host.so"))
    assert lib.problems == () and lib.containers == () and not lib.has_device_code
    assert not lib.links_gpu_runtime


def _readelf_needed(path) -> list[str]:
    out = subprocess.run(["readelf", "-dW", str(path)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.*?)\]", out)


@needs_tool("binutils readelf", shutil.which("readelf"))
@pytest.mark.parametrize("name", [n for n in ELF_LIKE if n.endswith(".so")])
def test_needed_libraries_match_readelf(name):
    lib = scan_file(str(BIN / name))
    assert list(lib.needed) == _readelf_needed(BIN / name)
    assert lib.links_gpu_runtime == any(n.startswith("libcudart") for n in lib.needed)


@pytest.mark.parametrize("name", [n for n in ELF_LIKE if n.startswith("lib_cmp_")])
def test_every_compressed_payload_decodes_to_its_declared_size(name):
    lib = scan_file(str(BIN / name), decode=True)
    assert lib.problems == ()
    for e in lib.entries:
        assert e.decoded and e.size > 0
    assert {e.compression for e in lib.entries} <= {"none", "zstd", "lz4"}


def test_compression_modes_are_told_apart():
    modes = {
        n: {e.compression for e in scan_file(str(BIN / f"lib_cmp_{n}.so")).entries}
        for n in ("speed_all", "size_all", "none")
    }
    assert modes == {"speed_all": {"lz4"}, "size_all": {"zstd"}, "none": {"none"}}
