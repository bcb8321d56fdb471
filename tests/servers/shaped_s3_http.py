"""The shaped S3 server's HTTP side: one asyncio connection handler, reading only the bytes a range asks for.

Plain HTTP/1.1 on asyncio streams (keep-alive, Content-Length bodies, no chunked uploads): enough of S3 for
GET/HEAD/ListObjectsV2 from obstore, botocore and s3fs, and exact control of when each byte leaves. The
state it serves (folder, shaping, faults, log) is :class:`S3State`, owned by ``shaped_s3.ShapedS3Server``.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

from tests.servers.common import Request
from tests.servers.ranges import parse_range

SHAPED_CHUNK = 64 * 1024  # the rate cap paces writes of this size
UNSHAPED_CHUNK = 1024 * 1024  # fewer, larger writes when nothing paces them
MAX_HEAD = 64 * 1024


@dataclass
class ShapedRequest(Request):
    """A :class:`Request` with its ``kind``: ``HEAD``, ``GET`` (whole object), ``range``, ``list``, or the
    method for anything else."""

    kind: str = ""
    began: float = 0.0  # time.monotonic() when the request arrived
    ended: float | None = None  # ... and when its answer was done (sent, dropped or abandoned)


@dataclass
class S3State:
    """What the handler serves and how: the folder, the knobs, the pending faults and the request log.
    Faults are consumed under ``lock`` (tests set them from another thread)."""

    root: Path
    bucket: str
    ttfb: float = 0.0
    rate: float | None = None
    storm: int = 0
    forbidden: set[str | None] = field(default_factory=set)  # None: every request
    drops: dict[str, int] = field(default_factory=dict)
    replaces: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    stalls: dict[str, list[float]] = field(default_factory=dict)  # key: extra seconds before the next GETs
    shifts: dict[str, int] = field(default_factory=dict)  # key: bytes the next range answer is moved by
    log: list[ShapedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def etag_of(st: os.stat_result) -> str:
    """Cheap and changing whenever the object does: a replaced file has a new inode (or size, or mtime)."""
    return f'"{st.st_ino:x}{st.st_size:x}{st.st_mtime_ns:x}"'


def error_xml(code: str, message: str, resource: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message><Resource>{escape(resource)}</Resource><RequestId>shaped-s3</RequestId></Error>"
    ).encode()


def list_xml(state: S3State, query: dict[str, list[str]]) -> bytes:
    """ListObjectsV2 of ``state.root``: prefix, delimiter, max-keys, continuation-token/start-after."""
    prefix = query.get("prefix", [""])[0]
    delimiter = query.get("delimiter", [""])[0]
    max_keys = int(query.get("max-keys", ["1000"])[0])
    after = query.get("continuation-token", query.get("start-after", [""]))[0]
    keys = sorted(
        p.relative_to(state.root).as_posix()
        for p in state.root.rglob("*")
        if p.is_file() and not p.name.startswith(".~")
    )
    entries: list[tuple[str, str | None]] = []  # (key, None) for objects, (common prefix, "") for folders
    for key in keys:
        if not key.startswith(prefix) or key <= after:
            continue
        cut = key.find(delimiter, len(prefix)) if delimiter else -1
        item = (key[: cut + len(delimiter)], "") if cut >= 0 else (key, None)
        if not entries or entries[-1] != item:
            entries.append(item)
    truncated = len(entries) > max_keys
    entries = entries[:max_keys]
    body = [
        f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>{escape(state.bucket)}</Name><Prefix>{escape(prefix)}</Prefix><KeyCount>{len(entries)}</KeyCount>"
        f"<MaxKeys>{max_keys}</MaxKeys><IsTruncated>{str(truncated).lower()}</IsTruncated>"
    ]
    if delimiter:
        body.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
    if truncated:
        body.append(f"<NextContinuationToken>{escape(entries[-1][0])}</NextContinuationToken>")
    for key, folder in entries:
        if folder is not None:
            body.append(f"<CommonPrefixes><Prefix>{escape(key)}</Prefix></CommonPrefixes>")
            continue
        st = (state.root / key).stat()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(st.st_mtime))
        body.append(
            f"<Contents><Key>{escape(key)}</Key><LastModified>{stamp}</LastModified>"
            f"<ETag>{escape(etag_of(st))}</ETag><Size>{st.st_size}</Size><StorageClass>STANDARD</StorageClass></Contents>"
        )
    body.append("</ListBucketResult>")
    return "".join(body).encode()


async def read_head(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str]] | None:
    """Request line and headers (names lower-cased), or None when the client closed the connection."""
    line = await reader.readline()
    if not line.strip():
        return None
    method, target, _version = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    size = len(line)
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        size += len(line)
        if size > MAX_HEAD:
            raise ConnectionError("request head too large")
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return method, target, headers


class Exchange:
    """One request and its response: the routing, the S3 answers, and the shaped, faultable body."""

    def __init__(
        self, state: S3State, writer: asyncio.StreamWriter, method: str, target: str, headers: dict[str, str]
    ):
        self.state, self.writer, self.method, self.headers = state, writer, method, headers
        url = urlsplit(target)
        self.path = unquote(url.path)
        self.query = parse_qs(url.query, keep_blank_values=True)
        bucket, _, self.key = self.path.lstrip("/").partition("/")
        self.bucket_ok = bucket == state.bucket
        self.range = headers.get("range")
        self.kind = method if method not in ("GET", "HEAD") else "HEAD" if method == "HEAD" else "list"
        if method == "GET" and self.key:
            self.kind = "range" if self.range else "GET"
        self.entry = ShapedRequest(
            method, self.path, self.range, 0, headers=headers, kind=self.kind, began=time.monotonic()
        )

    async def head(self, status: int, fields: dict[str, str], length: int) -> None:
        with self.state.lock:
            waits = self.state.stalls.get(self.key) if self.method == "GET" and status < 300 else None
            stall = waits.pop(0) if waits else 0.0
        if stall:
            self.entry.fault = "stall"
        if self.state.ttfb + stall > 0:
            await asyncio.sleep(self.state.ttfb + stall)
        self.entry.status = status
        lines = [f"HTTP/1.1 {status} {STATUS_TEXT.get(status, 'Status')}", f"Content-Length: {length}"]
        lines += [f"{k}: {v}" for k, v in fields.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    async def simple(self, status: int, body: bytes, fields: dict[str, str] | None = None) -> None:
        await self.head(status, {"Content-Type": "application/xml", **(fields or {})}, len(body))
        if self.method != "HEAD":
            self.writer.write(body)
            self.entry.bytes_sent = len(body)
        await self.writer.drain()

    async def error(self, status: int, code: str, message: str, fault: str | None = None) -> None:
        self.entry.fault = fault
        await self.simple(status, error_xml(code, message, self.path))

    async def respond(self) -> bool:
        """Answer; False when the connection must close (a drop, a request body we do not read)."""
        state = self.state
        with state.lock:
            storm = state.storm > 0
            state.storm -= storm
            forbidden = None in state.forbidden or self.key in state.forbidden
        if storm:
            await self.error(503, "SlowDown", "Please reduce your request rate.", "status")
        elif forbidden:
            await self.error(403, "AccessDenied", "Access Denied", "forbid")
        elif self.method not in ("GET", "HEAD") or self.headers.get("content-length", "0") != "0":
            await self.error(501, "NotImplemented", f"{self.method} is not served here")
            return False
        elif not self.bucket_ok:
            await self.error(404, "NoSuchBucket", "The specified bucket does not exist")
        elif not self.key:
            await self.simple(200, list_xml(state, self.query))
        else:
            return await self.serve_object()
        return True

    async def serve_object(self) -> bool:
        path = (self.state.root / self.key).resolve()
        if not path.is_relative_to(self.state.root) or not path.is_file():
            await self.error(404, "NoSuchKey", "The specified key does not exist.")
            return True
        fd = os.open(path, os.O_RDONLY)  # the object as it is now, even if replaced while we send it
        try:
            st = os.fstat(fd)
            etag = etag_of(st)
            wanted = self.headers.get("if-match")
            if wanted and wanted not in ("*", etag):
                await self.error(412, "PreconditionFailed", "At least one of the preconditions did not hold")
                return True
            got = parse_range(self.range, st.st_size)
            if got == "unsatisfiable":
                await self.error(416, "InvalidRange", "The requested range is not satisfiable")
                return True
            start, end = got if isinstance(got, tuple) else (0, st.st_size)
            with self.state.lock:
                shift = self.state.shifts.pop(self.key, 0) if isinstance(got, tuple) else 0
            if shift:  # a wrong answer: the bytes (and Content-Range) of another span of the same length
                self.entry.fault = "shift"
                start, end = max(0, start + shift), min(st.st_size, end + shift)
            fields = {
                "ETag": etag,
                "Last-Modified": email.utils.formatdate(st.st_mtime, usegmt=True),
                "Accept-Ranges": "bytes",
                "Content-Type": "application/octet-stream",
            }
            if isinstance(got, tuple):
                fields["Content-Range"] = f"bytes {start}-{end - 1}/{st.st_size}"
            await self.head(206 if isinstance(got, tuple) else 200, fields, end - start)
            if self.method == "HEAD":
                await self.writer.drain()
                return True
            return await self.body(fd, start, end)
        finally:
            os.close(fd)

    async def body(self, fd: int, start: int, end: int) -> bool:
        """Send ``[start, end)`` by pread, paced to ``rate``; apply a pending drop or replace of this key."""
        state, loop = self.state, asyncio.get_running_loop()
        with state.lock:
            drop = state.drops.pop(self.key, None) if self.method == "GET" else None
            replace = state.replaces.pop(self.key, None)
        rate, chunk = state.rate, SHAPED_CHUNK if state.rate else UNSHAPED_CHUNK
        began, sent = loop.time(), 0
        while True:
            if replace is not None and sent >= replace[0]:
                self.replace_file(replace[1])
                replace = None
            if drop is not None and sent >= drop:
                self.entry.fault = "drop"
                self.writer.transport.abort()
                return False
            if start + sent >= end:
                break
            stops = [end - start, sent + chunk] + [
                n for n in (drop, replace and replace[0]) if n and n > sent
            ]
            size = min(stops) - sent
            if rate:
                due = began + sent / rate
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
            self.writer.write(os.pread(fd, size, start + sent))
            sent += size
            self.entry.bytes_sent = sent
            await self.writer.drain()
        return True

    def replace_file(self, data: bytes) -> None:
        """New bytes under the key, by rename: a new inode, hence a new ETag; the open fd keeps the old."""
        path = self.state.root / self.key
        temp = path.with_name(f".~{path.name}")
        temp.write_bytes(data)
        os.replace(temp, path)


STATUS_TEXT = {
    200: "OK",
    206: "Partial Content",
    403: "Forbidden",
    404: "Not Found",
    412: "Precondition Failed",
    416: "Range Not Satisfiable",
    501: "Not Implemented",
    503: "Slow Down",
}


async def handle_connection(
    state: S3State, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Serve requests on one connection until the client closes it or a fault ends it."""
    try:
        while (head := await read_head(reader)) is not None:
            exchange = Exchange(state, writer, *head)
            with state.lock:  # logged on arrival, filled in as it is answered: a test never misses one
                state.log.append(exchange.entry)
            try:
                keep = await exchange.respond()
            finally:
                exchange.entry.ended = time.monotonic()
            if not keep or head[2].get("connection", "").lower() == "close":
                break
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass  # a client that went away or spoke no HTTP: nothing to answer
    finally:
        writer.close()
