"""Reading a remote wheel over HTTP range requests, without downloading it whole.

The zip reader asks for the end records and central directory first, then each member's local
header and first bytes (to know what it is), then streams only the members that can hold
device code. Small reads go through a block cache (neighbouring headers share one request);
a member's data is fetched with one request for exactly its bytes. Every byte received is
counted, so a report can say what was fetched against the wheel's size.
"""

from __future__ import annotations

import http.client
import io
import threading
import urllib.parse
import urllib.request
from collections import OrderedDict
from typing import Any

from .. import __version__
from ..errors import ArchauditError
from ..findings import Code

BLOCK = 64 << 10  # bytes per cached block
CACHE_BLOCKS = 512  # 32 MiB of blocks at most per reader
TAIL = 256 << 10  # bytes read from the end first: end records and, for most wheels, the directory
BIG = 1 << 20  # reads at least this long bypass the cache
KEEP = 96 << 20  # a streamed member up to this many compressed bytes is kept for a second read
TIMEOUT = 60.0
MAX_REDIRECTS = 5
USER_AGENT = f"archaudit/{__version__}"


class RemoteError(ArchauditError):
    """A remote wheel could not be read (finding E001)."""

    default_code = Code.E001


def get(url: str, accept: str = "*/*") -> tuple[bytes, str]:
    """A whole small resource (an index page): its body and content type."""
    req = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:  # noqa: S310 - http(s) only, checked by callers
            return resp.read(), resp.headers.get("Content-Type", "")
    except (OSError, ValueError) as e:
        raise RemoteError(f"{url}: cannot read: {e}") from None


class RangeReader:
    """One remote file read by byte ranges; `read_at` and `open` are what the zip reader needs."""

    def __init__(self, url: str):
        self.url = url
        self.fetched = 0  # bytes of content received
        self.requests = 0
        self._lock = threading.Lock()
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._extents: dict[int, int] = {}  # member data offset -> compressed size
        self._conn: http.client.HTTPConnection | None = None
        self._path = ""
        self.held: tuple[int, bytes] | None = None  # (data offset, bytes) of the last member streamed whole
        self.size = self._first_read()

    # ---- HTTP ----

    def _connect(self, url: str) -> tuple[http.client.HTTPConnection, str]:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RemoteError(f"{url}: not an http(s) URL")
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.hostname, parts.port, timeout=TIMEOUT)
        return conn, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def _request(self, first: int, last: int | None, *, reuse: bool) -> tuple[http.client.HTTPResponse, Any]:
        """A GET for bytes first..last (last None: a suffix of `first` bytes), following redirects."""
        rng = f"bytes=-{first}" if last is None else f"bytes={first}-{last}"
        url = self.url
        for _ in range(MAX_REDIRECTS + 1):
            if reuse and self._conn is not None and url == self.url:
                conn = self._conn
                path = self._path
            else:
                conn, path = self._connect(url)
            self.requests += 1
            try:
                conn.request("GET", path, headers={"Range": rng, "User-Agent": USER_AGENT,
                                                   "Accept-Encoding": "identity"})
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if reuse and conn is self._conn:
                    self._conn = None
                    continue  # a kept-alive connection the server closed: once more on a new one
                raise RemoteError(f"{self.url}: cannot read: {e}") from None
            if resp.status in (301, 302, 303, 307, 308):
                resp.read()
                location = resp.getheader("Location")
                if not location:
                    raise RemoteError(f"{self.url}: redirect without a Location")
                self.url = url = urllib.parse.urljoin(url, location)
                self._conn = None
                continue
            if resp.status == 200:
                conn.close()
                raise RemoteError(f"{self.url}: the server ignores Range requests (it would send the whole file)")
            if resp.status != 206:
                conn.close()
                raise RemoteError(f"{self.url}: HTTP {resp.status} {resp.reason}")
            if reuse and self._conn is None:
                self._conn, self._path = conn, path
            return resp, conn
        raise RemoteError(f"{self.url}: more than {MAX_REDIRECTS} redirects")

    def _fetch(self, first: int, last: int) -> bytes:
        with self._lock:
            resp, _ = self._request(first, last, reuse=True)
            try:
                data = resp.read()
            except (OSError, http.client.HTTPException) as e:
                self._conn = None
                raise RemoteError(f"{self.url}: cannot read: {e}") from None
        self.fetched += len(data)
        if len(data) != last - first + 1:
            raise RemoteError(f"{self.url}: asked for {last - first + 1} bytes at {first}, got {len(data)}")
        return data

    def _first_read(self) -> int:
        """Read the file's last TAIL bytes, learning its size from Content-Range."""
        with self._lock:
            resp, _ = self._request(TAIL, None, reuse=True)
            total = (resp.getheader("Content-Range") or "").rpartition("/")[2]
            data = resp.read()
        self.fetched += len(data)
        if not total.isdigit():
            raise RemoteError(f"{self.url}: no file size in the Content-Range answer")
        size = int(total)
        start = size - len(data)
        # keep the whole blocks the tail covers
        first_block = -(-start // BLOCK)
        for b in range(first_block, size // BLOCK + 1):
            lo, hi = b * BLOCK, min((b + 1) * BLOCK, size)
            if lo >= size:
                break
            self._blocks[b] = data[lo - start:hi - start]
        self._tail_start, self._tail = start, data
        return size

    # ---- what the zip reader calls ----

    def read_at(self, offset: int, length: int) -> bytes:
        """At most `length` bytes at `offset` (fewer only past the end)."""
        if offset < 0 or length <= 0 or offset >= self.size:
            return b""
        end = min(offset + length, self.size)
        if offset >= self._tail_start:
            return self._tail[offset - self._tail_start:end - self._tail_start]
        if end - offset >= BIG:
            return self._fetch(offset, end - 1)
        first, last = offset // BLOCK, (end - 1) // BLOCK
        missing = [b for b in range(first, last + 1) if b not in self._blocks]
        if missing:
            lo, hi = missing[0] * BLOCK, min((missing[-1] + 1) * BLOCK, self.size)
            data = self._fetch(lo, hi - 1)
            for b in range(missing[0], missing[-1] + 1):
                if b not in self._blocks:
                    self._blocks[b] = data[b * BLOCK - lo:(b + 1) * BLOCK - lo]
            while len(self._blocks) > CACHE_BLOCKS:
                self._blocks.popitem(last=False)
        parts = [self._blocks[b] for b in range(first, last + 1)]
        for b in range(first, last + 1):
            self._blocks.move_to_end(b)
        joined = b"".join(parts)
        return joined[offset - first * BLOCK:end - first * BLOCK]

    def cached(self, offset: int, limit: int) -> bytes:
        """The bytes from `offset` (at most `limit`) that the block cache holds already, contiguous."""
        out = []
        got = 0
        b = offset // BLOCK
        while got < limit and b in self._blocks:
            block = self._blocks[b]
            start = offset + got - b * BLOCK
            piece = block[start:start + limit - got]
            if not piece:
                break
            out.append(piece)
            got += len(piece)
            b += 1
        return b"".join(out)

    def cached_end(self, start: int, end: int) -> int:
        """Where the cached blocks that reach `end` begin (>= start); `end` when none does."""
        b = (end - 1) // BLOCK
        first = end
        while b >= 0 and b in self._blocks and len(self._blocks[b]) == min(BLOCK, self.size - b * BLOCK):
            first = max(start, b * BLOCK)
            if first == start:
                break
            b -= 1
        return first

    def know_members(self, extents: dict[int, int]) -> None:
        """Where member data lies (data offset -> compressed size): a stream opened at one is
        fetched with one request for exactly its bytes."""
        self._extents = dict(extents)

    def open(self) -> RangeFile:
        return RangeFile(self)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class RangeFile(io.RawIOBase):
    """A sequential reader over a RangeReader: after a seek to a member's data, reads stream
    that member's bytes from one response; anything else goes through read_at."""

    def __init__(self, reader: RangeReader):
        super().__init__()
        self._r = reader
        self._pos = 0
        self._resp: http.client.HTTPResponse | None = None
        self._conn: Any = None
        self._left = 0
        self._limit = 0  # end of the small member being read, when one is
        self._start = 0
        self._kept: list[bytes] | None = None
        self._mem: memoryview | None = None
        self._mem_at = 0
        self._tail = b""  # the end of the member being streamed, held in the block cache already
        self._tail_at = 0
        self._tail_end = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        target = {0: pos, 1: self._pos + pos, 2: self._r.size + pos}[whence]
        if target != self._pos:
            self._drop()
            self._limit, self._mem, self._tail = 0, None, b""
        self._pos = target
        return target

    def tell(self) -> int:
        return self._pos

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._resp, self._conn, self._left, self._kept = None, None, 0, None

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self._r.size - self._pos
        if self._mem is not None:  # a member read again (the scanner's second pass): from memory
            return self._from_memory(n)
        first = self._start_member(n)
        if first is not None:
            return first
        if self._resp is not None:
            return self._from_response(n)
        if self._tail and self._pos >= self._tail_at:  # the member's last bytes, from the block cache
            return self._from_tail(n)
        if self._limit > self._pos:
            n = min(n, self._limit - self._pos)
        data = self._r.read_at(self._pos, n)
        self._pos += len(data)
        return data

    def _from_memory(self, n: int) -> bytes:
        assert self._mem is not None
        data = bytes(self._mem[self._pos - self._mem_at:self._pos - self._mem_at + n])
        self._pos += len(data)
        return data

    def _start_member(self, n: int) -> bytes | None:
        """At a known member's data offset: the bytes to answer with now (the member from memory, or
        the start of its stream the cache holds), or None to read on as set up here."""
        extent = self._r._extents.get(self._pos) if self._resp is None else None
        if extent is None:
            return None
        held = self._r.held
        if held is not None and held[0] == self._pos:
            self._mem, self._mem_at = memoryview(held[1]), self._pos
            return self._from_memory(n)
        if extent >= BIG:
            return self._open_stream(extent, n) or None
        self._limit = self._pos + extent  # a small member: never read past its data
        return None

    def _open_stream(self, extent: int, n: int) -> bytes:
        """Set up one response for a big member's bytes that the cache lacks; returns the start of
        the member the cache holds already (b"" when none)."""
        self._start = self._pos
        self._kept = [] if extent <= KEEP else None
        prefix = self._r.cached(self._pos, min(n, extent))  # the start came with its local header
        if prefix:
            self._pos += len(prefix)
            if self._kept is not None:
                self._kept.append(prefix)
        end = self._start + extent
        self._tail_at = self._r.cached_end(self._pos, end)  # the end came with the next member's header
        self._tail_end = end
        self._left = self._tail_at - self._pos
        if self._left:
            self._resp, self._conn = self._r._request(self._pos, self._tail_at - 1, reuse=False)
        if end > self._tail_at:
            tail = self._r.cached(self._tail_at, end - self._tail_at)
            self._tail = tail
            if self._kept is not None and not self._left:
                self._kept.append(tail)
        elif self._kept is not None:
            self._r.held = (self._start, b"".join(self._kept))
        return prefix

    def _from_response(self, n: int) -> bytes:
        assert self._resp is not None
        try:
            data = self._resp.read(min(n, self._left))
        except (OSError, http.client.HTTPException) as e:
            self._drop()
            raise RemoteError(f"{self._r.url}: cannot read: {e}") from None
        self._r.fetched += len(data)
        self._left -= len(data)
        self._pos += len(data)
        if self._kept is not None:
            self._kept.append(data)
        if not self._left and self._tail and self._kept is not None:
            self._kept.append(self._tail)
        if not self._left and self._kept is not None:
            self._r.held = (self._start, b"".join(self._kept))
        if not self._left or not data:
            self._drop()
        return data

    def _from_tail(self, n: int) -> bytes:
        data = self._tail[self._pos - self._tail_at:self._pos - self._tail_at + n]
        self._pos += len(data)
        if self._pos >= self._tail_end:
            self._tail = b""
        return data

    def close(self) -> None:
        self._drop()
        super().close()


__all__ = ["RangeFile", "RangeReader", "RemoteError", "get"]
