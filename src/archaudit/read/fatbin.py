"""The CUDA fatbin container and entry format (what the code in an entry says: codefacts.py).

Layout as verified in shared/fatbin-format.md: a 16-byte container header (magic
0xBA55ED50), then entries back to back, each with a variable-size header whose fields
name kind, architecture, flags and (for compressed payloads) both sizes.
"""

from __future__ import annotations

import ctypes
import mmap
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

import lz4.block
import zstandard

from ..errors import ArchauditError
from ..findings import Code
from ..model import LTO, PTX, SASS, Kind
from . import elf

MAGIC = b"\x50\xed\x55\xba"
WRAPPER_MAGIC = b"\xb1\x43\x62\x46"  # .nvFatBinSegment record, not a container
CONTAINER_HEADER = struct.Struct("<IHHQ")
CONTAINER_MAGIC_TAIL = struct.pack("<HH", 1, 16)  # the only version and header size parse_container_header accepts
ENTRY_HEADER = struct.Struct("<HHIQIIHHIIIQQQ")  # 64 bytes
WRAPPER = struct.Struct("<IIQQ")
KINDS: dict[int, Kind] = {1: PTX, 2: SASS, 8: LTO}
OLD_CUBIN_KIND = 4  # listed by the public header, never produced by current nvcc

FLAG_DEBUG = 0x2
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_OPAQUE_LTO = 0x10000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY = 0x200000
MAX_ENTRY_HEADER = 4096
# The verification bound of one decoded payload: the one definition. `check --max-payload`
# defaults to it and passes its value down (read/records.py, decode.py, hip.py), so a payload
# declaring more is E012 (a HIP bundle's whole extent may be 4 times it, records.py).
DEFAULT_MAX_PAYLOAD = 256 << 20
# A caller that names no bound (smoke's PTX split, hip.parse on its own) decodes up to 4 times
# the verification bound, 1 GiB, as before: derived here, never written again.
STANDALONE_MAX_PAYLOAD = 4 * DEFAULT_MAX_PAYLOAD


class FatbinError(ArchauditError):
    """A malformed container or entry; code is an E0xx finding code."""


@dataclass(frozen=True, slots=True)
class ContainerHeader:
    version: int
    header_size: int
    fat_size: int

    @property
    def total(self) -> int:
        return self.header_size + self.fat_size


def parse_container_header(data: bytes | bytearray | memoryview, offset: int = 0) -> ContainerHeader | None:
    """The header at `offset`, or None if these bytes are not a container start."""
    if len(data) - offset < CONTAINER_HEADER.size:
        return None
    magic, version, header_size, fat_size = CONTAINER_HEADER.unpack_from(data, offset)
    if magic != 0xBA55ED50 or version != 1 or header_size != 16:
        return None
    return ContainerHeader(version, header_size, fat_size)


@dataclass(frozen=True, slots=True)
class EntryHeader:
    kind_code: int
    header_size: int
    payload_size: int
    compressed_size: int
    options_offset: int
    version: tuple[int, int]
    arch: int
    identifier_offset: int
    identifier_length: int
    flags: int
    uncompressed_size: int

    @property
    def kind(self) -> Kind | None:
        return KINDS.get(self.kind_code)

    @property
    def suffix(self) -> str:
        if self.flags & FLAG_ARCH_SPECIFIC:
            return "a"
        if self.flags & FLAG_FAMILY:
            return "f"
        return ""

    @property
    def target(self) -> str:
        return f"sm_{self.arch}{self.suffix}"

    @property
    def compression(self) -> str:
        if self.kind_code == 8 and self.flags & FLAG_OPAQUE_LTO:
            return "opaque"
        if self.flags & FLAG_ZSTD and self.compressed_size:
            return "zstd"
        if self.flags & FLAG_LZ4 and self.compressed_size:
            return "lz4"
        return "none"

    @property
    def stored_size(self) -> int:
        return self.compressed_size if self.compression != "none" else self.payload_size

    @property
    def size(self) -> int:
        return self.uncompressed_size if self.compression != "none" else self.payload_size

    @property
    def total(self) -> int:
        return self.header_size + self.payload_size


def parse_entry_header(data: bytes | bytearray | memoryview, offset: int, room: int, where: int) -> EntryHeader:
    """Parse and validate the entry at `offset`; `room` = bytes left in its container."""
    if room < ENTRY_HEADER.size:
        raise FatbinError(f"{room} bytes left in the container, too few for an entry", code=Code.E011, offset=where)
    (kind, ever, hsize, psize, csize, opt, vminor, vmajor, arch, id_off, id_len, flags, _, usize) = (
        ENTRY_HEADER.unpack_from(data, offset)
    )
    if kind not in KINDS and kind != OLD_CUBIN_KIND:
        raise FatbinError(f"entry kind {kind} is unknown", code=Code.E013, offset=where)
    if ever != 0x0101:
        raise FatbinError(f"entry version 0x{ever:04x}, expected 0x0101", code=Code.E011, offset=where)
    if hsize < ENTRY_HEADER.size or hsize > MAX_ENTRY_HEADER or hsize % 8:
        raise FatbinError(f"entry header size {hsize} is impossible", code=Code.E011, offset=where)
    if hsize + psize > room:
        raise FatbinError("entry overruns its container", code=Code.E011, offset=where)
    h = EntryHeader(kind, hsize, psize, csize, opt, (vmajor, vminor), arch, id_off, id_len, flags, usize)
    if kind == OLD_CUBIN_KIND:
        raise FatbinError("entry kind 4 (pre-ELF cubin) cannot be verified", code=Code.E013, offset=where)
    if h.compression in ("zstd", "lz4"):
        if csize > psize:
            raise FatbinError(f"compressed size {csize} exceeds the payload area {psize}", code=Code.E011, offset=where)
        if usize == 0:
            raise FatbinError("compressed entry declares no uncompressed size", code=Code.E011, offset=where)
    if not 10 <= arch <= 999:
        raise FatbinError(f"architecture {arch} is impossible", code=Code.E011, offset=where)
    if id_len and (id_off < ENTRY_HEADER.size or id_off + id_len > hsize):
        raise FatbinError("identifier lies outside the entry header", code=Code.E011, offset=where)
    return h


def check_options(header_bytes: bytes | bytearray | memoryview, h: EntryHeader, where: int) -> None:
    """Refuse an options descriptor that contradicts its entry, as cuobjdump does ("Invalid fatbin
    header", docs/fuzzing.md "Options descriptors"): a PTX entry always has one; it is a pair
    (string offset, length), and a PTX entry's string at a non-zero offset is followed by a NUL
    byte (an ELF entry's is the binary `.nv.compat` blob, checked for its extent only). cuobjdump
    also reads a descriptor or string that reaches into the payload when the bytes there happen
    to fit; archaudit refuses both (no compiler writes one: fail closed)."""
    opt = h.options_offset
    if not opt:
        if h.kind_code == 1:
            raise FatbinError("PTX entry has no options descriptor", code=Code.E011, offset=where)
        return
    if opt < ENTRY_HEADER.size or opt + 8 > h.header_size:
        raise FatbinError(f"options descriptor at {opt} lies outside the entry header", code=Code.E011, offset=where)
    s_off, s_len = struct.unpack_from("<II", header_bytes, opt)
    if not s_off:
        return
    end = s_off + s_len
    text = h.kind_code == 1  # a PTX entry's ptxas options; an ELF entry's is a binary .nv.compat blob
    if end + text > h.header_size:
        raise FatbinError(
            f"options string at {s_off} ({s_len} bytes) does not end inside the entry header",
            code=Code.E011,
            offset=where,
        )
    if text and header_bytes[end] != 0:
        raise FatbinError(
            f"options string at {s_off} ({s_len} bytes) is not followed by a NUL byte", code=Code.E011, offset=where
        )


def identifier(header_bytes: bytes | bytearray | memoryview, h: EntryHeader) -> str:
    if not h.identifier_length:
        return ""
    raw = bytes(header_bytes[h.identifier_offset : h.identifier_offset + h.identifier_length])
    return raw.decode("utf-8", errors="replace").strip()


def decode_payload(
    h: EntryHeader, payload: bytes | memoryview, where: int, max_payload: int = STANDALONE_MAX_PAYLOAD
) -> bytes:
    """The entry's payload, decompressed and checked against its declared size."""
    comp = h.compression
    if comp == "none" or comp == "opaque":
        return bytes(payload)
    if h.uncompressed_size > max_payload:
        raise FatbinError(
            f"{h.target} payload declares {h.uncompressed_size} bytes, "
            f"more than the {max_payload}-byte verification bound",
            code=Code.E012,
            offset=where,
        )
    data = bytes(payload[: h.compressed_size])
    try:
        if comp == "zstd":
            out = _zstd_bounded(data, h.uncompressed_size)
        else:
            out = lz4.block.decompress(data, uncompressed_size=h.uncompressed_size)
    except Exception as e:  # noqa: BLE001 - any decoder failure is a corrupt payload
        raise FatbinError(f"{h.target} {comp} payload does not decode: {e}", code=Code.E012, offset=where) from None
    if len(out) != h.uncompressed_size:
        raise FatbinError(
            f"{h.target} {comp} payload decodes to {len(out)} bytes, header says {h.uncompressed_size}",
            code=Code.E012,
            offset=where,
        )
    return out


class DecodeBuffer:
    """Memory a worker decodes payloads into, reused from one payload to the next. A fresh
    allocation per payload has every page faulted in again once freed memory goes back to
    the system (torch 2.14.1: 0.8 s of system time), and LZ4's own decoder copies its result
    once more (transformer-engine: 2.5 s of CPU against 0.9 s). Pages are transparent huge
    pages where the system offers them (fewer faults)."""

    def __init__(self) -> None:
        self._map: mmap.mmap | None = None
        self._address = 0

    def view(self, size: int) -> tuple[memoryview, int]:
        """A writable view of `size` bytes, and its address; valid until the next call."""
        if self._map is None or len(self._map) < size:
            self._map = None
            capacity = max(2 << 20, -(-size // (2 << 20)) * (2 << 20))
            m = mmap.mmap(-1, capacity)
            if hasattr(mmap, "MADV_HUGEPAGE"):
                try:
                    m.madvise(mmap.MADV_HUGEPAGE)
                except OSError:
                    pass
            self._address = ctypes.addressof((ctypes.c_char * capacity).from_buffer(m))
            self._map = m
        return memoryview(self._map)[:size], self._address


def _lz4_decode_into() -> Callable[[bytes, int, int, int], int] | None:
    """LZ4_decompress_safe(source, destination, compressed size, capacity) of the lz4
    package's own library (called through ctypes, so without the GIL); None where it is not
    exported (then lz4.block decodes, into memory of its own)."""
    try:
        from lz4.block import _block

        decode = ctypes.CDLL(_block.__file__).LZ4_decompress_safe
    except (ImportError, OSError, AttributeError, TypeError):
        return None
    decode.restype = ctypes.c_int
    decode.argtypes = (ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)
    return decode


_LZ4_INTO = _lz4_decode_into()


def decodes_into_buffers() -> bool:
    """Whether both payload compressions decode into a DecodeBuffer here."""
    return _LZ4_INTO is not None


def decode_payload_into(
    h: EntryHeader, payload: bytes, where: int, max_payload: int, out: DecodeBuffer | None
) -> bytes | memoryview:
    """decode_payload, but decoded into `out` where it can be (a view valid until `out`'s
    next use); the same checks, the same failures."""
    comp = h.compression
    size = h.uncompressed_size
    if out is None or comp not in ("zstd", "lz4") or not size or (comp == "lz4" and _LZ4_INTO is None):
        return decode_payload(h, payload, where, max_payload)
    if size > max_payload:
        raise FatbinError(
            f"{h.target} payload declares {size} bytes, more than the {max_payload}-byte verification bound",
            code=Code.E012,
            offset=where,
        )
    stored = min(h.compressed_size, len(payload))
    try:
        if comp == "zstd":
            content = zstandard.get_frame_parameters(payload[:32]).content_size
            if content != size:  # unknown size or several frames: the bounded general path
                return decode_payload(h, payload, where, max_payload)
            view, _ = out.view(size)
            done = _zstd_into(memoryview(payload)[:stored], view)
        else:
            assert _LZ4_INTO is not None
            view, address = out.view(size)
            done = _LZ4_INTO(payload, address, stored, size)
            # the words lz4.block.decompress uses for the same failures
            if done < 0:
                raise ValueError(
                    f"Decompression failed: corrupt input or insufficient space in destination "
                    f"buffer. Error code: {-done}"
                )
    except FatbinError:
        raise
    except Exception as e:  # noqa: BLE001 - any decoder failure is a corrupt payload
        raise FatbinError(f"{h.target} {comp} payload does not decode: {e}", code=Code.E012, offset=where) from None
    if done != size:
        raise FatbinError(
            f"{h.target} {comp} payload decodes to {done} bytes, header says {size}", code=Code.E012, offset=where
        )
    return view


def _zstd_into(payload: memoryview, view: memoryview) -> int:
    """Decode one zstd frame into `view`, which it must fill exactly: the bytes written; a
    ValueError (or zstandard's own) where it decodes to less or goes on past it."""
    done, size = 0, len(view)
    with _zstd().stream_reader(payload) as reader:
        while done < size:
            got = reader.readinto(view[done:])
            if not got:
                break
            done += got
        if done < size:
            raise ValueError("decompression error: did not decompress full frame")
        if reader.read(1):  # the frame goes on (reading to its end also checks its checksum)
            raise ValueError(f"frame decodes past {size} bytes")
    return done


def decode_frame(
    raw: bytes, declared: int | None, where: int, max_payload: int, out: DecodeBuffer | None = None
) -> bytes | memoryview:
    """A bare zstd frame outside any container (zstdframe.py), decoded: to exactly the size it
    declares, else (none declared) to at most `max_payload` bytes. Into `out` where given (a
    view valid until its next use). FatbinError E012 where it does not decode or is too large."""
    bound = max_payload if declared is None else declared
    if bound > max_payload:
        raise FatbinError(
            f"it declares {declared} bytes, more than the {max_payload}-byte verification bound",
            code=Code.E012,
            offset=where,
        )
    try:
        if declared is None:
            data: bytes | memoryview = _zstd_bounded(raw, max_payload)
            if len(data) > max_payload:
                raise FatbinError(
                    f"it decodes past the {max_payload}-byte verification bound", code=Code.E012, offset=where
                )
            return data
        if out is None or not declared:
            data = _zstd().decompress(raw, max_output_size=declared)
        else:
            data, _ = out.view(declared)
            _zstd_into(memoryview(raw), data)
    except FatbinError:
        raise
    except Exception as e:  # noqa: BLE001 - any decoder failure is a corrupt frame
        raise FatbinError(f"it does not decode: {e}", code=Code.E012, offset=where) from None
    if len(data) != declared:
        raise FatbinError(f"it decodes to {len(data)} bytes, its header says {declared}", code=Code.E012, offset=where)
    return data


def _zstd() -> zstandard.ZstdDecompressor:
    dctx = getattr(_LOCAL, "zstd", None)
    if dctx is None:
        dctx = _LOCAL.zstd = zstandard.ZstdDecompressor()
    return dctx


def check_payload_start(h: EntryHeader, first: bytes, where: int) -> None:
    """Cheap checks on a payload's first (up to 64) bytes, for audits that do not decode."""
    comp = h.compression
    if comp == "none" and h.kind == SASS:
        if len(first) < 52 or first[:4] != b"\x7fELF":
            raise FatbinError(f"{h.target} payload is not an ELF cubin", code=Code.E014, offset=where)
        machine = struct.unpack_from("<H", first, 18)[0]
        if machine != elf.EM_CUDA:
            raise FatbinError(
                f"{h.target} payload is not a CUDA ELF (e_machine {machine})", code=Code.E014, offset=where
            )
        flags = struct.unpack_from("<I", first, 48)[0]
        arch = (flags >> 8) & 0xFF if first[8] >= 8 else flags & 0xFF
        if arch != h.arch:
            raise FatbinError(f"cubin says sm_{arch}, entry header says {h.target}", code=Code.E014, offset=where)
    elif comp == "zstd":
        if first[:4] != b"\x28\xb5\x2f\xfd":
            raise FatbinError(f"{h.target} zstd payload does not start with a zstd frame", code=Code.E012, offset=where)
        try:
            content = zstandard.get_frame_parameters(first).content_size
        except zstandard.ZstdError:
            raise FatbinError(f"{h.target} zstd frame header is corrupt", code=Code.E012, offset=where) from None
        if content not in (zstandard.CONTENTSIZE_UNKNOWN, h.uncompressed_size):
            raise FatbinError(
                f"{h.target} zstd frame declares {content} bytes, header says {h.uncompressed_size}",
                code=Code.E012,
                offset=where,
            )


_LOCAL = threading.local()


def _zstd_bounded(data: bytes, declared: int) -> bytes:
    """Decode zstd without ever producing more than `declared` bytes (checked against the
    verification bound before this is called): one call, and the output buffer is the
    declared size, so a frame that expands further is an error, not an allocation."""
    content = zstandard.get_frame_parameters(data).content_size
    if content not in (zstandard.CONTENTSIZE_UNKNOWN, declared):
        raise ValueError(f"frame says {content} bytes")
    dctx = _zstd()
    if content == declared:  # one frame whose size is known: a single bounded call
        return dctx.decompress(data, max_output_size=declared)
    parts, total = [], 0
    with dctx.stream_reader(data, read_across_frames=True) as reader:
        while total <= declared:
            block = reader.read(declared + 1 - total)
            if not block:
                break
            parts.append(block)
            total += len(block)
    return b"".join(parts)


def parse_wrapper(data: bytes | bytearray | memoryview, offset: int) -> tuple[int, int] | None:
    """(version, container address) of a .nvFatBinSegment record, or None."""
    if len(data) - offset < WRAPPER.size:
        return None
    magic, version, addr, _ = WRAPPER.unpack_from(data, offset)
    if magic != 0x466243B1 or version not in (1, 2):
        return None
    return version, addr


__all__ = [
    "check_payload_start",
    "CONTAINER_HEADER",
    "CONTAINER_MAGIC_TAIL",
    "ContainerHeader",
    "decode_frame",
    "decode_payload",
    "decode_payload_into",
    "DecodeBuffer",
    "decodes_into_buffers",
    "DEFAULT_MAX_PAYLOAD",
    "ENTRY_HEADER",
    "EntryHeader",
    "FatbinError",
    "FLAG_ARCH_SPECIFIC",
    "FLAG_DEBUG",
    "FLAG_LZ4",
    "FLAG_OPAQUE_LTO",
    "FLAG_ZSTD",
    "check_options",
    "identifier",
    "MAGIC",
    "MAX_ENTRY_HEADER",
    "parse_container_header",
    "parse_entry_header",
    "parse_wrapper",
    "STANDALONE_MAX_PAYLOAD",
    "WRAPPER",
    "WRAPPER_MAGIC",
]
