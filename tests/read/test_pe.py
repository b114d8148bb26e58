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
from archaudit.model import Entry, Library
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
        assert [tuple(map(_entry, c.entries)) for c in dll.containers] == \
               [tuple(map(_entry, c.entries)) for c in so.containers]
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


@pytest.mark.parametrize("name,elf", [("sm80.dll", "lib_sm80.so"), ("multi.dll", "lib_multi.so"),
                                      ("sm90a_ext.pyd", "lib_sm90a.so"), ("rdc.dll", "lib_rdc.so")])
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

def _put(data: bytes, at: int, fmt: str, *values: int) -> bytes:
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
    return next(i for i in range(count) if data[table + 40 * i:table + 40 * i + 8].rstrip(b"\0") == name)


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
        return data[:len(data) - 600]
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


MALFORMED = ["ms-dos program", "header offset past the end", "only a DOS header", "optional header magic",
             "section table past the headers", "section data past the end", "truncated inside a section",
             "import directory in no section", "import directory lists no DLL",
             "long name outside the string table"]


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
    h = pe.parse_headers(data[:pe.headers_extent(data[:pe.headers_extent(data[:64])])], len(data))
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
        ("E011", f"fatbin container at 0x{c.offset:x} lies in no section")]


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
        return (rc, sorted({f["code"] for t in report["targets"] for f in t["findings"]} - {"D002"}),
                [label for lib in libs for label in lib["carries"]])
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
    return data[:c.offset] + (AMD / bundle_of).read_bytes()[bundle.offset:bundle.offset + bundle.size]


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
        main(["check", "-q", "--no-config", "--format", "json", "--detail", "containers", str(path),
              "--arch", "80"])
        report = json.loads(capsys.readouterr().out)
        (lib,) = report["targets"][0]["libraries"]
        seen[path.name] = ([(e["target"], e.get("ptx_target")) for c in lib["container_list"] for e in c["entries"]],
                           lib["carries"])
    assert seen == {"ptx100f.dll": ([("sm_100f", "sm_100f")], ["compute_100f"]),
                    regression.name: ([("sm_100a", "sm_100f")], ["compute_100f"])}
