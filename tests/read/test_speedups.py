"""The compiled speedups (archaudit._speedups) against the Python references they replace.

- `cubin_tables` against codefacts._tables: the same answer on every cubin the fixtures hold, on
  real cubins with fields and bytes changed at random, and none at all where the Python reader
  refuses the input.
- `find` against bytes.find: the same offset for needles of every length in the fixtures'
  libraries and in random bytes, at every start and stop.
- Built with AddressSanitizer, both read hostile input without one out-of-bounds access.

The speedups are optional (setup.py): where the install could not build them archaudit runs
the references, and these tests skip, except in CI, which must build them."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from archaudit.read import codefacts, elf, fatbin, library, search
from archaudit.read.elf import ElfError
from archaudit.read.fatbin import FatbinError
from reference_tools import missing_tool, speedups

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SOURCE = ROOT / "src" / "archaudit" / "_speedups.c"
MAGIC = struct.pack("<I", 0xBA55ED50)


compiled = speedups  # the module, or a skip (a failure in CI, whose install must build it)


@cache
def fixture_cubins() -> tuple[bytes, ...]:
    """Every distinct cubin of the committed fixtures: the .cubin files and every SASS entry of
    every fatbin container in any fixture file, decoded (read with the fatbin layout functions,
    not the reader under test)."""
    found: dict[bytes, None] = {}
    images = []
    for path in sorted(FIXTURES.rglob("*")):
        if not path.is_file() or path.stat().st_size > 8 << 20:
            continue
        images.append(path.read_bytes())
        if path.suffix in (".whl", ".zip"):
            with zipfile.ZipFile(path) as z:
                images += [z.read(m) for m in z.namelist() if z.getinfo(m).file_size < 64 << 20]
    for image in images:
        if image[:4] == b"\x7fELF" and image[18:20] == struct.pack("<H", elf.EM_CUDA):
            found[image] = None
        at = image.find(MAGIC)
        while at >= 0:
            head = fatbin.parse_container_header(image, at)
            if head is not None:
                entry, end = at + head.header_size, min(len(image), at + head.total)
                while entry < end:
                    try:
                        h = fatbin.parse_entry_header(image, entry, end - entry, entry)
                        payload = fatbin.decode_payload(h, image[entry + h.header_size : entry + h.total], entry)
                    except FatbinError:
                        break
                    if payload[:4] == b"\x7fELF" and payload[18:20] == struct.pack("<H", elf.EM_CUDA):
                        found[bytes(payload)] = None
                    entry += h.total
            at = image.find(MAGIC, at + 1)
    return tuple(found)


def both(data: bytes | memoryview, reader=None) -> tuple[object, object] | None:
    """(compiled answer, reference answer) for a cubin whose ELF header reads (cubin_facts asks
    the tables only then); the reference answer is None where it refuses the cubin (E014)."""
    try:
        h = elf.parse_header(data, len(data))
    except ElfError:
        return None
    if not h.shnum:
        return None
    fast = (reader or compiled()).cubin_tables(data, h.shoff, h.shnum, h.shstrndx)
    try:
        slow: object = codefacts._tables(data, h)
    except FatbinError:
        slow = None
    return fast, slow


def test_the_fixtures_hold_cubins_of_every_kind_read_here():
    """Both ELF ABIs, `a` cubins marked in .nv.compat, kernels with and without the entry flag
    (the constant-bank path), and cubins with no kernel at all."""
    cubins = fixture_cubins()
    heads = [elf.parse_header(c, len(c)) for c in cubins]
    tables = [codefacts._tables(c, h) for c, h in zip(cubins, heads)]
    unflagged = (FIXTURES / "readers" / "bin" / "noentry_sm80.cubin").read_bytes()
    assert len(cubins) >= 60 and {h.abiversion for h in heads} >= {7, 8}
    assert any(compat is not None for _, compat, _ in tables) and any(not k for k, _, _ in tables)
    assert sum(len(k) for k, _, _ in tables) >= 50 and unflagged in cubins


def test_every_fixture_cubin_reads_alike():
    reader = compiled()
    for cubin in fixture_cubins():
        pair = both(cubin, reader)
        assert pair is not None
        fast, slow = pair
        assert fast == slow and slow is not None
        assert both(memoryview(cubin), reader) == (slow, slow)  # the decode buffer is a memoryview


def test_cubin_facts_is_the_same_with_either_reader(monkeypatch):
    compiled()
    answers = [codefacts.cubin_facts(c) for c in fixture_cubins()]
    monkeypatch.setattr(codefacts, "_compiled", None)
    assert [codefacts.cubin_facts(c) for c in fixture_cubins()] == answers


def test_the_reference_runs_where_the_compiled_reader_refuses(monkeypatch):
    """A symbol table that links a missing string table: the compiled reader gives no answer,
    and cubin_facts raises the reference's finding, the same with either reader."""
    compiled()
    cubin = fixture_cubins()[0]
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    (shnum,) = struct.unpack_from("<H", cubin, 0x3C)
    out = bytearray(cubin)
    for i in range(shnum):
        if struct.unpack_from("<I", out, shoff + i * 64 + 4)[0] == elf.SHT_SYMTAB:
            struct.pack_into("<I", out, shoff + i * 64 + 40, shnum)
    pair = both(bytes(out))
    assert pair is not None
    fast, slow = pair
    assert fast is None and slow is None
    messages = []
    for reader in (speedups(), None):
        monkeypatch.setattr(codefacts, "_compiled", reader)
        with pytest.raises(FatbinError) as e:
            codefacts.cubin_facts(bytes(out))
        messages.append((e.value.code, e.value.message))
    assert messages[0] == messages[1] == ("E014", "cubin symbol table links a missing string table")


# Fields a hostile cubin would change: the header's table offset, count and name index, and any
# word of the section table or of a symbol (offsets, sizes, links, names, types, flags).
INTERESTING = [0, 1, 2, 3, 0x10, 0x12, 0x7F, 0xFF, 0xFFFF, 0xFFFF_FFFF, 2**63, 2**64 - 1]


@st.composite
def hostile(draw: st.DrawFn) -> bytes:
    cubin = bytearray(draw(st.sampled_from(fixture_cubins())))
    for _ in range(draw(st.integers(1, 6))):
        how = draw(st.sampled_from(["byte", "word", "cut", "header"]))
        if how == "cut" and len(cubin) > 64:
            del cubin[draw(st.integers(64, len(cubin) - 1)) :]
            continue
        width = draw(st.sampled_from([1, 2, 4, 8]))
        if how == "header":
            at = draw(st.sampled_from([0x28, 0x3C, 0x3E]))  # e_shoff, e_shnum, e_shstrndx
            width = 8 if at == 0x28 else 2
        elif how == "word":
            (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
            at = min(len(cubin) - width, shoff + draw(st.integers(0, 64 * 64)))
        else:
            at = draw(st.integers(0, len(cubin) - width))
        if at < 0:
            continue
        value = draw(st.sampled_from(INTERESTING) | st.integers(0, 2 ** (8 * width) - 1)) % 2 ** (8 * width)
        cubin[at : at + width] = value.to_bytes(width, "little")
    return bytes(cubin)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile())
def test_hostile_cubins_read_alike(cubin):
    got = both(cubin)
    if got is not None:
        assert got[0] == got[1]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512), st.integers(0, 2**64 - 1), st.integers(0, 2**16 + 2), st.integers(0, 2**16 + 2))
def test_any_arguments_give_an_answer_or_none(data, shoff, shnum, shstrndx):
    """The compiled reader checks the table bounds it is given again: never a crash."""
    shnum, shstrndx = shnum % 2**32, shstrndx % 2**32
    got = compiled().cubin_tables(data, shoff, shnum, shstrndx)
    assert got is None or (isinstance(got, tuple) and len(got) == 3)


ASAN_RUN = textwrap.dedent("""
    import random, struct, sys
    sys.path.insert(0, sys.argv[1])
    import _speedups
    from archaudit.read import elf
    cubins = [open(p, "rb").read() for p in sys.argv[2:]]
    rng = random.Random(7)
    values = [0, 1, 2, 0x10, 0xFF, 0xFFFF, 0xFFFFFFFF, 2**63, 2**64 - 1]
    assert _speedups.__file__.startswith(sys.argv[1]) and "libasan" in open("/proc/self/maps").read()
    n = tries = 0
    while n < 10000 and tries < 100000:
        tries += 1
        c = bytearray(rng.choice(cubins))
        for _ in range(rng.randint(1, 6)):
            w = rng.choice([1, 2, 4, 8])
            shoff = struct.unpack_from("<Q", c, 0x28)[0]
            at = rng.choice([rng.randrange(len(c) - w), min(len(c) - w, shoff + rng.randrange(64 * 64)),
                             min(len(c) - w, shoff + rng.randrange(64 * 64)), 0x28, 0x3C, 0x3E])
            c[at:at + w] = (rng.choice(values + [rng.getrandbits(8 * w)]) % 2 ** (8 * w)).to_bytes(w, "little")
        if rng.random() < 0.1:
            del c[rng.randrange(64, len(c)):]
        try:
            h = elf.parse_header(bytes(c), len(c))
        except Exception:
            continue
        if h.shnum:
            _speedups.cubin_tables(bytes(c), h.shoff, h.shnum, h.shstrndx)
            n += 1
        hay = bytes(c)
        needle = hay[rng.randrange(len(hay)):][:rng.choice([1, 2, 4, 8, 24, 40])] or b"CCOB"
        start = rng.randrange(len(hay) + 1)
        stop = rng.randrange(start, len(hay) + 1)
        assert _speedups.find(hay, needle, start, stop) == hay.find(needle, start, stop)
    print("read", n)
""")


def test_the_speedups_stay_in_bounds_under_address_sanitizer(tmp_path):
    """The C source built with -fsanitize=address,undefined reads 10,000 hostile cubins (random
    fields and bytes of the fixtures' cubins, cut short) and searches each, with no sanitizer
    report and every search's answer that of bytes.find."""
    compiled()
    cc = shutil.which(os.environ.get("CC", "gcc"))
    if cc is None:
        missing_tool("gcc", "not installed")
    runtime = subprocess.run([cc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(runtime):
        missing_tool("gcc", "has no AddressSanitizer runtime")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    build = subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=all",
            f"-I{sysconfig.get_paths()['include']}",
            str(SOURCE),
            "-o",
            str(tmp_path / f"_speedups{suffix}"),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    seeds = []
    for i, cubin in enumerate(fixture_cubins()):
        seeds.append(tmp_path / f"{i}.cubin")
        seeds[-1].write_bytes(cubin)
    env = dict(
        os.environ,
        LD_PRELOAD=runtime,
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=0",
        UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
        PYTHONPATH=str(ROOT / "src"),
    )
    run = subprocess.run(
        [sys.executable, "-c", ASAN_RUN, str(tmp_path), *map(str, seeds)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 0 and "ERROR" not in run.stderr, run.stderr[-4000:]
    assert run.stdout.split() == ["read", "10000"]


# ---- find ----

NEEDLES = [
    fatbin.MAGIC + fatbin.CONTAINER_MAGIC_TAIL,
    b"CCOB",
    b"__CLANG_OFFLOAD_BUNDLE__",
    fatbin.MAGIC,
    b"\0",
    b"\0\0",
    b"ELF",
    b"\x7fELF",
    b"sm_90",
    b".text.",
    b"\xcc\xcc\xcc\xcc",
    b"\0" * 9,
]


@cache
def fixture_libraries() -> tuple[bytes, ...]:
    names = ("*.so", "*.fatbin", "*.dll", "*.dylib", "*.o", "*.cubin")
    return tuple(
        p.read_bytes() for pattern in names for p in sorted(FIXTURES.rglob(pattern)) if p.stat().st_size < 4 << 20
    )


def every_offset(hay: bytes | bytearray, needle: bytes, find) -> list[int]:
    out, at = [], find(hay, needle, 0, len(hay))
    while at >= 0:
        out.append(at)
        at = find(hay, needle, at + 1, len(hay))
    return out


def test_find_finds_every_occurrence_bytes_find_does_in_the_fixtures():
    search = compiled().find
    libraries = fixture_libraries()
    assert len(libraries) >= 40
    hits = 0
    for hay in libraries:
        for needle in NEEDLES:
            want = every_offset(hay, needle, lambda h, n, a, b: h.find(n, a, b))
            assert every_offset(hay, needle, search) == want
            hits += len(want)
    assert hits > 10_000


@settings(max_examples=500, deadline=None)
@given(st.binary(min_size=0, max_size=300), st.data())
def test_find_is_bytes_find(hay, data):
    """Any needle (taken from the haystack or not), any start and stop within it: bytes and
    bytearray alike. Haystacks are short so that the 16-position steps meet every tail."""
    search = compiled().find
    needle = data.draw(
        st.one_of(
            st.binary(max_size=30), st.builds(lambda a, n: hay[a : a + n], st.integers(0, 300), st.integers(0, 30))
        )
    )
    start = data.draw(st.integers(0, len(hay)))
    stop = data.draw(st.integers(0, len(hay)))
    assert search(hay, needle, start, stop) == hay.find(needle, start, stop)
    assert search(bytearray(hay), needle, start, stop) == hay.find(needle, start, stop)


@pytest.mark.parametrize("needle", NEEDLES[:4])
def test_find_at_every_position_of_a_long_haystack(needle):
    """The needle planted at each offset of 200 bytes of x86 padding and zeros, and cut at
    each end: found exactly where it is, and not past `stop`."""
    search = compiled().find
    for at in range(200):
        planted = bytearray(b"\xcc\x00" * 150)
        planted[at : at + len(needle)] = needle
        hay = bytes(planted)
        for stop in (at + len(needle) - 1, at + len(needle), len(hay)):
            assert search(hay, needle, 0, stop) == hay.find(needle, 0, stop)
        assert search(hay, needle, at + 1, len(hay)) == hay.find(needle, at + 1, len(hay))


def test_find_refuses_a_range_outside_the_buffer():
    with pytest.raises(ValueError):
        compiled().find(b"abc", b"b", -1, 3)
    with pytest.raises(ValueError):
        compiled().find(b"abc", b"b", 0, 4)


def test_the_scan_finds_the_same_containers_with_either_search(monkeypatch):
    """Every fixture library's inventory, with the compiled search and with memmem or
    bytes.find (the needles are the same: both extend the fatbin magic)."""
    compiled()
    paths = [p for pattern in ("*.so", "*.fatbin", "*.dll", "*.dylib") for p in sorted(FIXTURES.rglob(pattern))]
    fast = [library.scan_file(str(p)) for p in paths]
    monkeypatch.setattr(search, "_FIND", None)
    assert [library.scan_file(str(p)) for p in paths] == fast
    assert sum(len(lib.entries) for lib in fast) > 100
