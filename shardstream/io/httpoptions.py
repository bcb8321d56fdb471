"""How shardstream talks to HTTP(S) servers: timeouts, retry budget, headers and the origins that get
them, caps on metadata downloads, TLS; one pool per process.

Headers (tokens) never appear in errors or logs: ``redact`` is how URLs are shown, without user:password.
Trade-off: headers are bound to origins, so a dataset whose shards live on a second host needs that host
named in ``origins`` before it gets the token.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote

import urllib3

from shardstream.errors import redact_url
from shardstream.sizes import parse_size

HEADERS_ENV = "SHARDSTREAM_HTTP_HEADERS"
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Sent to every origin: they say how to send bytes, not who asks.
_UNBOUND = {"Accept-Encoding": "identity"}
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


def origin(url: str) -> str | None:
    """``scheme://host:port`` of an http(s) URL (lower case, the port spelled out); None for any other URL,
    and for a host holding a brace pattern (``{a,b}.example.com``: no one origin)."""
    if not url.lower().startswith(("http://", "https://")):
        return None
    try:
        parts = urllib3.util.parse_url(url)
    except urllib3.exceptions.LocationParseError:
        return None
    if not parts.host or "{" in parts.host or parts.scheme not in _DEFAULT_PORTS:
        return None
    return f"{parts.scheme}://{parts.host.lower()}:{parts.port or _DEFAULT_PORTS[parts.scheme]}"


@dataclass(frozen=True, kw_only=True)
class HttpOptions:
    """How to talk to HTTP(S) servers. Headers (tokens) never appear in errors or logs.

    Fields: ``connect_timeout`` and ``read_timeout`` (seconds to connect, and to wait for the next bytes),
    ``retries`` (failures in a row, with no byte read between, that are retried: connection errors, broken
    bodies, HTTP 429 and 5xx; one more raises; 0: none), ``backoff`` and ``max_backoff`` (seconds: the
    first wait, doubled each retry, with jitter, and its cap, which also caps a server's Retry-After),
    ``headers`` (e.g. a token; ``$SHARDSTREAM_HTTP_HEADERS``, a JSON object, adds to and overrides them),
    ``origins`` (the ``scheme://host[:port]`` origins that get ``headers``, compared by scheme, host and
    port; None: a dataset binds them to its source's own origins, the index URL or the URLs its patterns
    name, so a host a remote index's rows name gets no header unless listed here; a source on local disk
    binds none, its rows being the user's own; used on its own (``HttpStream``), the URL asked for; a
    redirect to another origin always drops them; a host holding braces has no origin, so list it),
    ``ca_bundle`` (a PEM file of trusted CAs; None: the defaults), ``verify`` (False: no certificate is
    checked), ``max_redirects`` (redirects followed per request), ``max_metadata_size`` (bytes an index,
    offsets sidecar or key file download may hold, after gzip decoding, default 256 MiB; text such as
    "1GiB" works; more is an error naming it), ``metadata_deadline`` (seconds such a download may take
    in all, retries included, default 300; a server that sends nothing is cut sooner by ``read_timeout``),
    ``metadata_cache`` (where a remote dataset's sidecars, key file and cost columns are kept on this node,
    so its DataLoader workers and ranks fetch each once, not each for itself; keyed by URL and the hash of
    the dataset's index, which each rank's main process reads, so a re-indexed dataset is fetched again;
    True, the default: ``$SHARDSTREAM_CACHE/metadata``, else ``~/.cache/shardstream/metadata``, else a
    folder of this user's in the temp dir; a path: that folder; False: none, every process fetches its own).
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
    origins: tuple[str, ...] | None = None
    max_metadata_size: int = 256 << 20  # a 10M-shard index is ~1 GB: raise it for such a dataset
    metadata_deadline: float = 300.0
    metadata_cache: str | bool = True  # a folder (str or PathLike), True: the default one, False: none

    def __post_init__(self) -> None:
        if not isinstance(self.metadata_cache, (bool, str, os.PathLike)):
            raise ValueError(f"metadata_cache must be True, False or a folder, not {self.metadata_cache!r}")
        if isinstance(self.metadata_cache, os.PathLike):
            object.__setattr__(self, "metadata_cache", os.fspath(self.metadata_cache))
        for name in ("connect_timeout", "read_timeout", "backoff", "max_backoff"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, not {getattr(self, name)}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, not {self.retries}")
        if not self.metadata_deadline > 0:
            raise ValueError(f"metadata_deadline must be > 0 seconds, not {self.metadata_deadline}")
        cap = parse_size(self.max_metadata_size, name="max_metadata_size")
        object.__setattr__(self, "max_metadata_size", cap)
        if self.origins is not None:
            object.__setattr__(self, "origins", _checked_origins(self.origins))

    def bound_to(self, sources: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> HttpOptions:
        """These options for a dataset over ``sources`` (its index, or the patterns it names): headers go to
        the sources' own origins only, unless ``origins`` was given (then it stands). Sources on local disk
        only (an index the user keeps, naming remote shards) bind nothing: the user's own file is trusted."""
        if self.origins is not None:
            return self
        items = [sources] if isinstance(sources, (str, os.PathLike)) else sources
        named = items if isinstance(items, Iterable) else ()  # not a source: its dataset says so
        urls = [os.fspath(i) for i in named if isinstance(i, (str, os.PathLike))]
        remote = [url for url in urls if url.lower().startswith(("http://", "https://"))]
        if not remote:
            return self
        found = (origin(url) for url in remote)
        return replace(self, origins=tuple(dict.fromkeys(o for o in found if o is not None)))

    def headers_for(self, url: str) -> dict[str, str]:
        """What a request to ``url`` carries: the configured headers (options, then the environment) when
        its origin is one of ``origins`` (None: any URL asked for directly), else none of them."""
        if self.origins is not None and origin(url) not in self.origins:
            return dict(_UNBOUND)
        return self.request_headers()

    def request_headers(self) -> dict[str, str]:
        """Headers from the options, then from $SHARDSTREAM_HTTP_HEADERS (a JSON object), for any origin:
        requests take theirs from ``headers_for``."""
        headers = dict(_UNBOUND)
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

    def redirects_only(self, sent: Iterable[str] = ()) -> urllib3.Retry:
        """urllib3 follows redirects; every other retry is ours, with our backoff and our limits. A redirect
        to another origin drops every header in ``sent`` but those in ``_UNBOUND``, not only urllib3's
        Authorization and Cookie."""
        strip = {name.lower() for name in sent} - {name.lower() for name in _UNBOUND}
        return urllib3.Retry(
            total=None,
            connect=0,
            read=0,
            status=0,
            other=0,
            redirect=self.max_redirects,
            raise_on_redirect=True,
            raise_on_status=False,
            remove_headers_on_redirect=strip | set(urllib3.Retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT),
        )


def bind(
    http: HttpOptions | None, sources: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
) -> HttpOptions:
    """A dataset's HTTP options (None: the defaults), its headers bound to the origins of ``sources``."""
    return (http or HttpOptions()).bound_to(sources)


def _checked_origins(origins: Iterable[str]) -> tuple[str, ...]:
    if isinstance(origins, str):
        raise ValueError(
            f"origins must be a tuple of origins like ('https://host',), not the text {origins!r}"
        )
    checked = []
    for given in origins:
        found = origin(given) if isinstance(given, str) else None
        if found is None or urllib3.util.parse_url(given).path not in (None, "", "/"):
            raise ValueError(
                f"origins: {given!r} is not an origin; write scheme://host[:port], e.g. https://host"
            )
        checked.append(found)
    return tuple(checked)
