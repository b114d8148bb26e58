"""Windows (PE) and macOS (Mach-O) libraries: read in place and judged like ELF.

The fixtures in tests/fixtures/pe/bin carry, byte for byte, the containers nvcc built for
tests/fixtures/cuda/bin (and clang for tests/fixtures/amd/bin), placed where MSVC-style and
MinGW builds place them (build.sh). So each PE library must inventory exactly like its ELF
source; imports and sections are checked against binutils' and LLVM's own readers.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zipfile
from dataclasses import fields
from pathlib import Path

import pytest

from archaudit.cli import main
from archaudit.findings import Code
from archaudit.model import Entry, Library, Problem
from archaudit.read import pe
from archaudit.read.library import library_from_bytes, scan_file
from reference_tools import missing_tool

ROOT = Path(__file__).resolve().parents[1]
PE = ROOT / "fixtures" / "pe" / "bin"
CUDA = ROOT / "fixtures" / "cuda" / "bin"
AMD = ROOT / "fixtures" / "amd" / "bin"

# PE fixture -> the ELF library whose device code it carries
SOURCES = {
    "sm80.dll": CUDA / "lib_sm80.so",
    "multi.dll": CUDA / "lib_multi.so",
    "rdc.dll": CUDA / "lib_rdc.so",
    "sm90a_ext.pyd": CUDA / "lib_sm90a.so",
    "ptx100f.dll": CUDA / "lib_ptx100f.so",
    "hip_multi.dll": AMD / "hip_multi.so",
    "longnames.dll": CUDA / "lib_multi.so",
    "embedded.dll": CUDA / "lib_sm80.so",
    "sm80_msvc.dll": CUDA / "lib_sm80.so",
    "sm80_arm64.dll": CUDA / "lib_sm80.so",
}
PE_NAMES = {".nv_fatbin": ".nv_fatb", "__nv_relfatbin": "__nv_rel", ".hip_fatbin": ".hip_fat"}


def _entry(e: Entry) -> tuple:
    """Everything an entry says except where it lies in its file."""
    return tuple(getattr(e, f.name) for f in fields(Entry) if f.name != "offset")


def _inventory(lib: Library) -> list[tuple]:
    return [(c.vendor, c.role, tuple(_entry(e) for e in c.entries)) for c in lib.containers]


@pytest.mark.parametrize("decode", [False, True], ids=["headers", "decode"])
@pytest.mark.parametrize("name", sorted(SOURCES))
def test_dll_inventories_like_the_elf_library_it_came_from(name, decode):
    dll, so = scan_file(str(PE / name), decode=decode), scan_file(str(SOURCES[name]), decode=decode)
    assert dll.format == "pe" and not dll.problems and not so.problems
    if name == "embedded.dll":  # placed in .rdata: the runtime's registration is not known there
        assert {c.role for c in dll.containers} == {"embedded"}
        assert [tuple(map(_entry, c.entries)) for c in dll.containers] == [
            tuple(map(_entry, c.entries)) for c in so.containers
        ]
        return
    assert _inventory(dll) == _inventory(so)
    if name == "longnames.dll":  # MinGW's long names, read from the COFF string table
        assert [c.section for c in dll.containers] == [c.section for c in so.containers]
    else:  # cut to 8 characters, as MSVC and lld-link write them
        assert [c.section for c in dll.containers] == [PE_NAMES[c.section] for c in so.containers]


def test_device_link_container_is_known_from_its_wrapper_record():
    """nvlink's container is registered through a version-2 wrapper in .nvFatBi."""
    lib = scan_file(str(PE / "sm80.dll"))
    assert [c.role for c in lib.containers] == ["device-link", "executable"]
    rdc = scan_file(str(PE / "rdc.dll"))
    assert [c.role for c in rdc.containers] == ["device-link", "relocatable", "relocatable"]


def _objdump_imports(path: Path) -> list[str] | None:
    tool = shutil.which("x86_64-w64-mingw32-objdump") or shutil.which("objdump")
    if tool is None:
        return None
    out = subprocess.run([tool, "-p", str(path)], capture_output=True, text=True).stdout
    if "file format pei-x86-64" not in out:
        return None
    return re.findall(r"DLL Name: (\S+)", out)


def _readobj_imports(path: Path) -> list[str] | None:
    tool = shutil.which("llvm-readobj-19") or shutil.which("llvm-readobj")
    if tool is None:
        return None
    out = subprocess.run([tool, "--coff-imports", str(path)], capture_output=True, text=True).stdout
    return re.findall(r"^\s*Name: (\S+\.dll)", out, re.M) or None


@pytest.mark.parametrize("name", sorted(p.name for p in PE.glob("*.dll")) + ["sm90a_ext.pyd"])
def test_imports_are_what_binutils_and_llvm_list(name):
    """Imported and delay-loaded DLLs, in directory order: the DLL counterpart of NEEDED."""
    lib = scan_file(str(PE / name))
    reference = _readobj_imports(PE / name) or _objdump_imports(PE / name)
    if reference is None:
        missing_tool("llvm-readobj or objdump", "none that reads PE is installed")
    assert list(lib.needed) == reference


def test_delay_loaded_driver_and_arm64():
    """lld-link's DLLs delay-load nvcuda.dll, as CUDA libraries do; one is for Windows on Arm."""
    for name, machine in (("sm80_msvc.dll", 0x8664), ("sm80_arm64.dll", 0xAA64)):
        data = (PE / name).read_bytes()
        h = pe.parse_headers(data[:4096], len(data))
        assert h.machine == machine and h.optional_magic == pe.PE32_PLUS
        assert h.directory(pe.DIR_DELAY_IMPORT)[0]
        assert scan_file(str(PE / name)).needed == ("cudart64_13.dll", "nvcuda.dll")


def test_a_dll_linking_the_cuda_runtime_without_device_code_is_a_gpu_library(capsys):
    lib = scan_file(str(PE / "host.dll"))
    assert lib.format == "pe" and not lib.containers and lib.links_gpu_runtime
    rc = main(["check", "-q", "--no-config", "--format", "json", str(PE / "host.dll"), "--arch", "80"])
    codes = [f["code"] for t in json.loads(capsys.readouterr().out)["targets"] for f in t["findings"]]
    assert rc == 1 and "G006" in codes


@pytest.mark.parametrize(
    "name,elf",
    [
        ("sm80.dll", "lib_sm80.so"),
        ("multi.dll", "lib_multi.so"),
        ("sm90a_ext.pyd", "lib_sm90a.so"),
        ("rdc.dll", "lib_rdc.so"),
    ],
)
def test_check_judges_a_dll_as_it_judges_the_elf_library(capsys, name, elf):
    """Same exit code and the same findings (codes, per library) under the same claim."""

    def run(path: Path) -> tuple[int, list[str]]:
        rc = main(["check", "-q", "--no-config", "--format", "json", str(path), "--arch", "80;90;100"])
        report = json.loads(capsys.readouterr().out)
        return rc, sorted(f["code"] for t in report["targets"] for f in t["findings"])

    assert run(PE / name) == run(CUDA / elf)


def test_a_wheel_of_dlls_is_read_in_place(tmp_path, capsys):
    whl = tmp_path / "kernels-1.0-cp312-cp312-win_amd64.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("demo-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")  # a wheel: pip installs none without
        z.write(PE / "sm80.dll", "kernels/sm80.dll")
        z.write(PE / "sm90a_ext.pyd", "kernels/_ext.cp312-win_amd64.pyd")
    rc = main(["check", "-q", "--no-config", "--format", "json", str(whl), "--arch", "80"])
    report = json.loads(capsys.readouterr().out)
    libs = {lib["path"]: lib for t in report["targets"] for lib in t["libraries"]}
    assert set(libs) == {"kernels/sm80.dll", "kernels/_ext.cp312-win_amd64.pyd"}
    assert all(lib["format"] == "pe" for lib in libs.values())
    # the .pyd carries only sm_90a code: it fails the claimed 8.0 (G001; G005 says it is specialised)
    errors = [(f["code"], f["subject"]) for t in report["targets"] for f in t["findings"] if f["severity"] == "error"]
    assert rc == 1 and errors == [("G001", "kernels/_ext.cp312-win_amd64.pyd")], report


# ---- malformed PE: E021, never a pass, never a traceback ----


def _put(data: bytes, at: int | None, fmt: str, *values: int | bytes) -> bytes:
    assert at is not None
    out = bytearray(data)
    struct.pack_into(fmt, out, at, *values)
    return bytes(out)


def _header_offsets(data: bytes) -> tuple[int, int, int]:
    """(COFF header, optional header, section table) offsets."""
    lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    opt_size = struct.unpack_from("<H", data, lfanew + 20)[0]
    return lfanew + 4, lfanew + 24, lfanew + 24 + opt_size


def _section_index(data: bytes, name: bytes) -> int:
    coff, _, table = _header_offsets(data)
    count = struct.unpack_from("<H", data, coff + 2)[0]
    return next(i for i in range(count) if data[table + 40 * i : table + 40 * i + 8].rstrip(b"\0") == name)


def _malformed(kind: str) -> bytes:
    data = (PE / "sm80.dll").read_bytes()
    coff, opt, table = _header_offsets(data)
    if kind == "ms-dos program":
        return _put(data, struct.unpack_from("<I", data, 0x3C)[0], "<4s", b"NE\0\0")
    if kind == "header offset past the end":
        return _put(data, 0x3C, "<I", len(data) + 16)
    if kind == "only a DOS header":
        return b"MZ\x90\x00" + bytes(60)
    if kind == "optional header magic":
        return _put(data, opt, "<H", 0x107)
    if kind == "section table past the headers":
        return _put(data, coff + 2, "<H", 0xFFFF)
    if kind == "section data past the end":
        i = _section_index(data, b".nv_fatb")
        return _put(data, table + 40 * i + 16, "<I", len(data))
    if kind == "truncated inside a section":
        return data[: len(data) - 600]
    if kind == "import directory in no section":
        return _put(data, opt + 112 + 8, "<I", 0x7FFF0000)
    if kind == "import directory lists no DLL":
        rva = struct.unpack_from("<I", data, opt + 112 + 8)[0]
        at = pe.parse_headers(data[:4096], len(data)).rva_to_offset(rva)
        return _put(data, at, "<20s", bytes(20))
    if kind == "long name outside the string table":
        long = (PE / "longnames.dll").read_bytes()
        _, _, ltable = _header_offsets(long)
        i = next(i for i in range(20) if long[ltable + 40 * i] == ord("/"))
        return _put(long, ltable + 40 * i, "<8s", b"/9999999")
    raise AssertionError(kind)


MALFORMED = [
    "ms-dos program",
    "header offset past the end",
    "only a DOS header",
    "optional header magic",
    "section table past the headers",
    "section data past the end",
    "truncated inside a section",
    "import directory in no section",
    "import directory lists no DLL",
    "long name outside the string table",
]


@pytest.mark.parametrize("kind", MALFORMED)
def test_malformed_pe_is_e021(kind, tmp_path, capsys):
    path = tmp_path / "bad.pyd"
    path.write_bytes(_malformed(kind))
    rc = main(["check", "-q", "--no-config", "--format", "json", str(path), "--arch", "80"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    codes = [f["code"] for t in json.loads(captured.out)["targets"] for f in t["findings"]]
    assert rc == 1 and "E021" in codes, codes


def test_a_32_bit_pe_is_read_by_its_own_layout(tmp_path, capsys):
    """PE32 puts its data directories 16 bytes earlier than PE32+; its section table is where
    every PE's is. A 32-bit DLL (nvidia-cuda-runtime-cu11's cudart32_110.dll) is read, not E020."""
    data = (PE / "sm80.dll").read_bytes()
    path = tmp_path / "x86.dll"
    path.write_bytes(_put(data, _header_offsets(data)[1], "<H", pe.PE32))
    rc = main(["check", "-q", "--no-config", "--format", "json", str(path), "--arch", "80"])
    captured = capsys.readouterr()
    codes = [f["code"] for t in json.loads(captured.out)["targets"] for f in t["findings"]]
    assert "Traceback" not in captured.err and "E020" not in codes and rc in (0, 1)


def test_damaged_device_code_in_a_dll_is_judged_like_elf():
    """A damaged container magic in .nv_fatb leaves bytes unaccounted for; a wrapper in
    .nvFatBi then registers nothing: both E011, as in ELF."""
    data = bytearray((PE / "sm80.dll").read_bytes())
    at = data.find(b"\x50\xed\x55\xba", data.find(b"\x50\xed\x55\xba") + 1)
    data[at] ^= 0xFF
    lib = library_from_bytes("bad.dll", bytes(data))
    messages = [p.message for p in lib.problems if p.code == "E011"]
    assert any(".nv_fatb:" in m for m in messages) and any("wrapper" in m for m in messages)
    assert len(lib.containers) == 1


def test_a_container_cut_short_outside_a_fatbin_section_is_e011():
    """Found by the fuzzer: in .rdata no section accounting sees that a container's size was
    cut (to 0 here) and its entries hidden; the entry header after its end does."""
    data = bytearray((PE / "embedded.dll").read_bytes())
    first = scan_file(str(PE / "embedded.dll")).containers[0]
    struct.pack_into("<Q", data, first.offset + 8, 0)
    bad = library_from_bytes("bad.dll", bytes(data))
    assert "E011" in {p.code for p in bad.problems}


def test_an_empty_container_outside_nv_fatb_is_e011():
    """Found by the long run: with the size cut to 0 and the next entry header damaged too,
    nothing showed that entries followed; nvcc writes empty containers only in .nv_fatb."""
    data = bytearray((PE / "embedded.dll").read_bytes())
    first = scan_file(str(PE / "embedded.dll")).containers[0]
    struct.pack_into("<Q", data, first.offset + 8, 0)
    struct.pack_into("<H", data, first.offset + 16 + 2, 0)  # its entry's version
    bad = library_from_bytes("bad.dll", bytes(data))
    assert [(p.code, p.offset) for p in bad.problems] == [("E011", first.offset)]
    assert "empty" in bad.problems[0].message
    assert not scan_file(str(PE / "ptx100f.dll")).problems  # nvlink's empty container, in .nv_fatb


def test_unaligned_gap_in_nv_fatb_is_e011():
    """MSVC pads containers to 16 bytes: a gap of 16 or more could hide one."""
    data = bytearray((PE / "multi.dll").read_bytes())
    lib = scan_file(str(PE / "multi.dll"))
    first = lib.containers[0]
    struct.pack_into("<Q", data, first.offset + 8, first.size - 16 - 16)  # container 16 bytes shorter
    bad = library_from_bytes("bad.dll", bytes(data))
    assert "E011" in {p.code for p in bad.problems}


def _wrapper_section_variant(kind: str) -> bytes:
    """embedded.dll (two containers in .rdata, no accounting there) with its .nvFatBi changed."""
    data = (PE / "embedded.dll").read_bytes()
    _, _, table = _header_offsets(data)
    at = table + 40 * _section_index(data, b".nvFatBi")
    vsize, _, _, raw_at = struct.unpack_from("<IIII", data, at + 8)
    if kind == "zero fill":  # no raw data: the loader maps zeros
        return _put(data, at + 16, "<I", 0)
    if kind == "records past the virtual size":
        return _put(data, at + 8, "<I", 24)
    if kind == "a damaged record":
        return _put(data, raw_at + 24, "<I", 0x466243B0)
    if kind == "records moved":
        return _put(data, at + 20, "<I", raw_at + 24)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["zero fill", "records past the virtual size", "a damaged record"])
def test_a_wrapper_section_must_be_read_whole(kind):
    """Found by the fuzzer: with .nvFatBi's records zero fill, a damaged container in .rdata
    vanished unseen (nothing registered it any more). Every record the loader maps must be
    read, from the section's start: E011 otherwise."""
    lib = library_from_bytes("bad.dll", _wrapper_section_variant(kind))
    assert [p.code for p in lib.problems] == ["E011"] and ".nvFatBi" in lib.problems[0].message


def test_a_wrapper_section_read_whole_may_end_in_zeros():
    """The section's raw data moved 24 bytes on: it maps one record and 40 zero bytes, every one of
    them read (the wrapper section is read whole), so no record hides there; the container the
    moved-out record registered is still found and judged where it lies (.rdata)."""
    lib = library_from_bytes("moved.dll", _wrapper_section_variant("records moved"))
    assert not lib.problems and len(lib.containers) == 2


# ---- device code no section maps: searched, found and judged like ELF's ----

READERS = ROOT / "fixtures" / "readers" / "bin"
HIDDEN = {"overlay.dll": "overlay", "slack.dll": "header slack"}  # hide.py placed lib_sm80.so's container there


def _unmapped(data: bytes, offset: int, size: int) -> str | None:
    """Where [offset, offset+size) lies if no section's raw data holds any of it."""
    h = pe.parse_headers(data[: pe.headers_extent(data[: pe.headers_extent(data[:64])])], len(data))
    if any(s.raw_size and offset < s.raw_offset + s.raw_size and s.raw_offset < offset + size for s in h.sections):
        return None
    table_end = max((s.raw_offset + s.raw_size for s in h.sections), default=0)
    if offset >= table_end:
        return "overlay"
    return "header slack" if offset + size <= h.size_of_headers else "between sections"


@pytest.mark.parametrize("decode", [False, True], ids=["headers", "decode"])
@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_a_container_outside_every_section_is_found_and_fails_closed(name, decode):
    """lib_sm80.so's kernel container, written where no section maps it: it is read entry for
    entry as in the ELF library, and its placement is E011, as ELF's "lies in no section"."""
    data = (PE / name).read_bytes()
    lib = scan_file(str(PE / name), decode=decode)
    so = scan_file(str(CUDA / "lib_sm80.so"), decode=decode)
    (c,) = lib.containers
    assert _unmapped(data, c.offset, c.size) == HIDDEN[name]
    assert (c.role, c.section) == ("embedded", "")
    assert [_entry(e) for e in c.entries] == [_entry(e) for e in max(so.containers, key=lambda k: k.size).entries]
    assert [(p.code, p.message) for p in lib.problems] == [
        ("E011", f"fatbin container at 0x{c.offset:x} lies in no section")
    ]


def test_a_container_in_raw_data_past_a_sections_virtual_size_is_found():
    """The loader maps a section's VirtualSize bytes only: raw data past them (file-alignment
    padding) is unmapped. overlay.dll's last section grown in the file over its container."""
    data = (PE / "overlay.dll").read_bytes()
    coff, _, table = _header_offsets(data)
    last = struct.unpack_from("<H", data, coff + 2)[0] - 1
    vsize, _, _, raw_at = struct.unpack_from("<IIII", data, table + 40 * last + 8)
    grown = _put(data, table + 40 * last + 16, "<I", len(data) - raw_at)
    lib = library_from_bytes("grown.dll", grown)
    (c,) = lib.containers
    assert raw_at + vsize <= c.offset and c.offset + c.size <= len(data)  # in the raw data, past VirtualSize
    assert c.section == "" and [e.target for e in c.entries] == ["sm_80"]
    assert [p.code for p in lib.problems] == ["E011"]


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_hidden_container_is_judged_as_the_elf_one_appended(name, capsys):
    """The same verdict as the ELF library with a container appended after its end
    (tests/fixtures/readers): E011 and the code it carries, under any claim."""

    def run(path: Path, arch: str) -> tuple[int, list[str], list[str]]:
        rc = main(["check", "-q", "--no-config", "--format", "json", str(path), "--arch", arch])
        report = json.loads(capsys.readouterr().out)
        libs = [lib for t in report["targets"] for lib in t["libraries"]]
        return (
            rc,
            sorted({f["code"] for t in report["targets"] for f in t["findings"]} - {"D002"}),
            [label for lib in libs for label in lib["carries"]],
        )

    for arch in ("80", "80,90"):
        got = run(PE / name, arch)
        assert got == run(READERS / "lib_appended.so", arch)
        assert got[0] == 1 and "E011" in got[1] and got[2] == ["sm_80"]


def _hip_overlay(bundle_of: str) -> bytes:
    """hip_overlay.dll with its overlay (hip_multi.so's plain bundle) replaced by the first bundle
    of another HIP fixture (hip_ccob_generic.so's is compressed, CCOB v2)."""
    data = (PE / "hip_overlay.dll").read_bytes()
    (c,) = scan_file(str(PE / "hip_overlay.dll")).containers
    assert c.offset + c.size == len(data)
    (bundle,) = scan_file(str(AMD / bundle_of)).containers
    return data[: c.offset] + (AMD / bundle_of).read_bytes()[bundle.offset : bundle.offset + bundle.size]


@pytest.mark.parametrize("source", ["hip_multi.so", "hip_ccob_generic.so"])
def test_a_hip_bundle_in_the_overlay_is_found_judged_and_fails_closed(source, tmp_path, capsys):
    """An ELF fixture's offload bundle (plain, or compressed) after the last section of a DLL
    importing amdhip64_6.dll: the same bundle as the ELF's, judged by its targets (gfx908
    claimed and missing: G001), and its placement is E033, as a fatbin container's there is
    E011 (overlay.dll)."""
    dll = tmp_path / "hip_overlay.dll"
    dll.write_bytes(_hip_overlay(source))
    lib = scan_file(str(dll), decode=True)
    so = scan_file(str(AMD / source), decode=True)
    (c,) = lib.containers
    assert c.section == "" and _unmapped(dll.read_bytes(), c.offset, c.size) == "overlay"
    assert [(p.code, p.message) for p in lib.problems] == [("E033", f"HIP bundle at 0x{c.offset:x} lies in no section")]
    assert _inventory(lib) == _inventory(so)
    # the concrete targets it carries (a generic entry is selected for no GPU: docs/amd.md)
    carried = ";".join(e.target for e in c.entries if not e.target.endswith("-generic"))

    def codes(claim: str) -> tuple[int, set[str]]:
        rc = main(["check", "-q", "--no-config", "--format", "json", str(dll), "--amd-arch", claim])
        report = json.loads(capsys.readouterr().out)
        return rc, {f["code"] for t in report["targets"] for f in t["findings"]}

    assert codes(carried) == (1, {"E033"})
    assert codes(carried + ";gfx908") == (1, {"E033", "G001"})


def test_the_overlay_of_real_layouts_holds_no_device_code():
    """Every fixture DLL's unmapped bytes (headers, MinGW's symbol and string tables after the
    last section) are searched too, and hold nothing: the inventories above stay exact."""
    for name in sorted(SOURCES):
        lib = scan_file(str(PE / name))
        data = (PE / name).read_bytes()
        assert all(_unmapped(data, c.offset, c.size) is None for c in lib.containers), name


# ---- macOS ----


def test_macos_library_without_device_code_is_a_host_library(capsys):
    lib = scan_file(str(PE / "macos_host.dylib"))
    assert lib.format == "macho" and not lib.problems and not lib.containers
    assert "no CUDA" in lib.notes[0]
    rc = main(["check", "--no-config", str(PE / "macos_host.dylib")])
    assert rc == 0 and "CPU wheel" in capsys.readouterr().out


def test_macos_library_with_device_code_is_read_and_judged():
    lib = scan_file(str(PE / "macos_sm80.dylib"), decode=True)
    so = scan_file(str(CUDA / "lib_sm80.so"), decode=True)
    assert lib.format == "macho" and not lib.problems
    assert [c.role for c in lib.containers] == ["embedded"]
    assert [_entry(e) for e in lib.entries] == [_entry(e) for e in so.containers[1].entries]


def test_json_entries_show_the_ptx_target_the_rules_judge(capsys):
    """A PTX entry whose header says compute_100a while its text says .target sm_100f (the fuzz
    regression) is judged as the text says: the JSON shows both, so a reader of the report
    (and the fuzz projection) sees what was judged."""
    regression = ROOT / "fuzz" / "regressions" / "pe-ptx-header-a-text-f.dll"
    seen = {}
    for path in (PE / "ptx100f.dll", regression):
        main(["check", "-q", "--no-config", "--format", "json", "--detail", "containers", str(path), "--arch", "80"])
        report = json.loads(capsys.readouterr().out)
        (lib,) = report["targets"][0]["libraries"]
        seen[path.name] = (
            [(e["target"], e.get("ptx_target")) for c in lib["container_list"] for e in c["entries"]],
            lib["carries"],
        )
    assert seen == {
        "ptx100f.dll": ([("sm_100f", "sm_100f")], ["compute_100f"]),
        regression.name: ([("sm_100a", "sm_100f")], ["compute_100f"]),
    }


# ---- import tables, long section names and section names in findings ------------------------------
# PE import tables, long section names and the section names in findings, pinned where mutation
# testing found pe.py loose (docs/mutation.md).
#
# The import tables are those of the MSVC-built fixtures in tests/fixtures/pe/bin, read with
# pe's own header parser, then cut or extended by whole records; each case asserts the DLL names
# read or the E021 message.


def directory(name: str, index: int) -> tuple[pe.Headers, bytes, int]:
    """(headers, the bytes of its import or delay-import directory as declared, declared size)."""
    data = (PE / name).read_bytes()
    h = pe.parse_headers(data[: pe.HEADERS_MAX], len(data))
    rva, size = h.directory(index)
    at = h.rva_to_offset(rva)
    assert rva and at is not None
    return h, data[at : at + size], size


def names(h: pe.Headers, data: bytes, rvas: list[int]) -> list[str]:
    out = []
    for rva in rvas:
        off = h.rva_to_offset(rva)
        assert off is not None
        out.append(data[off : data.index(b"\0", off)].decode())
    return out


def test_an_import_table_of_exactly_its_records_and_terminator():
    """sm80.dll's import directory, declared to the byte: every DLL, the terminator found in the
    last record; without the terminator, E021."""
    h, declared, _ = directory("sm80.dll", pe.DIR_IMPORT)
    rec = pe._IMPORT.size
    n = next(i for i in range(0, len(declared), rec) if not any(declared[i : i + rec])) // rec + 1
    table = declared[: n * rec]  # the records, the terminator last
    size = len(table)
    rvas = pe.import_name_rvas(table, False, h.image_base, size)
    assert rvas == pe.import_name_rvas(declared, False, h.image_base, len(declared))
    data = (PE / "sm80.dll").read_bytes()
    assert len(rvas) == n - 1 and "KERNEL32.dll" in names(h, data, rvas)
    with pytest.raises(pe.PeError, match="import directory has no terminating entry"):
        pe.import_name_rvas(table[:-rec], False, h.image_base, size)
    with pytest.raises(pe.PeError, match="import directory has no terminating entry"):
        pe.import_name_rvas(table[:-rec] + bytes(rec - 1), False, h.image_base, size)  # a partial record


def test_delay_import_descriptors_of_both_versions():
    """A version-2 descriptor (attribute bit 0 set) holds RVAs; a version-1 one holds virtual
    addresses, which the image base turns into RVAs."""
    h, table, size = (
        directory("multi.dll", pe.DIR_DELAY_IMPORT)
        if _has_delay("multi.dll")
        else directory(_delay_fixture(), pe.DIR_DELAY_IMPORT)
    )
    rvas = pe.import_name_rvas(table, True, h.image_base, size)
    assert rvas
    rec = bytearray(table[: pe._DELAY.size])
    attributes, name = struct.unpack_from("<II", rec)
    assert attributes & 1
    struct.pack_into("<II", rec, 0, attributes & ~1, (h.image_base + name) & 0xFFFFFFFF)
    v1 = bytes(rec) + bytes(pe._DELAY.size)
    assert pe.import_name_rvas(v1, True, h.image_base & 0xFFFFFFFF, len(v1)) == [name]


def _has_delay(name: str) -> bool:
    data = (PE / name).read_bytes()
    h = pe.parse_headers(data[: pe.HEADERS_MAX], len(data))
    return bool(h.directory(pe.DIR_DELAY_IMPORT)[0])


def _delay_fixture() -> str:
    found = [p.name for p in sorted(PE.glob("*.dll")) if _has_delay(p.name)]
    assert found, "no fixture with a delay-import directory"
    return found[0]


@pytest.mark.parametrize("delay", [False, True])
def test_an_empty_directory_is_damage_only_when_it_declares_room_for_a_record(delay):
    rec = (pe._DELAY if delay else pe._IMPORT).size
    what = "delay-import" if delay else "import"
    assert pe.import_name_rvas(bytes(2 * rec), delay, 0, rec) == []  # a terminator alone
    assert pe.import_name_rvas(bytes(2 * rec), delay, 0, 2 * rec - 1) == []
    with pytest.raises(pe.PeError, match=f"{what} directory of {2 * rec} bytes lists no DLL"):
        pe.import_name_rvas(bytes(2 * rec), delay, 0, 2 * rec)


def test_the_most_imports_a_table_may_list():
    rec = pe._IMPORT.size
    one = struct.pack("<IIIII", 0x1000, 0, 0, 0x2000, 0x3000)
    table = one * pe.MAX_IMPORTS + bytes(rec)
    assert len(pe.import_name_rvas(table, False, 0, len(table))) == pe.MAX_IMPORTS
    table = one * (pe.MAX_IMPORTS + 1) + bytes(rec)
    with pytest.raises(pe.PeError, match=f"lists more than {pe.MAX_IMPORTS} DLLs"):
        pe.import_name_rvas(table, False, 0, len(table))


@pytest.mark.parametrize("name", ["/12a", "/\u0661\u0662", "/", "/-4"])
def test_a_long_section_name_that_is_no_offset(name):
    with pytest.raises(pe.PeError, match="is neither a name nor a string-table offset"):
        pe._long_offset(name)
    assert pe._long_offset("/123") == 123


def test_findings_name_the_sections_as_the_image_names_them():
    """A container grown past the end of .nv_fatb: the shared attribution speaks of ELF's
    .nv_fatbin and .nvFatBinSegment; a PE's findings say .nv_fatb and .nvFatBi."""
    lib = scan_file(str(PE / "sm80.dll"))
    last = lib.containers[-1]
    assert last.section == ".nv_fatb"
    data = bytearray((PE / "sm80.dll").read_bytes())
    struct.pack_into("<Q", data, last.offset + 8, last.size - 16 + 4096)
    bad = library_from_bytes("bad.dll", bytes(data))
    messages = [p.message for p in bad.problems if p.code == "E011"]
    assert f"fatbin container at 0x{last.offset:x} overruns section .nv_fatb" in messages, messages
    assert any(m.startswith("section .nvFatBi: ") for m in messages), messages
    assert not any(".nv_fatbin" in m or ".nvFatBinSegment" in m for m in messages), messages


def test_a_dll_whose_import_directory_lists_nothing_still_names_its_delay_loaded_dlls():
    """sm80_msvc.dll imports cudart64_13.dll and delay-loads nvcuda.dll. With its import
    directory emptied (a terminator alone, declared as one record), the delay-loaded driver is
    still read: a DLL that loads everything late is a GPU library all the same."""
    data = bytearray((PE / "sm80_msvc.dll").read_bytes())
    assert library_from_bytes("x.dll", bytes(data)).needed == ("cudart64_13.dll", "nvcuda.dll")
    h = pe.parse_headers(bytes(data[: pe.HEADERS_MAX]), len(data))
    rva, size = h.directory(pe.DIR_IMPORT)
    at = h.rva_to_offset(rva)
    assert at is not None and size == 2 * pe._IMPORT.size
    data[at : at + pe._IMPORT.size] = bytes(pe._IMPORT.size)
    lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    struct.pack_into("<I", data, lfanew + 24 + 112 + 8 * pe.DIR_IMPORT + 4, pe._IMPORT.size)
    lib = library_from_bytes("x.dll", bytes(data))
    assert lib.needed == ("nvcuda.dll",) and not lib.problems, (lib.needed, lib.problems)


# ---- the header checks at their bounds -------------------------------------------------------------

DLL = (PE / "sm80.dll").read_bytes()
LFANEW = struct.unpack_from("<I", DLL, 0x3C)[0]
NSECTIONS, OPT_SIZE = struct.unpack_from("<H", DLL, LFANEW + 6)[0], struct.unpack_from("<H", DLL, LFANEW + 20)[0]
TABLE = LFANEW + 24 + OPT_SIZE
TABLE_END = TABLE + NSECTIONS * 40


def headers_error(data: bytes, size: int) -> str:
    with pytest.raises(pe.PeError) as e:
        pe.parse_headers(data, size)
    assert e.value.code == "E021"
    return e.value.message


def with_lfanew(value: int) -> bytes:
    return DLL[:0x3C] + struct.pack("<I", value) + DLL[0x40:]


def test_the_first_64_bytes_and_the_pe_header_offset():
    assert headers_error(DLL[:63], len(DLL)) == "not a PE image (no MZ header)"
    assert headers_error(b"MZ" + DLL[2:64].replace(b"MZ", b"XX"), 64).startswith("PE header offset")
    assert headers_error(with_lfanew(3), len(DLL)) == "PE header offset 0x3 lies outside the file's headers"
    assert headers_error(with_lfanew(4), len(DLL)).startswith("no PE signature")  # inside, but no signature there
    last = len(DLL) - 24  # the COFF header ends at the file's end: inside
    assert headers_error(with_lfanew(last), len(DLL)).startswith("no PE signature")
    assert "lies outside" in headers_error(with_lfanew(last + 1), len(DLL))


def test_headers_cut_short():
    assert headers_error(DLL[: LFANEW + 23], len(DLL)) == "PE header is truncated"
    assert headers_error(DLL[: TABLE_END - 1], len(DLL)) == "section table is truncated"
    assert pe.parse_headers(DLL[:TABLE_END], len(DLL)).sections  # exactly the headers: enough


def test_a_section_table_past_the_end_of_the_file():
    assert headers_error(DLL[:TABLE_END], TABLE_END - 1) == "section table lies outside the file's headers"
    assert "section table" not in headers_error(DLL[:TABLE_END], TABLE_END)  # inside; its sections are not


@pytest.mark.parametrize(
    "opt_size, words",
    [
        (1, "no optional header: an object file, not an image"),
        (0, "no optional header: an object file, not an image"),
        (2, "optional header of 2 bytes is too short for its magic"),
        (111, "optional header of 111 bytes is too short for its magic"),
    ],
)
def test_optional_headers_too_short(opt_size, words):
    data = DLL[: LFANEW + 20] + struct.pack("<H", opt_size) + DLL[LFANEW + 22 :]
    assert headers_error(data, len(data)) == words


def test_directories_past_the_declared_count_are_not_read():
    """The loader reads only NumberOfRvaAndSizes directories: declared 13, the delay-import
    directory (index 13) of sm80_msvc.dll is not there, so nvcuda.dll is not a dependency."""
    data = bytearray((PE / "sm80_msvc.dll").read_bytes())
    lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    count_at = lfanew + 24 + 108
    assert struct.unpack_from("<I", data, count_at)[0] == 16
    for declared, needed in ((14, ("cudart64_13.dll", "nvcuda.dll")), (13, ("cudart64_13.dll",))):
        struct.pack_into("<I", data, count_at, declared)
        assert library_from_bytes("x.dll", bytes(data)).needed == needed


# ---- _imports' second pass: DLL names away from their import directory -----------------------------


def far_import_name(name: str, dll: str, distance: int) -> tuple[bytes, int]:
    """`name` with the import descriptor of `dll` pointing at a copy of that name `distance` bytes
    past the import directory's start: the last section grown (raw and virtual size) to hold it,
    as a linker that places the name strings in another, later section would. Returns the image
    and the copy's file offset."""
    data = bytearray((PE / name).read_bytes())
    h = pe.parse_headers(bytes(data[: pe.HEADERS_MAX]), len(data))
    rva, size = h.directory(pe.DIR_IMPORT)
    at = h.rva_to_offset(rva)
    assert at is not None

    def is_dll(d: int) -> bool:
        name_at = h.rva_to_offset(struct.unpack_from("<I", data, d + 12)[0]) or 0
        return data[name_at:].startswith(dll.encode() + b"\0")

    (desc,) = [d for d in range(at, at + size - 20, 20) if is_dll(d)]
    last = h.sections[-1]
    assert last.raw_offset + last.raw_size == len(data)
    to = at + distance
    end = max(len(data), to + 512)
    data += bytes(end - len(data))
    data[to : to + len(dll) + 1] = dll.encode() + b"\0"
    lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    opt_size = struct.unpack_from("<H", data, lfanew + 20)[0]
    header = lfanew + 24 + opt_size + 40 * (len(h.sections) - 1)
    struct.pack_into("<II", data, header + 8, end - last.raw_offset, last.rva)  # VirtualSize, VirtualAddress
    struct.pack_into("<I", data, header + 16, end - last.raw_offset)  # SizeOfRawData
    struct.pack_into("<I", data, desc + 12, last.rva + to - last.raw_offset)  # the descriptor's Name
    return bytes(data), to


SECOND_PASS = "second pass: imported DLL names lie away from the import directory"


def test_a_dll_name_past_the_bytes_kept_with_the_import_directory_is_read_in_a_second_pass():
    """sm80.dll's import directory keeps its records and the 64 KiB after them: a name whose
    256 bytes end there is read from them; one byte further on, from a second read of the file.
    The DLLs named are the same either way."""
    want = library_from_bytes("x.dll", (PE / "sm80.dll").read_bytes()).needed
    assert "cudart64_13.dll" in want
    h = pe.parse_headers(DLL[: pe.HEADERS_MAX], len(DLL))
    kept = h.directory(pe.DIR_IMPORT)[1] + pe.NAMES_WINDOW
    for distance, second in ((kept - 256, False), (kept - 255, True), (kept + 4096, True)):
        data, _ = far_import_name("sm80.dll", "cudart64_13.dll", distance)
        lib = library_from_bytes("x.dll", data)
        assert (lib.needed, lib.problems) == (want, ()), (distance, lib.problems)
        assert (SECOND_PASS in lib.notes) == second, (distance, lib.notes)


def test_dll_names_scattered_over_more_than_1_mib_are_malformed():
    """The names of one import directory must lie within 1 MiB of each other (the second read is
    bounded): sm80.dll's other names stay beside the directory, cudart64_13.dll's moves away."""
    h = pe.parse_headers(DLL[: pe.HEADERS_MAX], len(DLL))
    at = h.rva_to_offset(h.directory(pe.DIR_IMPORT)[0])
    assert at is not None
    data = DLL
    offsets = []
    for rva in pe.import_name_rvas(data[at : at + h.directory(pe.DIR_IMPORT)[1]], False, h.image_base, 0):
        off = h.rva_to_offset(rva)
        assert off is not None
        if not data[off:].startswith(b"cudart64_13.dll\0"):
            offsets.append(off)
    lo = min(offsets)
    bound = pe.NAMES_WINDOW * 16
    ok, far = far_import_name("sm80.dll", "cudart64_13.dll", lo - at + bound - 256)
    lib = library_from_bytes("x.dll", ok)
    assert "cudart64_13.dll" in lib.needed and not lib.problems and SECOND_PASS in lib.notes
    bad, _ = far_import_name("sm80.dll", "cudart64_13.dll", lo - at + bound - 255)
    lib = library_from_bytes("x.dll", bad)
    assert lib.needed == () and [(p.code, p.message) for p in lib.problems] == [
        ("E021", "malformed PE: imported DLL names are scattered over more than 1 MiB")
    ]
    # the section table of an image whose imports cannot be read is not trusted either
    assert lib.containers and all(c.section == "" for c in lib.containers)


@pytest.mark.parametrize(
    "name, words", [(b"\0", "is empty"), (b"cudart\x0164.dll\0", "is not text"), (b"cudart\xff.dll\0", "is not text")]
)
def test_a_dll_name_read_in_the_second_pass_must_be_text(name, words):
    data, far = far_import_name("sm80.dll", "cudart64_13.dll", 2 * pe.NAMES_WINDOW)
    bad = data[:far] + name + data[far + len(name) :]
    lib = library_from_bytes("x.dll", bad)
    assert [(p.code, p.message) for p in lib.problems] == [
        ("E021", f"malformed PE: imported DLL name at 0x{far:x} {words}")
    ]


# ---- images edited field by field: section headers, directories, the optional header ------------


class Image:
    """A fixture DLL as bytes to edit, with the offsets of its headers."""

    def __init__(self, name: str) -> None:
        self.data = bytearray((PE / name).read_bytes())
        self.lfanew = struct.unpack_from("<I", self.data, 0x3C)[0]
        self.opt = self.lfanew + 24
        self.opt_size = struct.unpack_from("<H", self.data, self.lfanew + 20)[0]
        self.table = self.opt + self.opt_size
        self.h = pe.parse_headers(bytes(self.data[: pe.HEADERS_MAX]), len(self.data))

    def section(self, name: str) -> int:
        """File offset of the header of the section the image names `name`."""
        (i,) = [i for i, s in enumerate(self.h.sections) if s.name == name]
        return self.table + 40 * i

    def put(self, at: int, fmt: str, *values: int | bytes) -> Image:
        struct.pack_into(fmt, self.data, at, *values)
        return self

    def directory(self, index: int, rva: int, size: int | None = None) -> Image:
        at = self.opt + 112 + 8 * index
        return self.put(at, "<II", rva, struct.unpack_from("<I", self.data, at + 4)[0] if size is None else size)

    def library(self) -> Library:
        return library_from_bytes("x.dll", bytes(self.data))


def problems(lib: Library) -> list[tuple[str, str]]:
    return [(p.code, p.message) for p in lib.problems]


def test_the_first_byte_past_the_headers_or_a_section_is_in_no_section():
    """sm80.dll's headers end at 0x400 and the first section is mapped at 0x1000; .idata's bytes
    end 1244 bytes into it. An import directory at either RVA lies in nothing the loader maps."""
    img = Image("sm80.dll")
    idata = next(s for s in img.h.sections if s.name == ".idata")
    for rva in (img.h.size_of_headers, idata.rva + idata.loaded_size):
        lib = Image("sm80.dll").directory(pe.DIR_IMPORT, rva).library()
        assert problems(lib) == [("E021", f"malformed PE: import directory at RVA 0x{rva:x} is in no section")]
        assert lib == Library("x.dll", len(img.data), "pe", problems=lib.problems)
    assert img.h.rva_to_offset(idata.rva + idata.loaded_size - 1) == idata.raw_offset + idata.loaded_size - 1
    assert img.h.rva_to_offset(0) == 0 and img.h.rva_to_offset(img.h.size_of_headers - 1) == img.h.size_of_headers - 1


def test_a_malformed_header_is_the_librarys_only_finding():
    data = bytes(Image("sm80.dll").put(0x3C, "<I", 3).data)
    lib = library_from_bytes("x.dll", data)
    assert lib == Library(
        "x.dll",
        len(data),
        "pe",
        problems=(Problem(Code.E021, "malformed PE: PE header offset 0x3 lies outside the file's headers"),),
    )
    pe32 = Image("sm80.dll")
    data = bytes(pe32.put(pe32.opt, "<H", pe.PE32).data)  # read by PE32's layout: its sections stay
    assert not any(p.code == "E020" for p in library_from_bytes("x.dll", data).problems)
    data = bytes(pe32.put(pe32.opt, "<H", 0x107).data)
    assert library_from_bytes("x.dll", data).problems == (
        Problem(Code.E021, "malformed PE: optional header magic 0x107 is neither PE32 nor PE32+"),
    )


def test_a_dll_without_an_import_directory_still_names_its_delay_loaded_dlls():
    """sm80_msvc.dll with its import directory removed (RVA 0): the delay-import directory after
    it is still read, so the driver it delay-loads keeps it a GPU library."""
    lib = Image("sm80_msvc.dll").directory(pe.DIR_IMPORT, 0, 0).library()
    assert (lib.needed, lib.problems) == (("nvcuda.dll",), ())


def test_a_version_1_delay_descriptor_cannot_address_a_name_in_an_image_above_4_gib():
    """Version-1 descriptors hold 32-bit virtual addresses: in sm80_msvc.dll (based at
    0x180000000) the low 32 bits of the name's address are no RVA of it."""
    img = Image("sm80_msvc.dll")
    rva, _ = img.h.directory(pe.DIR_DELAY_IMPORT)
    at = img.h.rva_to_offset(rva)
    assert at is not None and img.h.image_base > 0xFFFFFFFF
    attributes, name = struct.unpack_from("<II", img.data, at)
    lib = img.put(at, "<II", attributes & ~1, (img.h.image_base + name) & 0xFFFFFFFF).library()
    assert lib.needed == () and [p.code for p in lib.problems] == ["E021"]
    assert "is in no section" in lib.problems[0].message


def with_optional_header(name: str, opt_size: int, declared: int) -> Image:
    """The image with its optional header cut to `opt_size` bytes and the section table moved up
    behind it (as a linker writing fewer data directories lays it out)."""
    img = Image(name)
    n = len(img.h.sections)
    sections = bytes(img.data[img.table : img.table + 40 * n])
    img.data[img.opt + opt_size : img.table + 40 * n] = sections + bytes(img.table - img.opt - opt_size)
    img.put(img.lfanew + 20, "<H", opt_size).put(img.opt + 108, "<I", declared)
    return img


def test_an_optional_header_of_exactly_its_fixed_fields_holds_no_directory():
    img = with_optional_header("sm80_msvc.dll", 112, 0)
    h = pe.parse_headers(bytes(img.data[: pe.HEADERS_MAX]), len(img.data))
    assert h.directories == () and [s.name for s in h.sections] == [s.name for s in img.h.sections]
    assert img.library().needed == ()


@pytest.mark.parametrize("directories, needed", [(13, ("cudart64_13.dll",)), (14, ("cudart64_13.dll", "nvcuda.dll"))])
def test_only_the_directories_the_optional_header_holds_are_read(directories, needed):
    """NumberOfRvaAndSizes says 16, the optional header holds 13 (or 14) of them: the delay-import
    directory (index 13) is read only when it is inside; the section table follows at once."""
    img = with_optional_header("sm80_msvc.dll", 112 + 8 * directories, 16)
    h = pe.parse_headers(bytes(img.data[: pe.HEADERS_MAX]), len(img.data))
    assert len(h.directories) == directories
    lib = img.library()
    assert (lib.needed, lib.problems) == (needed, ())


def test_a_directory_size_past_2_31_is_a_size_not_a_negative_number():
    """The import directory's declared size is only an upper bound for the records (the
    terminator ends them): 0xFFFFFFF0 reads the same DLLs."""
    want = library_from_bytes("x.dll", bytes(Image("sm80.dll").data)).needed
    img = Image("sm80.dll")
    lib = img.directory(pe.DIR_IMPORT, img.h.directory(pe.DIR_IMPORT)[0], 0xFFFFFFF0).library()
    assert (lib.needed, lib.problems) == (want, ())


def test_an_empty_import_directory_declaring_2_gib_is_damaged():
    """sm80_msvc.dll's import directory emptied (its one record zeroed) and declared at 0x80000000
    bytes: room for records, none listed (E021), the size read unsigned."""
    img = Image("sm80_msvc.dll")
    rva, _ = img.h.directory(pe.DIR_IMPORT)
    at = img.h.rva_to_offset(rva)
    assert at is not None
    lib = img.put(at, "<20s", bytes(20)).directory(pe.DIR_IMPORT, rva, 0x80000000).library()
    assert problems(lib) == [("E021", "malformed PE: import directory of 2147483648 bytes lists no DLL")]


def test_a_sound_image_is_read_whole():
    data = (PE / "sm80_msvc.dll").read_bytes()
    lib = library_from_bytes("x.dll", data)
    assert (lib.path, lib.size, lib.format, lib.needed, lib.runpath, lib.problems, lib.notes) == (
        "x.dll",
        len(data),
        "pe",
        ("cudart64_13.dll", "nvcuda.dll"),
        (),
        (),
        (),
    )
    assert [(c.section, c.role) for c in lib.containers] == [(".nv_fatb", "device-link"), (".nv_fatb", "executable")]


def test_a_section_without_raw_data_maps_nothing_from_the_file():
    """PointerToRawData 0 means the section is zero fill whatever SizeOfRawData says: sm80.dll's
    .idata so declared holds no import directory the file could give."""
    img = Image("sm80.dll")
    lib = img.put(img.section(".idata") + 20, "<I", 0).library()
    rva = img.h.directory(pe.DIR_IMPORT)[0]
    assert problems(lib) == [("E021", f"malformed PE: import directory at RVA 0x{rva:x} is in no section")]


def long_names(symtab: int) -> Image:
    img = Image("longnames.dll")
    return img.put(img.lfanew + 12, "<I", symtab)


def test_long_section_names_need_a_string_table():
    """longnames.dll's names (/4 ...) are offsets into the COFF string table after its symbols:
    without a symbol table pointer there is none (E021 before anything is read); with the table
    starting 4 bytes before the file's end it holds only its size field, so /4 is outside it."""
    img = Image("longnames.dll")
    nsymbols = struct.unpack_from("<I", img.data, img.lfanew + 16)[0]
    assert nsymbols and img.h.string_table
    lib = long_names(0).library()
    assert lib == Library(
        "x.dll",
        len(img.data),
        "pe",
        problems=(
            Problem(Code.E021, "malformed PE: a long section name points into a string table the file does not have"),
        ),
    )
    size = len(img.data)
    for strings, words in (
        (size - 4, "section 3: long name '/4' lies outside the string table"),
        (size - 3, "a long section name points into a string table the file does not have"),
    ):
        lib = long_names(strings - nsymbols * pe.SYMBOL_SIZE).library()
        assert ("E021", f"malformed PE: {words}") in problems(lib), problems(lib)


def test_a_long_name_offset_inside_the_tables_size_field_is_outside_its_strings():
    img = Image("longnames.dll")
    lib = img.put(img.section("/4"), "<8s", b"/2").library()
    assert ("E021", "malformed PE: section 3: long name '/2' lies outside the string table") in problems(lib)


def test_a_short_section_name_that_is_not_utf8_reads_with_a_replacement_character():
    img = Image("sm80.dll")
    img.put(img.section(".pdata"), "<8s", b".pd\xffta")
    h = pe.parse_headers(bytes(img.data[: pe.HEADERS_MAX]), len(img.data))
    assert ".pd\ufffdta" in [s.name for s in h.sections]
    assert not img.library().problems


def test_the_4_mib_of_headers_parse_headers_reads_at_most():
    """The PE header moved so that the section table ends exactly at HEADERS_MAX: read; one
    byte further, E021 (the headers must lie in the first 4 MiB)."""
    base = Image("sm80.dll")
    end = base.table + 40 * len(base.h.sections)
    for shift, ok in ((pe.HEADERS_MAX - end, True), (pe.HEADERS_MAX - end + 8, False)):
        img = Image("sm80.dll")
        data = img.data[: img.lfanew] + bytes(shift) + img.data[img.lfanew :]
        struct.pack_into("<I", data, 0x3C, img.lfanew + shift)
        for i in range(len(img.h.sections)):
            at = img.table + shift + 40 * i + 20
            raw = struct.unpack_from("<I", data, at)[0]
            struct.pack_into("<I", data, at, raw + shift if raw else 0)
        lib = library_from_bytes("x.dll", bytes(data))
        if ok:
            assert lib.needed and not [p for p in lib.problems if p.code == "E021"], lib.problems
        else:
            assert problems(lib) == [("E021", "malformed PE: section table lies outside the file's headers")]


# ---- what is searched where: zones by section kind ------------------------------------------------

CLAIM = b"-gencode;arch=compute_80,code=sm_80"


def with_claim(where: str) -> Image:
    """sm80.dll with PyTorch's NVCC-flags string (an embedded claim) written into the file-alignment
    padding after a section's data; for `where` a section, its virtual size grown over the string
    so that the loader maps it; "padding": left unmapped; "overlay": appended after the last section."""
    img = Image("sm80.dll")
    blob = b"\0" + CLAIM + b"\0"
    if where == "overlay":
        img.data += blob + bytes(16)
        return img
    name = ".rdata" if where == "padding" else where
    s = next(s for s in img.h.sections if s.name == name)
    at = s.raw_offset + s.virtual_size + 8
    assert at + len(blob) <= s.raw_offset + s.raw_size and not any(img.data[at : at + len(blob)])
    img.data[at : at + len(blob)] = blob
    if where != "padding":
        img.put(img.section(name) + 8, "<I", s.raw_size)
    return img


@pytest.mark.parametrize(
    "where, claims",
    [
        (".rdata", (CLAIM.decode(),)),  # read-only data: where string literals are
        (".text", (CLAIM.decode(),)),  # code: a linker may merge .rdata into it (/MERGE:.rdata=.text)
        (".data", ()),  # writable data holds no string literal
        ("padding", ()),
        ("overlay", ()),  # bytes the loader never maps
    ],
)
def test_embedded_claims_are_read_from_mapped_read_only_bytes_only(where, claims):
    lib = with_claim(where).library()
    assert (lib.embedded_claims, lib.problems) == (claims, ()), where


@pytest.mark.parametrize(
    "characteristics",
    [pe.SCN_READ | pe.SCN_EXECUTE | 0x20, pe.SCN_READ | pe.SCN_WRITE | 0x40],
    ids=["executable", "writable"],
)
def test_offload_bundles_are_found_in_code_and_writable_sections(characteristics):
    want = [
        (c.section, c.offset, [e.target for e in c.entries])
        for c in library_from_bytes("x.dll", (PE / "hip_multi.dll").read_bytes()).containers
    ]
    assert want and want[0][0] == ".hip_fat"
    img = Image("hip_multi.dll")
    lib = img.put(img.section(".hip_fat") + 36, "<I", characteristics).library()
    assert [(c.section, c.offset, [e.target for e in c.entries]) for c in lib.containers] == want
    assert not lib.problems


def test_wrapper_records_are_read_in_a_writable_wrapper_section():
    img = Image("sm80.dll")
    lib = img.put(img.section(".nvFatBi") + 36, "<I", pe.SCN_READ | pe.SCN_WRITE | 0x40).library()
    assert not lib.problems and [c.role for c in lib.containers] == [
        c.role for c in library_from_bytes("x.dll", (PE / "sm80.dll").read_bytes()).containers
    ]


# ---- the wrapper section's bytes ---------------------------------------------------------------------


def test_a_wrapper_section_whose_raw_size_is_its_virtual_size_is_sound():
    """sm80_msvc.dll's .nvFatBi holds 2 records (48 bytes) in 512 bytes of raw data; declared
    with exactly 48 bytes of raw data (a file alignment of 16), nothing is zero fill."""
    img = Image("sm80_msvc.dll")
    s = next(s for s in img.h.sections if s.name == ".nvFatBi")
    assert s.virtual_size == 48 < s.raw_size
    lib = img.put(img.section(".nvFatBi") + 16, "<I", 48).library()
    assert not lib.problems


def test_padding_after_the_wrapper_records_is_zeros_read_or_less_than_32_bytes():
    """sm80.dll's .nvFatBi: 2 records (48 bytes); MinGW pads to 64. The section is read whole, so
    any zero bytes after the records are padding (80, 200); a byte that is not zero there is room
    for a record unread (E011)."""
    for vsize, nonzero, bad in ((79, None, False), (80, None, False), (200, None, False), (80, 70, True)):
        img = Image("sm80.dll")
        img.put(img.section(".nvFatBi") + 8, "<I", vsize)
        s = next(s for s in img.h.sections if s.name == ".nvFatBi")
        if nonzero is not None:
            img.put(s.raw_offset + nonzero, "<B", 1)
        lib = img.library()
        want = [
            Problem(
                Code.E011,
                f"section .nvFatBi: its {vsize} bytes are not 2 fatbin wrapper records and "
                "padding, so what it registers cannot be checked",
                s.raw_offset,
            )
        ]
        assert list(lib.problems) == (want if bad else []), vsize


def test_a_long_named_wrapper_section_is_checked_like_a_short_named_one():
    """longnames.dll names its wrapper section .nvFatBinSegment in full (/15): its virtual size
    grown past its raw data is zero fill the records cannot be read from (E011)."""
    img = Image("longnames.dll")
    s = next(s for s in img.h.sections if s.name == "/15")
    lib = img.put(img.section("/15") + 8, "<I", s.raw_size + 24).library()
    assert problems(lib) == [
        (
            "E011",
            f"section .nvFatBinSegment: 24 of its {s.raw_size + 24} bytes are not in the "
            "file (zero fill), so what it registers cannot be checked",
        )
    ]


def test_a_container_at_the_first_byte_after_a_section_is_named_for_its_own_section():
    """sm80.dll's .rdata raw data ends where .nv_fatb's begins: with .rdata's virtual size grown
    to all of its raw data, the first container is still in .nv_fatb."""
    img = Image("sm80.dll")
    rdata = next(s for s in img.h.sections if s.name == ".rdata")
    fatb = next(s for s in img.h.sections if s.name == ".nv_fatb")
    assert rdata.raw_offset + rdata.raw_size == fatb.raw_offset
    lib = img.put(img.section(".rdata") + 8, "<I", rdata.raw_size).library()
    assert lib.containers[0].offset == fatb.raw_offset and {c.section for c in lib.containers} == {".nv_fatb"}
    assert not lib.problems
