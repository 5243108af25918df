"""A fault-injecting S3 endpoint for tests: an HTTP proxy in front of an S3 API server (moto's
``ThreadedMotoServer``) that answers some requests, by a schedule, with what a real object store
under load does: ``503 SlowDown``, ``500 InternalError``, a connection reset, or a GET's body cut
short (with an honest ``Content-Length``, or one that promises the whole body).

>>> proxy = FaultProxy("127.0.0.1", moto_port)
>>> endpoint = proxy.start()          # give it to s3fs as client_kwargs={"endpoint_url": endpoint}
>>> proxy.schedule([Fault("slowdown", method="GET", times=2)])
>>> ...
>>> proxy.fired()                     # {"slowdown": 2}
>>> proxy.stop()

Every request is forwarded whole (the request line, headers and body as received; a chunked body
is de-chunked), so the S3 server sees the client's own signed request. Faults of the kinds
``slowdown``, ``internal`` and ``reset`` are injected *before* forwarding (the server never sees
the request); ``short`` and ``short_lie`` forward a GET and cut the successful response's body
to its first tenth (``keep``). A fault matches by method, by a regular expression on the path and
query (``path``), and fires on the matching requests after the first ``after``, at most ``times``
times (``None``: forever, a permanent fault).
"""

from __future__ import annotations

import http.client
import re
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Tuple

KINDS = ("slowdown", "internal", "reset", "short", "short_lie")

_ERRORS = {
    "slowdown": (503, "Service Unavailable", "SlowDown", "Please reduce your request rate."),
    "internal": (500, "Internal Server Error", "InternalError",
                 "We encountered an internal error. Please try again."),
}

# Hop-by-hop headers the proxy sets itself.
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}


@dataclass
class Fault:
    kind: str
    method: Optional[str] = None
    path: Optional[str] = None
    times: Optional[int] = 1
    after: int = 0
    #: The part of a ``short``/``short_lie`` body sent.
    keep: float = 0.1
    seen: int = field(default=0, init=False)
    fired: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"fault kind {self.kind!r}: one of {KINDS}")

    def take(self, method: str, target: str) -> bool:
        """Whether this fault fires on a request (counts it)."""
        if self.method is not None and method != self.method:
            return False
        if self.kind.startswith("short") and method != "GET":
            return False
        if self.path is not None and not re.search(self.path, target):
            return False
        self.seen += 1
        if self.seen <= self.after or (self.times is not None and self.fired >= self.times):
            return False
        self.fired += 1
        return True


class FaultProxy:
    """The proxy: ``start()`` returns its endpoint URL; ``schedule`` replaces the faults."""

    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self._faults: List[Fault] = []
        self._lock = threading.Lock()
        #: Every request: (method, path and query, Range header or "", the fault injected or "").
        self.log: List[Tuple[str, str, str, str]] = []
        self._server: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    def start(self) -> str:
        proxy = self

        class Handler(_Handler):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def schedule(self, faults: List[Fault]) -> None:
        with self._lock:
            self._faults = list(faults)
            self.log = []

    def clear(self) -> None:
        self.schedule([])

    def fired(self) -> Dict[str, int]:
        """How many times each kind of fault was injected since the last ``schedule``."""
        counts: Dict[str, int] = {}
        with self._lock:
            for f in self._faults:
                if f.fired:
                    counts[f.kind] = counts.get(f.kind, 0) + f.fired
        return counts

    def _choose(self, method: str, target: str, range_: str) -> Optional[Fault]:
        with self._lock:
            chosen = None
            for f in self._faults:
                if f.take(method, target):
                    chosen = f
                    break
            self.log.append((method, target, range_, chosen.kind if chosen else ""))
            return chosen


class _Handler(BaseHTTPRequestHandler):
    owner: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  (quiet)
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _reset(self) -> None:
        """Drops the connection with a TCP reset (SO_LINGER 0)."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()

    def _send(self, status: int, reason: str, headers: List[Tuple[str, str]], body: bytes,
              length: Optional[int] = None) -> None:
        self.send_response_only(status, reason)
        for k, v in headers:
            if k.lower() not in _HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()

    def _handle(self) -> None:
        body = self._body()
        fault = self.owner._choose(self.command, self.path, self.headers.get("Range", ""))
        kind = fault.kind if fault else ""
        if kind == "reset":
            self._reset()
            return
        if kind in _ERRORS:
            status, reason, code, message = _ERRORS[kind]
            xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                   f"<Message>{message}</Message><RequestId>fault</RequestId></Error>").encode()
            self._send(status, reason, [("Content-Type", "application/xml")], xml)
            return
        conn = http.client.HTTPConnection(*self.owner.upstream, timeout=60)
        try:
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for k, v in self.headers.items():
                if k.lower() not in _HOP and k.lower() != "expect":
                    conn.putheader(k, v)
            if body or self.command in ("PUT", "POST"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            resp = conn.getresponse()
            data = resp.read()
            headers = resp.getheaders()
            status, reason = resp.status, resp.reason
        finally:
            conn.close()
        if self.command == "HEAD":
            # No body: the upstream's Content-Length is the object's.
            length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
            self._send(status, reason, headers, b"", length)
            return
        if fault is not None and kind.startswith("short") and status in (200, 206) \
                and len(data) >= 2:
            cut = data[: max(1, min(len(data) - 1, int(len(data) * fault.keep)))]
            if kind == "short":
                self._send(status, reason, headers, cut)
            else:
                # Promise the whole body, send half, close.
                self._send(status, reason, headers, cut, len(data))
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self._send(status, reason, headers, data)

    def _any(self) -> None:
        try:
            self._handle()
        except (ConnectionError, OSError):
            self.close_connection = True

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any
