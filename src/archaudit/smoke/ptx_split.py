"""Spread the driver's JIT of one large PTX entry over several processes.

The driver compiles a container's PTX in one thread: cuSPARSELt 0.8.0 carries one container
with 71 MB of PTX (428 kernels) that takes 77 s and 2 GB to JIT on an H200, even at
optimisation level 0, eagerly or lazily (lazy loading compiles the whole module at load
too: records/smoke-h200/jit-modes.txt). Here the container is rewritten into several
containers that differ from it only in their PTX payload: each keeps the module's header
(.version, .target, .address_size), every module-scope declaration and non-entry function,
and a share of the .entry definitions; every kernel is in exactly one part. The driver then
does to each part what it would do to the whole (it chooses among the same entries, checks
the ISA version and the .target, compiles), and the parts load in parallel.

Pure: bytes in, bytes out.
"""

from __future__ import annotations

import re
import struct

from ..read import fatbin

# A comment or string (skipped whole, so braces and ".entry" inside them do not count), a
# brace, a semicolon, or an .entry directive.
_TOKEN = re.compile(rb'//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|[{};]|\.entry\b', re.S)
_COMPRESSED = fatbin.FLAG_ZSTD | fatbin.FLAG_LZ4


class NotSplittable(ValueError):
    """The PTX (or the container) is not one this module can split safely."""


def entry_spans(text: bytes) -> list[tuple[int, int]]:
    """(start, end) of each module-scope .entry definition, its directives and body included."""
    spans: list[tuple[int, int]] = []
    depth = 0
    pending: int | None = None  # start of an .entry whose body has not opened yet
    last_end = 0  # end of the last module-scope statement
    for m in _TOKEN.finditer(text):
        t = m.group()
        if t == b"{":
            depth += 1
        elif t == b"}":
            depth -= 1
            if depth < 0:
                raise NotSplittable("a closing brace without an opening one")
            if depth == 0:
                end = m.end() + (1 if text[m.end() : m.end() + 1] == b"\n" else 0)
                if pending is not None:
                    spans.append((pending, end))
                    pending = None
                last_end = end
        elif t == b";":
            if depth == 0:
                pending = None  # an .entry declaration without a body stays in every part
                last_end = m.end()
        elif t == b".entry" and depth == 0 and pending is None:
            pending = _with_comments(text, max(text.rfind(b"\n", 0, m.start()) + 1, last_end), last_end)
    if depth or pending is not None:
        raise NotSplittable("unbalanced braces or an .entry without a body")
    return spans


def _with_comments(text: bytes, start: int, floor: int) -> int:
    """start moved back over the whole-line comments just above it (nvcc's "// .globl name")."""
    while start > floor:
        nl = text.rfind(b"\n", floor, start - 1)
        line = nl + 1 if nl >= 0 else floor
        if not text[line:start].lstrip().startswith(b"//"):
            break
        start = line
    return start


def split(text: bytes, parts: int, spans: list[tuple[int, int]] | None = None) -> list[bytes]:
    """The PTX as `parts` modules of about equal size; each .entry in exactly one of them.

    A module may get no .entry (when there are fewer than `parts`): then it is the header and
    the module-scope text alone, still valid PTX."""
    spans = entry_spans(text) if spans is None else spans
    parts = max(1, parts)
    owner = [0] * len(spans)
    load = [0] * parts
    for i in sorted(range(len(spans)), key=lambda i: spans[i][0] - spans[i][1]):  # largest first
        k = load.index(min(load))
        owner[i] = k
        load[k] += spans[i][1] - spans[i][0]
    out: list[list[bytes]] = [[] for _ in range(parts)]
    at = 0
    for i, (start, end) in enumerate(spans):
        common = text[at:start]
        for k in range(parts):
            out[k].append(common)
        out[owner[i]].append(text[start:end])
        at = end
    for k in range(parts):
        out[k].append(text[at:])
    return [b"".join(p) for p in out]


def _entries(image: bytes) -> list[tuple[int, fatbin.EntryHeader]]:
    head = fatbin.parse_container_header(image, 0)
    if head is None or head.total > len(image):
        raise NotSplittable("not one whole fatbin container")
    found = []
    at, end = head.header_size, head.total
    while at < end:
        h = fatbin.parse_entry_header(image, at, end - at, at)
        found.append((at, h))
        at += h.total
    return found


def part_containers(image: bytes, parts: int) -> list[bytes]:
    """The container as up to `parts` containers, each with a share of its PTX entries' kernels.

    Every PTX entry is split the same number of ways and part k carries share k of each, so
    whichever entry the driver chooses for the GPU, every kernel of it is compiled in exactly
    one part. Every other entry (SASS for other GPUs, LTO IR) is kept as it is and in its
    place, so the driver chooses among the same entries as for the original. PTX payloads are
    stored uncompressed (as nvcc --no-compress writes them: NUL-terminated, padded to 8 bytes)."""
    entries = _entries(image)
    texts = {
        at: fatbin.decode_payload(h, image[at + h.header_size : at + h.total], at).rstrip(b"\0")
        for at, h in entries
        if h.kind == "ptx"
    }
    if not texts:
        raise NotSplittable("no PTX entry")
    spans = {at: entry_spans(t) for at, t in texts.items()}
    n = max(1, min(parts, max(len(s) for s in spans.values())))
    shares = {at: split(t, n, spans[at]) for at, t in texts.items()}
    out = []
    for k in range(n):
        pieces = []
        for at, h in entries:
            if at not in shares:
                pieces.append(image[at : at + h.total])
                continue
            body = shares[at][k] + b"\0" * (8 - len(shares[at][k]) % 8)
            header = bytearray(image[at : at + h.header_size])
            struct.pack_into("<Q", header, 8, len(body))  # payload size
            struct.pack_into("<I", header, 16, 0)  # compressed size
            struct.pack_into("<Q", header, 40, h.flags & ~_COMPRESSED)
            struct.pack_into("<Q", header, 56, 0)  # uncompressed size (0: stored as it is)
            pieces.append(bytes(header) + body)
        fat = b"".join(pieces)
        out.append(fatbin.CONTAINER_HEADER.pack(0xBA55ED50, 1, 16, len(fat)) + fat)
    return out


__all__ = ["entry_spans", "NotSplittable", "part_containers", "split"]
