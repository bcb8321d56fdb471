"""HTTP(S) shard streams over httpx: timeouts, retries with backoff and jitter, resume by Range.

A dropped connection is resumed at the exact byte it broke, with If-Range and a check of ETag,
Last-Modified and length, so a changed object is an error instead of a silently spliced shard.
"""

from __future__ import annotations

import io
import json
import os
import random
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from packer.errors import ShardNotFoundError, ShardReadError

HEADERS_ENV = "SHARDSTREAM_HTTP_HEADERS"
_FATAL = {400: "bad request", 401: "unauthorized", 403: "forbidden", 404: "not found", 410: "gone"}
_clients: dict[tuple[Any, ...], httpx.Client] = {}


def redact(url: str) -> str:
    """The URL as errors show it: without user:password."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


@dataclass(frozen=True)
class HttpOptions:
    """How to talk to HTTP(S) servers. Headers (tokens) never appear in errors or logs."""

    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    retries: int = 5  # consecutive failed attempts without progress before giving up
    backoff: float = 0.5  # first wait; doubles each attempt, with jitter, capped at max_backoff
    max_backoff: float = 15.0
    headers: Mapping[str, str] = field(default_factory=dict)
    ca_bundle: str | None = None  # a PEM file of trusted CAs (e.g. a self-signed server's)
    verify: bool = True
    chunk_size: int = 1 << 20

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "read_timeout", "backoff", "max_backoff"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, not {getattr(self, name)}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, not {self.retries}")

    def request_headers(self) -> dict[str, str]:
        """Headers from the options, then from $SHARDSTREAM_HTTP_HEADERS (a JSON object)."""
        headers = {"Accept-Encoding": "identity"}
        headers.update(self.headers)
        extra = os.environ.get(HEADERS_ENV)
        if extra:
            try:
                parsed = json.loads(extra)
            except json.JSONDecodeError as exc:
                raise ValueError(f"${HEADERS_ENV} must be a JSON object of header names to values") from exc
            if not isinstance(parsed, dict):
                raise ValueError(f"${HEADERS_ENV} must be a JSON object of header names to values")
            headers.update({str(k): str(v) for k, v in parsed.items()})
        return headers

    def client(self) -> httpx.Client:
        # One pooled client per process and settings; a forked worker must not reuse its parent's sockets.
        key = (os.getpid(), self.connect_timeout, self.read_timeout, self.ca_bundle, self.verify)
        client = _clients.get(key)
        if client is None:
            verify: Any = self.ca_bundle if (self.verify and self.ca_bundle) else self.verify
            if isinstance(verify, str):
                import ssl

                verify = ssl.create_default_context(cafile=verify)
            timeout = httpx.Timeout(self.read_timeout, connect=self.connect_timeout)
            client = httpx.Client(timeout=timeout, verify=verify, follow_redirects=True)
            _clients[key] = client
        return client


class HttpStream(io.RawIOBase):
    """A shard's bytes from ``offset`` on; reconnects mid-body without losing or repeating a byte."""

    def __init__(self, url: str, offset: int = 0, options: HttpOptions | None = None) -> None:
        super().__init__()
        self.url = url
        self.shown = redact(url)
        self.position = offset
        self.options = options or HttpOptions()
        self._validators: tuple[str | None, str | None, int | None] | None = None
        self._response: httpx.Response | None = None
        self._chunks: Iterator[bytes] = iter(())
        self._pending = b""
        self._failures = 0
        self._connect()

    # -- connecting ------------------------------------------------------------------------------------
    def _fail(
        self, reason: str, retry_after: float | None = None, cause: BaseException | None = None
    ) -> None:
        """Count a failed attempt: wait (backoff with jitter) and return, or raise when out of retries."""
        self._failures += 1
        if self._failures > self.options.retries:
            message = f"{reason}; gave up after {self.options.retries} retries"
            raise ShardReadError(message, url=self.shown, offset=self.position) from cause
        wait = min(self.options.max_backoff, self.options.backoff * 2 ** (self._failures - 1))
        wait *= random.uniform(0.5, 1.5)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.options.max_backoff))
        time.sleep(wait)

    def _connect(self) -> None:
        client = self.options.client()
        while True:
            headers = self.options.request_headers()
            if self.position:
                headers["Range"] = f"bytes={self.position}-"
                if self._validators is not None and (self._validators[0] or self._validators[1]):
                    headers["If-Range"] = self._validators[0] or self._validators[1]  # type: ignore[assignment]
            try:
                response = client.send(client.build_request("GET", self.url, headers=headers), stream=True)
            except httpx.TransportError as exc:
                if _certificate_problem(exc):
                    raise ShardReadError(
                        "TLS certificate not trusted; pass HttpOptions(ca_bundle=...) for a private CA",
                        url=self.shown,
                    ) from exc
                self._fail(f"cannot connect: {type(exc).__name__}", cause=exc)
                continue
            status = response.status_code
            if status in (200, 206):
                self._accept(response)
                return
            response.close()
            if status in (404, 410):
                raise ShardNotFoundError(f"HTTP {status} {_FATAL[status]}", url=self.shown)
            if status in _FATAL:
                raise ShardReadError(f"HTTP {status} {_FATAL[status]}", url=self.shown)
            if status == 416:
                raise ShardReadError("HTTP 416: offset is past the end of the object", url=self.shown,
                                     offset=self.position)  # fmt: skip
            if status == 429 or status >= 500:
                self._fail(f"HTTP {status}", retry_after=_retry_after(response))
                continue
            raise ShardReadError(f"unexpected HTTP {status}", url=self.shown)

    def _accept(self, response: httpx.Response) -> None:
        headers = response.headers
        total = _total_length(response, self.position)
        seen = (headers.get("etag"), headers.get("last-modified"), total)
        if self._validators is not None and (
            (response.status_code == 200 and self.position) or _changed(self._validators, seen)
        ):
            response.close()
            raise ShardReadError(
                "the object changed between requests (ETag, Last-Modified or length differ); "
                "its shard cannot be resumed without mixing two versions",
                url=self.shown,
                offset=self.position,
            )
        self._validators = seen
        self._response = response
        # No re-chunking: bytes reach us as the socket delivers them, so a drop loses nothing buffered.
        self._chunks = response.iter_raw()
        if response.status_code == 200 and self.position:
            # The server ignored Range: read and drop the bytes before the offset.
            skip = self.position
            while skip:
                chunk = next(self._chunks, b"")
                if not chunk:
                    break
                skip -= len(chunk)
                if skip < 0:
                    self._pending = chunk[skip:]
                    skip = 0

    # -- reading ---------------------------------------------------------------------------------------
    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            parts = []
            while chunk := self.read(self.options.chunk_size):
                parts.append(chunk)
            return b"".join(parts)
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                total = self._validators[2] if self._validators else None
                if total is None or self.position >= total:
                    return b""
                self._reconnect(f"body ended at byte {self.position} of {total}", None)
            except httpx.TransportError as exc:
                self._reconnect(f"connection broke: {type(exc).__name__}", exc)
            except httpx.StreamError as exc:
                self._reconnect(f"stream broke: {type(exc).__name__}", exc)
        data, self._pending = self._pending[:size], self._pending[size:]
        self.position += len(data)
        self._failures = 0  # progress: the next failure starts a fresh retry budget
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _reconnect(self, reason: str, cause: BaseException | None) -> None:
        if self._response is not None:
            self._response.close()
        self._fail(reason, cause=cause)
        self._connect()

    def close(self) -> None:
        if self._response is not None:
            self._response.close()
        super().close()


def _certificate_problem(exc: BaseException) -> bool:
    """A certificate that fails verification will fail the same way on every retry."""
    import ssl

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _total_length(response: httpx.Response, offset: int) -> int | None:
    content_range = response.headers.get("content-range")
    if content_range and "/" in content_range:
        total = content_range.rsplit("/", 1)[1]
        return int(total) if total.isdigit() else None
    length = response.headers.get("content-length")
    if length is None or not length.isdigit():
        return None
    return int(length) + (offset if response.status_code == 206 else 0)


def _changed(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    return any(a is not None and b is not None and a != b for a, b in zip(before, now, strict=True))


def read_http(url: str, options: HttpOptions | None = None) -> bytes | None:
    """A whole small object (an index, an offsets sidecar); None when the server says 404."""
    try:
        with HttpStream(url, 0, options) as stream:
            return stream.read()
    except ShardNotFoundError:
        return None
