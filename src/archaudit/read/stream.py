"""The forward-only window over a library's stream of chunks: what the scanner reads, the
ranges it captures (headers, the section table, the dynamic segment), and a second pass
(`fetch`) for the rare table the first could not keep.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ..errors import ArchauditError
from ..findings import Code
from . import elf

HEAD = 4 << 20  # always kept: ELF header, program headers, usually .dynstr
SHSTR_WINDOW = 1 << 20  # bytes before the section table kept in the hope .shstrtab is there
SEAM = 64  # longer than any pattern: what a window keeps between chunks
CHUNK_GUESS = 1 << 21  # a chunk is never larger than this; chunks ending before a skip target are not kept

Chunks = Callable[[], Iterable[bytes]]


class ReadFailed(ArchauditError):
    """The file itself could not be read to its end (I/O, a zip member error): the code of the
    finding it becomes."""


# ---- the window over the stream ----


@dataclass(slots=True)
class _Capture:
    want: int  # next file offset to fill
    stop: int
    out: bytearray
    done: Callable[[bytearray], None] | None


class Source:
    """A forward-only window over a byte stream, with ranges captured as they pass."""

    def __init__(self, chunks: Iterable[bytes], size: int):
        self._it: Iterator[bytes] = iter(chunks)
        self.size = size
        self.buf = bytearray()
        self.base = 0  # file offset of buf[0]
        self.before = -1  # the byte at base - 1, which the window let go last (-1: none)
        self.read = 0  # bytes pulled from the stream
        self._captures: list[_Capture] = []
        self._feeding: tuple[bytes, int, int] | None = None  # the chunk being fed to the captures

    @property
    def end(self) -> int:
        return self.base + len(self.buf)

    def capture(self, start: int, stop: int, done: Callable[[bytearray], None] | None = None) -> bytearray:
        """Bytes [start, stop), filled in as they pass; `done` is called once they are all in.
        Register before they pass: what has already been released is not there, and the
        result is then shorter than asked (and `done` is not called)."""
        start, stop = max(0, start), min(self.size, stop)
        out = bytearray()
        if start >= stop or start < self.base:
            return out
        if start < self.end:
            out += self.buf[start - self.base : min(stop, self.end) - self.base]
        if self._feeding is not None:  # asked by a `done` callback: that chunk is not fed again
            chunk, lo, hi = self._feeding
            at = start + len(out)
            if lo <= at < hi and at < stop:
                out += chunk[at - lo : min(stop, hi) - lo]
        if start + len(out) < stop:
            self._captures.append(_Capture(start + len(out), stop, out, done))
        elif done is not None:
            done(out)
        return out

    def _next(self) -> tuple[bytes, int, int] | None:
        """The next chunk and its [lo, hi) file range, captures fed; None at the end."""
        try:
            chunk = next(self._it)
        except StopIteration:
            return None
        lo = self.read
        hi = self.read = lo + len(chunk)
        if self._captures:
            self._feed(chunk, lo, hi)
        return chunk, lo, hi

    def _pull(self, keep: bool = True) -> bool:
        """Append the next chunk to the window (or, with keep=False, let it pass: the window
        must be empty then)."""
        got = self._next()
        if got is None:
            return False
        chunk, _, hi = got
        if keep:
            self.buf += chunk
        else:
            del self.buf[:]
            self.base = hi
            if chunk:
                self.before = chunk[-1]
        return True

    def skim(self, holds: Callable[[bytes], bool], stop: int) -> bool:
        """Pull the next chunk like _pull, but when it ends before `stop` and `holds` finds no
        pattern in it (nor across the seam with the window's short tail) keep only its last
        SEAM bytes instead of copying it into the window: most of a library is such chunks."""
        got = self._next()
        if got is None:
            return False
        chunk, _, hi = got
        if hi <= stop and len(self.buf) <= SEAM < len(chunk):
            if not holds(bytes(self.buf) + chunk[:SEAM]) and not holds(chunk):
                self.buf = bytearray(chunk[-SEAM:])
                self.base = hi - SEAM
                self.before = chunk[-SEAM - 1]
                return True
        self.buf += chunk
        return True

    def _feed(self, chunk: bytes, lo: int, hi: int) -> None:
        finished = []
        for cap in self._captures:
            if lo <= cap.want < hi:
                take = chunk[cap.want - lo : min(cap.stop, hi) - lo]
                cap.out += take
                cap.want += len(take)
                if cap.want >= cap.stop and cap.done is not None:
                    finished.append(cap)
        self._captures = [c for c in self._captures if c.want < c.stop and c.want >= hi]
        self._feeding = (chunk, lo, hi)
        try:
            for cap in finished:
                assert cap.done is not None
                cap.done(cap.out)
        finally:
            self._feeding = None

    def ensure(self, stop: int) -> bool:
        while self.end < stop:
            if not self._pull():
                return False
        return True

    def release(self, upto: int) -> None:
        cut = min(upto, self.end) - self.base
        if cut > 0:
            self.before = self.buf[cut - 1]
            del self.buf[:cut]
            self.base += cut

    def skip_to(self, pos: int) -> bool:
        """Move the window start to `pos` without holding the bytes in between."""
        if pos <= self.end:
            self.release(pos)
            return True
        self.release(self.end)
        while self.end < pos:
            if not self._pull(keep=self.read + CHUNK_GUESS > pos):
                return False
        self.release(pos)
        return True

    def drain(self) -> None:
        """Pull the rest of the stream (for captures and the verification of its end)."""
        self.release(self.end)
        while self._pull(keep=False):
            pass


def _guard(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Turn reader failures (zip member errors, I/O) into a read failure of this file."""
    try:
        yield from chunks
    except OSError as e:
        raise ReadFailed(f"cannot read: {e}", code=Code.E001) from None
    except Exception as e:  # noqa: BLE001 - zipread.MemberError and friends carry a code
        raise ReadFailed(str(e), code=getattr(e, "code", Code.E002)) from None


def fetch(chunks: Chunks, start: int, stop: int, size: int) -> bytes:
    """Bytes [start, stop) of the file, read again from its start: a second pass, used only
    for the rare table that lies where the first could not keep it."""
    src = Source(_guard(chunks()), size)
    if not src.skip_to(start) or not src.ensure(stop):
        raise elf.ElfError("range lies past the end of the file")
    return bytes(src.buf[: stop - start])


__all__ = ["CHUNK_GUESS", "Chunks", "fetch", "HEAD", "ReadFailed", "SEAM", "SHSTR_WINDOW", "Source"]
