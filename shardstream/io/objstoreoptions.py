"""How shardstream reaches object stores natively (obstore): the options record and one store per bucket.

Trade-off: credentials come only from the standard environment chain (``AWS_ACCESS_KEY_ID``/``SECRET``,
web identity, container and instance credentials), read by obstore itself; nothing here holds or shows
them, so a store cannot be handed keys in code (use the environment, as botocore's users do).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from shardstream.errors import ShardReadError
from shardstream.sizes import parse_size

CLIENT_ENV = "SHARDSTREAM_S3_CLIENT"  # "s3fs": s3:// back through fsspec/s3fs, as before obstore
INSTALL_HINT = "pip install obstore (or set SHARDSTREAM_S3_CLIENT=s3fs to read s3:// through s3fs)"
SCHEMES = ("s3",)  # gs:// and az:// come later; they stay on fsspec until then
# Where instance credentials would be asked for when $AWS_EC2_METADATA_DISABLED is set: a port that refuses
# at once, so a machine without credentials fails in milliseconds instead of waiting on 169.254.169.254.
_NO_METADATA = "http://127.0.0.1:1"
_stores: dict[tuple[Any, ...], Any] = {}
# obstore runs a tokio runtime that does not survive fork(): a process forked after its parent used obstore
# would crash in it, so such a process (a fork-started DataLoader worker) reads through fsspec instead.
_used_in: list[int] = []


@dataclass(frozen=True, kw_only=True)
class ObjectStoreOptions:
    """How s3:// objects are read natively. Credentials are never here: the environment's chain gives them.

    Fields: ``part_size`` (bytes per ranged GET of a shard read whole, default 8 MiB; text such as "16MiB"
    works), ``parts_in_flight`` (ranged GETs of one shard in flight at once, default 8),
    ``bytes_in_flight`` (the per-process budget, so per DataLoader worker, of shard bytes asked for and not
    yet handed to the tar reader, summed over every open shard, the ones read ahead included; default
    128 MiB, at least ``part_size``; text works; one ``part_size`` of it is kept for a shard whose reader
    waits with nothing in flight, so read-ahead never starves the shard being read. Memory: at most the
    budget plus the one part each open shard is handing out), ``hedge_after`` (seconds: a ranged GET whose
    answer has not begun by then is sent again, identical, and the first answer wins, the other dropped
    unread; default 0.5, None: never; each hedge is counted in ``ObjectStream.hedges``),
    ``retries`` (failed attempts of one request retried: 429, 5xx/SlowDown,
    connection errors, a short body; one more raises a ShardReadError naming the URL and byte; 0: none),
    ``backoff`` and ``max_backoff`` (seconds: the first wait, doubled each retry with jitter, and its cap),
    ``connect_timeout`` (seconds to connect), ``request_timeout`` (seconds one request may take, its body
    included: a part of ``part_size`` must arrive within it).
    The way back to s3fs: ``$SHARDSTREAM_S3_CLIENT=s3fs``. The endpoint: ``$AWS_ENDPOINT_URL_S3``, else
    ``$AWS_ENDPOINT_URL`` (an ``http://`` one, such as a local MinIO or moto, is allowed as given).
    """

    part_size: int = 8 << 20
    parts_in_flight: int = 8
    bytes_in_flight: int = 128 << 20
    hedge_after: float | None = 0.5
    retries: int = 5
    backoff: float = 0.2
    max_backoff: float = 10.0
    connect_timeout: float = 10.0
    request_timeout: float = 120.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "part_size", parse_size(self.part_size, name="part_size"))
        if self.part_size < 1:
            raise ValueError(f"part_size must be >= 1 byte, not {self.part_size}")
        if not isinstance(self.parts_in_flight, int) or self.parts_in_flight < 1:
            raise ValueError(f"parts_in_flight must be an integer >= 1, not {self.parts_in_flight!r}")
        object.__setattr__(self, "bytes_in_flight", parse_size(self.bytes_in_flight, name="bytes_in_flight"))
        if self.bytes_in_flight < self.part_size:
            raise ValueError(
                f"bytes_in_flight must hold at least one part (part_size={self.part_size}), "
                f"not {self.bytes_in_flight}"
            )
        if self.hedge_after is not None and not self.hedge_after > 0:
            raise ValueError(f"hedge_after must be > 0 seconds or None (never), not {self.hedge_after!r}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, not {self.retries}")
        for name in ("backoff", "max_backoff"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 seconds, not {getattr(self, name)}")
        for name in ("connect_timeout", "request_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 seconds, not {getattr(self, name)}")


def native(scheme: str) -> bool:
    """Whether ``scheme://`` objects are read through obstore (else through fsspec): not turned off by
    ``$SHARDSTREAM_S3_CLIENT=s3fs``, and this process not forked from one that had used obstore."""
    if scheme not in SCHEMES or os.environ.get(CLIENT_ENV, "obstore").strip().lower() == "s3fs":
        return False
    return not _used_in or _used_in[0] == os.getpid()


def metadata_native(scheme: str) -> bool:
    """Whether small objects (an index, a sidecar) of ``scheme://`` are read through obstore too.

    Not while s3fs is installed: the main process then reads them with it (one GET), so it never starts
    obstore's runtime and its fork-started DataLoader workers can read their shards natively.
    """
    if not native(scheme):
        return False
    try:
        import s3fs  # noqa: F401
    except ImportError:
        return True
    return False


def split(url: str) -> tuple[str, str]:
    """``s3://bucket/key`` as (bucket, key)."""
    parts = urlparse(url)
    return parts.netloc, parts.path.lstrip("/")


def _true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def endpoint() -> str | None:
    """The configured S3 endpoint (as botocore reads it), or None for AWS itself."""
    if _true("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        return None
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def store_for(url: str, options: ObjectStoreOptions) -> Any:
    """The obstore S3Store for ``url``'s bucket, one per process, bucket, endpoint and timeouts (a forked
    worker makes its own: a client's connections must not be shared across a fork)."""
    bucket, _ = split(url)
    where = endpoint()
    key = (os.getpid(), bucket, where, options.connect_timeout, options.request_timeout)
    store = _stores.get(key)
    if not _used_in:
        _used_in.append(os.getpid())
    if store is None:
        try:
            from obstore.store import S3Store
        except ImportError as exc:
            raise ShardReadError(f"reading s3:// natively needs obstore: {INSTALL_HINT}", url=url) from exc
        config: dict[str, Any] = {}
        if where is not None:
            config["endpoint"] = where
        if _true("AWS_EC2_METADATA_DISABLED"):
            config["metadata_endpoint"] = _NO_METADATA
        client = {
            "allow_http": bool(where and where.lower().startswith("http://")),  # the user's own endpoint
            "connect_timeout": f"{options.connect_timeout}s",
            "timeout": f"{options.request_timeout}s",
        }
        # No retries inside obstore: ours (``retries``, backoff with jitter) are the one budget, and they
        # cover a body that breaks mid-part too.
        store = S3Store(bucket, config=config, client_options=client, retry_config={"max_retries": 0})
        _stores[key] = store
    return store
