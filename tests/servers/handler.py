"""The FaultServer's socket side: a threading HTTP/1.1 server and the writes that answer a request."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import socket
import socketserver
import struct
import sys
import threading
import traceback
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from tests.servers.common import HOST, Request

if TYPE_CHECKING:
    from tests.servers.fault_server import FaultServer


class FaultHTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: FaultServer, address: tuple[str, int]) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        super().__init__(address, FaultHandler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup that can hang: not here.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = HOST, self.server_address[1]

    def process_request(self, request, client_address):
        with self.conn_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.conn_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address):
        error = sys.exc_info()[1]
        if isinstance(error, (OSError, TimeoutError)):
            return  # the client went away, a broken pipe, a reset: expected with faults, not worth a word
        self.owner.errors.append("".join(traceback.format_exc()))


class FaultHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real servers; each response has a Content-Length
    server_version = "shardstream-fault/1"
    timeout = 10  # idle keep-alive connections end after this
    disable_nagle_algorithm = True  # else headers-then-body waits out delayed ACKs (40 ms a request)
    server: FaultHTTPServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.owner._handle(self, head=False)

    def do_HEAD(self) -> None:
        self.server.owner._handle(self, head=True)


def request_entry(h: FaultHandler, *, head: bool) -> tuple[Request, str]:
    """The log entry for this request (status still 0), and the query string of its URL."""
    split = urllib.parse.urlsplit(h.path)
    path = urllib.parse.unquote(split.path) or "/"
    headers = {k.lower(): v for k, v in h.headers.items()}
    entry = Request("HEAD" if head else "GET", path, h.headers.get("Range"), 0, headers=headers)
    return entry, split.query


def send_simple(
    h: FaultHandler, entry: Request, code: int, head: bool, headers: dict[str, str] | None
) -> None:
    """A response with a short text body (none for HEAD, 304)."""
    body = b"" if code in (204, 304) else f"{code} {http.client.responses.get(code, '')}\n".encode()
    try:
        h.send_response(code)
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        if code != 304:
            h.send_header("Content-Type", "text/plain")
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head and body:
            entry.bytes_sent = len(body)
            h.wfile.write(body)
    except OSError:
        h.close_connection = True


def send_head(h: FaultHandler, status: int, headers: dict[str, str]) -> bool:
    """The status line and headers; False (and the connection closes) if the client is gone."""
    h.send_response(status)
    for name, value in headers.items():
        h.send_header(name, value)
    try:
        h.end_headers()
    except OSError:
        h.close_connection = True
        return False
    return True


def send_body(
    h: FaultHandler,
    entry: Request,
    file: Path,
    start: int,
    cut: int,
    chunk_size: int,
    flip: tuple[int, int] | None,
) -> bool:
    """``cut`` bytes of ``file`` from ``start``, counted in ``entry.bytes_sent``, the byte at ``flip``'s
    offset XORed with its mask (a changed object). False (and the connection closes) if the client is gone."""
    try:
        with open(file, "rb") as fh:
            fh.seek(start)
            pos = start
            while pos < start + cut:
                chunk = fh.read(min(chunk_size, start + cut - pos))
                if not chunk:
                    break
                if flip is not None and pos <= flip[0] < pos + len(chunk):
                    buf = bytearray(chunk)
                    buf[flip[0] - pos] ^= flip[1]
                    chunk = bytes(buf)
                entry.bytes_sent += len(chunk)  # counted first, so a client that has them sees them
                try:
                    h.wfile.write(chunk)
                except OSError:
                    entry.bytes_sent -= len(chunk)
                    h.close_connection = True
                    return False
                pos += len(chunk)
    except OSError:
        h.close_connection = True
        return False
    return True


def close_connection(h: FaultHandler, *, reset: bool) -> None:
    """End the connection mid-response: FIN after what was sent, or RST (unread data may be lost)."""
    h.close_connection = True
    with contextlib.suppress(OSError):
        if reset:
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.connection.close()
        else:
            h.connection.shutdown(socket.SHUT_WR)
