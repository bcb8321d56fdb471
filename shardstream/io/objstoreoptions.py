"""How shardstream reaches object stores natively (obstore): the options record and one store per bucket.

S3 (``s3://BUCKET/KEY``), Google Cloud Storage (``gs://BUCKET/KEY``) and Azure Blob Storage
(``az://CONTAINER/KEY``, the account from ``$AZURE_STORAGE_ACCOUNT_NAME``), each store made by its
builder in ``BUILDERS``. Trade-off: credentials come only from each store's standard environment chain,
read by obstore itself (AWS: ``AWS_ACCESS_KEY_ID``/``SECRET``, web identity, container and instance
credentials; GCS: ``GOOGLE_APPLICATION_CREDENTIALS``/``GOOGLE_SERVICE_ACCOUNT``, the machine's account;
Azure: ``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_KEY``, a client secret, managed identity);
nothing here holds or shows them, so a store cannot be handed keys in code. Endpoints, for a local
server or another cloud: ``$AWS_ENDPOINT_URL_S3``, ``$GOOGLE_BASE_URL``, ``$AZURE_STORAGE_ENDPOINT``
(an ``http://`` one is allowed as given).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from shardstream.errors import ShardReadError
from shardstream.sizes import parse_size

CLIENT_ENV = "SHARDSTREAM_S3_CLIENT"  # "s3fs": s3:// back through fsspec/s3fs, as before obstore
# Each scheme's way back to fsspec: $SHARDSTREAM_<SCHEME>_CLIENT set to its fsspec backend (or "fsspec").
FSSPEC_BACKENDS = {"s3": "s3fs", "gs": "gcsfs", "az": "adlfs"}
SCHEMES = tuple(FSSPEC_BACKENDS)
INSTALL_HINT = "pip install obstore (or set SHARDSTREAM_S3_CLIENT=s3fs to read s3:// through s3fs)"
# Where instance credentials would be asked for when $AWS_EC2_METADATA_DISABLED is set: a port that refuses
# at once, so a machine without credentials fails in milliseconds instead of waiting on 169.254.169.254.
_NO_METADATA = "http://127.0.0.1:1"
_stores: dict[tuple[Any, ...], Any] = {}
# obstore runs a tokio runtime that does not survive fork(): a process forked after its parent used obstore
# would crash in it, so such a process (a fork-started DataLoader worker) reads through fsspec instead.
_used_in: list[int] = []


@dataclass(frozen=True, kw_only=True)
class ObjectStoreOptions:
    """How s3://, gs:// and az:// objects are read natively. Credentials are never here: each store's
    environment chain gives them.

    Fields: ``part_size`` (bytes per ranged GET of a shard read whole, default 8 MiB, reached by doubling
    from a first part of 1 MiB; text such as "16MiB" works), ``parts_in_flight`` (ranged GETs of one
    shard in flight at once once its reader has it, two before; default 8: with 30 ms to each answer's
    first byte and 100 MB/s a connection, 16 gave 577-584 MB/s in one process where 8 gave 416, but two
    DataLoader workers at 16 each gave 329-379 MB/s where 8 gave 414-427: raise it for few readers),
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
    The way back to fsspec: ``$SHARDSTREAM_S3_CLIENT=s3fs`` (``_GS_CLIENT=gcsfs``, ``_AZ_CLIENT=adlfs``).
    The S3 endpoint: ``$AWS_ENDPOINT_URL_S3``, else
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


def client_env(scheme: str) -> str:
    """The variable that sends ``scheme://`` back to fsspec: ``$SHARDSTREAM_S3_CLIENT=s3fs`` and alike."""
    return f"SHARDSTREAM_{scheme.upper()}_CLIENT"


def forked() -> bool:
    """Whether this process was forked from one that had used obstore (whose runtime does not survive)."""
    return bool(_used_in) and _used_in[0] != os.getpid()


def native(scheme: str) -> bool:
    """Whether ``scheme://`` objects are read through obstore (else through fsspec): not turned off by
    ``$SHARDSTREAM_<SCHEME>_CLIENT`` (``s3fs``, ``gcsfs``, ``adlfs`` or ``fsspec``), and this process not
    forked from one that had used obstore; obstore installed (else fsspec, as before it)."""
    if scheme not in SCHEMES or not _has_obstore():
        return False
    if os.environ.get(client_env(scheme), "obstore").strip().lower() in ("fsspec", FSSPEC_BACKENDS[scheme]):
        return False
    return not forked()


@functools.cache
def _has_obstore() -> bool:
    """Whether obstore is installed (without importing it: its runtime starts only when used)."""
    return importlib.util.find_spec("obstore") is not None


def fork_hint(scheme: str) -> str | None:
    """What to do when a process forked after obstore ran cannot fall back to fsspec (None: not that)."""
    if scheme not in SCHEMES or not forked():
        return None
    return (
        f"this process was forked after its parent read {scheme}:// through obstore, whose runtime does "
        "not survive fork(), and fsspec's backend is not installed either: start the DataLoader's "
        f"workers with multiprocessing_context='forkserver' (or 'spawn'), or pip install "
        f"{FSSPEC_BACKENDS[scheme]}"
    )


def has_fsspec_backend(scheme: str) -> bool:
    """Whether fsspec's backend for ``scheme`` (s3fs, gcsfs, adlfs) is installed."""
    return importlib.util.find_spec(FSSPEC_BACKENDS[scheme]) is not None


def metadata_native(scheme: str) -> bool:
    """Whether small objects (an index, a sidecar) of ``scheme://`` are read through obstore too.

    Not while the scheme's fsspec backend (s3fs, gcsfs, adlfs) is installed: the main process then reads
    them with it (one GET), so it never starts obstore's runtime and its fork-started DataLoader workers
    can read their shards natively.
    """
    return native(scheme) and not has_fsspec_backend(scheme)


def split(url: str) -> tuple[str, str]:
    """``s3://bucket/key`` (``gs://``, ``az://container/key``) as (bucket, key)."""
    parts = urlparse(url)
    return parts.netloc, parts.path.lstrip("/")


def _true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def endpoint(scheme: str = "s3") -> str | None:
    """The configured endpoint of ``scheme``'s store (as its own tools read it), or None for the cloud's."""
    if scheme == "gs":
        return os.environ.get("GOOGLE_BASE_URL") or None
    if scheme == "az":
        if _true("AZURE_STORAGE_USE_EMULATOR"):
            return "http://127.0.0.1:10000"  # Azurite's, which obstore takes on its own
        return os.environ.get("AZURE_STORAGE_ENDPOINT") or os.environ.get("AZURE_ENDPOINT") or None
    if _true("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        return None
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def _s3_store(bucket: str, where: str | None, client: dict[str, Any]) -> Any:
    from obstore.store import S3Store

    config: dict[str, Any] = {}
    if where is not None:
        config["endpoint"] = where
    if _true("AWS_EC2_METADATA_DISABLED"):
        config["metadata_endpoint"] = _NO_METADATA
    return S3Store(bucket, config=config, client_options=client, retry_config={"max_retries": 0})


def _gcs_store(bucket: str, where: str | None, client: dict[str, Any]) -> Any:
    from obstore.store import GCSStore

    # The endpoint and credentials come from the environment, which GCSStore reads itself.
    return GCSStore(bucket, client_options=client, retry_config={"max_retries": 0})


def _azure_store(container: str, where: str | None, client: dict[str, Any]) -> Any:
    from obstore.store import AzureStore

    return AzureStore(container, client_options=client, retry_config={"max_retries": 0})


# One builder per scheme: (bucket or container, endpoint or None, client options) -> an obstore store. No
# retries inside obstore: ours (``retries``, backoff with jitter) are the one budget, and they cover a body
# that breaks mid-part too.
BUILDERS = {"s3": _s3_store, "gs": _gcs_store, "az": _azure_store}


def store_for(url: str, options: ObjectStoreOptions) -> Any:
    """The obstore store for ``url``'s bucket, one per process, scheme, bucket, endpoint and timeouts (a
    forked worker makes its own: a client's connections must not be shared across a fork)."""
    scheme = urlparse(url).scheme
    bucket, _ = split(url)
    where = endpoint(scheme)
    key = (os.getpid(), scheme, bucket, where, options.connect_timeout, options.request_timeout)
    store = _stores.get(key)
    if not _used_in:
        _used_in.append(os.getpid())
    if store is None:
        try:
            import obstore  # noqa: F401
        except ImportError as exc:
            raise ShardReadError(
                f"reading {scheme}:// natively needs obstore: {INSTALL_HINT}", url=url
            ) from exc
        client = {
            "allow_http": bool(where and where.lower().startswith("http://")),  # the user's own endpoint
            "connect_timeout": f"{options.connect_timeout}s",
            "timeout": f"{options.request_timeout}s",
        }
        store = _stores[key] = BUILDERS[scheme](bucket, where, client)
    return store
