"""Decoding device-code payloads: what a cubin or PTX text says, once it is decompressed.

Every compressed entry the scanner meets is decoded (zstd/LZ4 release the GIL, so decoding
runs on a pool beside the inflating readers). One pool serves every library of an inventory
run, and the compressed bytes waiting for it are bounded, so memory stays flat however large
the libraries are. Results are read back in stream order when a library's scan ends.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from ..findings import Code
from ..gpus.cuda import CudaTarget
from ..model import SASS, Entry
from . import codefacts, elf, fatbin, libc

MAX_IN_FLIGHT = 16 << 20  # compressed bytes queued for the pool, all libraries together
BIG = 48 << 20  # payloads that decode to more than this take turns (transformer-engine: 66 MB LZ4)
TRIM_AFTER = 4 << 20  # decoded size after which a worker returns freed memory to the system


class DecodePool:
    """Worker threads shared by every library of one run, with back-pressure: a reader that
    would queue more than MAX_IN_FLIGHT compressed bytes waits for the workers."""

    def __init__(self, workers: int | None = None, max_in_flight: int = MAX_IN_FLIGHT):
        self.workers = max(1, workers or os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="archaudit-decode")
        self._max = max_in_flight
        self._in_flight = 0
        self._cond = threading.Condition()
        self._big = threading.Lock()
        self._big_buffer = fatbin.DecodeBuffer()
        self._local = threading.local()

    def submit(self, nbytes: int, decoded: int, fn: Callable[[fatbin.DecodeBuffer | None], Entry]) -> Future[Entry]:
        """Run `fn` (decoding `nbytes` into `decoded` bytes, into the buffer it is given) on a
        worker. Each worker decodes into a buffer of its own; payloads larger than BIG take
        turns in one shared buffer. Where a payload could not be decoded into a buffer, the
        worker returns the freed memory to the system afterwards."""
        with self._cond:
            while self._in_flight and self._in_flight + nbytes > self._max:
                self._cond.wait()
            self._in_flight += nbytes

        def job() -> Entry:
            if decoded > BIG:  # one such payload at a time
                with self._big:
                    return fn(self._big_buffer)
            out = getattr(self._local, "buffer", None)
            if out is None:
                out = self._local.buffer = fatbin.DecodeBuffer()
            return fn(out)

        fut = self._pool.submit(job if decoded <= TRIM_AFTER or fatbin.decodes_into_buffers() else _trimmed(job))
        fut.add_done_callback(lambda _: self._release(nbytes))
        return fut

    def _release(self, nbytes: int) -> None:
        with self._cond:
            self._in_flight -= nbytes
            self._cond.notify_all()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> DecodePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Decoding:
    """One library's decode jobs: handed to the pool when there is one (else decoded at once,
    in the scanning thread), and collected in stream order by `result`."""

    pool: DecodePool | None
    max_payload: int
    jobs: int = field(default=0)

    def entry(self, eh: fatbin.EntryHeader, raw: bytes, pos: int, base: Entry) -> Entry | Future[Entry]:
        """The decoded entry, or its future. A decode failure raises FatbinError (at once, or
        from the future's result)."""
        if self.pool is None or eh.compression == "none":  # a raw cubin: parsing holds the GIL anyway
            return decode_entry(eh, raw, pos, self.max_payload, base)
        self.jobs += 1
        max_payload = self.max_payload
        return self.pool.submit(len(raw), eh.size, lambda out: decode_entry(eh, raw, pos, max_payload, base, out))

    def frame(self, raw: bytes, offset: int, declared: int | None, bound: int | None = None) -> Entry | Future[Entry]:
        """The entry of a whole cubin stored as a bare zstd frame (framed_cubin), or its future:
        a frame that declares its size decodes on the pool, one that does not at once, to at most
        `bound` bytes (the verification bound by default)."""
        max_payload = self.max_payload if bound is None else bound
        if self.pool is None or declared is None:
            return framed_cubin(raw, offset, declared, max_payload)
        self.jobs += 1
        return self.pool.submit(len(raw), declared, lambda out: framed_cubin(raw, offset, declared, max_payload, out))


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, where there is one (elsewhere freed memory is left to the allocator)."""
    trim: Callable[[int], int] | None = libc.function("malloc_trim")
    return trim


_TRIM = _malloc_trim()


def return_free_memory() -> None:
    """Give freed heap pages back to the system. Each worker thread's allocator arena keeps
    the pages of the multi-megabyte payloads it decoded, so without this the peak RSS grows
    with the number of workers (torch 2.14.1: 220 MB instead of 160 MB)."""
    if _TRIM is not None:
        _TRIM(0)


def _trimmed(job: Callable[[], Entry]) -> Callable[[], Entry]:
    def trimmed() -> Entry:
        try:
            return job()
        finally:
            return_free_memory()

    return trimmed


def result(e: Entry | Future[Entry]) -> Entry:
    return e.result() if isinstance(e, Future) else e


def _interned(names: tuple[str, ...]) -> tuple[str, ...]:
    """One copy of each kernel name: the same kernel recurs once per target (and, in
    transformer-engine, in hundreds of containers)."""
    return tuple(map(sys.intern, names))


def decode_entry(
    eh: fatbin.EntryHeader, raw: bytes, pos: int, max_payload: int, base: Entry, out: fatbin.DecodeBuffer | None = None
) -> Entry:
    """`base` completed with what the payload says: kernel names, the cubin's toolkit, the PTX
    text's .target; the payload must agree with its entry header. With `out`, the payload is
    decoded into that buffer (nothing returned refers to it)."""
    if eh.kind == SASS:
        data = fatbin.decode_payload_into(eh, raw, pos, max_payload, out)
        try:
            target, kernels, toolkit = codefacts.cubin_facts(data)
            unresolved = codefacts.cubin_unresolved(data)
        except (elf.ElfError, struct.error, IndexError) as e:
            raise fatbin.FatbinError(f"{eh.target} cubin: {e}", code=Code.E014, offset=pos) from None
        if target.rstrip("a") != f"sm_{eh.arch}":
            raise fatbin.FatbinError(f"cubin says {target}, entry header says {eh.target}", code=Code.E014, offset=pos)
        # From sm_90 on a cubin marks the arch-specific 'a' (e_flags or .nv.compat): it must agree.
        if eh.arch >= 90 and target.endswith("a") != (eh.suffix == "a"):
            raise fatbin.FatbinError(f"cubin says {target}, entry header says {eh.target}", code=Code.E014, offset=pos)
        empty = not kernels and codefacts.cubin_defines_nothing(data)
        return replace(
            base,
            kernels=_interned(kernels),
            toolkit=toolkit,
            decoded=True,
            unresolved=unresolved,
            defines_nothing=empty,
        )
    written, _, kernels = codefacts.ptx_facts(bytes(fatbin.decode_payload_into(eh, raw, pos, max_payload, out)))
    if written is None:
        raise fatbin.FatbinError(f"{eh.target} PTX has no .target directive", code=Code.E014, offset=pos)
    target = written.replace("compute_", "sm_")
    # The driver JIT-compiles for the text's .target: a suffix the header lacks (TensorFlow's
    # compute_90 entries whose text says sm_90a) is recorded for the rules to judge, while a
    # different architecture number is not the entry the header describes.
    if not is_cuda_target(target) or target.rstrip("af") != eh.target.rstrip("af"):
        raise fatbin.FatbinError(
            f"PTX says .target {written}, entry header says {eh.target}", code=Code.E014, offset=pos
        )
    return replace(base, kernels=_interned(kernels), decoded=True, ptx_target=target)


def whole_cubin(data: bytes | memoryview, offset: int) -> Entry:
    """The entry of a whole cubin the driver loads alone (cuModuleLoadData on its bytes, found
    outside any fatbin container): its architecture from e_flags, its kernels and toolkit, and,
    for a relocatable one (ET_REL), the code it calls without carrying. FatbinError (E014) for a
    CUDA ELF that names no CUDA architecture or whose tables do not parse."""
    try:
        h = elf.parse_header(data, len(data))
        target, kernels, toolkit = codefacts.cubin_facts(data)
        unresolved = codefacts.cubin_unresolved(data) if h.type == elf.ET_REL else ()
    except (elf.ElfError, struct.error, IndexError) as e:
        raise fatbin.FatbinError(str(e), code=Code.E014, offset=offset) from None
    if not is_cuda_target(target):
        raise fatbin.FatbinError(f"its e_flags name no CUDA architecture ({target})", code=Code.E014, offset=offset)
    empty = not kernels and codefacts.cubin_defines_nothing(data)
    return Entry(
        "nvidia",
        SASS,
        target,
        (1, h.abiversion),
        "none",
        len(data),
        len(data),
        offset,
        kernels=_interned(kernels),
        toolkit=toolkit,
        decoded=True,
        unresolved=unresolved,
        defines_nothing=empty,
    )


def framed_cubin(
    raw: bytes, offset: int, declared: int | None, max_payload: int, out: fatbin.DecodeBuffer | None = None
) -> Entry:
    """The entry of a whole cubin a library stores as a bare zstd frame (zstdframe.py) and loads
    itself once decoded: the frame decoded (to its declared size, within `max_payload`), then read
    as `whole_cubin`; stored size the frame's, size the cubin's, offset the frame's.
    FatbinError: E012 where the frame does not decode, E014 where the cubin does not parse."""
    data = fatbin.decode_frame(raw, declared, offset, max_payload, out)
    entry = whole_cubin(data, offset)
    return replace(entry, compression="zstd", stored_size=len(raw), size=len(data))


def framed_cubin_head(first: bytes, raw: int, declared: int | None, offset: int) -> Entry:
    """A frame's cubin read from its ELF header only (`first`: its first decoded bytes), for
    --fast: the architecture e_flags name, nothing decoded (so E015 says what was not read)."""
    h = elf.parse_header(first, max(len(first), declared or 0))
    arch = (h.flags >> 8) & 0xFF if h.abiversion >= 8 else h.flags & 0xFF
    accelerated = h.flags & (
        codefacts.EF_CUDA_ACCELERATORS_V8 if h.abiversion >= 8 else codefacts.EF_CUDA_ACCELERATORS_V7
    )
    target = f"sm_{arch}{'a' if accelerated else ''}"
    if not is_cuda_target(target):
        raise fatbin.FatbinError(f"its e_flags name no CUDA architecture ({target})", code=Code.E014, offset=offset)
    return Entry("nvidia", SASS, target, (1, h.abiversion), "zstd", raw, declared or 0, offset)


def is_cuda_target(target: str) -> bool:
    try:
        CudaTarget.parse(target)
    except ValueError:
        return False
    return True


__all__ = [
    "BIG",
    "decode_entry",
    "DecodePool",
    "Decoding",
    "framed_cubin",
    "framed_cubin_head",
    "is_cuda_target",
    "result",
    "whole_cubin",
]
