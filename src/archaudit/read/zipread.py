"""A zip reader for untrusted wheels: members are streamed in place, never extracted.

Why not zipfile: we need the hazards (duplicates, bombs, unsafe names, symlinks) as
findings rather than exceptions, bounded output per inflate call, one open file per
reader thread, and the fastest inflater available (ISA-L), all without temporary files.

What is read must be what pip installs. pip's installer lists members with the standard
library's zipfile, which finds the end record, honours a zip64 locator right before it
whatever the end record says, reads the zip64 record right before the locator, and reads
the central directory that ends where those records begin (shifting every offset by the
difference). A zip records the same facts in several places; wherever they disagree, this
reader fails (E002) instead of choosing one, so its member list is zipfile's or nothing.
"""

from __future__ import annotations

import io
import os
import stat
import struct
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import IO, Any

from ..errors import ArchauditError
from ..findings import Code

_inflater: ModuleType
try:  # ISA-L inflates the same deflate streams about twice as fast as zlib.
    from isal import isal_zlib as _inflater
except ImportError:  # pragma: no cover - isal is a declared dependency
    _inflater = zlib

crc32 = _inflater.crc32
INFLATER = _inflater.__name__

CHUNK = 1 << 20  # bytes of output per inflate step
# Compressed bytes read per step: small enough that one step's output (at most CHUNK) takes all
# of it. Reading CHUNK instead leaves most of it as the inflater's unconsumed tail, copied anew
# at every step, and with ISA-L in two threads those copies fragment the allocator's arenas
# (torch 2.14.1 read by two threads: 131 MB peak instead of 48 MB).
INPUT_CHUNK = 256 << 10
MAX_MEMBER = 16 << 30  # larger declared members are treated as bombs
MAX_RATIO = 1000  # deflate tops out near 1032:1; beyond this the header lies
HEAD = 512  # bytes of each member's start read to know what it is
_QUICK = 64  # bytes of a member's start that say what it is, PE aside
_PREFETCH = 1024  # compressed bytes read with each local header (when heads are wanted)
HEAD_INPUT = 64 << 10  # compressed bytes a member may take to yield its first HEAD bytes
WHOLE = 4096  # members this small are inflated whole (and verified) when their head is read
MAX_COMMENT = 0xFFFF

Hazard = tuple[Code, str, str]  # (code, member name, message)
ReadAt = Callable[[int, int], bytes]  # (offset, length) -> at most length bytes


class ZipError(ArchauditError):
    """The archive as a whole cannot be read (finding E002)."""

    default_code = Code.E002


class MemberError(ArchauditError):
    """One member cannot be read or is hazardous; code is E002 or E003."""


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    method: int
    flags: int
    crc: int
    compressed_size: int
    size: int
    header_offset: int
    mode: int  # unix mode from the external attributes, 0 if none
    data_offset: int = -1  # where the member's data starts (after its local header); -1 unknown
    tag: object = None  # what the caller's `select` said of its first bytes
    whole: bytes | None = None  # the whole member, verified, when selected and at most WHOLE bytes

    @property
    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self.mode)

    @property
    def is_dir(self) -> bool:
        return self.name.endswith("/")


_EOCD = struct.Struct("<4s4H2LH")
_EOCD64_LOCATOR = struct.Struct("<4sLQL")
_EOCD64 = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_LOCAL = struct.Struct("<4s5H3L2H")
_UNICODE_PATH = 0x7075  # Info-ZIP Unicode Path extra field: newer zipfile renames the member by it


Select = Callable[[str, bytes], object]  # (member name, its first HEAD bytes) -> tag, falsy: not wanted


def read_directory(path: str, select: Select | None = None) -> tuple[list[Member], list[Hazard]]:
    """Members of the archive, and hazards as (code, member, message). Raises ZipError.

    With `select`, each file member's first HEAD bytes are read along with its local header
    (the rest is not inflated) and `select(name, head)` is kept as its tag."""
    try:
        with open(path, "rb") as f:
            fd = f.fileno()
            size = os.fstat(fd).st_size
            return _read_directory(lambda at, n: os.pread(fd, n, at), size, select)
    except OSError as e:
        raise ZipError(f"cannot read: {e}") from e


def read_directory_bytes(data: bytes, select: Select | None = None) -> tuple[list[Member], list[Hazard]]:
    """The same for an archive held in memory (a zip inside a wheel)."""
    view = memoryview(data)
    return _read_directory(lambda at, n: bytes(view[at : at + n]), len(data), select)


def _read_directory(read_at: ReadAt, size: int, select: Select | None) -> tuple[list[Member], list[Hazard]]:
    eocd_pos, count, cd_size, cd_offset = _end_records(read_at, size)
    if count > cd_size // _CENTRAL.size:
        raise ZipError(f"central directory claims {count} members in {cd_size} bytes")
    directory = read_at(cd_offset, cd_size)
    if len(directory) != cd_size:
        raise ZipError("central directory overruns the archive (truncated?)")
    members, hazards = _parse_directory(directory, count, cd_offset, size)
    members = _check_local_headers(read_at, members, hazards, select)
    return _check_overlaps(members, hazards, cd_offset), hazards


def read_directory_at(read_at: ReadAt, size: int, select: Select | None = None) -> tuple[list[Member], list[Hazard]]:
    """The same for an archive of `size` bytes read through `read_at` (a stored zip inside a wheel)."""
    return _read_directory(read_at, size, select)


class Window(io.RawIOBase):
    """Bytes [base, base + size) of a binary file, as a file of its own (a stored zip member read
    in place). Owns the file it is given."""

    def __init__(self, f: IO[bytes], base: int, size: int):
        super().__init__()
        self._f, self._base, self._size, self._pos = f, base, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        self._pos = pos if whence == 0 else self._pos + pos if whence == 1 else self._size + pos
        return self._pos

    def tell(self) -> int:
        return self._pos

    def pread(self, at: int, n: int) -> bytes:
        n = max(0, min(n, self._size - at))
        if at < 0 or not n:
            return b""
        self._f.seek(self._base + at)
        return self._f.read(n)

    def readinto(self, b: Any) -> int:
        data = self.pread(self._pos, len(b))
        b[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def close(self) -> None:
        self._f.close()
        super().close()


def _find_end_record(read_at: ReadAt, size: int) -> tuple[int, bytes]:
    """(offset, bytes) of the end of central directory record, where zipfile finds it."""
    if size < _EOCD.size:
        raise ZipError("end of central directory not found (truncated or not a zip)")
    last = read_at(size - _EOCD.size, _EOCD.size)
    if last[:4] == b"PK\x05\x06" and last[-2:] == b"\0\0":
        return size - _EOCD.size, last
    # zipfile takes the last signature within a maximal comment's reach
    start = max(0, size - MAX_COMMENT - _EOCD.size)
    tail = read_at(start, size - start)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _EOCD.size > len(tail):
        raise ZipError("end of central directory not found (truncated or not a zip)")
    return start + at, tail[at : at + _EOCD.size]


def _zip64_directory(
    read_at: ReadAt, locator: bytes, loc_pos: int, end_record: tuple[int, int, int, int]
) -> tuple[int, int, int, int]:
    """(member count, directory size, directory offset, directory end) from the zip64 record the
    locator at `loc_pos` names; `end_record` is the end record's (count, disk count, size, offset),
    each of which must agree with it or be saturated."""
    count, disk_count, cd_size, cd_offset = end_record
    _, loc_disk, rec_offset, disks = _EOCD64_LOCATOR.unpack(locator)
    rec_pos = loc_pos - _EOCD64.size
    if loc_disk != 0 or disks > 1:
        raise ZipError("multi-disk archives are not wheels")
    if rec_pos < 0 or rec_offset != rec_pos:
        raise ZipError(
            "the zip64 locator points elsewhere than the zip64 record before it (zipfile reads the one before it)"
        )
    rec64 = read_at(rec_pos, _EOCD64.size)
    if len(rec64) < _EOCD64.size or rec64[:4] != b"PK\x06\x06":
        raise ZipError("zip64 end of central directory is corrupt")
    (_, rec_size, _, _, disk64, cd_disk64, disk_count64, count64, cd_size64, cd_offset64) = _EOCD64.unpack(rec64)
    if rec_size != _EOCD64.size - 12:
        raise ZipError("zip64 end record has extensible data (zipfile would misread it)")
    if disk64 != 0 or cd_disk64 != 0 or disk_count64 != count64:
        raise ZipError("multi-disk archives are not wheels")
    for name, small, big, full in (
        ("member count", count, count64, 0xFFFF),
        ("member count", disk_count, count64, 0xFFFF),
        ("directory size", cd_size, cd_size64, 0xFFFFFFFF),
        ("directory offset", cd_offset, cd_offset64, 0xFFFFFFFF),
    ):
        if small != full and small != big:
            raise ZipError(f"the end record and the zip64 record disagree on the {name} ({small} and {big})")
    return count64, cd_size64, cd_offset64, rec_pos


def _end_records(read_at: ReadAt, size: int) -> tuple[int, int, int, int]:
    """(end record offset, member count, directory size, directory offset), found where
    zipfile finds them; every disagreement between the end record, the zip64 locator, the
    zip64 record and the directory's position is a ZipError."""
    eocd_pos, rec = _find_end_record(read_at, size)
    (_, disk, cd_disk, disk_count, count, cd_size, cd_offset, comment_len) = _EOCD.unpack(rec)
    if eocd_pos + _EOCD.size + comment_len != size:
        raise ZipError(
            "the end record's comment length does not reach the end of the file "
            "(bytes after the archive, or a second end record)"
        )
    if disk != 0 or cd_disk != 0:
        raise ZipError("multi-disk archives are not wheels")
    dir_end = eocd_pos
    loc_pos = eocd_pos - _EOCD64_LOCATOR.size
    locator = read_at(loc_pos, _EOCD64_LOCATOR.size) if loc_pos >= 0 else b""
    if locator[:4] == b"PK\x06\x07":  # zipfile honours a locator whatever the end record says
        count, cd_size, cd_offset, dir_end = _zip64_directory(
            read_at, locator, loc_pos, (count, disk_count, cd_size, cd_offset)
        )
    elif disk_count != count:
        raise ZipError("multi-disk archives are not wheels")
    if cd_offset + cd_size != dir_end:
        raise ZipError(
            "the central directory does not end where the end record begins "
            "(a second directory, or bytes before the archive): zipfile would read "
            "another one"
        )
    return eocd_pos, count, cd_size, cd_offset


def _parse_directory(data: bytes, count: int, cd_offset: int, archive_size: int) -> tuple[list[Member], list[Hazard]]:
    members: list[Member] = []
    hazards: list[Hazard] = []
    seen: set[str] = set()
    pos = 0
    unpack = _CENTRAL.unpack_from
    for _ in range(count):
        if pos + _CENTRAL.size > len(data) or data[pos : pos + 4] != b"PK\x01\x02":
            raise ZipError(f"central directory entry {len(members) + len(hazards)} is corrupt")
        (_, made_by, _, flags, method, _, _, crc, csize, usize, nlen, xlen, clen, _, _, ext_attr, offset) = unpack(
            data, pos
        )
        name_at = pos + _CENTRAL.size
        end = name_at + nlen + xlen + clen
        if end > len(data):
            raise ZipError("central directory entry overruns the directory")
        raw_name = data[name_at : name_at + nlen]
        pos = end
        try:
            name = raw_name.decode("ascii" if raw_name.isascii() else "utf-8" if flags & 0x800 else "cp437")
        except UnicodeDecodeError:
            hazards.append(
                (
                    Code.E002,
                    raw_name.decode("utf-8", "replace"),
                    "name is flagged UTF-8 but is not (zipfile cannot read it)",
                )
            )
            continue
        problem = None
        if xlen:
            extra = data[name_at + nlen : name_at + nlen + xlen]
            usize, csize, offset, problem = _extra_fields(extra, raw_name, name, usize, csize, offset)
            if problem:
                hazards.append((Code.E002, name, problem))
                continue
        mode = (ext_attr >> 16) if (made_by >> 8) == 3 else 0
        member = Member(name, method, flags, crc, csize, usize, offset, mode)
        problem = _hazard(member, archive_size, cd_offset)
        if name in seen:
            problem = problem or "member listed twice"
        seen.add(name)
        if problem:
            hazards.append((Code.E003, name, problem))
            continue
        members.append(member)
    if pos != len(data):  # a lowered count would hide members
        raise ZipError(f"central directory holds more than the {count} members its end record counts")
    return members, hazards


def _extra_fields(
    extra: bytes, raw_name: bytes, name: str, usize: int, csize: int, offset: int
) -> tuple[int, int, int, str | None]:
    """Sizes and offset with the zip64 extra field applied as zipfile applies it, or a problem:
    a malformed extra field, a second zip64 field, or a Unicode Path field naming the member
    otherwise (newer zipfile installs it under that name)."""
    pos = 0
    zip64_seen = False
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4 : pos + 4 + length]
        if len(body) != length:
            return usize, csize, offset, f"extra field {tag:#06x} overruns its entry"
        if tag == 1:
            if zip64_seen:
                return usize, csize, offset, "two zip64 extra fields"
            zip64_seen = True
            vals = [struct.unpack_from("<Q", body, i)[0] for i in range(0, len(body) - 7, 8)]
            it = iter(vals)
            try:
                if usize == 0xFFFFFFFF:
                    usize = next(it)
                if csize == 0xFFFFFFFF:
                    csize = next(it)
                if offset == 0xFFFFFFFF:
                    offset = next(it)
            except StopIteration:
                return usize, csize, offset, "zip64 extra field is too short"
        elif (
            tag == _UNICODE_PATH
            and len(body) >= 5
            and body[0] == 1
            and struct.unpack_from("<L", body, 1)[0] == zlib.crc32(raw_name)
        ):
            alt = body[5:].decode("utf-8", "replace")
            if alt and alt != name:
                return usize, csize, offset, f"its Unicode Path extra field names it {alt!r}"
        pos += 4 + length
    if pos != len(extra):
        return usize, csize, offset, "extra fields overrun their entry"
    if 0xFFFFFFFF in (usize, csize, offset) and not zip64_seen:
        return usize, csize, offset, "zip64 sizes announced but no zip64 extra field"
    return usize, csize, offset, None


def _hazard(m: Member, archive_size: int, cd_offset: int) -> str | None:
    name = m.name
    if name[:1] in ("/", "\\") or name[1:2] == ":":
        return "absolute member path"
    if ".." in name and ".." in name.replace("\\", "/").split("/"):
        return "member path escapes the archive ('..')"
    if "\x00" in name:
        return "NUL byte in member name"
    if m.is_symlink:
        return "member is a symbolic link"
    if m.header_offset + _LOCAL.size > cd_offset or m.compressed_size > archive_size:
        return "member data lies outside the archive"
    if m.size > MAX_MEMBER:
        return f"declares {m.size} bytes uncompressed (zip bomb?)"
    if m.size > (1 << 20) and m.size > MAX_RATIO * max(m.compressed_size, 1):
        return f"declares a {m.size // max(m.compressed_size, 1)}:1 compression ratio (zip bomb?)"
    return None


def _check_local_headers(
    read_at: ReadAt, members: list[Member], hazards: list[Hazard], select: Select | None
) -> list[Member]:
    """Each member's local header must repeat its central-directory name, as zipfile (and so
    pip) requires: otherwise the name that decided whether it is audited is not the name it is
    installed under. Its method, CRC and sizes must agree too. Returns the members that pass,
    with their data offsets (and, with `select`, their tags)."""
    kept: dict[int, Member] = {}
    prefetch = _PREFETCH if select is not None else 0
    data_end = 0  # end of the data of the member before, in file order
    # In file order, so that a member whose header lies inside the data before it (overlap,
    # E003 below) is not inflated: the heads read never share a byte, their input is bounded
    # by the file's size.
    for index, m in sorted(enumerate(members), key=lambda im: im[1].header_offset):
        name = m.name
        raw_len = len(name) if name.isascii() else len(name.encode("utf-8" if m.flags & 0x800 else "cp437"))
        head = read_at(m.header_offset, _LOCAL.size + raw_len + prefetch)
        local = _local_header(read_at, m, head, raw_len)
        if isinstance(local, str):
            hazards.append((Code.E002, name, local))
            continue
        nlen, xlen = local
        data_offset = m.header_offset + _LOCAL.size + nlen + xlen
        tag: object = None
        whole = None
        overlapped = m.header_offset < data_end
        data_end = max(data_end, data_offset + m.compressed_size)
        if select is not None and name[-1:] != "/" and not overlapped:
            first = head[_LOCAL.size + nlen + xlen :] if nlen == raw_len else b""
            try:
                tag, whole = _selected(read_at, m, select, first[: m.compressed_size], data_offset)
            except MemberError as e:
                hazards.append((e.code, name, str(e)))
                continue
        kept[index] = Member(
            name, m.method, m.flags, m.crc, m.compressed_size, m.size, m.header_offset, m.mode, data_offset, tag, whole
        )
    return [kept[i] for i in sorted(kept)]


def _local_header(read_at: ReadAt, m: Member, head: bytes, raw_len: int) -> tuple[int, int] | str:
    """The lengths of the local header's name and extra field, or why the header does not repeat
    the central directory's name, method, encryption, CRC and sizes. ``head``: the bytes read at
    the header, ``raw_len``: the length of the central directory's name as stored."""
    if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
        return "local header missing (archive truncated or corrupt)"
    (_, _, flags, method, _, _, crc, csize, usize, nlen, xlen) = _LOCAL.unpack_from(head)
    fixed = _LOCAL.size + raw_len
    local_raw = head[_LOCAL.size : fixed] if nlen == raw_len else read_at(m.header_offset + _LOCAL.size, nlen)
    local = _decoded_name(local_raw, flags)
    if local != m.name:
        return f"local header names it {local!r}"
    if method != m.method or (flags ^ m.flags) & 0x1:
        return "local header and central directory disagree on its compression or encryption"
    if not flags & 0x8 and (
        crc != m.crc or csize not in (m.compressed_size, 0xFFFFFFFF) or usize not in (m.size, 0xFFFFFFFF)
    ):
        return "local header and central directory disagree on its CRC or sizes"
    return nlen, xlen


def _decoded_name(raw: bytes, flags: int) -> str:
    """A local header's name as zipfile reads it: UTF-8 where its flag says so, else cp437."""
    try:
        return raw.decode("ascii" if raw.isascii() else "utf-8" if flags & 0x800 else "cp437")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace")


def _selected(
    read_at: ReadAt, m: Member, select: Select, first: bytes, data_offset: int
) -> tuple[object, bytes | None]:
    """What ``select`` tags the member by its first bytes (64 say what a file is; an MS-DOS stub
    points further, to its PE header), and, for a tagged member of at most WHOLE bytes, the
    whole member, verified. Raises MemberError."""
    start, _ = member_head(read_at, m, _QUICK, first, data_offset, whole=False)
    if start[:2] == b"MZ":
        start, _ = member_head(read_at, m, HEAD, first, data_offset, whole=False)
    tag = select(m.name, start)
    whole = None
    if tag and m.size <= WHOLE:
        _, whole = member_head(read_at, m, HEAD, first, data_offset)
    return tag, whole


def _check_overlaps(members: list[Member], hazards: list[Hazard], cd_offset: int) -> list[Member]:
    """Each member's header and data must lie between the previous member's data and the next
    member's header (newer zipfile refuses overlapped entries as possible zip bombs): members
    sharing bytes are E003, so no byte is inflated twice."""
    order = sorted(members, key=lambda m: m.header_offset)
    bad: set[int] = set()
    for i, m in enumerate(order):
        end = m.data_offset + m.compressed_size
        limit = order[i + 1].header_offset if i + 1 < len(order) else cd_offset
        if end > limit:
            bad.add(id(m))
            other = order[i + 1].name if i + 1 < len(order) else "the central directory"
            hazards.append((Code.E003, m.name, f"member data overlaps {other!r} (zip bomb?)"))
            if i + 1 < len(order):
                bad.add(id(order[i + 1]))
                hazards.append((Code.E003, order[i + 1].name, f"member data overlaps {m.name!r} (zip bomb?)"))
    return [m for m in members if id(m) not in bad] if bad else members


def member_head(
    read_at: ReadAt, m: Member, n: int = HEAD, first: bytes = b"", data_offset: int = -1, whole: bool = True
) -> tuple[bytes, bytes | None]:
    """The member's first n bytes (fewer if it is shorter), without inflating the rest; and (if
    `whole`) the whole member, verified, when it is at most WHOLE bytes. `first`: the start of
    its data, when the caller has it already. Raises MemberError."""
    _readable(m)
    at = m.data_offset if data_offset < 0 else data_offset
    if m.method == 0:
        return _stored_head(read_at, m, n, first, at, whole)
    whole = whole and m.size <= WHOLE
    want = m.size if whole else min(n, m.size)
    out, eof, taken, unused = _inflate(read_at, m, first, at, want, whole)
    if not whole:
        return out[:n], None
    if not eof:
        raise MemberError("deflate stream is truncated", code=Code.E002)
    if taken != m.compressed_size or unused:
        raise MemberError("member has data after its deflate stream", code=Code.E002)
    _verify(m, out)
    return out[:n], out


def _stored_head(read_at: ReadAt, m: Member, n: int, first: bytes, at: int, whole: bool) -> tuple[bytes, bytes | None]:
    """member_head of a stored member: its bytes as they are."""
    if m.compressed_size != m.size:
        raise MemberError("stored member's sizes disagree", code=Code.E002)
    if whole and m.size <= WHOLE:
        data = first if len(first) >= m.size else read_at(at, m.size)
        _verify(m, data[: m.size])
        return data[:n], data[: m.size]
    return (first if len(first) >= n else read_at(at, min(n, m.size)))[:n], None


def _inflate(
    read_at: ReadAt, m: Member, first: bytes, at: int, want: int, whole: bool
) -> tuple[bytes, bool, int, bool]:
    """Inflate a deflated member until ``want`` bytes (``whole``: to its end), reading its input
    in growing steps and never more than HEAD_INPUT bytes of it for a head. Returns what it
    inflated, whether the stream ended, the input bytes taken, and whether input followed the
    stream's end. Raises MemberError."""
    inflater = zlib.decompressobj(-15)  # for a few bytes, zlib starts faster than ISA-L
    out = b""
    taken = 0
    step = min(m.compressed_size, 1024)
    while (len(out) < want or (whole and not inflater.eof)) and taken < m.compressed_size:
        if taken >= HEAD_INPUT:
            raise MemberError(
                f"no {want} bytes of content in its first {HEAD_INPUT} "
                f"compressed bytes (corrupt or hostile deflate data)",
                code=Code.E002,
            )
        if first and not taken:
            block = first
        else:
            block = read_at(at + taken, min(step, m.compressed_size - taken))
        if not block:
            raise MemberError("member data is truncated", code=Code.E002)
        taken += len(block)
        step = min(step * 4, HEAD_INPUT)
        try:  # one byte more than wanted: a whole member inflating past its size is caught
            out += inflater.decompress(inflater.unconsumed_tail + block, want + 1 - len(out))
        except Exception as e:  # noqa: BLE001 - any inflater failure is corrupt input
            raise MemberError(f"corrupt deflate data: {e}", code=Code.E002) from None
        if len(out) > want and whole:
            raise MemberError(f"inflates past its declared {m.size} bytes (zip bomb?)", code=Code.E003)
        if inflater.eof:
            break
    return out, inflater.eof, taken, bool(inflater.unused_data)


def _verify(m: Member, data: bytes) -> None:
    if len(data) != m.size:
        raise MemberError(f"inflates to {len(data)} bytes, header says {m.size}", code=Code.E002)
    if crc32(data) != m.crc:
        raise MemberError("CRC mismatch (corrupt or changed while read)", code=Code.E002)


def _readable(m: Member) -> None:
    if m.flags & 0x1:
        raise MemberError("member is encrypted", code=Code.E002)
    if m.method not in (0, 8):
        raise MemberError(f"unsupported compression method {m.method}", code=Code.E002)


def _seek_data(f: IO[bytes], m: Member) -> None:
    """Put `f` at the member's data, past its local header when the directory did not say where."""
    if m.data_offset >= 0:
        f.seek(m.data_offset)
        return
    f.seek(m.header_offset)
    head = f.read(_LOCAL.size)
    if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
        raise MemberError("local header missing (archive truncated or corrupt)", code=Code.E002)
    nlen, xlen = _LOCAL.unpack(head)[-2:]
    f.seek(m.header_offset + _LOCAL.size + nlen + xlen)


def _stored(f: IO[bytes], m: Member, chunk: int) -> Generator[bytes, None, int]:
    """Yield a stored member's bytes; returns their CRC."""
    if m.compressed_size != m.size:
        raise MemberError("stored member's sizes disagree", code=Code.E002)
    remaining_in = m.compressed_size
    crc = 0
    while remaining_in:
        block = f.read(min(chunk, remaining_in))
        if not block:
            raise MemberError("member data is truncated", code=Code.E002)
        remaining_in -= len(block)
        crc = crc32(block, crc)
        yield block
    return crc


def _inflated(f: IO[bytes], m: Member, chunk: int) -> Generator[bytes, None, tuple[int, int]]:
    """Yield a deflated member's bytes, never more than it declares; returns (bytes produced, CRC)."""
    remaining_in = m.compressed_size
    produced = 0
    crc = 0
    inflater = _inflater.decompressobj(-15)
    pending = b""
    # ISA-L may take all the input of a call and hold output it has not returned yet (zlib keeps
    # such input in unconsumed_tail): with no input left, the inflater is asked again, and the
    # stream is truncated only when it then yields nothing short of its end.
    while not inflater.eof:
        if not pending and remaining_in:
            pending = f.read(min(chunk, INPUT_CHUNK, remaining_in))
            if not pending:
                raise MemberError("member data is truncated", code=Code.E002)
            remaining_in -= len(pending)
        try:
            out = inflater.decompress(pending, chunk)
        except Exception as e:  # noqa: BLE001 - any inflater failure is corrupt input (isal's IsalError too)
            raise MemberError(f"corrupt deflate data: {e}", code=Code.E002) from None
        pending = inflater.unconsumed_tail
        if out:
            produced += len(out)
            if produced > m.size:
                raise MemberError(f"inflates past its declared {m.size} bytes (zip bomb?)", code=Code.E003)
            crc = crc32(out, crc)
            yield out
        elif not pending and not remaining_in and not inflater.eof:
            raise MemberError("deflate stream is truncated", code=Code.E002)
    if remaining_in or inflater.unused_data:
        raise MemberError("member has data after its deflate stream", code=Code.E002)
    return produced, crc


def iter_member(f: IO[bytes], m: Member, chunk: int = CHUNK) -> Iterator[bytes]:
    """Yield the member's bytes in order, verifying size and CRC; raises MemberError.

    `f` is a binary file object owned by the caller (one per thread).
    """
    _readable(m)
    _seek_data(f, m)
    if m.method == 0:
        crc = yield from _stored(f, m, chunk)
        produced = m.size
    else:
        produced, crc = yield from _inflated(f, m, chunk)
    if produced != m.size:
        raise MemberError(f"inflates to {produced} bytes, header says {m.size}", code=Code.E002)
    if crc != m.crc:
        raise MemberError("CRC mismatch (corrupt or changed while read)", code=Code.E002)


__all__ = [
    "CHUNK",
    "crc32",
    "Hazard",
    "HEAD",
    "HEAD_INPUT",
    "INFLATER",
    "iter_member",
    "MAX_MEMBER",
    "MAX_RATIO",
    "Member",
    "member_head",
    "MemberError",
    "read_directory",
    "read_directory_at",
    "read_directory_bytes",
    "ReadAt",
    "Select",
    "WHOLE",
    "Window",
    "ZipError",
]
