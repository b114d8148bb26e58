"""Archive and filesystem hazards: each gives a clear finding, exit 1 or 2, and `check` writes
nothing anywhere.

Every case runs the real command (`python -m archaudit check`) in a child process whose working
directory, HOME and TMPDIR are fresh empty directories, with a timeout (a FIFO opened for
reading would block forever: the timeout is the proof that it is not opened). Afterwards the
three directories and the target's directory must be exactly as before.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from pathlib import Path

import pytest

from archaudit.read import library, plan, zipread
from helpers import WHEEL_NAME, assert_finding, check, findings, wheel

ROOT = Path(__file__).resolve().parents[2]
CUDA = ROOT / "tests" / "fixtures" / "cuda" / "bin"
LIB = (CUDA / "lib_sm80.so").read_bytes()


# ---- wheels ------------------------------------------------------------------------------------


def _cd_entries(data: bytes):
    eocd = data.rfind(b"PK\x05\x06")
    cd_size, cd_offset = struct.unpack_from("<LL", data, eocd + 12)
    pos = cd_offset
    while pos < cd_offset + cd_size:
        nlen, xlen, clen = struct.unpack_from("<HHH", data, pos + 28)
        yield pos, data[pos + 46 : pos + 46 + nlen]
        pos += 46 + nlen + xlen + clen


def test_member_declaring_an_absurd_size(tmp_path):
    """A zip bomb by header: the central directory declares 4 GiB - 1 for a 20 KB member."""
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libk.so", LIB)])
    data = bytearray(p.read_bytes())
    for pos, name in _cd_entries(bytes(data)):
        if name == b"demo/libk.so":
            struct.pack_into("<L", data, pos + 24, 0xFFFFFFFE)
    p.write_bytes(data)
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E003", "zip bomb")


def test_member_inflating_past_its_declared_size(tmp_path):
    """A zip bomb by content: the deflate stream of 64 MiB of zeros, with headers (and CRC)
    declaring the 20 KB library. Reading stops at the declared size: E003, bounded memory."""
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libk.so", LIB)])
    data = p.read_bytes()
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = c.compress(LIB + b"\0" * (64 << 20)) + c.flush()
    members, _ = zipread.read_directory(str(p))
    m = members[-1]
    nlen, xlen = struct.unpack_from("<HH", data, m.header_offset + 26)
    start = m.header_offset + 30 + nlen + xlen
    out = bytearray(data[:start] + bomb + data[start + m.compressed_size :])
    delta = len(bomb) - m.compressed_size
    struct.pack_into("<L", out, m.header_offset + 18, len(bomb))
    eocd = out.rfind(b"PK\x05\x06")
    (cd_offset,) = struct.unpack_from("<L", out, eocd + 16)
    struct.pack_into("<L", out, eocd + 16, cd_offset + delta)
    for pos, name in _cd_entries(bytes(out)):
        if name == b"demo/libk.so":
            struct.pack_into("<L", out, pos + 20, len(bomb))
    p.write_bytes(out)
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E003", "inflates past its declared")


def test_duplicate_member_names(tmp_path):
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libk.so", LIB), ("demo/libk.so", LIB)])
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E003", "listed twice")


@pytest.mark.parametrize(
    "name", ["../evil/libk.so", "demo/../../libk.so", "/abs/libk.so", "C:/x/libk.so", "\\abs\\libk.so"]
)
def test_unsafe_member_paths(tmp_path, name):
    """zipfile normalises such names on write, so the raw name bytes are patched in both headers."""
    placeholder = "q" * (len(name) - 3) + ".so"
    p = wheel(tmp_path / WHEEL_NAME, [("demo/__init__.py", b""), (placeholder, LIB)])
    data = p.read_bytes()
    assert data.count(placeholder.encode()) == 2
    p.write_bytes(data.replace(placeholder.encode(), name.encode()))
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E003", "absolute member path" if name[0] in "/\\" or name[1] == ":" else "'..'")


def test_symlink_member(tmp_path):
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libk.so", b"/usr/lib/libcuda.so")], symlink="demo/libk.so")
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E003", "symbolic link")


def test_truncated_wheel(tmp_path):
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libk.so", LIB)])
    p.write_bytes(p.read_bytes()[:-30])
    code, rep, _ = check(tmp_path, p)
    assert code == 2
    assert_finding(rep, "E002", "malformed archive")


def test_truncated_member_data(tmp_path):
    """The archive's tail intact but a member's data cut short (central directory kept)."""
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libk.so", LIB)])
    data = p.read_bytes()
    members, _ = zipread.read_directory(str(p))
    m = members[-1]
    cut = m.header_offset + 30 + len(m.name) + m.compressed_size // 2
    eocd = data.rfind(b"PK\x05\x06")
    (cd_offset,) = struct.unpack_from("<L", data, eocd + 16)
    p.write_bytes(data[:cut] + data[cd_offset:])
    code, rep, _ = check(tmp_path, p)
    assert code in (1, 2)
    assert any(c in ("E002", "E003") for c, _ in findings(rep)), findings(rep)


def test_not_a_zip(tmp_path):
    p = tmp_path / WHEEL_NAME
    p.write_bytes(b"this is not a zip archive\n" * 100)
    code, rep, _ = check(tmp_path, p)
    assert code == 2
    assert_finding(rep, "E002", "malformed archive")


def test_wheel_changed_while_read(tmp_path):
    """The wheel is rewritten between reading its directory and reading a member: the CRC
    catches it (E002), deterministically, through the real reader in its real order."""
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libk.so", LIB)])
    jobs, problems = plan._wheel_jobs(str(p))
    assert not problems and len(jobs) == 1
    data = bytearray(p.read_bytes())
    members, _ = zipread.read_directory(str(p))
    start = members[-1].header_offset + 30 + len(members[-1].name)
    data[start + 5] ^= 0xFF  # same length, different deflate bytes
    p.write_bytes(data)
    lib = library.scan_stream(jobs[0].display, jobs[0].size, jobs[0].chunks)
    assert lib.problems and lib.problems[0].code in ("E002", "E003"), lib.problems


# ---- directories -------------------------------------------------------------------------------


def test_empty_directory(tmp_path):
    d = tmp_path / "target"
    d.mkdir()
    code, rep, _ = check(tmp_path, d)
    assert code == 2
    assert_finding(rep, "E001", "no files")


def test_symlink_loops_and_broken_links(tmp_path):
    d = tmp_path / "target"
    d.mkdir()
    (d / "libgood.so").write_bytes(LIB)
    os.symlink("libloop.so", d / "libloop.so")  # a link to itself
    os.symlink("libb.so", d / "liba.so")
    os.symlink("liba.so", d / "libb.so")  # a two-link cycle
    os.symlink("missing.so", d / "libbroken.so")
    os.symlink(".", d / "here")  # a directory loop: inside the target, not walked twice
    code, rep, _ = check(tmp_path, d)
    assert code == 1
    for name in ("libloop.so", "liba.so", "libb.so", "libbroken.so"):
        assert_finding(rep, "E003", f"{name}: unreadable or a broken/looping link")
    libs = [lib["path"] for t in rep["targets"] for lib in t["libraries"]]
    assert libs == ["libgood.so"]


def test_symlinks_pointing_outside(tmp_path):
    d = tmp_path / "target"
    d.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "libout.so").write_bytes(LIB)
    os.symlink(outside / "libout.so", d / "libout.so")
    os.symlink(outside, d / "vendored")
    code, rep, _ = check(tmp_path, d)
    assert code == 1
    assert_finding(rep, "E003", "libout.so: symbolic link points outside the target")
    assert_finding(rep, "E003", "vendored: symbolic link to a directory outside the target")


def test_fifo_is_not_opened(tmp_path):
    """A FIFO named like a library: E003, and never opened (opening it for reading would block
    without a writer; the child's timeout proves it is not)."""
    d = tmp_path / "target"
    d.mkdir()
    os.mkfifo(d / "libfifo.so")
    code, rep, _ = check(tmp_path, d, timeout=30)
    assert code == 1
    assert_finding(rep, "E003", "libfifo.so: not a regular file")
    # no reader holds it open now either
    with pytest.raises(OSError):
        os.close(os.open(d / "libfifo.so", os.O_WRONLY | os.O_NONBLOCK))


def test_fifo_given_as_the_target(tmp_path):
    fifo = tmp_path / "libfifo.so"
    os.mkfifo(fifo)
    code, rep, stderr = check(tmp_path, fifo, timeout=30)
    assert code == 2
    assert any(c == "E001" for c, _ in findings(rep)), (findings(rep), stderr)


def test_character_device(tmp_path):
    d = tmp_path / "target"
    d.mkdir()
    try:
        os.mknod(d / "libnull.so", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # like /dev/null
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot create a device node here: {e}")
    code, rep, _ = check(tmp_path, d, timeout=30)
    assert code == 1
    assert_finding(rep, "E003", "libnull.so: not a regular file")


def test_link_to_dev_null(tmp_path):
    d = tmp_path / "target"
    d.mkdir()
    os.symlink("/dev/null", d / "libnull.so")
    code, rep, _ = check(tmp_path, d, timeout=30)
    assert code == 1
    assert_finding(rep, "E003", "libnull.so: symbolic link points outside the target")


def test_file_truncated_between_listing_and_reading(tmp_path):
    """Listed at its full size, then truncated before it is read: the stream ends early (E002)."""
    d = tmp_path / "target"
    d.mkdir()
    (d / "libk.so").write_bytes(LIB)
    jobs, problems = plan._directory_jobs(str(d))
    assert not problems and len(jobs) == 1
    with open(d / "libk.so", "r+b") as f:
        f.truncate(len(LIB) // 2)
    lib = library.scan_stream(jobs[0].display, jobs[0].size, jobs[0].chunks)
    assert any(p.code == "E002" for p in lib.problems), lib.problems


def test_stream_that_grows_or_fails_while_read(tmp_path):
    """Generator-driven streams: more bytes than listed, a second pass that differs, an I/O error
    in the middle. Each is a finding, never a pass."""

    def longer():
        yield LIB
        yield b"\0" * 100

    lib = library.scan_stream("libk.so", len(LIB), longer)
    assert any(p.code == "E002" for p in lib.problems), lib.problems

    def failing():
        yield LIB[:4096]
        raise OSError(5, "Input/output error")

    lib = library.scan_stream("libk.so", len(LIB), failing)
    assert any(p.code == "E001" for p in lib.problems), lib.problems


def test_non_elf_named_so(tmp_path):
    d = tmp_path / "target"
    d.mkdir()
    (d / "libtext.so").write_text("INPUT(-lfoo)\n")  # a linker script, as some distros ship
    code, rep, _ = check(tmp_path, d)
    assert code == 1
    assert_finding(rep, "E010", "not an ELF file")


def test_fatbin_with_corrupted_size(tmp_path):
    data = bytearray(LIB)
    lib = library.library_from_bytes("lib_sm80.so", bytes(data))
    c = lib.containers[-1]
    struct.pack_into("<Q", data, c.offset + 8, 2**63)
    p = tmp_path / "libbad.so"
    p.write_bytes(data)
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E011", "")


@pytest.mark.parametrize("data", [LIB[:3000], LIB], ids=["held-whole", "streamed"])
def test_crc_mismatch(tmp_path, data):
    """Both headers state a CRC the member's (valid) deflate data does not have: E002. A member of
    at most 4 KiB is verified when its first bytes are read, a larger one while it is streamed;
    each path has its own check."""
    assert (len(data) <= zipread.WHOLE) == (data is not LIB)
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libgood.so", LIB), ("demo/libk.so", data)])
    raw = bytearray(p.read_bytes())
    members, _ = zipread.read_directory(str(p))
    m = next(m for m in members if m.name == "demo/libk.so")
    wrong = m.crc ^ 0x1
    struct.pack_into("<L", raw, m.header_offset + 14, wrong)
    for pos, name in _cd_entries(bytes(raw)):
        if name == b"demo/libk.so":
            struct.pack_into("<L", raw, pos + 16, wrong)
    p.write_bytes(raw)
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E002", "demo/libk.so: CRC mismatch")


def test_local_header_naming_the_member_otherwise(tmp_path):
    """The central directory says demo/libk.so, the local header demo/libk.sx (zipfile, and so
    pip, refuses such a member): E002, whatever the name would have decided."""
    p = wheel(tmp_path / WHEEL_NAME, [("demo/libgood.so", LIB), ("demo/libk.so", LIB)])
    raw = bytearray(p.read_bytes())
    members, _ = zipread.read_directory(str(p))
    m = next(m for m in members if m.name == "demo/libk.so")
    raw[m.header_offset + 30 + len("demo/libk.s")] = ord("x")
    p.write_bytes(raw)
    code, rep, _ = check(tmp_path, p)
    assert code == 1
    assert_finding(rep, "E002", "demo/libk.so: local header names it 'demo/libk.sx'")
