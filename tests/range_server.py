"""A tiny HTTP server for tests and benchmarks: files of one directory with Range support
(python's http.server has none), on 127.0.0.1 only, answering a bounded number of requests.

Besides files it serves a PEP 691 JSON or PEP 503 HTML simple index of the wheels it holds,
at /simple/<project>/ (JSON when the client asks for it), and counts bytes sent.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager

from packaging.utils import canonicalize_name, parse_wheel_filename

MAX_REQUESTS = 100_000


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: RangeServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        srv = self.server
        with srv.lock:
            srv.requests += 1
            over = srv.requests > srv.max_requests
        if over:
            self._send(503, b"request budget spent")
            return
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        if path.startswith("/simple/"):
            self._index(path[len("/simple/") :].strip("/"))
            return
        full = os.path.join(srv.root, os.path.basename(path))
        if not os.path.isfile(full):
            self._send(404, b"not found")
            return
        size = os.path.getsize(full)
        rng = self.headers.get("Range")
        if rng is None or not srv.ranges:
            with open(full, "rb") as f:
                self._send(200, f.read(), "application/octet-stream")
            return
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
        if not m or (not m.group(1) and not m.group(2)):
            self._send(416, b"bad range")
            return
        if m.group(1):
            first = int(m.group(1))
            last = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
        else:
            first, last = max(0, size - int(m.group(2))), size - 1
        if first > last or first >= size:
            self._send(416, b"range not satisfiable")
            return
        with open(full, "rb") as f:
            f.seek(first)
            body = f.read(last - first + 1)
        self._send(206, body, "application/octet-stream", {"Content-Range": f"bytes {first}-{last}/{size}"})

    def _index(self, project: str) -> None:
        srv = self.server
        files = []
        for name in sorted(os.listdir(srv.root)):
            if not name.endswith(".whl"):
                continue
            try:
                got = parse_wheel_filename(name)[0]
            except ValueError:
                continue
            if got == canonicalize_name(project):
                files.append(name)
        if not files:
            self._send(404, b"no such project")
            return
        digests = {n: srv.digest(n) for n in files}
        if "application/vnd.pypi.simple.v1+json" in (self.headers.get("Accept") or ""):
            body = json.dumps(
                {
                    "meta": {"api-version": "1.1"},
                    "name": project,
                    "files": [
                        {
                            "filename": n,
                            "url": f"../../{n}",
                            "hashes": {"sha256": digests[n]},
                            "size": os.path.getsize(os.path.join(srv.root, n)),
                            "upload-time": srv.upload_times.get(n),
                        }
                        for n in files
                    ],
                }
            ).encode()
            self._send(200, body, "application/vnd.pypi.simple.v1+json")
            return
        links = "".join(f'<a href="../../{n}#sha256={digests[n]}">{n}</a><br>' for n in files)
        self._send(200, f"<!DOCTYPE html><html><body>{links}</body></html>".encode(), "text/html")

    def _send(self, status: int, body: bytes, ctype: str = "text/plain", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes" if self.server.ranges else "none")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            return
        with self.server.lock:
            self.server.sent += len(body)


class RangeServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: str, *, ranges: bool = True, max_requests: int = MAX_REQUESTS):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root
        self.ranges = ranges
        self.max_requests = max_requests
        self.requests = 0
        self.sent = 0
        self.lock = threading.Lock()
        self.upload_times: dict[str, str] = {}
        self._digests: dict[str, str] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def digest(self, name: str) -> str:
        if name not in self._digests:
            h = hashlib.sha256()
            with open(os.path.join(self.root, name), "rb") as f:
                while block := f.read(1 << 22):
                    h.update(block)
            self._digests[name] = h.hexdigest()
        return self._digests[name]


@contextmanager
def serving(root: str, *, ranges: bool = True, max_requests: int = MAX_REQUESTS) -> Iterator[RangeServer]:
    """A RangeServer on 127.0.0.1 for the duration of the block."""
    srv = RangeServer(root, ranges=ranges, max_requests=max_requests)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(timeout=5)
