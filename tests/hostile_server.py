"""An HTTP server that attacks its client, for tests: 127.0.0.1 only, every loop bounded, and it
stops by itself (each answer ends after MAX_SEND bytes or MAX_TRICKLE slow bytes, or when the
client goes away; the server ends with the `hostile()` block).

Paths (anything else is 404):

- `/endless.whl`: a 206 answer with no Content-Length whose body never ends (until MAX_SEND);
- `/liar.whl`: a 206 answer declaring a Content-Length far larger than the range asked;
- `/trickle.whl`: a 206 answer whose body comes one byte every TRICKLE_GAP seconds;
- `/slow-headers.whl`: a status line, then one header byte every TRICKLE_GAP seconds;
- `/simple/endless/`: a JSON index page that never ends;
- `/simple/trickle/`: a JSON index page one byte every TRICKLE_GAP seconds;
- `/simple/bad/`: a JSON index page whose `files` is not a list;
- `/simple/deep/`: a JSON index page nested deeper than any parser's stack;
- `/simple/html-bad/`: an HTML page whose anchors are garbage;
- `/simple/good/`: a JSON index page listing `good_url` (set by the test).

`sent[path]` counts the body bytes sent on each path, `stopped_early[path]` whether the client
went away before the server's own bound.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MAX_SEND = 256 << 20  # an endless body stops here at the latest
MAX_TRICKLE = 40  # a trickled body stops after this many bytes at the latest
TRICKLE_GAP = 0.25
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


class HostileServer:
    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.good_url = ""
        self.sent: dict[str, int] = {}
        self.stopped_early: dict[str, bool] = {}
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            t = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=MAX_TRICKLE * TRICKLE_GAP + 5)
        self.sock.close()

    def _count(self, path: str, n: int) -> None:
        with self.lock:
            self.sent[path] = self.sent.get(path, 0) + n

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        try:
            request = b""
            while b"\r\n\r\n" not in request and len(request) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                request += chunk
            path = request.split(b" ", 2)[1].decode()
            early = self._answer(conn, path)
            with self.lock:
                self.stopped_early[path] = early
        except OSError:
            pass
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, path: str) -> bool:
        """Send the answer for path; True when the client went away first."""
        head206 = b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-99/1000000\r\nConnection: close\r\n"
        pages = {
            "/simple/bad/": json.dumps({"meta": {"api-version": "1.1"}, "files": 5}).encode(),
            "/simple/deep/": b'{"files": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
            "/simple/html-bad/": b"<html><a href='http://[::1'>x.whl</a><a href='\x00'>",
            "/simple/good/": json.dumps(
                {
                    "meta": {"api-version": "1.1"},
                    "files": [{"filename": self.good_url.rsplit("/", 1)[-1], "url": self.good_url, "hashes": {}}],
                }
            ).encode(),
        }
        if path == "/endless.whl":
            return self._endless(conn, path, head206 + b"\r\n")
        if path == "/liar.whl":
            return self._endless(conn, path, head206 + b"Content-Length: 1000000000000\r\n\r\n")
        if path == "/trickle.whl":
            return self._trickle(conn, path, head206 + b"\r\n", b"x" * MAX_TRICKLE)
        if path == "/slow-headers.whl":
            return self._trickle(conn, path, b"HTTP/1.1 206 Partial Content\r\n", b"X-Slow: " + b"y" * MAX_TRICKLE)
        json_head = f"HTTP/1.1 200 OK\r\nContent-Type: {JSON_TYPE}\r\nConnection: close\r\n".encode()
        if path == "/simple/endless/":
            return self._endless(conn, path, json_head + b"\r\n", b'{"files": [' + b" " * 65536)
        if path == "/simple/trickle/":
            return self._trickle(conn, path, json_head + b"\r\n", b'{"files": []}' + b" " * MAX_TRICKLE)
        if path in pages:
            ctype = b"text/html" if "html" in path else JSON_TYPE.encode()
            body = pages[path]
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: "
                + ctype
                + b"\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n"
                + body
            )
            self._count(path, len(body))
            return False
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        return False

    def _endless(self, conn: socket.socket, path: str, head: bytes, first: bytes = b"") -> bool:
        conn.sendall(head + first)
        block = b"\0" * 65536
        sent = len(first)
        while sent < MAX_SEND and not self._stop.is_set():
            try:
                conn.sendall(block)
            except OSError:
                self._count(path, sent)
                return True
            sent += len(block)
        self._count(path, sent)
        return False

    def _trickle(self, conn: socket.socket, path: str, head: bytes, body: bytes) -> bool:
        conn.sendall(head)
        for i in range(len(body)):
            if self._stop.is_set():
                return False
            time.sleep(TRICKLE_GAP)
            try:
                conn.sendall(body[i : i + 1])
            except OSError:
                self._count(path, i)
                return True
        self._count(path, len(body))
        return False


def settled(srv: HostileServer, path: str) -> None:
    """Wait (at most 50 polls) until the server's answer on path has ended, then stop it."""
    for _ in range(50):
        if path in srv.stopped_early:
            break
        time.sleep(TRICKLE_GAP / 2)
    srv.stop()


@contextmanager
def hostile() -> Iterator[HostileServer]:
    srv = HostileServer()
    t = threading.Thread(target=srv.serve, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.stop()
        t.join(timeout=5)
