"""Whole cubins outside any fatbin container: a host library that carries nvcc -cubin output in its
read-only data and loads it itself (cuModuleLoadData). gcc-built fixtures (build_embedded.sh)."""

from __future__ import annotations

import json
import struct

import pytest

import oracle
from archaudit.cli import main
from archaudit.model import CUBIN, SASS
from archaudit.read import elf
from archaudit.read.library import library_from_bytes, scan_file
from reference_tools import needs_tool

BIN = oracle.FIXTURES
needs_cuobjdump = needs_tool("cuobjdump", oracle.find_cuobjdump())


def _check(capsys, path: str, *args: str) -> tuple[int, dict]:
    rc = main(["check", "-q", "--format", "json", "--no-config", path, *args])
    return rc, json.loads(capsys.readouterr().out)


def _codes(report: dict) -> list[str]:
    return [f["code"] for t in report["targets"] for f in t["findings"]]


def _cubin_at(data: bytes) -> int:
    """Offset of the embedded cubin (an ELF whose e_machine is EM_CUDA) in a host library."""
    at = data.find(b"\x7fELF", 1)
    while at >= 0 and struct.unpack_from("<H", data, at + 18)[0] != elf.EM_CUDA:
        at = data.find(b"\x7fELF", at + 1)
    assert at > 0
    return at


def test_a_cubin_in_rodata_is_a_module_of_its_own():
    lib = scan_file(str(BIN / "lib_embedded_cubin_sm80.so"))
    assert not lib.problems
    (c,) = lib.containers
    standalone = (BIN / "lib_embedded_cubin_sm80.so").read_bytes()
    assert (c.role, c.section, c.offset) == (CUBIN, ".rodata", _cubin_at(standalone))
    (e,) = c.entries
    assert (e.kind, e.target, e.kernels, e.offset) == (SASS, "sm_80", ("_Z4axpyfPKfPfi",), c.offset)
    assert e.toolkit is not None and e.decoded and not e.unresolved


@needs_cuobjdump
def test_cuobjdump_lists_no_entry_of_a_library_whose_only_code_is_an_embedded_cubin():
    """cuobjdump reads fatbin sections only: the difference docs/fail-closed.md explains."""
    assert oracle.list_entries(BIN / "lib_embedded_cubin_sm80.so", all_sections=True) == []


@needs_cuobjdump
def test_a_cubin_inside_a_fatbin_container_is_not_counted_twice():
    """An uncompressed sm_80 cubin inside .nv_fatbin (cuobjdump lists it) beside an sm_90 cubin in
    .rodata: the container's cubin is its entry only, the .rodata one a module of its own."""
    lib = scan_file(str(BIN / "lib_fatbin80_embedded90.so"))
    assert not lib.problems
    cubins = [c for c in lib.containers if c.role == CUBIN]
    assert [(c.section, c.entries[0].target) for c in cubins] == [(".rodata", "sm_90")]
    in_fatbin = [("ELF", e.target) for c in lib.containers if c.role != CUBIN for e in c.entries if e.kind == SASS]
    assert sorted(in_fatbin) == sorted(
        x for x in oracle.list_entries(BIN / "lib_fatbin80_embedded90.so") if x[0] == "ELF"
    )
    assert all(e.compression == "none" for c in lib.containers for e in c.entries)


def test_an_embedded_cubin_runs_on_its_own_sass_range_only(capsys):
    """sm_80 SASS runs on 8.0 and 8.6 (same major, not older), never on 9.0."""
    path = str(BIN / "lib_embedded_cubin_sm80.so")
    rc, rep = _check(capsys, path, "--arch", "80;86")
    assert rc == 0
    rc, rep = _check(capsys, path, "--arch", "80;90")
    assert rc == 1 and _codes(rep).count("G001") == 1
    (g,) = [f for t in rep["targets"] for f in t["findings"] if f["code"] == "G001"]
    assert g["data"]["missing"] == ["90"] and g["data"]["carried"] == ["sm_80"]


def test_each_embedded_cubin_is_judged_on_its_own(capsys):
    """axpy only for sm_80, layernorm_kernel only for sm_90: the union covers 80;90, each kernel fails."""
    rc, rep = _check(capsys, str(BIN / "lib_embedded_two_cubins.so"), "--arch", "80;90")
    assert rc == 1 and _codes(rep).count("K001") == 2


def test_detail_containers_shows_the_embedded_cubin(capsys):
    rc = main(
        ["check", "--no-config", "--detail", "containers", "--arch", "80", str(BIN / "lib_embedded_cubin_sm80.so")]
    )
    text = capsys.readouterr().out
    assert rc == 0
    assert "1 whole cubin outside any container, loaded by the library itself, in .rodata: sm_80" in text


def _damaged(mutate) -> bytes:
    data = bytearray((BIN / "lib_embedded_cubin_sm80.so").read_bytes())
    mutate(data, _cubin_at(bytes(data)))
    return bytes(data)


@pytest.mark.parametrize(
    "what, mutate",
    [
        ("section table past the file", lambda d, at: struct.pack_into("<Q", d, at + 40, len(d))),
        ("no section table", lambda d, at: struct.pack_into("<H", d, at + 60, 0)),
        ("no CUDA architecture", lambda d, at: struct.pack_into("<I", d, at + 48, 0)),
    ],
)
def test_a_damaged_embedded_cubin_fails_closed(what, mutate):
    lib = library_from_bytes("lib.so", _damaged(mutate))
    assert [p.code for p in lib.problems] == ["E014"], what
    assert not [c for c in lib.containers if c.role == CUBIN]


def test_a_cubin_after_the_end_of_the_elf_lies_in_no_section():
    cubin = (BIN / "kern_sm80.cubin").read_bytes()
    host = (BIN / "lib_host.so").read_bytes()
    lib = library_from_bytes("lib.so", host + b"\0" * (-len(host) % 64) + cubin)
    assert [c.role for c in lib.containers] == [CUBIN]
    assert [p.code for p in lib.problems] == ["E014"] and "lies in no section" in lib.problems[0].message


def test_the_library_itself_is_not_an_embedded_cubin():
    """The host ELF's own header (e_machine x86-64) matches the magic and is passed over."""
    lib = scan_file(str(BIN / "lib_host.so"))
    assert not lib.containers and not lib.problems


def test_one_kernel_in_whole_cubins_for_each_architecture_is_the_librarys_choice(capsys):
    """axpy in an sm_80 and an sm_90 whole cubin: nothing binds a launch to either (the library
    loads the image it picks, and only the one whose SASS runs there loads): K003 "chosen", exit 0."""
    rc, rep = _check(capsys, str(BIN / "lib_embedded_axpy_80_90.so"), "--arch", "80;90")
    k003 = [f for t in rep["targets"] for f in t["findings"] if f["code"] == "K003"]
    assert rc == 0 and {f["data"]["reason"] for f in k003} == {"chosen"} and len(k003) == 2
    assert not {"K001", "K004"} & set(_codes(rep))


def test_the_choice_holds_between_whole_cubins_only(capsys):
    """Just outside it: the sm_90 code of axpy in a whole cubin, its sm_80 code in a fatbin container
    the runtime registers (whose host stub launches from that container): K004 stays."""
    rc, rep = _check(capsys, str(BIN / "lib_fatbin80_embedded90.so"), "--arch", "80;90")
    assert rc == 1 and "K004" in _codes(rep) and "K003" not in _codes(rep)


@pytest.mark.slow
def test_cupti_carries_its_tool_kernels_as_whole_cubins(capsys):
    """nvidia-cuda-cupti-cu12 12.9.79: 115 whole cubins outside any container (libcupti.so.12 71,
    libnvperf_host.so and libnvperf_target.so 20 each, libcheckpoint.so 4), none damaged; its tool
    kernels come one cubin per architecture, so a claim of 75;80;90;100;120 passes, never K004: the
    library loads the image it picks, and it is CUPTI, identified by its bytes, whose per-kernel
    gaps inside the range its release documents are its dispatch (K005)."""
    from archaudit.read.artifacts import inventory
    from wheels import fetch

    wheel = str(fetch("nvidia-cuda-cupti-cu12", "12.9.79"))
    inv = inventory(wheel, decode=False)
    count = {lib.path.rsplit("/", 1)[-1]: sum(c.role == CUBIN for c in lib.containers) for lib in inv.libraries}
    assert {k: v for k, v in count.items() if v} == {
        "libcupti.so.12": 71,
        "libnvperf_host.so": 20,
        "libnvperf_target.so": 20,
        "libcheckpoint.so": 4,
    }
    assert not [p for lib in inv.libraries for p in lib.problems if "cubin at" in p.message]
    rc, rep = _check(capsys, wheel, "--arch", "75;80;90;100;120")
    assert rc == 0 and "K004" not in _codes(rep) and "K005" in _codes(rep)
