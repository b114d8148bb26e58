"""What a cubin and a PTX text say of themselves (codefacts.py): the target, the kernels, the
toolkit that built a cubin, and the functions a relocatable cubin leaves unresolved.

Cubins and containers are nvcc 13.0's (tests/fixtures/cuda/bin, NVCC_VERSION) and ptxas 12.8's
(tests/fixtures/readers/bin, built by its build.sh); each malformed case changes one field of a
real cubin and asserts the finding code and its words. Every test runs with each cubin reader
(conftest.each_cubin_reader): the compiled one and the Python reference.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from archaudit.read import codefacts, elf, fatbin
from archaudit.read.fatbin import FatbinError
from archaudit.read.library import scan_file
from helpers import READERS

pytestmark = pytest.mark.usefixtures("each_cubin_reader")

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
AXPY = ("_Z4axpyfPKfPfi",)
SM90A = (BIN / "kern_sm90a.cubin").read_bytes()
SM90 = (BIN / "kern_sm90.cubin").read_bytes()
SHDR = codefacts._SHDR  # name, type, flags, addr, offset, size, link, info, align, entsize


def sections(data: bytes) -> dict[bytes, tuple[int, tuple[int, ...]]]:
    """Section name -> (index, header fields), read with struct (not the code under test)."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
    heads = [SHDR.unpack_from(data, shoff + i * SHDR.size) for i in range(shnum)]
    names = data[heads[shstrndx][4] : heads[shstrndx][4] + heads[shstrndx][5]]
    return {names[h[0] : names.index(b"\0", h[0])]: (i, h) for i, h in enumerate(heads)}


def with_field(data: bytes, section: bytes, field: int, value: int) -> bytes:
    """`data` with one field (an index into SHDR's fields) of one section header changed."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    i, head = sections(data)[section]
    fields = list(head)
    fields[field] = value
    out = bytearray(data)
    SHDR.pack_into(out, shoff + i * SHDR.size, *fields)
    return bytes(out)


def cubin_refused(words: str, data: bytes) -> None:
    with pytest.raises(FatbinError) as e:
        codefacts.cubin_facts(data)
    assert e.value.code == "E014" and words in e.value.message, (e.value.code, e.value.message)


@pytest.mark.parametrize(
    "name",
    [
        "kern_sm75.cubin",
        "kern_sm80.cubin",
        "kern_sm90.cubin",
        "kern_sm90a.cubin",
        "kern_sm100.cubin",
        "kern_sm120.cubin",
    ],
)
def test_every_cubin_names_the_toolkit_that_built_it(name):
    """The .note.nv.tkinfo note says "release 13.0": the driver floor (D001/D002) starts there."""
    assert codefacts.cubin_facts((BIN / name).read_bytes())[2] == (13, 0)


@pytest.mark.parametrize(
    "note, toolkit",
    [
        (b"Cuda compilation tools, release 12.8, V12.8.93", (12, 8)),
        (b"xx release 9.2, V9.2.148", (9, 2)),
        (b"Cuda compilation tools, release 13.1, V13.1.80", (13, 1)),
        (b"release x.y", None),
        (b"release 13", None),
        (b"no version", None),
    ],
)
def test_the_toolkit_release_as_the_note_writes_it(note, toolkit):
    assert codefacts._toolkit(b"\0\0\0\0" + note + b"\0") == toolkit


def test_the_arch_specific_mark_is_found_wherever_its_attribute_lies():
    """CUDA 13 marks an sm_90a cubin in .nv.compat (attribute 0x09 = 1). nvcc writes it first;
    the same attribute last (after a record with a payload) marks the cubin all the same."""
    assert codefacts.cubin_facts(SM90A)[0] == "sm_90a" and codefacts.cubin_facts(SM90)[0] == "sm_90"
    _, head = sections(SM90A)[b".nv.compat"]
    raw = SM90A[head[4] : head[4] + head[5]]
    assert raw[:4] == b"\x02\x09\x01\x00" and len(raw) == 36
    moved = raw[4:] + raw[:4]  # 0x09 last: the seven other records, then it
    assert codefacts._compat_arch_specific(moved) is True
    assert codefacts._compat_arch_specific(moved[:-4] + b"\x02\x09\x00\x00") is False
    assert codefacts._compat_arch_specific(raw[4:]) is False
    data = SM90A[: head[4]] + moved + SM90A[head[4] + head[5] :]
    assert codefacts.cubin_facts(data)[0] == "sm_90a"


def test_a_cubin_for_another_machine_is_e014():
    data = bytearray(SM90)
    struct.pack_into("<H", data, 0x12, 62)  # EM_X86_64
    cubin_refused("not a CUDA ELF (e_machine 62)", bytes(data))


def test_a_cubin_without_a_section_table_is_e014():
    data = bytearray(SM90)
    struct.pack_into("<H", data, 0x3C, 0)
    cubin_refused("cubin has no section table", bytes(data))


@pytest.mark.parametrize(
    "change", ["index 0", "not a string table", "no leading NUL", "no final NUL", "offset with the top bit set"]
)
def test_a_cubin_without_a_valid_section_name_table_is_e014(change):
    index, head = sections(SM90)[b".shstrtab"]
    if change == "index 0":
        edited = bytearray(SM90)
        struct.pack_into("<H", edited, 0x3E, 0)
        data = bytes(edited)
    elif change == "not a string table":
        data = with_field(SM90, b".shstrtab", 1, 1)  # SHT_PROGBITS
    elif change == "no leading NUL":
        data = with_field(SM90, b".shstrtab", 4, head[4] + 1)
    elif change == "no final NUL":
        data = with_field(SM90, b".shstrtab", 5, head[5] - 1)
    else:  # read as signed, this offset counts back from the end of the cubin to the real table
        data = with_field(SM90, b".shstrtab", 4, (1 << 64) - (len(SM90) - head[4]))
    cubin_refused("cubin has no valid section name table", data)


@pytest.mark.parametrize("link", ["count", "top bit set"])
def test_a_symbol_table_linking_a_missing_string_table_is_e014(link):
    (count,) = struct.unpack_from("<H", SM90, 0x3C)
    cubin_refused(
        "cubin symbol table links a missing string table",
        with_field(SM90, b".symtab", 6, count if link == "count" else 0xFFFFFFFF),
    )


def test_a_symbol_table_with_a_partial_last_record_reads_its_whole_records():
    _, head = sections(SM90)[b".symtab"]
    assert codefacts.cubin_facts(with_field(SM90, b".symtab", 5, head[5] + 5)) == codefacts.cubin_facts(SM90)


def test_the_first_name_of_the_section_name_table_is_found():
    """.nv.compat named first in .shstrtab (right after its leading NUL): still the 'a' mark."""
    table_at, table = sections(SM90A)[b".shstrtab"]
    names = SM90A[table[4] : table[4] + table[5]]
    first = b".nv.compat\0"
    new_names = b"\0" + first + names[1:]
    (shoff,) = struct.unpack_from("<Q", SM90A, 0x28)
    (shnum,) = struct.unpack_from("<H", SM90A, 0x3C)
    out = bytearray(SM90A + new_names)
    for i in range(shnum):
        f = list(SHDR.unpack_from(SM90A, shoff + i * SHDR.size))
        name = names[f[0] : names.index(b"\0", f[0])]
        f[0] = 1 if name == b".nv.compat" else (f[0] + len(first) if f[0] else 0)
        if i == table_at:
            f[4], f[5] = len(SM90A), len(new_names)
        SHDR.pack_into(out, shoff + i * SHDR.size, *f)
    assert codefacts.cubin_facts(bytes(out)) == codefacts.cubin_facts(SM90A) == ("sm_90a", ("_Z4axpyfPKfPfi",), (13, 0))


def test_every_kernel_of_a_cubin_is_named():
    """lib_many.so's sm_80 cubin: four kernels (a template's two instances, an extern "C" one)."""
    lib = scan_file(str(BIN / "lib_many.so"), decode=True)
    (c,) = [c for c in lib.containers if c.role == "executable"]
    assert c.entries[0].kernels == ("_Z4fillPffi", "_Z5scaleIdEvPT_S0_i", "_Z5scaleIfEvPT_S0_i", "add_c")


def test_a_device_function_of_relocatable_code_is_no_kernel():
    """rdc_b.o: the kernel apply() calls scale(), defined in rdc_a.cu; a relocatable cubin of
    lib_rdc.so holds scale() in a .text section of its own, without the entry flag or a bank."""
    for name in ("rdc_b.o", "lib_rdc.so"):
        lib = scan_file(str(BIN / name), decode=True)
        kernels = sorted({k for e in lib.entries if e.kind == "sass" for k in e.kernels or ()})
        assert kernels == ["_Z5applyPfi"], (name, kernels)


def relocatable_cubin() -> bytes:
    """lib_rdc.so's relocatable sm_80 cubin of rdc_b.cu: the kernel apply() and the function
    scale() it calls without carrying (undefined, global)."""
    data = (BIN / "lib_rdc.so").read_bytes()
    for c in scan_file(str(BIN / "lib_rdc.so"), decode=True).containers:
        for e in c.entries:
            if e.kind == "sass" and e.unresolved:
                h = fatbin.parse_entry_header(data, e.offset, c.offset + c.size - e.offset, e.offset)
                return fatbin.decode_payload(h, data[e.offset + h.header_size : e.offset + h.total], e.offset)
    raise AssertionError("lib_rdc.so holds no relocatable cubin with undefined symbols")


def symbols(cubin: bytes) -> tuple[int, list[tuple[int, ...]]]:
    _, head = sections(cubin)[b".symtab"]
    return head[4], list(codefacts._SYM.iter_unpack(cubin[head[4] : head[4] + head[5]]))


def with_symbols(cubin: bytes, syms: list[tuple[int, ...]]) -> bytes:
    at, _ = symbols(cubin)
    out = bytearray(cubin)
    for k, sym in enumerate(syms):
        codefacts._SYM.pack_into(out, at + k * codefacts._SYM.size, *sym)
    return bytes(out)


def test_a_called_function_listed_before_the_kernel_does_not_hide_it():
    """The undefined scale() moved ahead of apply() in the symbol table (nvcc's device-link
    objects list their functions in that order): apply() is still a kernel, scale() still
    unresolved."""
    cubin = relocatable_cubin()
    _, syms = symbols(cubin)
    kernel = next(k for k, s in enumerate(syms) if s[2] & 0x10)
    undefined = next(k for k, s in enumerate(syms) if s[3] == 0 and s[1] & 0xF == 2)
    assert kernel < undefined
    syms[kernel], syms[undefined] = syms[undefined], syms[kernel]
    moved = with_symbols(cubin, syms)
    assert codefacts.cubin_facts(moved)[1] == codefacts.cubin_facts(cubin)[1] == ("_Z5applyPfi",)
    assert codefacts.cubin_unresolved(moved) == codefacts.cubin_unresolved(cubin) == ("_Z5scalef",)


def test_a_weak_undefined_function_is_unresolved_too():
    cubin = relocatable_cubin()
    _, syms = symbols(cubin)
    k = next(k for k, s in enumerate(syms) if s[3] == 0 and s[1] & 0xF == 2)
    syms[k] = (syms[k][0], 0x22) + syms[k][2:]  # STB_WEAK, STT_FUNC
    assert codefacts.cubin_unresolved(with_symbols(cubin, syms)) == ("_Z5scalef",)
    syms[k] = (syms[k][0], 0x02) + syms[k][2:]  # STB_LOCAL: not a reference to another object
    assert codefacts.cubin_unresolved(with_symbols(cubin, syms)) == ()


def test_a_relocatable_symbol_table_with_a_partial_last_record_reads_its_whole_records():
    cubin = relocatable_cubin()
    _, head = sections(cubin)[b".symtab"]
    assert codefacts.cubin_unresolved(with_field(cubin, b".symtab", 5, head[5] + 5)) == ("_Z5scalef",)


def test_a_kernels_own_constant_bank_and_shared_memory_relocation_are_not_unresolved():
    """cuBLASLt 13.1's volta_* and cuDNN 9.28's *_cudnn_volta_* cubins (sm_50 to sm_89) name
    `.nv.constant0.<kernel>` and `shmem_reloc_<kernel>` undefined beside the kernel itself: they
    resolve within the object. The same names for a kernel the object does not define do not."""
    cubin = relocatable_cubin()
    _, head = sections(cubin)[b".strtab"]
    strs = cubin[head[4] : head[4] + head[5]]
    bank, scale = strs.index(b".nv.constant0._Z5applyPfi\0"), strs.index(b"_Z5scalef\0")
    _, syms = symbols(cubin)
    k = next(k for k, s in enumerate(syms) if s[3] == 0 and s[1] & 0xF == 2)  # the undefined scale()
    syms[k] = (bank,) + syms[k][1:]
    assert codefacts.cubin_unresolved(with_symbols(cubin, syms)) == ()
    kernel = next(k for k, s in enumerate(syms) if s[2] & 0x10)
    syms[kernel] = (scale,) + syms[kernel][1:]  # the object now defines scale(), not apply()
    assert codefacts.cubin_unresolved(with_symbols(cubin, syms)) == (".nv.constant0._Z5applyPfi",)


@pytest.mark.parametrize(
    "text, kernels",
    [
        (b"// .entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),  # a comment on the first line
        (b".version 9.0\n// .entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),
        (b"/* a block */.entry _Z4realv(", ("_Z4realv",)),  # right after a block's end
        (b"/* .entry _Z4fakev */ .entry _Z4realv(", ("_Z4realv",)),
        (b"/* // */ .entry _Z4realv(", ("_Z4realv",)),  # a // inside a block is no comment
        (b".entry _Z1av( // .entry _Z1bv\n.entry _Z1cv(", ("_Z1av", "_Z1cv")),
        # a `//` inside a block comment, then a real one: the .entry after it is commented out
        (b"/* // */ // .entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),
        (b"// x /* // */ .entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),
        (b"/* // */ // x /* // */ .entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),
        (b"/* x *///.entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),  # the block ends on the //'s first slash
        (b"/* // */ .entry _Z4realv( // a comment after it", ("_Z4realv",)),
        # a `/*` inside a line comment opens no block: the kernels before a later real block count
        (
            b"// see /* below\n.entry _Z1av(\n.entry _Z1bv( /* a real block */ .entry _Z1cv(",
            ("_Z1av", "_Z1bv", "_Z1cv"),
        ),
        (b"/* unterminated .entry _Z1av(", ("_Z1av",)),  # no block without its end (ptxas refuses the text)
    ],
)
def test_ptx_kernels_outside_comments(text, kernels):
    assert codefacts.ptx_facts(text)[2] == kernels


@pytest.mark.parametrize(
    "name,abi,bit",
    [("cuda12_sm90", 7, 0x800), ("cuda12_sm90a", 7, 0x800), ("cuda12_sm100", 8, 0x8), ("cuda12_sm100a", 8, 0x8)],
)
def test_cuda12_cubins_mark_the_a_target_in_e_flags(name, abi, bit):
    data = (READERS / f"{name}.cubin").read_bytes()
    h = elf.parse_header(data, len(data))
    assert h.abiversion == abi
    assert bool(h.flags & bit) == name.endswith("a")  # the fact, as ptxas 12.8 writes it
    target, kernels, _ = codefacts.cubin_facts(data)
    assert target == name.split("_")[1].replace("sm", "sm_")
    assert kernels == AXPY
    cleared = bytearray(data)  # the bit is the only marker: without it the cubin is plain
    struct.pack_into("<I", cleared, 48, h.flags & ~bit)
    assert codefacts.cubin_facts(bytes(cleared))[0] == target.rstrip("a")


def test_kernel_without_the_entry_flag_is_still_a_kernel():
    data = (READERS / "noentry_sm80.cubin").read_bytes()
    small = elf.parse_small(data)
    funcs = [(n, other) for n, info, other, _ in small.symbols() if info & 0xF == 2]
    assert funcs and all(not other & 0x10 for _, other in funcs)  # STO_CUDA_ENTRY cleared
    assert codefacts.cubin_facts(data)[1] == AXPY


def test_device_function_is_not_a_kernel():
    # an -rdc cubin's __noinline__ device function has .text.<name> but no constant bank
    data = (READERS / "cuda12_sm90.cubin").read_bytes()
    assert codefacts.cubin_facts(data)[1] == AXPY


def test_ptx_read_as_ptxas_reads_it():
    text = (READERS / "entry_comment.ptx").read_bytes()
    assert b".entry /*x*/ _Z4axpyfPKfPfi" in text and b"/* .target sm_50 */" in text
    assert b"// .entry decoy_in_a_comment" in text
    assert codefacts.ptx_facts(text) == ("sm_80", (9, 0), AXPY)


@pytest.mark.parametrize(
    "text,target,entries",
    [
        (b".version 8.0\n.target sm_90a, debug\n.entry k()\n{}\n", "sm_90a", ("k",)),
        (b".version 8.0\n.target // why\n  sm_75\n.visible .entry\n//c\nk2 ( )", "sm_75", ("k2",)),
        (b"/*\n.target sm_50\n*/.version 8.0\n.target sm_86\n", "sm_86", ()),
        (b".version 8.0\n.target sm_80 garbage\n", "", ()),
        (b".version 8.0\n/* .entry hidden() */ .entry shown()", None, ("shown",)),
    ],
)
def test_ptx_facts_on_comment_placements(text, target, entries):
    got = codefacts.ptx_facts(text)
    assert (got[0], got[2]) == (target, entries)
