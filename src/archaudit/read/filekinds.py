"""What a file is, by its first bytes (its magic) or its name: the content kinds that can carry
device code, and the rule that picks a wheel's members to read (select_member).
"""

from __future__ import annotations

import os
import stat
from typing import Literal

from . import fatbin, hip, zipread

LIBRARY_SUFFIXES = (".so", ".cubin", ".fatbin", ".ptx", ".hsaco", ".pyd", ".dll", ".dylib")

ContentKind = Literal["elf", "fatbin", "offload-bundle", "zip", "pe", "mach-o"]
HEAD = zipread.HEAD  # bytes of a file's start that say what it is


_MACHO = (b"\xfe\xed\xfa\xce", b"\xce\xfa\xed\xfe", b"\xfe\xed\xfa\xcf", b"\xcf\xfa\xed\xfe")
_FIRST_BYTES = frozenset({b"\x7f", fatbin.MAGIC[:1], b"_", b"C", b"P", b"M", b"\xfe", b"\xce", b"\xcf"})


def is_library_name(name: str) -> bool:
    base = name.rsplit("/", 1)[-1].lower()
    if base.endswith(LIBRARY_SUFFIXES):
        return True
    return ".so." in base and base.split(".so.", 1)[1].replace(".", "").isdigit()


def content_kind(head: bytes) -> ContentKind | None:
    """What a file's first bytes say it is, when that is something that can carry device code
    (or hold files that can): the magic decides, never the name."""
    first = head[:1]
    if first not in _FIRST_BYTES:
        return None
    magic = head[:4]
    if magic == b"\x7fELF":
        return "elf"
    if magic == fatbin.MAGIC:
        return "fatbin"
    if head.startswith(hip.MAGICS):
        return "offload-bundle"
    if magic == b"PK\x03\x04":
        return "zip"
    if magic in _MACHO:
        return "mach-o"
    if first == b"M" and head[:2] == b"MZ" and len(head) >= 0x40:
        pe_at = int.from_bytes(head[0x3C:0x40], "little")
        if head[pe_at : pe_at + 4] == b"PE\0\0":
            return "pe"
    return None


def _regular_kind(path: str) -> ContentKind | None:
    """content_kind of a regular file on disk (links followed; special files never opened).
    OSError when it cannot be read."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        return None
    with open(path, "rb") as f:
        return content_kind(f.read(HEAD))


def file_content_kind(path: str) -> ContentKind | None:
    """content_kind of a regular file on disk, None when it cannot be read."""
    try:
        return _regular_kind(path)
    except OSError:
        return None


def is_audited_file(path: str) -> bool:
    """The rule for a file on disk: the same as for a wheel's members (its first HEAD bytes
    are read; special files never are)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
    except OSError:
        return False
    return file_content_kind(path) is not None or is_library_name(path)


_KIND_WORDS: dict[str, str] = {
    "elf": "an ELF file",
    "fatbin": "a fatbin",
    "offload-bundle": "a clang offload bundle",
    "zip": "a zip",
    "pe": "a PE (Windows) file",
    "mach-o": "a Mach-O file",
}


def _name_note(name: str, kind: ContentKind | None) -> str:
    """What the name would have hidden: a file chosen by content that no name search picks."""
    if kind is None or is_library_name(name):
        return ""
    return (
        f"named {name.rsplit('/', 1)[-1]!r}, which no search by file name picks: read because "
        f"its content is {_KIND_WORDS[kind]}"
    )


def select_member(name: str, head: bytes) -> ContentKind | Literal["name"] | None:
    """A member's tag: its content kind, "name" when only its name says library, else None
    (None: not read). The rule `check` applies to every member of a wheel."""
    kind = content_kind(head)
    return kind if kind is not None else "name" if is_library_name(name) else None


__all__ = [
    "content_kind",
    "ContentKind",
    "file_content_kind",
    "HEAD",
    "is_audited_file",
    "is_library_name",
    "LIBRARY_SUFFIXES",
    "select_member",
]
