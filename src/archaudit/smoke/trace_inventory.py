"""check's inventory of the files the traced processes mapped: each cubin entry by the sha256 of
its decoded bytes, each kernel by the containers that define it, and the loose zstd frames
check does not read (trace.py describes the probe).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..model import CUBIN, SASS, Library
from .trace_records import Module


@dataclass(frozen=True)
class Source:
    """One container of one scanned library, with the entry the driver loaded when known."""

    library: int  # index into the inventory's libraries
    container: int
    entry: int | None  # the entry whose bytes the loaded image has; None when tied by name


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
MAX_LOOSE_FRAMES = 4096  # zstd frames of the loaded images' sizes decoded, over all mapped files


CHUNK = 16 << 20  # bytes of a file read at once while looking for zstd frames


def loose_cubins(path: str, sizes: set[int], budget: int) -> list[tuple[int, str]]:
    """(offset, sha256) of the bare zstd frames of a file (no fatbin container around them: cuBLASLt
    13.1 keeps cubins so in .ldata) that decode to a CUDA ELF of one of `sizes`; read CHUNK bytes at a
    time, at most `budget` frames decoded, each bounded by its declared size."""
    import zstandard

    out: list[tuple[int, str]] = []
    if not sizes:
        return out
    dctx = zstandard.ZstdDecompressor()
    with open(path, "rb") as f:
        base = 0
        while budget > 0:
            f.seek(base)
            chunk = f.read(CHUNK + 17)  # a frame header (at most 18 bytes) across the boundary is seen whole
            at = chunk.find(ZSTD_MAGIC)
            while 0 <= at < CHUNK and budget > 0:
                try:
                    size = zstandard.get_frame_parameters(chunk[at : at + 18]).content_size
                except zstandard.ZstdError:
                    size = -1
                if size in sizes:
                    budget -= 1
                    f.seek(base + at)
                    try:
                        data = dctx.decompressobj().decompress(f.read(size + (size >> 3) + 4096))
                    except zstandard.ZstdError:
                        data = b""
                    if len(data) == size and data[:4] == b"\x7fELF":
                        out.append((base + at, hashlib.sha256(data).hexdigest()))
                at = chunk.find(ZSTD_MAGIC, at + 4)
            if len(chunk) <= CHUNK:
                break
            base += CHUNK
    return out


@dataclass
class Inventory:
    """check's containers of the libraries the traced processes mapped, and two ways to find them."""

    libraries: list[tuple[str, Library]]  # (display name, library)
    by_hash: dict[str, list[Source]] = field(default_factory=dict)  # the same bytes may recur in containers
    by_kernel: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    loose: dict[str, tuple[str, int]] = field(default_factory=dict)  # sha256 -> (file, offset): not check's

    def index_loose(self, paths: Sequence[str], modules: Sequence[Module]) -> list[str]:
        """The loaded images no container holds, looked for among the mapped files' bare zstd
        frames: device code check does not read, which a launch can come from all the same."""
        unmatched = {m.sha256: m.size for m in modules if m.sha256 not in self.by_hash}
        sizes = set(unmatched.values())
        budget = MAX_LOOSE_FRAMES
        problems = []
        for li, path in enumerate(paths):
            try:
                found = loose_cubins(path, sizes, budget)
            except (OSError, ValueError) as exc:
                problems.append(f"{self.libraries[li][0]}: its bytes outside containers could not be read: {exc}")
                continue
            budget -= len(found)
            for offset, digest in found:
                if digest in unmatched:
                    self.loose.setdefault(digest, (self.libraries[li][0], offset))
        return problems

    def index_kernels(self) -> None:
        for li, (_, lib) in enumerate(self.libraries):
            for ci, c in enumerate(lib.containers):
                if c.vendor != "nvidia":
                    continue
                for k in {k for e in c.entries for k in (e.kernels or ())}:
                    self.by_kernel.setdefault(k, []).append((li, ci))

    def index_hashes(self, paths: Sequence[str], sizes: set[int]) -> list[str]:
        """sha256 of every cubin entry whose decoded size is that of a loaded image (paths[i] is the
        file of libraries[i]); returns what could not be read."""
        from ..read import fatbin

        problems = []
        for li, (_, lib) in enumerate(self.libraries):
            wanted = [
                (ci, ei, e, c.offset + c.size - e.offset, c.role == CUBIN)
                for ci, c in enumerate(lib.containers)
                if c.vendor == "nvidia"
                for ei, e in enumerate(c.entries)
                if e.kind == SASS and e.size in sizes
            ]
            if not wanted:
                continue
            try:
                with open(paths[li], "rb") as f:
                    for ci, ei, e, room, whole in wanted:
                        f.seek(e.offset)
                        if whole and e.compression == "zstd":  # a whole cubin as a bare zstd frame: decoded
                            data = bytes(
                                fatbin.decode_frame(f.read(e.stored_size), e.size, e.offset, fatbin.DEFAULT_MAX_PAYLOAD)
                            )
                            self.by_hash.setdefault(hashlib.sha256(data).hexdigest(), []).append(Source(li, ci, ei))
                            continue
                        if whole:  # a whole cubin outside any container: its bytes are the image loaded
                            data = f.read(e.size)
                            self.by_hash.setdefault(hashlib.sha256(data).hexdigest(), []).append(Source(li, ci, ei))
                            continue
                        head = f.read(fatbin.ENTRY_HEADER.size)
                        eh = fatbin.parse_entry_header(head, 0, room, e.offset)
                        f.seek(e.offset + eh.header_size)
                        data = fatbin.decode_payload(eh, f.read(eh.payload_size), e.offset)
                        self.by_hash.setdefault(hashlib.sha256(data).hexdigest(), []).append(Source(li, ci, ei))
            except (OSError, fatbin.FatbinError) as exc:
                problems.append(f"{self.libraries[li][0]}: its cubins could not be hashed: {exc}")
        return problems


__all__ = ["CHUNK", "Inventory", "loose_cubins", "MAX_LOOSE_FRAMES", "Source", "ZSTD_MAGIC"]
