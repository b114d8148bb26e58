"""Shared machinery of the fuzz suite: real fixtures, where their fields are, how to
mutate them, and the properties every run must satisfy.

Fields are located with archaudit's own readers on the *unmutated* fixture (ELF tables
with ``elf.parse_small``, fatbin containers and entries with ``library.library_from_bytes``,
HIP bundles with ``hip``), so a mutation can aim at one named field of one real
structure instead of at random bytes only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import struct
import tempfile
import time
import zlib
from collections import Counter
from functools import cache
from pathlib import Path

import lz4.block
import zstandard
from hypothesis import strategies as st

from archaudit import cli
from archaudit.read import elf, fatbin, hip, library, zipread

ROOT = Path(__file__).resolve().parents[2]
CUDA = ROOT / "tests" / "fixtures" / "cuda" / "bin"
AMD = ROOT / "tests" / "fixtures" / "amd" / "bin"
EXAMPLE_WHEEL = next((ROOT / "src" / "archaudit" / "examples").glob("*.whl"))
REGRESSIONS = Path(__file__).resolve().parent / "regressions"

# Inputs run per test function; written to ARCHAUDIT_FUZZ_COUNTS (JSON) every 500 inputs and at
# the end of the session, so that a run stopped by a time limit still reports what it did.
COUNTS: Counter = Counter()


def tally(test: str) -> None:
    COUNTS[test] += 1
    if sum(COUNTS.values()) % 500 == 0:
        write_counts()


def write_counts() -> None:
    out = os.environ.get("ARCHAUDIT_FUZZ_COUNTS")
    if out:
        with open(out + ".tmp", "w") as f:
            json.dump(dict(sorted(COUNTS.items())), f, indent=1)
        os.replace(out + ".tmp", out)


# The values every size, count and offset field is set to (masked to the field's width).
SPECIAL = (
    0,
    1,
    7,
    8,
    16,
    63,
    64,
    0x7F,
    0xFF,
    0x7FFF,
    0xFFFF,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**32,
    2**63 - 1,
    2**63,
    2**64 - 1,
)

LIBRARY_FIXTURES = sorted(str(p.relative_to(ROOT)) for p in CUDA.glob("*.so")) + sorted(
    str(p.relative_to(ROOT)) for p in AMD.glob("*.so")
)
OBJECT_FIXTURES = sorted(str(p.relative_to(ROOT)) for p in CUDA.glob("*.o"))
CUBIN_FIXTURES = sorted(str(p.relative_to(ROOT)) for p in CUDA.glob("*.cubin"))
PTX_FIXTURES = sorted(str(p.relative_to(ROOT)) for p in CUDA.glob("*.ptx"))
FATBIN_FIXTURES = sorted(str(p.relative_to(ROOT)) for p in CUDA.glob("*.fatbin"))
HSACO_FIXTURES = sorted(str(p.relative_to(ROOT)) for p in AMD.glob("*.hsaco"))
HIP_FIXTURES = sorted(str(p.relative_to(ROOT)) for p in AMD.glob("*.so"))


@cache
def load(rel: str) -> bytes:
    return (ROOT / rel).read_bytes()


# ---- where the fields are ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Field:
    """A fixed-width little-endian integer at `offset` (`width` bytes), named for reports."""

    name: str
    offset: int
    width: int


@dataclasses.dataclass(frozen=True)
class Region:
    name: str
    start: int
    stop: int


@dataclasses.dataclass
class Layout:
    fields: list[Field]
    regions: list[Region]
    payloads: list[tuple[int, fatbin.EntryHeader]]  # (entry offset, header)
    # (offset, bit mask): bits an input states only once, taken on trust in some modes
    trusted_header_mode: list[tuple[int, int]]
    trusted_decode_mode: list[tuple[int, int]]
    # payloads of SASS entries: their kernel symbols decide (in decode mode) whether a
    # device-link container is judged at all
    dlink_payloads: list[tuple[int, int]] = dataclasses.field(default_factory=list)


_ELF_HEADER_FIELDS = [
    ("e_ident.class", 4, 1),
    ("e_ident.data", 5, 1),
    ("e_ident.osabi", 7, 1),
    ("e_ident.abiversion", 8, 1),
    ("e_type", 16, 2),
    ("e_machine", 18, 2),
    ("e_phoff", 32, 8),
    ("e_shoff", 40, 8),
    ("e_flags", 48, 4),
    ("e_phentsize", 54, 2),
    ("e_phnum", 56, 2),
    ("e_shentsize", 58, 2),
    ("e_shnum", 60, 2),
    ("e_shstrndx", 62, 2),
]
_PHDR_FIELDS = [
    ("p_type", 0, 4),
    ("p_flags", 4, 4),
    ("p_offset", 8, 8),
    ("p_vaddr", 16, 8),
    ("p_filesz", 32, 8),
    ("p_memsz", 40, 8),
]
_SHDR_FIELDS = [
    ("sh_name", 0, 4),
    ("sh_type", 4, 4),
    ("sh_flags", 8, 8),
    ("sh_addr", 16, 8),
    ("sh_offset", 24, 8),
    ("sh_size", 32, 8),
    ("sh_link", 40, 4),
    ("sh_entsize", 56, 8),
]
_CONTAINER_FIELDS = [("magic", 0, 4), ("version", 4, 2), ("header_size", 6, 2), ("fat_size", 8, 8)]
_ENTRY_FIELDS = [
    ("kind", 0, 2),
    ("entry_version", 2, 2),
    ("header_size", 4, 4),
    ("payload_size", 8, 8),
    ("compressed_size", 16, 4),
    ("options_offset", 20, 4),
    ("version_minor", 24, 2),
    ("version_major", 26, 2),
    ("arch", 28, 4),
    ("identifier_offset", 32, 4),
    ("identifier_length", 36, 4),
    ("flags", 40, 8),
    ("reserved", 48, 8),
    ("uncompressed_size", 56, 8),
]
_WRAPPER_FIELDS = [("magic", 0, 4), ("version", 4, 4), ("container_address", 8, 8), ("prelinked", 16, 8)]


def elf_layout(data: bytes, base: int = 0, prefix: str = "elf") -> tuple[list[Field], list[Region], dict]:
    """Fields and regions of the ELF at data[base:]; also {section name: Section}."""
    fields = [Field(f"{prefix}.{n}", base + o, w) for n, o, w in _ELF_HEADER_FIELDS]
    regions = [Region(f"{prefix}.header", base, base + 64)]
    small = elf.parse_small(data[base:])
    h = small.header
    regions.append(Region(f"{prefix}.program_headers", base + h.phoff, base + h.phoff + 56 * h.phnum))
    for i in range(h.phnum):
        fields += [Field(f"{prefix}.phdr[{i}].{n}", base + h.phoff + 56 * i + o, w) for n, o, w in _PHDR_FIELDS]
    regions.append(Region(f"{prefix}.section_table", base + h.shoff, base + h.shoff + 64 * h.shnum))
    sections: dict[str, elf.Section] = {}
    for i, s in enumerate(small.sections):
        sections.setdefault(s.name, s)
        for n, o, w in _SHDR_FIELDS:
            fields.append(Field(f"{prefix}.shdr[{i}:{s.name}].{n}", base + h.shoff + 64 * i + o, w))
        if s.type != elf.SHT_NOBITS and s.size:
            regions.append(Region(f"{prefix}.section:{s.name}", base + s.offset, base + s.file_end))
    return fields, regions, sections


def _cubin_layout(
    data: bytes, at: int, size: int, entry: int
) -> tuple[list[Field], list[Region], list[tuple[int, int]]]:
    """A raw cubin entry's own ELF tables (fields, regions) and the bytes decode mode reads by
    section name; nothing when its ELF cannot be read."""
    try:
        f, r, _ = elf_layout(data[: at + size], at, f"cubin@{entry:x}")
    except elf.ElfError:
        return [], [], []
    td: list[tuple[int, int]] = []
    # decode mode: the cubin's 'a' lives in .nv.compat, found by section name;
    # changing both it and the header flag agrees with itself
    for x in f:
        if x.name.endswith(
            (
                ".sh_name",
                ".e_shstrndx",
                ":.shstrtab].sh_offset",
                ":.shstrtab].sh_size",
                ":.nv.compat].sh_offset",
                ":.nv.compat].sh_size",
            )
        ):
            td += [(x.offset + i, 0xFF) for i in range(x.width)]
    for reg in r:
        if reg.name.endswith((".section:.nv.compat", ".section:.shstrtab")):
            td += [(i, 0xFF) for i in range(reg.start, reg.stop)]
    return f, r, td


@cache
def layout(rel: str) -> Layout:
    data = load(rel)
    fields: list[Field] = []
    regions: list[Region] = []
    payloads: list[tuple[int, fatbin.EntryHeader]] = []
    th: list[tuple[int, int]] = []
    td: list[tuple[int, int]] = []
    sections: dict = {}
    if data[:4] == b"\x7fELF":
        f, r, sections = elf_layout(data)
        fields += f
        regions += r
        # Section names are stated once (e_shstrndx, sh_name into .shstrtab, and where .shstrtab
        # lies); a container's role
        # and a cubin's .nv.compat follow them. archaudit rejects unnamed sections and a missing
        # name table, but a name changed into another valid name is taken on trust.
        names = [
            x
            for x in f
            if x.name.startswith("elf.")
            and (
                x.name.endswith((".sh_name", ".e_shstrndx"))
                or x.name.endswith((":.shstrtab].sh_offset", ":.shstrtab].sh_size"))
            )
        ]
        shstr = sections.get(".shstrtab")
        for x in names:
            th += [(x.offset + i, 0xFF) for i in range(x.width)]
        if shstr is not None:
            th += [(i, 0xFF) for i in range(shstr.offset, shstr.file_end)]
        # A standalone cubin or code object states its target once: e_flags (and a cubin's 'a'
        # in .nv.compat). Inside a fatbin or bundle the entry header or bundle id repeats it.
        if struct.unpack_from("<H", data, 18)[0] in (elf.EM_CUDA, elf.EM_AMDGPU):
            th += [(48 + i, 0xFF) for i in range(4)]
            compat = sections.get(".nv.compat")
            if compat is not None:
                th += [(i, 0xFF) for i in range(compat.offset, compat.file_end)]
        td += th
        seg = sections.get(".nvFatBinSegment")
        if seg is not None:
            for i in range(seg.offset, seg.file_end - 23, 24):
                fields += [Field(f"wrapper@{i:x}.{n}", i + o, w) for n, o, w in _WRAPPER_FIELDS]
    lib = library.library_from_bytes(rel, data, decode=False)
    # fixtures are valid, but for the ones whose container lies, by design, in no section, and the
    # zstd frame that holds a fatbin container (lib_zstd_fatbin.so), which check refuses by design
    assert all(
        p.code in ("E011", "E033") and (p.message.endswith("lies in no section") or "inside a zstd frame" in p.message)
        for p in lib.problems
    ), (rel, lib.problems)
    for c in lib.containers:
        if c.vendor == "nvidia" and data[c.offset : c.offset + 4] == fatbin.MAGIC:
            regions.append(Region(f"container@{c.offset:x}", c.offset, c.offset + c.size))
            fields += [Field(f"container@{c.offset:x}.{n}", c.offset + o, w) for n, o, w in _CONTAINER_FIELDS]
            for e in c.entries:
                eh = fatbin.parse_entry_header(data, e.offset, c.offset + c.size - e.offset, e.offset)
                payloads.append((e.offset, eh))
                fields += [Field(f"entry@{e.offset:x}.{n}", e.offset + o, w) for n, o, w in _ENTRY_FIELDS]
                regions.append(Region(f"entry_header@{e.offset:x}", e.offset, e.offset + eh.header_size))
                at = e.offset + eh.header_size
                regions.append(Region(f"payload@{e.offset:x}", at, at + eh.payload_size))
                if eh.compression in ("zstd", "lz4"):
                    regions.append(Region(f"compressed@{e.offset:x}", at, at + eh.compressed_size))
                elif eh.kind_code == 2 and eh.payload_size >= 64:  # a raw cubin: its own ELF tables
                    f, r, d = _cubin_layout(data, at, eh.payload_size, e.offset)
                    fields += f
                    regions += r
                    td += d
                # header mode takes kind, arch and flags on trust: they are stated only there
                th += [(e.offset + i, 0xFF) for i in (0, 1)]
                th += [(e.offset + 28 + i, 0xFF) for i in range(4)]
                th += [(e.offset + 40 + i, 0xFF) for i in range(8)]
                if eh.kind_code == 2:
                    # decode mode: a cubin records no 'f' (family) suffix at all, and 'a' only
                    # from sm_90 on (.nv.compat attribute 9)
                    td.append((e.offset + 42, 0x20 | (0x10 if eh.arch < 90 else 0)))
                # decode mode: kind 8 (LTO IR) is opaque and never decoded: turning an entry
                # into one is not detectable (it then counts as no coverage at all)
                td.append((e.offset, 0x08))
        elif c.vendor == "amd" and c.role == "hip":
            regions.append(Region(f"bundle@{c.offset:x}", c.offset, c.offset + c.size))
            fields += hip_fields(data, c.offset)
    dl = [(o + eh.header_size, o + eh.header_size + eh.payload_size) for o, eh in payloads if eh.kind_code == 2]
    return Layout(fields, regions, payloads, th, td, dl)


def hip_fields(data: bytes, at: int) -> list[Field]:
    if data[at : at + 4] == hip.COMPRESSED_MAGIC:
        version = struct.unpack_from("<H", data, at + 4)[0]
        out = [Field(f"ccob@{at:x}.version", at + 4, 2), Field(f"ccob@{at:x}.method", at + 6, 2)]
        if version == 1:
            out += [Field(f"ccob@{at:x}.usize", at + 8, 4), Field(f"ccob@{at:x}.hash", at + 12, 8)]
        elif version == 2:
            out += [
                Field(f"ccob@{at:x}.total", at + 8, 4),
                Field(f"ccob@{at:x}.usize", at + 12, 4),
                Field(f"ccob@{at:x}.hash", at + 16, 8),
            ]
        else:
            out += [
                Field(f"ccob@{at:x}.total", at + 8, 8),
                Field(f"ccob@{at:x}.usize", at + 16, 8),
                Field(f"ccob@{at:x}.hash", at + 24, 8),
            ]
        return out
    out = [Field(f"bundle@{at:x}.count", at + 24, 8)]
    count = struct.unpack_from("<Q", data, at + 24)[0]
    pos = at + 32
    for i in range(count):
        off, size, idlen = struct.unpack_from("<QQQ", data, pos)
        out += [
            Field(f"bundle@{at:x}[{i}].offset", pos, 8),
            Field(f"bundle@{at:x}[{i}].size", pos + 8, 8),
            Field(f"bundle@{at:x}[{i}].id_length", pos + 16, 8),
        ]
        if data[at + off : at + off + 4] == b"\x7fELF":
            try:
                f, _, _ = elf_layout(data[: at + off + size], at + off, f"codeobject@{at + off:x}")
                out += f
            except elf.ElfError:
                pass
        pos += 24 + idlen
    return out


# ---- mutations -------------------------------------------------------------------------------


def put(data: bytes, f: Field, value: int) -> bytes:
    value &= (1 << (8 * f.width)) - 1
    if f.offset + f.width > len(data):
        return data
    return data[: f.offset] + value.to_bytes(f.width, "little") + data[f.offset + f.width :]


def get(data: bytes, f: Field) -> int:
    return int.from_bytes(data[f.offset : f.offset + f.width], "little")


@st.composite
def field_values(draw, data: bytes, f: Field, others: list[Field]):
    """A hostile value for `f`: special sizes, near the current value, or another field's
    value or offset (values that overlap or loop back)."""
    current = get(data, f)
    how = draw(st.sampled_from(["special", "delta", "other_value", "offset_of", "random"]))
    if how == "special":
        return draw(st.sampled_from(SPECIAL))
    if how == "delta":
        return (
            current + draw(st.sampled_from([-64, -16, -8, -1, 1, 8, 16, 64, 4096]))
            if draw(st.booleans())
            else current * draw(st.sampled_from([2, 3, 1000]))
        )
    if how == "other_value":
        return get(data, draw(st.sampled_from(others)))
    if how == "offset_of":  # point at another structure (or at itself): overlaps and loops
        return draw(st.sampled_from(others)).offset
    return draw(st.integers(0, 2 ** (8 * f.width) - 1))


@st.composite
def set_field(draw, data: bytes, fields: list[Field]):
    f = draw(st.sampled_from(fields))
    value = draw(field_values(data, f, fields))
    return put(data, f, value), f"set {f.name} (@{f.offset:#x}/{f.width}) = {value & ((1 << 8 * f.width) - 1):#x}"


@st.composite
def truncate_in(draw, data: bytes, regions: list[Region]):
    r = draw(st.sampled_from(regions))
    at = draw(st.sampled_from([r.start, r.stop, max(r.start, r.stop - 1)]) | st.integers(r.start, max(r.start, r.stop)))
    at = min(max(at, 0), len(data))
    return Mutant((data[:at], f"truncate at {at:#x} (in {r.name})"))


@st.composite
def flip_bits(draw, data: bytes, regions: list[Region]):
    r = draw(st.sampled_from(regions))
    n = draw(st.integers(1, 4))
    out = bytearray(data)
    where = []
    for _ in range(n):
        at = draw(st.integers(r.start, max(r.start, min(r.stop, len(data)) - 1)))
        bit = draw(st.integers(0, 7))
        if at < len(out):
            out[at] ^= 1 << bit
            where.append(f"{at:#x}.{bit}")
    return bytes(out), f"flip bits {','.join(where)} (in {r.name})"


@st.composite
def overwrite(draw, data: bytes, regions: list[Region]):
    r = draw(st.sampled_from(regions))
    at = draw(st.integers(r.start, max(r.start, r.stop)))
    blob = draw(
        st.binary(min_size=1, max_size=64)
        | st.sampled_from(
            [
                b"\x00" * 16,
                b"\xff" * 16,
                fatbin.MAGIC,
                b"\x7fELF",
                hip.UNCOMPRESSED_MAGIC,
                hip.COMPRESSED_MAGIC,
                b"\x28\xb5\x2f\xfd",
            ]
        )
    )
    out = data[:at] + blob + data[at + len(blob) :]
    return out[: len(data)] if at + len(blob) <= len(
        data
    ) else out, f"overwrite {len(blob)} bytes at {at:#x} (in {r.name})"


@st.composite
def splice(draw, data: bytes, regions: list[Region]):
    """Delete or duplicate a slice: shifts every later offset."""
    r = draw(st.sampled_from(regions))
    a = draw(st.integers(r.start, max(r.start, r.stop)))
    b = draw(st.integers(a, max(a, min(r.stop, a + 256))))
    if draw(st.booleans()):
        return data[:a] + data[b:], f"delete [{a:#x}, {b:#x}) (in {r.name})"
    return data[:b] + data[a:b] + data[b:], f"duplicate [{a:#x}, {b:#x}) (in {r.name})"


def mutation(data: bytes, fields: list[Field], regions: list[Region]):
    """Any single structural mutation of `data`, with a description."""
    kinds = [truncate_in(data, regions), flip_bits(data, regions), overwrite(data, regions), splice(data, regions)]
    if fields:
        kinds.insert(0, set_field(data, fields))
    return st.one_of(kinds)


class Mutant(tuple):
    """(bytes, description), shown by its description only in Hypothesis reports."""

    def __repr__(self) -> str:
        return f"<{len(self[0])} bytes: {self[1]}>"


@st.composite
def mutated(draw, data: bytes, fields: list[Field], regions: list[Region], max_steps: int = 3):
    """One to `max_steps` mutations applied in turn."""
    steps = draw(st.integers(1, max_steps))
    notes = []
    for _ in range(steps):
        data, note = draw(mutation(data, fields, regions))
        notes.append(note)
    return Mutant((data, "; ".join(notes)))


# ---- payload replacements --------------------------------------------------------------------


@st.composite
def payload_lie(draw, data: bytes, entry: int, eh: fatbin.EntryHeader):
    """Replace a compressed payload by garbage, by a frame that expands past (or short of) its
    declared size, or lie about the sizes."""
    at = entry + eh.header_size
    area = eh.payload_size
    how = draw(st.sampled_from(["garbage", "expand", "shrink", "usize", "csize", "method", "bomb"]))
    usize = eh.uncompressed_size
    if how in ("garbage", "expand", "shrink", "bomb"):
        if how == "garbage":
            blob = draw(st.binary(min_size=0, max_size=min(area, 256)))
        else:
            n = {
                "expand": usize + draw(st.integers(1, 4096)),
                "shrink": max(0, usize - draw(st.integers(1, usize or 1))),
                "bomb": draw(st.sampled_from([1 << 20, 8 << 20, 64 << 20])),
            }[how]
            filler = draw(st.sampled_from([b"\x00", b"A", b"\x7fELF"]))
            raw = (filler * (n // len(filler) + 1))[:n]
            if eh.compression == "zstd":
                blob = zstandard.ZstdCompressor(level=1, write_content_size=draw(st.booleans())).compress(raw)
            else:
                blob = lz4.block.compress(raw, store_size=False)
        if len(blob) > area:
            blob = blob[:area]
        out = bytearray(data)
        out[at : at + area] = blob + b"\x00" * (area - len(blob))
        out[entry + 16 : entry + 20] = len(blob).to_bytes(4, "little")
        if how == "bomb" and draw(st.booleans()):  # declare the bomb's size as well
            out[entry + 56 : entry + 64] = n.to_bytes(8, "little")
        return Mutant((bytes(out), f"{how} {eh.compression} payload of entry {entry:#x} ({len(blob)} bytes)"))
    out = bytearray(data)
    if how == "usize":
        v = draw(st.sampled_from([0, 1, usize - 1, usize + 1, usize * 2, 2**32, 2**63, 2**64 - 1, 4 << 30]))
        out[entry + 56 : entry + 64] = (v & (2**64 - 1)).to_bytes(8, "little")
    elif how == "csize":
        v = draw(
            st.sampled_from([0, 1, eh.compressed_size - 1, eh.compressed_size + 1, area, area + 1, 2**31, 2**32 - 1])
        )
        out[entry + 16 : entry + 20] = (v & (2**32 - 1)).to_bytes(4, "little")
    else:  # swap zstd <-> lz4
        flags = int.from_bytes(out[entry + 40 : entry + 48], "little") ^ (fatbin.FLAG_ZSTD | fatbin.FLAG_LZ4)
        out[entry + 40 : entry + 48] = flags.to_bytes(8, "little")
        v = flags
    return Mutant((bytes(out), f"{how} of entry {entry:#x} = {v:#x}"))


# ---- running archaudit ------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float
    report: dict | None

    @property
    def finding_codes(self) -> list[str]:
        if not self.report:
            return []
        return [f["code"] for t in self.report["targets"] for f in t["findings"]]


_TMP = tempfile.TemporaryDirectory(prefix="archaudit-fuzz-")


def scratch(name: str) -> str:
    return os.path.join(_TMP.name, name)


def scratch_write(name: str, data: bytes) -> str:
    path = scratch(name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def run_cli(argv: list[str]) -> Run:
    """archaudit.cli.main in-process; a raised exception (a traceback) fails the test."""
    out, err = io.StringIO(), io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as e:  # argparse usage errors
            code = e.code if isinstance(e.code, int) else 2
    seconds = time.perf_counter() - t
    report = None
    if "--format" in argv and argv[argv.index("--format") + 1] == "json" and out.getvalue().strip():
        report = json.loads(out.getvalue())
    return Run(code, out.getvalue(), err.getvalue(), seconds, report)


def check_run(run: Run, size: int, what: str, replay: list[str] | None = None) -> None:
    """The properties of every run: a known exit code, no traceback, no internal error. No time
    is asserted (a loaded machine would fail it): work linear in the bytes is counted in steps by
    test_linear_bounds.py, and times are benchmarks/bench_hostile.py's; `run.seconds` stays for
    long_run.py's report. `size` and `replay` are kept for the callers."""
    assert run.code in (0, 1, 2), f"{what}: exit code {run.code!r}"
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout, f"{what}: traceback\n{run.stderr}"
    assert "E099" not in run.finding_codes, f"{what}: internal error\n{run.stdout[:4000]}"
    if run.code == 0 and run.report is not None:
        assert run.report["passed"], what


# ---- the fail-closed property ----------------------------------------------------------------


def projection(report: dict) -> list:
    """What a verdict rests on: per library (its path), per container (relocatable or
    loadable, and the sorted (vendor, kind, target) of its entries). Offsets, sizes,
    identifiers, code versions and kernel names are left out: they are informational, not
    coverage. A decoded PTX entry's target is its text's .target (``ptx_target``), which the
    JIT obeys and the rules judge, not its header's. Loadable roles (executable, device-link, embedded,
    standalone, hip) are one class
    here: a device-link container judged as an ordinary one only adds scrutiny, and the other
    direction (hiding a container's K001 by making it device-link) is caught by requiring the
    original to pass as well."""
    out = []
    for t in report["targets"]:
        for lib in t["libraries"]:
            containers = sorted(
                (
                    "relocatable" if c["role"] == "relocatable" else "loadable",
                    tuple(sorted((e["vendor"], e["kind"], e.get("ptx_target") or e["target"]) for e in c["entries"])),
                )
                for c in lib.get("container_list", [])
            )
            out.append((lib["path"], tuple(containers)))
    return sorted(out)


def exact_claim_args(report: dict) -> list[str]:
    """Flags claiming exactly what the original carries, judged with nothing excused."""
    nv: set[str] = set()
    amd: set[str] = set()
    for t in report["targets"]:
        for lib in t["libraries"]:
            for label in lib.get("carries", []):
                (amd if label.startswith("gfx") else nv).add(label)
    args = ["--exact", "--strict", "--strict-kernels"]
    if nv:
        args += ["--arch", ",".join(sorted(nv)), "--arch-style", "list"]
    if amd:
        args += ["--amd-arch", ";".join(sorted(amd))]
    return args


def base_args(path: str, decode: bool) -> list[str]:
    return [
        "check",
        "--no-config",
        "-q",
        "-j",
        "1",
        "--format",
        "json",
        "--detail",
        "containers",
        path,
    ] + []  # payloads are always decoded


@cache
def original(rel: str, decode: bool) -> tuple[int, list, tuple[str, ...]]:
    """(exit code, projection, claim flags) of the unmutated fixture under its exact claim."""
    path = str(ROOT / rel)
    first = run_cli(base_args(path, decode))
    assert first.report is not None, first.stderr
    claim = exact_claim_args(first.report)
    run = run_cli(base_args(path, decode) + claim)
    check_run(run, len(load(rel)), rel)
    assert run.report is not None, run.stderr
    return run.code, projection(run.report), tuple(claim)


def touches(orig: bytes, mut: bytes, trusted: list[tuple[int, int]]) -> bool:
    """Whether the mutant changed any bit the mode takes on trust."""
    for at, mask in trusted:
        if at < len(orig) and at < len(mut) and (orig[at] ^ mut[at]) & mask:
            return True
    return False


def _strip_a(proj: list) -> list:
    return [
        (path, tuple((cls, tuple((v, k, t.rstrip("a")) for v, k, t in entries)) for cls, entries in cs))
        for path, cs in proj
    ]


def only_inside(orig: bytes, mut: bytes, ranges: list[tuple[int, int]]) -> bool:
    """Whether every byte the mutant changed lies in one of `ranges` (same length only)."""
    if len(orig) != len(mut) or not ranges:
        return False
    diff = [i for i in range(len(orig)) if orig[i] != mut[i]] if len(orig) < 1 << 20 else [0]
    return all(any(lo <= i < hi for lo, hi in ranges) for i in diff)


def check_mutant(
    rel: str,
    mutant: bytes,
    note: str,
    decode: bool,
    test: str,
    name: str | None = None,
    fail_closed: bool = True,
    lenient_a: bool = False,
) -> Run:
    """Run one mutant of fixture `rel` through the CLI and assert every property.

    Fail-closed property. Let O be the fixture and M the mutant. Both are audited under the
    same claim: exactly the architectures O carries, with --exact, --strict and
    --strict-kernels, so that no change of coverage can hide behind a policy excuse. Then

        exit(M) == 0  implies  exit(O) == 0  and  projection(M) == projection(O)

    i.e. a mutant passes only if the original passes and archaudit saw the same containers,
    roles and (kind, target) entries in it: a mutation of bytes archaudit does not read is
    allowed to pass; a mutation of bytes it does read must either be detected (exit 1 or 2)
    or leave the coverage it reports unchanged. The only exemptions are bits the format
    states exactly once, so that no reader could notice a change: the kind, arch and flags
    fields of an entry header in header-only mode (``--decode`` cross-checks them against
    the cubin's e_flags and the PTX .target), and in --decode mode the family ('f') bit of a
    cubin entry and its arch-specific ('a') bit below sm_90 (a cubin records 'f' nowhere and
    'a' only in the .nv.compat of sm_90 and newer), and the bytes that locate and hold that
    .nv.compat inside an entry's cubin (changing them together with the header's flag agrees
    with itself); section names (e_shstrndx, sh_name, .shstrtab and where it lies), from which
    container roles follow, when changed into other valid names; and,
    in --decode mode, the "original passes too" half for mutations confined to cubin payloads:
    kernel symbols (each stated once) decide whether a device-link container is judged, so
    hiding a kernel there can hide a K001 (the projection must still be equal); in --decode
    mode, an entry's kind turned into 8 (LTO IR: opaque, never decoded, never coverage); and
    the target of a standalone cubin or code object (e_flags, a cubin's .nv.compat), which no
    other byte repeats; for a standalone cubin the 'a' suffix is compared leniently (any damage
    that hides its .nv.compat, such as a lowered e_shnum, drops it).
    """
    tally(test)
    path = scratch(name or os.path.basename(rel))
    with open(path, "wb") as f:
        f.write(mutant)
    orig_code, orig_proj, claim = original(rel, decode)
    argv = base_args(path, decode) + list(claim)
    run = run_cli(argv)
    what = f"{rel} [{'decode' if decode else 'headers'}]: {note}"
    check_run(run, len(mutant), what, replay=argv)
    if run.code == 0 and fail_closed:
        lay = zip_layout(rel) if rel.endswith(".whl") else layout(rel)
        trusted = lay.trusted_decode_mode if decode else lay.trusted_header_mode
        if not touches(load(rel), mutant, trusted):
            if not (decode and only_inside(load(rel), mutant, lay.dlink_payloads)):
                assert orig_code == 0, f"{what}: mutant passes, original does not"
            assert run.report is not None, run.stderr
            proj = projection(run.report)
            if lenient_a:  # a bare cubin states 'a' only in .nv.compat: hiding it drops the suffix
                proj, orig_proj = _strip_a(proj), _strip_a(orig_proj)
            if name is None:  # same display path
                assert proj == orig_proj, f"{what}: passes with different coverage\n{proj}\n!=\n{orig_proj}"
    return run


# ---- zip (wheel) layout ----------------------------------------------------------------------

_EOCD_FIELDS = [
    ("disk", 4, 2),
    ("cd_disk", 6, 2),
    ("count_on_disk", 8, 2),
    ("count", 10, 2),
    ("cd_size", 12, 4),
    ("cd_offset", 16, 4),
    ("comment_length", 20, 2),
]
_CD_FIELDS = [
    ("made_by", 4, 2),
    ("needed", 6, 2),
    ("flags", 8, 2),
    ("method", 10, 2),
    ("crc", 16, 4),
    ("compressed_size", 20, 4),
    ("size", 24, 4),
    ("name_length", 28, 2),
    ("extra_length", 30, 2),
    ("comment_length", 32, 2),
    ("disk", 34, 2),
    ("external_attributes", 38, 4),
    ("local_header_offset", 42, 4),
]
_LOCAL_FIELDS = [
    ("needed", 4, 2),
    ("flags", 6, 2),
    ("method", 8, 2),
    ("crc", 14, 4),
    ("compressed_size", 18, 4),
    ("size", 22, 4),
    ("name_length", 26, 2),
    ("extra_length", 28, 2),
]


@cache
def zip_layout(rel: str) -> Layout:
    data = load(rel)
    eocd = data.rfind(b"PK\x05\x06")
    fields = [Field(f"eocd.{n}", eocd + o, w) for n, o, w in _EOCD_FIELDS]
    regions = [Region("eocd", eocd, len(data))]
    cd_size, cd_offset = struct.unpack_from("<LL", data, eocd + 12)
    regions.append(Region("central_directory", cd_offset, cd_offset + cd_size))
    pos = cd_offset
    while pos < cd_offset + cd_size:
        nlen, xlen, clen = struct.unpack_from("<HHH", data, pos + 28)
        name = data[pos + 46 : pos + 46 + nlen].decode()
        fields += [Field(f"cd[{name}].{n}", pos + o, w) for n, o, w in _CD_FIELDS]
        regions.append(Region(f"cd[{name}].name", pos + 46, pos + 46 + nlen))
        (local,) = struct.unpack_from("<L", data, pos + 42)
        (csize,) = struct.unpack_from("<L", data, pos + 20)
        fields += [Field(f"local[{name}].{n}", local + o, w) for n, o, w in _LOCAL_FIELDS]
        lnlen, lxlen = struct.unpack_from("<HH", data, local + 26)
        regions.append(Region(f"local[{name}]", local, local + 30 + lnlen + lxlen))
        start = local + 30 + lnlen + lxlen
        regions.append(Region(f"data[{name}]", start, start + csize))
        pos += 46 + nlen + xlen + clen
    return Layout(fields, regions, [], [], [])


def library_members(rel: str) -> list[tuple[zipread.Member, int]]:
    """(member, data offset) of every library member of a wheel fixture."""
    path = str(ROOT / rel)
    members, _ = zipread.read_directory(path)
    data = load(rel)
    out = []
    for m in members:
        if m.name.endswith(".so"):
            nlen, xlen = struct.unpack_from("<HH", data, m.header_offset + 26)
            out.append((m, m.header_offset + 30 + nlen + xlen))
    return out


def rezip_member(
    data: bytes, m: zipread.Member, start: int, new_stream: bytes, crc: int | None = None, size: int | None = None
) -> bytes:
    """Replace a member's stored bytes; patch compressed size (and crc/size if given) in both
    headers and shift the central directory."""
    out = bytearray(data[:start] + new_stream + data[start + m.compressed_size :])
    delta = len(new_stream) - m.compressed_size
    eocd = out.rfind(b"PK\x05\x06")
    cd_size, cd_offset = struct.unpack_from("<LL", out, eocd + 12)
    struct.pack_into("<L", out, eocd + 16, cd_offset + delta)
    cd_offset += delta
    struct.pack_into("<L", out, m.header_offset + 18, len(new_stream))
    if crc is not None:
        struct.pack_into("<L", out, m.header_offset + 14, crc)
    if size is not None:
        struct.pack_into("<L", out, m.header_offset + 22, size)
    pos = cd_offset
    while pos < cd_offset + cd_size:
        nlen, xlen, clen = struct.unpack_from("<HHH", out, pos + 28)
        (local,) = struct.unpack_from("<L", out, pos + 42)
        if local == m.header_offset:
            struct.pack_into("<L", out, pos + 20, len(new_stream))
            if crc is not None:
                struct.pack_into("<L", out, pos + 16, crc)
            if size is not None:
                struct.pack_into("<L", out, pos + 24, size)
        elif local > m.header_offset:
            struct.pack_into("<L", out, pos + 42, local + delta)
        pos += 46 + nlen + xlen + clen
    return bytes(out)


def deflate(raw: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(raw) + c.flush()
