"""Reading a remote wheel over HTTP range requests, without downloading it whole.

The zip reader asks for the end records and central directory first, then each member's local
header and first bytes (to know what it is), then streams only the members that can hold
device code. Small reads go through a block cache (neighbouring headers share one request);
a member's data is fetched with one request for exactly its bytes. Every byte received is
counted, so a report can say what was fetched against the wheel's size.

Every read is bounded (docs/threat-model.md, "index over HTTP"): in bytes by what was asked
(a range's length, which Content-Length and Content-Range must agree with; an index page at
most PAGE_LIMIT bytes), and in time by a deadline for the whole wheel (WHEEL_DEADLINE) or the
whole page (PAGE_DEADLINE), not per socket read: at the deadline a watchdog shuts every socket
of that wheel down, so a server that trickles a byte every few seconds holds it no longer.
"""

from __future__ import annotations

import http.client
import io
import socket
import threading
import time
import urllib.parse
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
TIMEOUT = 60.0  # seconds one socket operation may wait (the deadlines below bound the total)
WHEEL_DEADLINE = 1800.0  # seconds for every request of one wheel together
PAGE_DEADLINE = 120.0  # seconds for one index page, redirects included
PAGE_LIMIT = 64 << 20  # bytes of one index page at most (PyPI's largest JSON pages are a few MB)
CHUNK = 64 << 10  # bytes asked of the socket at a time
MAX_REDIRECTS = 5
USER_AGENT = f"archaudit/{__version__}"


class RemoteError(ArchauditError):
    """A remote wheel could not be read (finding E001)."""

    default_code = Code.E001


class Deadline:
    """A time limit over many socket operations: at its end every socket it watches is shut down
    (a blocked read returns at once), and every later request or read raises RemoteError."""

    def __init__(self, seconds: float, what: str):
        self.seconds, self.what = seconds, what
        self.end = time.monotonic() + seconds
        self.expired = False
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            socks, self._socks = self._socks, []
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def error(self) -> RemoteError:
        return RemoteError(f"{self.what}: not read within its {self.seconds:g} s deadline")

    def left(self) -> float:
        """Seconds a socket operation may wait now; RemoteError once the deadline has passed."""
        left = self.end - time.monotonic()
        if self.expired or left <= 0:
            raise self.error()
        return min(left, TIMEOUT)

    def watch(self, conn: http.client.HTTPConnection) -> None:
        """Connect conn (waiting at most what is left) and shut it down at the deadline."""
        conn.timeout = self.left()
        try:
            conn.connect()
        except OSError as e:
            raise RemoteError(f"{self.what}: cannot connect: {e}") from None
        if conn.sock is None:
            return
        with self._lock:
            if not self.expired:
                self._socks.append(conn.sock)
                return
        raise self.error()

    def cancel(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._socks = []


def _read_body(resp: http.client.HTTPResponse, limit: int, deadline: Deadline, what: str) -> bytes:
    """At most limit + 1 bytes of a response, a socket read at a time, within the deadline."""
    parts, got = [], 0
    while got <= limit:
        deadline.left()
        try:
            data = resp.read1(min(CHUNK, limit + 1 - got))
        except (OSError, http.client.HTTPException) as e:
            if deadline.expired:
                raise deadline.error() from None
            raise RemoteError(f"{what}: cannot read: {e}") from None
        if not data:
            if deadline.expired:
                raise deadline.error()
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def _connect(url: str) -> tuple[http.client.HTTPConnection, str]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteError(f"{url}: not an http(s) URL")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    try:
        conn = cls(parts.hostname, parts.port, timeout=TIMEOUT)
    except (ValueError, http.client.InvalidURL) as e:
        raise RemoteError(f"{url}: {e}") from None
    return conn, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def get(url: str, accept: str = "*/*", *, limit: int = PAGE_LIMIT, seconds: float | None = None) -> tuple[bytes, str]:
    """A whole small resource (an index page): its body and content type; at most `limit` bytes,
    read within `seconds` (PAGE_DEADLINE), redirects included."""
    deadline = Deadline(PAGE_DEADLINE if seconds is None else seconds, url)
    try:
        for _ in range(MAX_REDIRECTS + 1):
            conn, path = _connect(url)
            resp: http.client.HTTPResponse | None = None
            try:
                deadline.watch(conn)
                try:
                    conn.request(
                        "GET", path, headers={"Accept": accept, "User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
                    )
                    resp = conn.getresponse()
                except (OSError, http.client.HTTPException) as e:
                    if deadline.expired:
                        raise deadline.error() from None
                    raise RemoteError(f"{url}: cannot read: {e}") from None
                if resp.status in (301, 302, 303, 307, 308) and resp.getheader("Location"):
                    url = urllib.parse.urljoin(url, resp.getheader("Location") or "")
                    continue
                if resp.status != 200:
                    raise RemoteError(f"{url}: HTTP {resp.status} {resp.reason}")
                length = resp.getheader("Content-Length")
                if length and length.isdigit() and int(length) > limit:
                    raise RemoteError(f"{url}: the page declares {length} bytes, more than the {limit}-byte bound")
                body = _read_body(resp, limit, deadline, url)
                if len(body) > limit:
                    raise RemoteError(f"{url}: the page is longer than the {limit}-byte bound")
                return body, resp.getheader("Content-Type", "") or ""
            finally:
                if resp is not None:
                    resp.close()  # the answer holds the socket: closed, the server learns nobody reads
                conn.close()
        raise RemoteError(f"{url}: more than {MAX_REDIRECTS} redirects")
    finally:
        deadline.cancel()


class RangeReader:
    """One remote file read by byte ranges; `read_at` and `open` are what the zip reader needs."""

    def __init__(self, url: str, *, seconds: float | None = None):
        self.url = url
        self.deadline = Deadline(WHEEL_DEADLINE if seconds is None else seconds, url)
        self.fetched = 0  # bytes of content received
        self.requests = 0
        self._lock = threading.Lock()
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        self._extents: dict[int, int] = {}  # member data offset -> compressed size
        self._conn: http.client.HTTPConnection | None = None
        self._path = ""
        self.held: tuple[int, bytes] | None = None  # (data offset, bytes) of the last member streamed whole
        try:
            self.size = self._first_read()
        except BaseException:
            self.close()
            raise

    # ---- HTTP ----

    def _connect(self, url: str) -> tuple[http.client.HTTPConnection, str]:
        conn, path = _connect(url)
        self.deadline.watch(conn)
        return conn, path

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
                conn.timeout = self.deadline.left()
                if conn.sock is not None:
                    conn.sock.settimeout(conn.timeout)
                conn.request(
                    "GET", path, headers={"Range": rng, "User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
                )
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if self.deadline.expired:
                    raise self.deadline.error() from None
                if reuse and conn is self._conn:
                    self._conn = None
                    continue  # a kept-alive connection the server closed: once more on a new one
                raise RemoteError(f"{self.url}: cannot read: {e}") from None
            if resp.status in (301, 302, 303, 307, 308):
                resp.close()  # its body is never read: the connection goes with it
                conn.close()
                if conn is self._conn:
                    self._conn = None
                location = resp.getheader("Location")
                if not location:
                    raise RemoteError(f"{self.url}: redirect without a Location")
                self.url = url = urllib.parse.urljoin(url, location)
                continue
            if resp.status == 200:
                resp.close()
                conn.close()
                raise RemoteError(f"{self.url}: the server ignores Range requests (it would send the whole file)")
            if resp.status != 206:
                resp.close()
                conn.close()
                raise RemoteError(f"{self.url}: HTTP {resp.status} {resp.reason}")
            self._check_length(resp, first, last, conn)
            if reuse and self._conn is None:
                self._conn, self._path = conn, path
            return resp, conn
        raise RemoteError(f"{self.url}: more than {MAX_REDIRECTS} redirects")

    def _check_length(
        self, resp: http.client.HTTPResponse, first: int, last: int | None, conn: http.client.HTTPConnection
    ) -> None:
        """A 206 answer must declare no more than was asked: Content-Length at most the range's length."""
        want = (last - first + 1) if last is not None else first
        length = resp.getheader("Content-Length")
        if length is not None and (not length.strip().isdigit() or int(length) > want):
            resp.close()
            conn.close()
            if conn is self._conn:
                self._conn = None
            raise RemoteError(f"{self.url}: asked for {want} bytes, the answer declares {length!r}")

    def _body(self, resp: http.client.HTTPResponse, want: int) -> bytes:
        """The body of a range answer: at most want bytes (one more is an error), within the deadline.
        A connection whose answer was not read to its end is not used again."""
        try:
            data = _read_body(resp, want, self.deadline, self.url)
        except RemoteError:
            self._drop_conn(resp)
            raise
        self.fetched += len(data)
        if len(data) > want:
            self._drop_conn(resp)
            raise RemoteError(f"{self.url}: asked for {want} bytes, the server sent more")
        if not resp.isclosed():
            self._drop_conn(resp)  # more was sent, or its end is not known: the next answer cannot be told from it
        return data

    def _drop_conn(self, resp: http.client.HTTPResponse | None = None) -> None:
        """Close the kept connection, and the answer on it: the answer holds the socket open
        (http.client hands it over), so the server learns at once that nobody reads."""
        if resp is not None:
            resp.close()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _fetch(self, first: int, last: int) -> bytes:
        with self._lock:
            resp, _ = self._request(first, last, reuse=True)
            data = self._body(resp, last - first + 1)
        if len(data) != last - first + 1:
            raise RemoteError(f"{self.url}: asked for {last - first + 1} bytes at {first}, got {len(data)}")
        return data

    def _first_read(self) -> int:
        """Read the file's last TAIL bytes, learning its size from Content-Range."""
        with self._lock:
            resp, _ = self._request(TAIL, None, reuse=True)
            total = (resp.getheader("Content-Range") or "").rpartition("/")[2]
            data = self._body(resp, TAIL)
        if not total.isdigit():
            raise RemoteError(f"{self.url}: no file size in the Content-Range answer")
        size = int(total)
        if len(data) != min(TAIL, size):
            raise RemoteError(f"{self.url}: asked for the last {min(TAIL, size)} bytes, got {len(data)}")
        start = size - len(data)
        # keep the whole blocks the tail covers
        first_block = -(-start // BLOCK)
        for b in range(first_block, size // BLOCK + 1):
            lo, hi = b * BLOCK, min((b + 1) * BLOCK, size)
            if lo >= size:
                break
            self._blocks[b] = data[lo - start : hi - start]
        self._tail_start, self._tail = start, data
        return size

    # ---- what the zip reader calls ----

    def read_at(self, offset: int, length: int) -> bytes:
        """At most `length` bytes at `offset` (fewer only past the end)."""
        if offset < 0 or length <= 0 or offset >= self.size:
            return b""
        end = min(offset + length, self.size)
        if offset >= self._tail_start:
            return self._tail[offset - self._tail_start : end - self._tail_start]
        if end - offset >= BIG:
            return self._fetch(offset, end - 1)
        first, last = offset // BLOCK, (end - 1) // BLOCK
        missing = [b for b in range(first, last + 1) if b not in self._blocks]
        if missing:
            lo, hi = missing[0] * BLOCK, min((missing[-1] + 1) * BLOCK, self.size)
            data = self._fetch(lo, hi - 1)
            for b in range(missing[0], missing[-1] + 1):
                if b not in self._blocks:
                    self._blocks[b] = data[b * BLOCK - lo : (b + 1) * BLOCK - lo]
            while len(self._blocks) > CACHE_BLOCKS:
                self._blocks.popitem(last=False)
        parts = [self._blocks[b] for b in range(first, last + 1)]
        for b in range(first, last + 1):
            self._blocks.move_to_end(b)
        joined = b"".join(parts)
        return joined[offset - first * BLOCK : end - first * BLOCK]

    def cached(self, offset: int, limit: int) -> bytes:
        """The bytes from `offset` (at most `limit`) that the block cache holds already, contiguous."""
        out = []
        got = 0
        b = offset // BLOCK
        while got < limit and b in self._blocks:
            block = self._blocks[b]
            start = offset + got - b * BLOCK
            piece = block[start : start + limit - got]
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
        self.deadline.cancel()
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
        if self._resp is not None:
            self._resp.close()
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
        data = bytes(self._mem[self._pos - self._mem_at : self._pos - self._mem_at + n])
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
            self._r.deadline.left()
            data = self._resp.read1(min(n, self._left, CHUNK))
        except (OSError, http.client.HTTPException) as e:
            self._drop()
            if self._r.deadline.expired:
                raise self._r.deadline.error() from None
            raise RemoteError(f"{self._r.url}: cannot read: {e}") from None
        except RemoteError:
            self._drop()
            raise
        if not data and self._r.deadline.expired:
            self._drop()
            raise self._r.deadline.error()
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
        data = self._tail[self._pos - self._tail_at : self._pos - self._tail_at + n]
        self._pos += len(data)
        if self._pos >= self._tail_end:
            self._tail = b""
        return data

    def close(self) -> None:
        self._drop()
        super().close()


__all__ = ["RangeFile", "RangeReader", "RemoteError", "get"]
