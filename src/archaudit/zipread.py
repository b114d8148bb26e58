"""A zip reader for untrusted wheels: members are streamed in place, never extracted.

Why not zipfile: we need the hazards (duplicates, bombs, unsafe names, symlinks) as
findings rather than exceptions, bounded output per inflate call, one open file per
reader thread, and the fastest inflater available (ISA-L), all without temporary files.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

try:  # ISA-L inflates the same deflate streams about twice as fast as zlib.
    from isal import isal_zlib as _inflater
except ImportError:  # pragma: no cover - isal is a declared dependency
    _inflater = zlib  # type: ignore[assignment]

crc32 = _inflater.crc32
INFLATER = _inflater.__name__

CHUNK = 1 << 20  # bytes of output per inflate step
MAX_MEMBER = 16 << 30  # larger declared members are treated as bombs
MAX_RATIO = 1000  # deflate tops out near 1032:1; beyond this the header lies


class ZipError(Exception):
    """The archive as a whole cannot be read (finding E002)."""


class MemberError(Exception):
    """One member cannot be read or is hazardous; code is E002 or E003."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


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


def read_directory(path: str) -> tuple[list[Member], list[tuple[str, str, str]]]:
    """Members of the archive, and hazards as (code, member, message). Raises ZipError."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            tail_len = min(size, 65535 + _EOCD.size)
            f.seek(size - tail_len)
            tail = f.read(tail_len)
            at = tail.rfind(b"PK\x05\x06")
            if at < 0 or at + _EOCD.size > len(tail):
                raise ZipError("end of central directory not found (truncated or not a zip)")
            (_, disk, _, _, count, cd_size, cd_offset, _) = _EOCD.unpack_from(tail, at)
            eocd_pos = size - tail_len + at
            if disk != 0:
                raise ZipError("multi-disk archives are not wheels")
            if count == 0xFFFF or cd_offset == 0xFFFFFFFF or cd_size == 0xFFFFFFFF:
                count, cd_size, cd_offset = _zip64_directory(f, eocd_pos, size)
            if cd_offset + cd_size > eocd_pos:
                raise ZipError("central directory overruns the archive (truncated?)")
            if count > cd_size // _CENTRAL.size:
                raise ZipError(f"central directory claims {count} members in {cd_size} bytes")
            f.seek(cd_offset)
            directory = f.read(cd_size)
    except OSError as e:
        raise ZipError(f"cannot read: {e}") from e
    members, hazards = _parse_directory(directory, count, cd_offset, size)
    return _check_local_names(path, members, hazards)


def _check_local_names(path: str, members: list[Member], hazards: list[tuple[str, str, str]]):
    """Each member's local header must repeat its central-directory name, as zipfile (and so
    pip) requires: otherwise the name that decided whether it is audited is not the name it is
    installed under."""
    kept = []
    try:
        with open(path, "rb") as f:
            for m in members:
                f.seek(m.header_offset)
                head = f.read(_LOCAL.size)
                if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
                    hazards.append(("E002", m.name, "local header missing (archive truncated or corrupt)"))
                    continue
                flags, nlen = _LOCAL.unpack(head)[2], _LOCAL.unpack(head)[-2]
                local = f.read(nlen).decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
                if local != m.name:
                    hazards.append(("E002", m.name, f"local header names it {local!r}"))
                    continue
                kept.append(m)
    except OSError as e:
        raise ZipError(f"cannot read: {e}") from e
    return kept, hazards


def _zip64_directory(f, eocd_pos: int, size: int) -> tuple[int, int, int]:
    if eocd_pos < _EOCD64_LOCATOR.size:
        raise ZipError("zip64 locator missing")
    f.seek(eocd_pos - _EOCD64_LOCATOR.size)
    sig, _, rec_offset, _ = _EOCD64_LOCATOR.unpack(f.read(_EOCD64_LOCATOR.size))
    if sig != b"PK\x06\x07" or rec_offset + _EOCD64.size > size:
        raise ZipError("zip64 end of central directory locator is corrupt")
    f.seek(rec_offset)
    rec = f.read(_EOCD64.size)
    if len(rec) < _EOCD64.size or rec[:4] != b"PK\x06\x06":
        raise ZipError("zip64 end of central directory is corrupt")
    _, _, _, _, _, _, _, count, cd_size, cd_offset = _EOCD64.unpack(rec)
    return count, cd_size, cd_offset


def _parse_directory(data: bytes, count: int, cd_offset: int, archive_size: int):
    members: list[Member] = []
    hazards: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    pos = 0
    for _ in range(count):
        if pos + _CENTRAL.size > len(data) or data[pos:pos + 4] != b"PK\x01\x02":
            raise ZipError(f"central directory entry {len(members)} is corrupt")
        (_, made_by, _, flags, method, _, _, crc, csize, usize, nlen, xlen, clen, _, _, ext_attr,
         offset) = _CENTRAL.unpack_from(data, pos)
        end = pos + _CENTRAL.size + nlen + xlen + clen
        if end > len(data):
            raise ZipError("central directory entry overruns the directory")
        raw_name = data[pos + _CENTRAL.size:pos + _CENTRAL.size + nlen]
        extra = data[pos + _CENTRAL.size + nlen:pos + _CENTRAL.size + nlen + xlen]
        if 0xFFFFFFFF in (csize, usize, offset):
            usize, csize, offset = _zip64_sizes(extra, usize, csize, offset)
        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
        pos = end
        mode = (ext_attr >> 16) if (made_by >> 8) == 3 else 0
        member = Member(name, method, flags, crc, csize, usize, offset, mode)
        problem = _hazard(member, archive_size, cd_offset)
        if name in seen:
            problem = problem or "member listed twice"
        seen.add(name)
        if problem:
            hazards.append(("E003", name, problem))
            continue
        members.append(member)
    if pos != len(data):  # a lowered count would hide members
        raise ZipError(f"central directory holds more than the {count} members its end record counts")
    return members, hazards


def _zip64_sizes(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        if tag == 1:
            fields = extra[pos + 4:pos + 4 + length]
            vals = [struct.unpack_from("<Q", fields, i)[0] for i in range(0, len(fields) - 7, 8)]
            it = iter(vals)
            try:
                if usize == 0xFFFFFFFF:
                    usize = next(it)
                if csize == 0xFFFFFFFF:
                    csize = next(it)
                if offset == 0xFFFFFFFF:
                    offset = next(it)
            except StopIteration:
                raise ZipError("zip64 extra field is too short") from None
            return usize, csize, offset
        pos += 4 + length
    raise ZipError("zip64 sizes announced but no zip64 extra field")


def _hazard(m: Member, archive_size: int, cd_offset: int) -> str | None:
    name = m.name
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "absolute member path"
    if ".." in name.replace("\\", "/").split("/"):
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


def iter_member(f, m: Member, chunk: int = CHUNK) -> Iterator[bytes]:
    """Yield the member's bytes in order, verifying size and CRC; raises MemberError.

    `f` is a binary file object owned by the caller (one per thread).
    """
    if m.flags & 0x1:
        raise MemberError("E002", "member is encrypted")
    if m.method not in (0, 8):
        raise MemberError("E002", f"unsupported compression method {m.method}")
    f.seek(m.header_offset)
    head = f.read(_LOCAL.size)
    if len(head) < _LOCAL.size or head[:4] != b"PK\x03\x04":
        raise MemberError("E002", "local header missing (archive truncated or corrupt)")
    nlen, xlen = _LOCAL.unpack(head)[-2:]
    f.seek(m.header_offset + _LOCAL.size + nlen + xlen)
    remaining_in = m.compressed_size
    produced = 0
    crc = 0
    if m.method == 0:
        if m.compressed_size != m.size:
            raise MemberError("E002", "stored member's sizes disagree")
        while remaining_in:
            block = f.read(min(chunk, remaining_in))
            if not block:
                raise MemberError("E002", "member data is truncated")
            remaining_in -= len(block)
            crc = crc32(block, crc)
            yield block
        produced = m.size
    else:
        inflater = _inflater.decompressobj(-15)
        pending = b""
        while True:
            if not pending:
                if inflater.eof:
                    break
                if not remaining_in:
                    raise MemberError("E002", "deflate stream is truncated")
                pending = f.read(min(chunk, remaining_in))
                if not pending:
                    raise MemberError("E002", "member data is truncated")
                remaining_in -= len(pending)
            try:
                out = inflater.decompress(pending, chunk)
            except zlib.error as e:  # isal raises zlib.error-compatible IsalError
                raise MemberError("E002", f"corrupt deflate data: {e}") from None
            except Exception as e:  # noqa: BLE001 - any inflater failure is corrupt input
                raise MemberError("E002", f"corrupt deflate data: {e}") from None
            pending = inflater.unconsumed_tail
            if out:
                produced += len(out)
                if produced > m.size:
                    raise MemberError("E003", f"inflates past its declared {m.size} bytes (zip bomb?)")
                crc = crc32(out, crc)
                yield out
            elif inflater.eof:
                break
        if remaining_in or inflater.unused_data:
            raise MemberError("E002", "member has data after its deflate stream")
    if produced != m.size:
        raise MemberError("E002", f"inflates to {produced} bytes, header says {m.size}")
    if crc != m.crc:
        raise MemberError("E002", "CRC mismatch (corrupt or changed while read)")
