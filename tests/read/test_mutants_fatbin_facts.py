"""What a fatbin entry's payload says (fatbin.cubin_facts, _toolkit, _compat_arch_specific,
ptx_facts, parse_container_header, decode_payload_into), pinned where mutation testing found
fatbin.py loose (docs/mutation.md). test_mutants_fatbin.py holds the checks between an entry's
header and its payload.

Cubins and containers are nvcc 13.0's (tests/fixtures/cuda/bin, NVCC_VERSION); each malformed
case changes one field of a real cubin and asserts the finding code and its words.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from archaudit.read import fatbin
from archaudit.read.decode import DecodePool
from archaudit.read.fatbin import FatbinError
from archaudit.read.library import scan_file, scan_stream

# Every test here runs with each cubin reader (conftest.each_cubin_reader).
pytestmark = pytest.mark.usefixtures("each_cubin_reader")

BIN = Path(__file__).resolve().parents[1] / "fixtures" / "cuda" / "bin"
SM90A = (BIN / "kern_sm90a.cubin").read_bytes()
SM90 = (BIN / "kern_sm90.cubin").read_bytes()
SHDR = fatbin._SHDR  # name, type, flags, addr, offset, size, link, info, align, entsize


def sections(data: bytes) -> dict[bytes, tuple[int, tuple[int, ...]]]:
    """Section name -> (index, header fields), read with struct (not the code under test)."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, shstrndx = struct.unpack_from("<HH", data, 0x3C)
    heads = [SHDR.unpack_from(data, shoff + i * SHDR.size) for i in range(shnum)]
    names = data[heads[shstrndx][4]:heads[shstrndx][4] + heads[shstrndx][5]]
    return {names[h[0]:names.index(b"\0", h[0])]: (i, h) for i, h in enumerate(heads)}


def with_field(data: bytes, section: bytes, field: int, value: int) -> bytes:
    """`data` with one field (an index into SHDR's fields) of one section header changed."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    i, head = sections(data)[section]
    fields = list(head)
    fields[field] = value
    out = bytearray(data)
    SHDR.pack_into(out, shoff + i * SHDR.size, *fields)
    return bytes(out)


def refused(words: str, data: bytes) -> None:
    with pytest.raises(FatbinError) as e:
        fatbin.cubin_facts(data)
    assert e.value.code == "E014" and words in e.value.message, (e.value.code, e.value.message)


@pytest.mark.parametrize("name", ["kern_sm75.cubin", "kern_sm80.cubin", "kern_sm90.cubin", "kern_sm90a.cubin",
                                  "kern_sm100.cubin", "kern_sm120.cubin"])
def test_every_cubin_names_the_toolkit_that_built_it(name):
    """The .note.nv.tkinfo note says "release 13.0": the driver floor (D001/D002) starts there."""
    assert fatbin.cubin_facts((BIN / name).read_bytes())[2] == (13, 0)


@pytest.mark.parametrize("note, toolkit", [(b"Cuda compilation tools, release 12.8, V12.8.93", (12, 8)),
                                           (b"xx release 9.2, V9.2.148", (9, 2)),
                                           (b"Cuda compilation tools, release 13.1, V13.1.80", (13, 1)),
                                           (b"release x.y", None), (b"release 13", None), (b"no version", None)])
def test_the_toolkit_release_as_the_note_writes_it(note, toolkit):
    assert fatbin._toolkit(b"\0\0\0\0" + note + b"\0") == toolkit


def test_the_arch_specific_mark_is_found_wherever_its_attribute_lies():
    """CUDA 13 marks an sm_90a cubin in .nv.compat (attribute 0x09 = 1). nvcc writes it first;
    the same attribute last (after a record with a payload) marks the cubin all the same."""
    assert fatbin.cubin_facts(SM90A)[0] == "sm_90a" and fatbin.cubin_facts(SM90)[0] == "sm_90"
    _, head = sections(SM90A)[b".nv.compat"]
    raw = SM90A[head[4]:head[4] + head[5]]
    assert raw[:4] == b"\x02\x09\x01\x00" and len(raw) == 36
    moved = raw[4:] + raw[:4]  # 0x09 last: the seven other records, then it
    assert fatbin._compat_arch_specific(moved) is True
    assert fatbin._compat_arch_specific(moved[:-4] + b"\x02\x09\x00\x00") is False
    assert fatbin._compat_arch_specific(raw[4:]) is False
    data = SM90A[:head[4]] + moved + SM90A[head[4] + head[5]:]
    assert fatbin.cubin_facts(data)[0] == "sm_90a"


def test_a_cubin_for_another_machine_is_e014():
    data = bytearray(SM90)
    struct.pack_into("<H", data, 0x12, 62)  # EM_X86_64
    refused("not a CUDA ELF (e_machine 62)", bytes(data))


def test_a_cubin_without_a_section_table_is_e014():
    data = bytearray(SM90)
    struct.pack_into("<H", data, 0x3C, 0)
    refused("cubin has no section table", bytes(data))


@pytest.mark.parametrize("change", ["index 0", "not a string table", "no leading NUL", "no final NUL",
                                    "offset with the top bit set"])
def test_a_cubin_without_a_valid_section_name_table_is_e014(change):
    index, head = sections(SM90)[b".shstrtab"]
    if change == "index 0":
        data = bytearray(SM90)
        struct.pack_into("<H", data, 0x3E, 0)
        data = bytes(data)
    elif change == "not a string table":
        data = with_field(SM90, b".shstrtab", 1, 1)  # SHT_PROGBITS
    elif change == "no leading NUL":
        data = with_field(SM90, b".shstrtab", 4, head[4] + 1)
    elif change == "no final NUL":
        data = with_field(SM90, b".shstrtab", 5, head[5] - 1)
    else:  # read as signed, this offset counts back from the end of the cubin to the real table
        data = with_field(SM90, b".shstrtab", 4, (1 << 64) - (len(SM90) - head[4]))
    refused("cubin has no valid section name table", data)


@pytest.mark.parametrize("link", ["count", "top bit set"])
def test_a_symbol_table_linking_a_missing_string_table_is_e014(link):
    count, = struct.unpack_from("<H", SM90, 0x3C)
    refused("cubin symbol table links a missing string table",
            with_field(SM90, b".symtab", 6, count if link == "count" else 0xFFFFFFFF))


def test_a_symbol_table_with_a_partial_last_record_reads_its_whole_records():
    _, head = sections(SM90)[b".symtab"]
    assert fatbin.cubin_facts(with_field(SM90, b".symtab", 5, head[5] + 5)) == fatbin.cubin_facts(SM90)


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


@pytest.mark.parametrize("text, kernels", [
    (b"// .entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),              # a comment on the first line
    (b".version 9.0\n// .entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),
    (b"/* a block */.entry _Z4realv(", ("_Z4realv",)),                     # right after a block's end
    (b"/* .entry _Z4fakev */ .entry _Z4realv(", ("_Z4realv",)),
    (b"/* // */ .entry _Z4realv(", ("_Z4realv",)),                         # a // inside a block is no comment
    (b".entry _Z1av( // .entry _Z1bv\n.entry _Z1cv(", ("_Z1av", "_Z1cv")),
    # a `//` inside a block comment, then a real one: the .entry after it is commented out
    (b"/* // */ // .entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),
    (b"// x /* // */ .entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),
    (b"/* // */ // x /* // */ .entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),
    (b"/* x *///.entry _Z4fakev\n.entry _Z4realv(", ("_Z4realv",)),  # the block ends on the //'s first slash
    (b"/* // */ .entry _Z4realv( // a comment after it", ("_Z4realv",)),
    # a `/*` inside a line comment opens no block: the kernels before a later real block count
    (b"// see /* below\n.entry _Z1av(\n.entry _Z1bv( /* a real block */ .entry _Z1cv(", ("_Z1av", "_Z1bv", "_Z1cv")),
    (b"/* unterminated .entry _Z1av(", ("_Z1av",)),  # no block without its end (ptxas refuses the text)
])
def test_ptx_kernels_outside_comments(text, kernels):
    assert fatbin.ptx_facts(text)[2] == kernels


def test_a_container_header_is_version_1_with_a_16_byte_header():
    data = (BIN / "kern.fatbin").read_bytes()
    fat_size, = struct.unpack_from("<Q", data, 8)
    assert fatbin.parse_container_header(data) == fatbin.ContainerHeader(1, 16, fat_size)
    assert fatbin.parse_container_header(b"\0" * 8 + data[:16], 8) == fatbin.ContainerHeader(1, 16, fat_size)
    assert fatbin.parse_container_header(data[:16]) is not None and fatbin.parse_container_header(data[:15]) is None
    for version, header_size in ((2, 16), (1, 32), (0, 16)):
        head = data[:4] + struct.pack("<HH", version, header_size) + data[8:16]
        assert fatbin.parse_container_header(head) is None, (version, header_size)


def test_a_wrapper_record_is_version_1_or_2():
    record = fatbin.WRAPPER.pack(0x466243B1, 1, 0x1000, 0)
    assert fatbin.parse_wrapper(record, 0) == (1, 0x1000)
    assert fatbin.parse_wrapper(b"\0" * 4 + record, 4) == (1, 0x1000)
    assert fatbin.parse_wrapper(record[:-1], 0) is None
    assert fatbin.parse_wrapper(fatbin.WRAPPER.pack(0x466243B1, 3, 0x1000, 0), 0) is None


# ---- decoding into a worker's buffer (what a run with a decode pool does) ---------------------

COMPRESSED = ["lib_cmp_size.so", "lib_cmp_speed.so", "lib_cmp_speed_all.so", "lib_cmp_all.so", "kern.fatbin"]


def compressed_entries() -> list[tuple[str, fatbin.EntryHeader, bytes, int]]:
    """(file, entry header, payload as stored, offset) of every compressed entry of the fixtures."""
    out = []
    for name in COMPRESSED:
        data = (BIN / name).read_bytes()
        for c in scan_file(str(BIN / name), decode=False).containers:
            pos = c.offset + 16
            while pos < c.offset + c.size:
                h = fatbin.parse_entry_header(data, pos, c.offset + c.size - pos, pos)
                if h.compression in ("zstd", "lz4"):
                    out.append((name, h, data[pos + h.header_size:pos + h.total], pos))
                pos += h.total
    return out


def test_every_compressed_payload_decodes_into_a_buffer_as_it_decodes_alone():
    found = compressed_entries()
    assert {h.compression for _, h, _, _ in found} == {"zstd", "lz4"}
    buf = fatbin.DecodeBuffer()
    for name, h, payload, pos in found:
        alone = fatbin.decode_payload(h, payload, pos)
        assert bytes(fatbin.decode_payload_into(h, payload, pos, fatbin.DEFAULT_MAX_PAYLOAD, buf)) == alone, name
        assert len(alone) == h.uncompressed_size


def test_a_payload_past_the_bound_is_e012_in_a_buffer_too():
    buf = fatbin.DecodeBuffer()
    for _, h, payload, pos in compressed_entries():
        with pytest.raises(FatbinError) as e:
            fatbin.decode_payload_into(h, payload, pos, h.uncompressed_size - 1, buf)
        assert (e.value.code, e.value.offset) == ("E012", pos) and "verification bound" in e.value.message
        assert len(fatbin.decode_payload_into(h, payload, pos, h.uncompressed_size, buf)) == h.uncompressed_size


def test_a_corrupt_or_short_payload_is_e012_in_a_buffer_too():
    buf = fatbin.DecodeBuffer()
    for name, h, payload, pos in compressed_entries():
        cut = payload[:len(payload) // 2]
        with pytest.raises(FatbinError) as e:
            fatbin.decode_payload_into(h, cut, pos, fatbin.DEFAULT_MAX_PAYLOAD, buf)
        assert (e.value.code, e.value.offset) == ("E012", pos), (name, e.value.message)


def test_a_zstd_frame_longer_than_its_header_says_is_e012_in_a_buffer():
    """The header declares one byte less than the frame holds: the frame goes on past it."""
    for name, h, payload, pos in compressed_entries():
        if h.compression != "zstd":
            continue
        short = fatbin.EntryHeader(h.kind_code, h.header_size, h.payload_size, h.compressed_size,
                                   h.options_offset, h.version, h.arch, h.identifier_offset, h.identifier_length,
                                   h.flags, h.uncompressed_size - 1)
        with pytest.raises(FatbinError) as e:
            fatbin.decode_payload_into(short, payload, pos, fatbin.DEFAULT_MAX_PAYLOAD, fatbin.DecodeBuffer())
        assert e.value.code == "E012", name


@pytest.mark.parametrize("name", COMPRESSED + ["lib_many.so", "lib_rdc.so"])
def test_a_decode_pool_inventories_as_the_scanning_thread_does(name):
    path = BIN / name
    data = path.read_bytes()
    alone = scan_file(str(path), decode=True)
    with DecodePool(2, max_in_flight=4096) as pool:  # a small bound: readers wait for the workers
        pooled = scan_stream(name, len(data), lambda: iter([data[i:i + 1000] for i in range(0, len(data), 1000)]),
                             decode=True, pool=pool)
        assert pool._in_flight == 0  # every job's bytes released: the bound holds for the next library
    assert pooled.containers == alone.containers and pooled.problems == alone.problems


def relocatable_cubin() -> bytes:
    """lib_rdc.so's relocatable sm_80 cubin of rdc_b.cu: the kernel apply() and the function
    scale() it calls without carrying (undefined, global)."""
    data = (BIN / "lib_rdc.so").read_bytes()
    for c in scan_file(str(BIN / "lib_rdc.so"), decode=True).containers:
        for e in c.entries:
            if e.kind == "sass" and e.unresolved:
                h = fatbin.parse_entry_header(data, e.offset, c.offset + c.size - e.offset, e.offset)
                return fatbin.decode_payload(h, data[e.offset + h.header_size:e.offset + h.total], e.offset)
    raise AssertionError("lib_rdc.so holds no relocatable cubin with undefined symbols")


def symbols(cubin: bytes) -> tuple[int, list[tuple[int, ...]]]:
    _, head = sections(cubin)[b".symtab"]
    return head[4], list(fatbin._SYM.iter_unpack(cubin[head[4]:head[4] + head[5]]))


def with_symbols(cubin: bytes, syms: list[tuple[int, ...]]) -> bytes:
    at, _ = symbols(cubin)
    out = bytearray(cubin)
    for k, sym in enumerate(syms):
        fatbin._SYM.pack_into(out, at + k * fatbin._SYM.size, *sym)
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
    assert fatbin.cubin_facts(moved)[1] == fatbin.cubin_facts(cubin)[1] == ("_Z5applyPfi",)
    assert fatbin.cubin_unresolved(moved) == fatbin.cubin_unresolved(cubin) == ("_Z5scalef",)


def test_a_weak_undefined_function_is_unresolved_too():
    cubin = relocatable_cubin()
    _, syms = symbols(cubin)
    k = next(k for k, s in enumerate(syms) if s[3] == 0 and s[1] & 0xF == 2)
    syms[k] = (syms[k][0], 0x22) + syms[k][2:]  # STB_WEAK, STT_FUNC
    assert fatbin.cubin_unresolved(with_symbols(cubin, syms)) == ("_Z5scalef",)
    syms[k] = (syms[k][0], 0x02) + syms[k][2:]  # STB_LOCAL: not a reference to another object
    assert fatbin.cubin_unresolved(with_symbols(cubin, syms)) == ()


def test_a_relocatable_symbol_table_with_a_partial_last_record_reads_its_whole_records():
    cubin = relocatable_cubin()
    _, head = sections(cubin)[b".symtab"]
    assert fatbin.cubin_unresolved(with_field(cubin, b".symtab", 5, head[5] + 5)) == ("_Z5scalef",)


def test_the_first_name_of_the_section_name_table_is_found():
    """.nv.compat named first in .shstrtab (right after its leading NUL): still the 'a' mark."""
    table_at, table = sections(SM90A)[b".shstrtab"]
    names = SM90A[table[4]:table[4] + table[5]]
    first = b".nv.compat\0"
    new_names = b"\0" + first + names[1:]
    shoff, = struct.unpack_from("<Q", SM90A, 0x28)
    shnum, = struct.unpack_from("<H", SM90A, 0x3C)
    out = bytearray(SM90A + new_names)
    for i in range(shnum):
        f = list(SHDR.unpack_from(SM90A, shoff + i * SHDR.size))
        name = names[f[0]:names.index(b"\0", f[0])]
        f[0] = 1 if name == b".nv.compat" else (f[0] + len(first) if f[0] else 0)
        if i == table_at:
            f[4], f[5] = len(SM90A), len(new_names)
        SHDR.pack_into(out, shoff + i * SHDR.size, *f)
    assert fatbin.cubin_facts(bytes(out)) == fatbin.cubin_facts(SM90A) == ("sm_90a", ("_Z4axpyfPKfPfi",), (13, 0))


def test_an_entry_identifier_absent_or_not_utf8():
    h = fatbin.EntryHeader(2, 64, 0, 0, 0, (1, 8), 80, 0, 0, 0, 0)
    assert fatbin.identifier(b"\0" * 64, h) == ""
    h = fatbin.EntryHeader(2, 64, 0, 0, 0, (1, 8), 80, 4, 6, 0, 0)
    assert fatbin.identifier(b"\0" * 4 + b" k\xffo.cu" + b"\0" * 54, h) == "k\ufffdo.c"


def test_short_data_at_an_offset_is_no_header():
    data = (BIN / "kern.fatbin").read_bytes()
    assert fatbin.parse_container_header(b"\0" * 8 + data[:15], 8) is None
    assert fatbin.parse_wrapper(b"\0" * 8 + fatbin.WRAPPER.pack(0x466243B1, 1, 0x1000, 0)[:-1], 8) is None


def zstd_ptx_entry(payload: bytes, usize: int) -> fatbin.EntryHeader:
    return fatbin.EntryHeader(1, 64, len(payload), len(payload), 0, (9, 0), 90, 0, 0, fatbin.FLAG_ZSTD, usize)


@pytest.mark.parametrize("layout", ["no content size", "two frames", "large, one frame"])
def test_zstd_payloads_the_fast_path_does_not_take_decode_alike(layout):
    """A frame that does not state its size, a payload of two frames (refused), and one large
    enough that the stream reader fills the buffer in several reads: into a buffer, as alone."""
    import zstandard

    text = (BIN / "kern_80.ptx").read_bytes()
    if layout == "no content size":
        payload = zstandard.ZstdCompressor(write_content_size=False).compress(text)
    elif layout == "two frames":
        payload = zstandard.ZstdCompressor().compress(text[:100]) + zstandard.ZstdCompressor().compress(text[100:])
    else:
        text = text * (4 << 20 // len(text) + 1)
        payload = zstandard.ZstdCompressor().compress(text)
    h = zstd_ptx_entry(payload, len(text))
    if layout == "two frames":  # refused: the entry's size is not one frame's (E012), whichever path
        for out in (None, fatbin.DecodeBuffer()):
            with pytest.raises(FatbinError) as e:
                fatbin.decode_payload_into(h, payload, 0, fatbin.DEFAULT_MAX_PAYLOAD, out)
            assert e.value.code == "E012" and "frame says 100 bytes" in e.value.message
        return
    into = fatbin.decode_payload_into(h, payload, 0, fatbin.DEFAULT_MAX_PAYLOAD, fatbin.DecodeBuffer())
    assert bytes(into) == fatbin.decode_payload(h, payload, 0) == text
    with pytest.raises(FatbinError) as e:
        fatbin.decode_payload_into(h, payload, 0, len(text) - 1, fatbin.DecodeBuffer())
    assert e.value.code == "E012"


def test_each_worker_decodes_into_its_own_buffer_and_large_payloads_into_one_shared():
    """A 1-worker pool: small jobs reuse the worker's buffer; a payload decoding to more than BIG
    (transformer-engine's 66 MB LZ4 entries) takes its turn in the one shared buffer."""
    from archaudit.model import Entry
    from archaudit.read import decode

    seen: list[fatbin.DecodeBuffer | None] = []

    def job(out: fatbin.DecodeBuffer | None) -> Entry:
        seen.append(out)
        return Entry("nvidia", "sass", "sm_80")

    with DecodePool(1) as pool:
        small = [decode.result(pool.submit(10, 100, job)) for _ in range(2)]
        big = decode.result(pool.submit(10, decode.BIG + 1, job))
        assert pool._in_flight == 0
    assert small == [Entry("nvidia", "sass", "sm_80")] * 2 and big == small[0]
    assert all(isinstance(b, fatbin.DecodeBuffer) for b in seen)
    assert seen[0] is seen[1] and seen[2] is not seen[0]
    assert pool.workers == 1


def test_a_kernels_own_constant_bank_and_shared_memory_relocation_are_not_unresolved():
    """cuBLASLt 13.1's volta_* and cuDNN 9.28's *_cudnn_volta_* cubins (sm_50 to sm_89) name
    `.nv.constant0.<kernel>` and `shmem_reloc_<kernel>` undefined beside the kernel itself: they
    resolve within the object. The same names for a kernel the object does not define do not."""
    cubin = relocatable_cubin()
    _, head = sections(cubin)[b".strtab"]
    strs = cubin[head[4]:head[4] + head[5]]
    bank, scale = strs.index(b".nv.constant0._Z5applyPfi\0"), strs.index(b"_Z5scalef\0")
    _, syms = symbols(cubin)
    k = next(k for k, s in enumerate(syms) if s[3] == 0 and s[1] & 0xF == 2)  # the undefined scale()
    syms[k] = (bank,) + syms[k][1:]
    assert fatbin.cubin_unresolved(with_symbols(cubin, syms)) == ()
    kernel = next(k for k, s in enumerate(syms) if s[2] & 0x10)
    syms[kernel] = (scale,) + syms[kernel][1:]  # the object now defines scale(), not apply()
    assert fatbin.cubin_unresolved(with_symbols(cubin, syms)) == (".nv.constant0._Z5applyPfi",)
