"""Self-check of the cuobjdump oracle (tests/oracle.py) on the CUDA fixtures.

These test the oracle and the committed fixtures against the layouts recorded
in the shared fatbin notes (section 6 table, section 3 compression table), not
archaudit. Skipped when cuobjdump is not available.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from pathlib import Path

import pytest

import oracle
from reference_tools import needs_tool

needs_cuobjdump = needs_tool("cuobjdump", oracle.find_cuobjdump())

F = oracle.fixture
AXPY = "_Z4axpyfPKfPfi"
MUL = "_Z3mulPKfS0_Pfi"
EXAMPLE_WHEEL = (
    Path(__file__).resolve().parents[1] / "src" / "archaudit" / "examples" / "gpu_example-1.0-py3-none-linux_x86_64.whl"
)


@needs_cuobjdump
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("lib_sm80.so", [("ELF", "sm_80")] * 2),  # dlink container doubles every SASS entry
        ("lib_ptx90.so", [("PTX", "sm_90")]),  # dlink container is empty
        ("lib_ptx90a.so", [("PTX", "sm_90a")]),
        ("lib_sm90a.so", [("ELF", "sm_90a")] * 2),
        ("lib_sm100a.so", [("ELF", "sm_100a")] * 2),
        ("lib_sm100f.so", [("ELF", "sm_100")] * 2),  # -lelf drops the f suffix
        ("lib_ptx100f.so", [("PTX", "sm_100f")]),  # ... but PTX keeps it
        ("lib_sm110.so", [("ELF", "sm_110")] * 2),
        ("lib_sm120a.so", [("ELF", "sm_120a")] * 2),
        ("lib_sm80_86.so", [("ELF", "sm_80"), ("ELF", "sm_86")] * 2),
        ("lib_rdc.so", [("ELF", "sm_80")]),  # only the device-linked cubin is loaded
        ("kern.fatbin", [("ELF", "sm_80"), ("PTX", "sm_90")]),
        ("kern_sm90a.cubin", [("ELF", "sm_90a")]),
        ("lto_b.o", []),  # LTO IR (kind 8) is never listed
        ("lib_host.so", []),  # rc 255: no device code
        ("kern_100f.ptx", []),  # rc 255 as well
    ],
)
def test_list_entries(name: str, expected: list[tuple[str, str]]) -> None:
    assert oracle.list_entries(F(name)) == expected


@needs_cuobjdump
def test_list_entries_all_sections_adds_relocatable_code() -> None:
    assert oracle.list_entries(F("lib_rdc.so"), all_sections=True) == [
        ("ELF", "sm_80"),  # .nv_fatbin: device-linked
        ("ELF", "sm_80"),
        ("PTX", "sm_90"),  # __nv_relfatbin: rdc_a.o
        ("ELF", "sm_80"),
        ("PTX", "sm_90"),  # __nv_relfatbin: rdc_b.o
    ]


@needs_cuobjdump
@pytest.mark.parametrize(
    ("name", "archs"),
    [
        ("lib_sm100f.so", ["sm_100f", "sm_100f"]),
        ("lib_sm103f.so", ["sm_103f", "sm_103f"]),
        ("lib_sm121f.so", ["sm_121f", "sm_121f"]),
        ("lib_sm90a.so", ["sm_90a", "sm_90a"]),
        ("lib_sm100a_ptx.so", ["sm_100a", "sm_100a", "sm_100a"]),
    ],
)
def test_dump_keeps_suffixes(name: str, archs: list[str]) -> None:
    assert [e["arch"] for e in oracle.dump_entries(F(name))] == archs


@needs_cuobjdump
def test_dump_ptx100f() -> None:
    assert oracle.dump_entries(F("lib_ptx100f.so")) == [
        {
            "kind": "ptx",
            "arch": "sm_100f",
            "code_version": (9, 0),
            "compressed": True,
            "identifier": None,
            "debug": False,
        }
    ]


@needs_cuobjdump
def test_dump_debug_identifiers() -> None:
    entries = oracle.dump_entries(F("lib_debug.so"))
    assert [(e["identifier"], e["debug"], e["compressed"]) for e in entries] == [
        ("kern.cu ", True, True),  # the dlink entry keeps a trailing space
        ("kern.cu", True, True),
    ]
    assert all(e["code_version"] == (1, 8) for e in entries)


@needs_cuobjdump
def test_dump_lto_object_is_nvvm() -> None:
    assert [(e["kind"], e["arch"], e["code_version"]) for e in oracle.dump_entries(F("lto_b.o"))] == [
        ("nvvm", "sm_80", (1, 65))
    ]


@needs_cuobjdump
def test_dump_host_only_is_empty() -> None:
    assert oracle.dump_entries(F("lib_host.so")) == []
    assert oracle.kernel_names(F("lib_host.so")) == {}


@needs_cuobjdump
@pytest.mark.parametrize(
    ("mode", "elf_compressed", "ptx_compressed"),
    [
        ("unset", False, True),
        ("default", False, True),
        ("balance", False, True),
        ("size", True, True),
        ("speed", False, True),
        ("none", False, False),
        ("nocompress", False, False),
        ("all", True, True),
        ("size_all", True, True),
        ("speed_all", True, True),
    ],
)
def test_compression_matrix(mode: str, elf_compressed: bool, ptx_compressed: bool) -> None:
    entries = oracle.dump_entries(F(f"lib_cmp_{mode}.so"))
    assert [e["kind"] for e in entries] == ["elf", "elf", "ptx"]
    assert [e["compressed"] for e in entries] == [elf_compressed, elf_compressed, ptx_compressed]


@needs_cuobjdump
def test_missing_file_raises() -> None:
    with pytest.raises(oracle.CuobjdumpError) as info:
        oracle.list_entries(F("does-not-exist.so"))
    assert info.value.returncode == 1


@needs_cuobjdump
def test_kernel_names_multiobj_union_overstates() -> None:
    # Library-level union: sm_80, sm_90, PTX 90; but `mul` only has sm_80.
    assert oracle.kernel_names(F("lib_multiobj.so")) == {
        "sm_75": set(),  # kernel-less dlink cubin for nvlink's default arch
        "sm_80": {AXPY, MUL},
        "sm_90": {AXPY},
        "compute_90": {AXPY},
    }


@needs_cuobjdump
def test_kernel_names_many_mangled() -> None:
    names = {"_Z4fillPffi", "add_c", "_Z5scaleIfEvPT_S0_i", "_Z5scaleIdEvPT_S0_i"}
    assert oracle.kernel_names(F("lib_many.so")) == {"sm_80": names, "sm_90": names}


@needs_cuobjdump
def test_kernel_names_specialised_and_bare_cubin() -> None:
    assert oracle.kernel_names(F("lib_hopper_only.so")) == {"sm_90a": {"_Z11hopper_onlyPfi"}}
    assert oracle.kernel_names(F("lib_mixed_specialised.so"))["sm_90a"] == {"_Z11hopper_onlyPfi"}
    assert oracle.kernel_names(F("kern_sm90a.cubin")) == {"sm_90a": {AXPY}}


@needs_cuobjdump
def test_kernel_names_rdc_excludes_device_functions() -> None:
    # _Z5scalef is a plain __device__ function: FUNC but not ENTRY.
    assert oracle.kernel_names(F("lib_rdc.so")) == {"sm_80": {"_Z5applyPfi"}}
    assert oracle.kernel_names(F("lib_rdc.so"), all_sections=True) == {
        "sm_80": {"_Z5applyPfi"},
        "compute_90": {"_Z5applyPfi"},
    }


@needs_cuobjdump
def test_example_wheel_libraries(tmp_path: Path) -> None:
    with zipfile.ZipFile(EXAMPLE_WHEEL) as zf:
        zf.extractall(tmp_path)
    lib = tmp_path / "gpu_example"
    assert set(oracle.list_entries(lib / "libkernels.so")) == {("ELF", "sm_80"), ("ELF", "sm_90"), ("PTX", "sm_90")}
    assert set(oracle.list_entries(lib / "libshim.so")) == {("ELF", "sm_80")}


def test_example_wheel_record_is_valid() -> None:
    with zipfile.ZipFile(EXAMPLE_WHEEL) as zf:
        names = zf.namelist()
        record = zf.read("gpu_example-1.0.dist-info/RECORD").decode()
        rows = list(csv.reader(io.StringIO(record)))
        assert sorted(r[0] for r in rows) == sorted(names)
        for name, digest, size in rows:
            if name.endswith("/RECORD"):
                assert (digest, size) == ("", "")
                continue
            data = zf.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expected}"
            assert int(size) == len(data)
    assert {n.split("/", 1)[1] for n in names if n.startswith("gpu_example/")} == {
        "__init__.py",
        "libkernels.so",
        "libshim.so",
    }
