"""How shardstream talks to HTTP(S) servers: timeouts, retry budget, headers, TLS; one pool per process.

Headers (tokens) never appear in errors or logs: ``redact`` is how URLs are shown, without user:password.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import urllib3

from shardstream.errors import redact_url

HEADERS_ENV = "SHARDSTREAM_HTTP_HEADERS"
_pools: dict[tuple[Any, ...], urllib3.PoolManager] = {}


def redact(url: str) -> str:
    """The URL as errors show it: without user:password (the core's one rule, ``redact_url``)."""
    return redact_url(url)


def url_credentials(url: str) -> tuple[str, dict[str, str]]:
    """The URL to request, without user:password, and the Basic Authorization header they stand for.

    urllib3 sends nothing for a URL's userinfo; browsers and curl send it as Basic auth, and so do we.
    """
    parts = urllib3.util.parse_url(url)
    if parts.auth is None:
        return url, {}
    user, _, password = parts.auth.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return parts._replace(auth=None).url, {"Authorization": f"Basic {token}"}


@dataclass(frozen=True, kw_only=True)
class HttpOptions:
    """How to talk to HTTP(S) servers. Headers (tokens) never appear in errors or logs.

    Fields: ``connect_timeout`` and ``read_timeout`` (seconds to connect, and to wait for the next bytes),
    ``retries`` (failures in a row, with no byte read between, that are retried: connection errors, broken
    bodies, HTTP 429 and 5xx; one more raises; 0: none), ``backoff`` and ``max_backoff`` (seconds: the
    first wait, doubled each retry, with jitter, and its cap, which also caps a server's Retry-After),
    ``headers`` (sent with every request, e.g. a token; ``$SHARDSTREAM_HTTP_HEADERS``, a JSON object, adds
    to and overrides them), ``ca_bundle`` (a PEM file of trusted CAs; None: the defaults), ``verify``
    (False: no certificate is checked), ``max_redirects`` (redirects followed per request).
    """

    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    retries: int = 5  # consecutive failed attempts without progress before giving up
    backoff: float = 0.5  # first wait; doubles each attempt, with jitter, capped at max_backoff
    max_backoff: float = 15.0
    # Not in repr: options printed or logged (an OpenOptions, a config dump) must not show tokens.
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    ca_bundle: str | None = None  # a PEM file of trusted CAs (e.g. a self-signed server's)
    verify: bool = True
    max_redirects: int = 10

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

    def pool(self) -> urllib3.PoolManager:
        # One pool per process and settings; a forked worker must not reuse its parent's sockets.
        key = (os.getpid(), self.connect_timeout, self.read_timeout, self.ca_bundle, self.verify)
        pool = _pools.get(key)
        if pool is None:
            tls: dict[str, Any] = {"cert_reqs": "CERT_REQUIRED" if self.verify else "CERT_NONE"}
            if self.ca_bundle:
                tls["ca_certs"] = self.ca_bundle
            timeout = urllib3.Timeout(connect=self.connect_timeout, read=self.read_timeout)
            pool = urllib3.PoolManager(timeout=timeout, **tls)
            _pools[key] = pool
        return pool

    def redirects_only(self) -> urllib3.Retry:
        """urllib3 follows redirects; every other retry is ours, with our backoff and our limits."""
        return urllib3.Retry(
            total=None,
            connect=0,
            read=0,
            status=0,
            other=0,
            redirect=self.max_redirects,
            raise_on_redirect=True,
            raise_on_status=False,
        )
