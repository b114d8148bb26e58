"""Zip layouts and member selection, generated: the readers added for wheels whose structures
disagree (issue: what is read must be what pip installs) and for members chosen by content.

- Layouts: a wheel's members are written by zipfile, then its end is rebuilt from pieces drawn
  at random: the real central directory and a decoy one (a subset, reordered), zip64 records
  and locators pointing at either or anywhere, end records whose fields take the true, decoy,
  saturated or special values, bytes before the archive, after it, or as a comment. Property:
  whenever archaudit reads a member list at all, every member zipfile lists (so pip installs)
  is in it or named by a finding, and archaudit reads no member zipfile does not list.
- Selection: members holding libraries, cubins, fatbins, code objects, zips of those, text
  and random bytes, under library-like or data-like names, stored or deflated. Property: every
  member whose content is device code or a library is audited (or named by a finding),
  whatever its name, down to members of zips inside the wheel; a member that is neither and is
  not named like a library is not read.
"""

from __future__ import annotations

import io
import struct
import warnings
import zipfile

from hypothesis import given, strategies as st

import fuzzlib as fz
from archaudit.read import artifacts, zipread

WHEEL = str(fz.EXAMPLE_WHEEL.relative_to(fz.ROOT))


def _pieces(data: bytes) -> tuple[bytes, list[bytes]]:
    eocd = data.rfind(b"PK\x05\x06")
    _, _, _, _, count, cd_size, cd_offset, _ = struct.unpack_from("<4s4H2LH", data, eocd)
    entries, pos = [], cd_offset
    for _ in range(count):
        nlen, xlen, clen = struct.unpack_from("<3H", data, pos + 28)
        entries.append(data[pos : pos + 46 + nlen + xlen + clen])
        pos += 46 + nlen + xlen + clen
    return data[:cd_offset], entries


def _eocd(count: int, size: int, offset: int, comment: bytes = b"", count_disk: int | None = None) -> bytes:
    n = count if count_disk is None else count_disk
    return (
        struct.pack(
            "<4s4H2LH",
            b"PK\x05\x06",
            0,
            0,
            n & 0xFFFF,
            count & 0xFFFF,
            size & 0xFFFFFFFF,
            offset & 0xFFFFFFFF,
            len(comment),
        )
        + comment
    )


def _record(count: int, size: int, offset: int) -> bytes:
    return struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, size, offset)


def _locator(offset: int) -> bytes:
    return struct.pack("<4sLQL", b"PK\x06\x07", 0, offset & (2**64 - 1), 1)


def _zipfile_names(data: bytes) -> list[str] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return zipfile.ZipFile(io.BytesIO(data)).namelist()
    except Exception:  # noqa: BLE001 - zipfile refuses it: pip would not install anything
        return None


@given(data=st.data())
def test_zip_end_structures(data):
    local, entries = _pieces(fz.load(WHEEL))
    decoy = data.draw(
        st.permutations(entries).flatmap(lambda es: st.integers(0, len(es)).map(lambda k: es[:k])), label="decoy"
    )
    real_cd, decoy_cd = b"".join(entries), b"".join(decoy)
    prefix = data.draw(st.sampled_from([b"", b"\0" * 7, b"PK\x03\x04junk"]), label="prefix")
    body = bytearray(prefix + local)
    placed = {}  # what -> offset
    for what in data.draw(st.permutations(["real", "decoy", "rec-real", "rec-decoy"]), label="order"):
        if what == "decoy" and not data.draw(st.booleans(), label="with decoy"):
            continue
        if what.startswith("rec") and not data.draw(st.booleans(), label=f"with {what}"):
            continue
        placed[what] = len(body)
        if what == "real":
            body += real_cd
        elif what == "decoy":
            body += decoy_cd
        else:
            cd = "real" if what == "rec-real" else "decoy"
            target = placed.get(cd, placed.get("real", len(prefix + local)))
            size = len(real_cd if cd == "real" else decoy_cd)
            count = len(entries if cd == "real" else decoy)
            body += _record(data.draw(st.sampled_from([count, len(entries), len(decoy)])), size, target)
    if "rec-real" in placed or "rec-decoy" in placed or data.draw(st.booleans(), label="stray locator"):
        to = data.draw(st.sampled_from(sorted(placed.values()) + [0, len(body) - 56, 2**63]), label="locator to")
        body += _locator(to)
    offsets = {"real": placed.get("real", 0), "decoy": placed.get("decoy", 0)}
    which = data.draw(st.sampled_from(["real", "decoy"]), label="end record names")
    size = len(real_cd if which == "real" else decoy_cd)
    count = len(entries if which == "real" else decoy)
    sat = data.draw(st.booleans(), label="saturated")
    comment = data.draw(st.sampled_from([b"", b"a comment", b"PK\x05\x06" + bytes(18)]), label="comment")
    end = _eocd(0xFFFF if sat else count, 0xFFFFFFFF if sat else size, 0xFFFFFFFF if sat else offsets[which], comment)
    trailer = data.draw(st.sampled_from([b"", b"\0", b"trailing bytes"]), label="trailer")
    wheel = bytes(body) + end + trailer
    fz.tally("test_zip_end_structures")
    theirs = _zipfile_names(wheel)
    try:
        members, hazards = zipread.read_directory_bytes(wheel)
    except zipread.ZipError:
        return
    ours = {m.name for m in members}
    named = ours | {name for _, name, _ in hazards}
    assert theirs is not None, ("archaudit reads an archive zipfile refuses", sorted(ours))
    assert set(theirs) <= named, ("zipfile lists members archaudit does not", sorted(set(theirs) - named))
    assert ours <= set(theirs), ("archaudit reads members zipfile does not list", sorted(ours - set(theirs)))
    run = fz.run_cli(
        [
            "check",
            "--no-config",
            "-q",
            "-j",
            "1",
            "--format",
            "json",
            fz.scratch_write("layout.whl", wheel),
            "--arch",
            "80",
        ]
    )
    fz.check_run(run, len(wheel), "zip end structures")


_CONTENTS = {
    "library": "tests/fixtures/cuda/bin/lib_sm80.so",
    "cubin": "tests/fixtures/cuda/bin/kern_sm80.cubin",
    "fatbin": "tests/fixtures/cuda/bin/kern.fatbin",
    "hsaco": next(iter(fz.HSACO_FIXTURES), "tests/fixtures/cuda/bin/kern_sm90.cubin"),
}
_LIBRARY_NAMES = st.sampled_from(["libk.so", "libk.so.1", "k.cubin", "k.fatbin", "k.hsaco", "k.ptx"])
_DATA_NAMES = st.sampled_from(
    ["libk.so.bak", "libk", "libk.so.1rc1", "kernels.bin", "kernels.dat", "k.py", "data/k.txt", "k"]
)


@st.composite
def _member(draw, depth: int = 0):
    kind = draw(
        st.sampled_from(
            ["library", "cubin", "fatbin", "hsaco", "text", "random", "empty"] + (["zip"] if depth < 2 else [])
        )
    )
    if kind in _CONTENTS:
        content = fz.load(_CONTENTS[kind])
    elif kind == "text":
        content = b"def f():\n    return 1\n" * draw(st.integers(0, 300))
    elif kind == "random":
        content = draw(st.binary(max_size=3000))
    elif kind == "empty":
        content = b""
    else:
        inner = draw(st.lists(_member(depth + 1), min_size=1, max_size=3, unique_by=lambda m: m[0]))
        content = _zip(inner)
    name = draw(_LIBRARY_NAMES | _DATA_NAMES)
    method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    return (f"m{draw(st.integers(0, 999))}/{name}", content, method)


def _zip(members) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, content, method in members:
            z.writestr(zipfile.ZipInfo(name), content, compress_type=method)
    return buf.getvalue()


def _expected(members, prefix: str = "", depth: int = 0) -> tuple[set[str], set[str]]:
    """(display names that must be audited or named by a finding, display names that must not
    be read), for members of an archive nested `depth` zips deep."""
    must, never = set(), set()
    for name, content, _ in members:
        kind = artifacts.content_kind(content[: zipread.HEAD])
        if kind == "zip":
            try:
                inner = zipfile.ZipFile(io.BytesIO(content))
                sub = [(i.filename, inner.read(i), 0) for i in inner.infolist()]
            except Exception:  # noqa: BLE001 - random bytes that open like a zip: a finding names it
                must.add(prefix + name)
                continue
            if depth + 1 > artifacts.MAX_NESTING:
                must.add(prefix + name)  # the finding that says its members are not read
                continue
            m, n = _expected(sub, prefix + name + "!", depth + 1)
            must |= m
            never |= n
        elif kind is not None:
            must.add(prefix + name)
        elif not artifacts.is_library_name(name):
            never.add(prefix + name)
    return must, never


@given(members=st.lists(_member(), min_size=1, max_size=6, unique_by=lambda m: m[0]))
def test_members_chosen_by_content(members):
    fz.tally("test_members_chosen_by_content")
    info = ("selection-1.0.dist-info/WHEEL", b"Wheel-Version: 1.0\n", 0)  # a wheel pip installs
    path = fz.scratch_write("selection-1.0-py3-none-any.whl", _zip([*members, info]))
    inv = artifacts.inventory(path, jobs=1)
    audited = {lib.path for lib in inv.libraries}
    mentioned = " ".join(p.message for p in inv.problems)
    must, never = _expected(members)
    missing = {n for n in must if n not in audited and n not in mentioned}
    assert not missing, (missing, audited, inv.problems)
    assert not (never & audited), never & audited
