"""Openers by URL scheme, in a name-to-function registry: a shard URL in, a byte stream at an offset out.

Local files, HTTP(S) and fsspec URLs (s3://, gs://, ...) start at any byte (a seek, a Range request);
gzip-compressed shards and pipes cannot, so their callers read and skip. Remote objects go through the
local cache when one is set.
"""

from __future__ import annotations

import gzip
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, BinaryIO

from shardstream.errors import ShardNotFoundError, ShardReadError
from shardstream.sizes import parse_size

from .fsspecio import cat, open_at
from .http import HttpOptions, HttpStream, read_http, redact
from .iostats import IO, thread_clock
from .localfiles import NotRegularFile, open_regular
from .metacache import node_cache
from .metadata import over_cap, read_capped
from .objstore import ObjectStream, read_object, read_object_range
from .objstoreoptions import ObjectStoreOptions, metadata_native, native
from .urls import local_path, scheme_of

Opener = Callable[[str, int, "OpenOptions"], BinaryIO]
OPENERS: dict[str, Opener] = {}
_BUFFER = 1 << 20
_LOCAL = ("file", "pipe")


@dataclass(frozen=True, kw_only=True)
class OpenOptions:
    """How shards are reached: HTTP settings and an optional local cache for remote objects.

    Fields: ``http`` (``HttpOptions`` for http(s) URLs), ``cache_dir`` (a folder where remote shards, indexes
    and sidecars are copied whole on first read, then read from; None: no cache), ``cache_size`` (bytes the
    cache keeps, the least recently used deleted first; None: no limit; ``of`` also takes text, "20GB"),
    ``object_store`` (``ObjectStoreOptions`` for s3://, gs:// and az:// read natively: part size, parts
    in flight, retries).
    """

    http: HttpOptions = field(default_factory=HttpOptions)
    object_store: ObjectStoreOptions = field(default_factory=ObjectStoreOptions)
    cache_dir: str | None = None
    cache_size: int | None = None

    def cache(self) -> Any:
        return _cache(self.cache_dir, self.cache_size) if self.cache_dir else None

    @classmethod
    def of(
        cls,
        http: HttpOptions | None,
        cache_dir: str | os.PathLike[str] | None,
        cache_size: int | str | None,
        object_store: ObjectStoreOptions | None = None,
    ) -> OpenOptions:
        """From a dataset's keyword options: ``cache_size`` may be text ("20GB")."""
        if isinstance(cache_size, str):
            cache_size = parse_size(cache_size, name="cache_size")
        cache = os.fspath(cache_dir) if cache_dir is not None else None
        if object_store is not None and not isinstance(object_store, ObjectStoreOptions):
            raise ValueError(f"object_store must be an ObjectStoreOptions, not {object_store!r:.60}")
        return cls(
            http=http or HttpOptions(),
            cache_dir=cache,
            cache_size=cache_size,
            object_store=object_store or ObjectStoreOptions(),
        )


@lru_cache(maxsize=8)
def _cache(cache_dir: str, cache_size: int | None) -> Any:
    from .cache import ShardCache

    return ShardCache(cache_dir, cache_size)


def register_opener(scheme: str, opener: Opener) -> None:
    """Make ``scheme://...`` URLs (or ``pipe:``) open through ``opener(url, offset, options)``."""
    OPENERS[scheme] = opener


def is_compressed(url: str) -> bool:
    return url.endswith((".gz", ".tgz"))


def seekable(url: str) -> bool:
    """Whether a stream can start at any byte (so the offsets sidecar is worth reading)."""
    return scheme_of(url) != "pipe" and not is_compressed(url)


def _open_file(url: str, offset: int, options: OpenOptions) -> BinaryIO:
    path = local_path(url)
    try:
        handle = open_regular(path, buffering=0)  # unbuffered: readers fetch 1 MiB at a time
    except FileNotFoundError as exc:
        raise ShardNotFoundError("shard not found", url=url) from exc
    except OSError as exc:
        raise ShardReadError(f"cannot open shard: {exc.strerror or exc}", url=url) from exc
    if offset:
        handle.seek(offset)
    return handle


def _open_pipe(url: str, offset: int, options: OpenOptions) -> BinaryIO:
    command = url[len("pipe:") :]
    process = subprocess.Popen(shlex.split(command), stdout=subprocess.PIPE, bufsize=_BUFFER)
    if process.stdout is None:
        raise ShardReadError("pipe gave no stdout", url=url)
    _skip(process.stdout, offset, url)
    return process.stdout


def _open_http(url: str, offset: int, options: OpenOptions) -> BinaryIO:
    return HttpStream(url, offset, options.http)  # type: ignore[return-value]


def _open_fsspec(url: str, offset: int, options: OpenOptions) -> BinaryIO:
    return open_at(url, offset)  # type: ignore[return-value]


def _open_object(url: str, offset: int, options: OpenOptions) -> BinaryIO:
    if not native(scheme_of(url)):  # $SHARDSTREAM_S3_CLIENT=s3fs: the way back; or forked after obstore ran
        return _open_fsspec(url, offset, options)
    return ObjectStream(url, offset, options.object_store)  # type: ignore[return-value]


def fetches_ahead(url: str) -> bool:
    """Whether ``url``'s stream asks for its own bytes ahead once opened (an object store's parallel
    parts): a read-ahead of it then needs only to open it."""
    return _native(scheme_of(url)) and not is_compressed(url)


def _native(scheme: str) -> bool:
    """Whether URLs of ``scheme`` are read through obstore (our opener registered, not turned off)."""
    return OPENERS.get(scheme) is _open_object and native(scheme)


def _is_fsspec(scheme: str) -> bool:
    """Whether URLs of ``scheme`` go through fsspec: no opener of ours (or a caller's) is registered."""
    return scheme not in OPENERS or (OPENERS[scheme] is _open_object and not native(scheme))


def _skip(stream: BinaryIO, count: int, url: str) -> None:
    while count > 0:
        chunk = stream.read(min(count, _BUFFER))
        if not chunk:
            raise ShardReadError(f"stream ended before byte {count}", url=redact(url))  # no user:password
        count -= len(chunk)


register_opener("file", _open_file)
register_opener("pipe", _open_pipe)
register_opener("http", _open_http)
register_opener("https", _open_http)
register_opener("s3", _open_object)
register_opener("gs", _open_object)
register_opener("az", _open_object)


def _raw_open(url: str, offset: int, options: OpenOptions) -> BinaryIO:
    opener = OPENERS.get(scheme_of(url), _open_fsspec)
    return opener(url, offset, options)


def _cached(url: str, options: OpenOptions, sha256: str | None) -> BinaryIO:
    """A handle on the cached copy (fetched on a miss); a handle, so a concurrent eviction cannot race it."""

    def fetch(handle: BinaryIO) -> None:
        with _raw_open(url, 0, options) as stream:
            shutil.copyfileobj(stream, handle, _BUFFER)

    return options.cache().open(url, fetch, sha256=sha256)


def open_stream(
    url: str, offset: int = 0, options: OpenOptions | None = None, *, sha256: str | None = None
) -> BinaryIO:
    """A stream of the (decompressed) shard starting at byte ``offset``."""
    options = options or OpenOptions()
    cached = options.cache_dir is not None and scheme_of(url) not in _LOCAL
    if not is_compressed(url):
        if not cached:
            return _raw_open(url, offset, options)
        handle = _cached(url, options, sha256)
        handle.seek(offset)
        return handle
    inner = _cached(url, options, sha256) if cached else _raw_open(url, 0, options)
    stream = gzip.GzipFile(fileobj=inner, mode="rb")
    _skip(stream, offset, url)  # type: ignore[arg-type]
    return stream  # type: ignore[return-value]


def read_small(url: str, options: OpenOptions | None = None, *, version: str | None = None) -> bytes | None:
    """The whole of a small file (an index, an offsets sidecar), or None when it does not exist.

    ``version``: the hash of the index that names the file (``ShardList.metadata_version``); with it, a
    remote file is read through the node's metadata cache (``HttpOptions.metadata_cache``): once per node.
    """
    options = options or OpenOptions()
    scheme = scheme_of(url)
    if scheme == "file":
        try:
            with open_regular(local_path(url)) as handle:  # a FIFO or /dev/zero would never end
                return handle.read()
        except FileNotFoundError:
            return None
        except NotRegularFile as exc:
            raise ShardReadError(exc.strerror, url=url) from exc
    # Remote metadata is capped (HttpOptions.max_metadata_size): an endless answer must not take the memory.
    cap = options.http.max_metadata_size
    cache = options.cache()
    if cache is not None and scheme != "pipe":
        # Absence is remembered too: a second epoch over a cached dataset makes no request at all.
        if cache.absent(url):
            return None

        def fetch(handle: BinaryIO) -> None:  # the uncached read, so the cap holds on the way in too
            data = read_small(url, replace(options, cache_dir=None))
            if data is None:
                raise ShardNotFoundError("not found", url=redact(url))
            handle.write(data)

        try:
            with cache.open(url, fetch, sha256=None) as handle:
                return read_capped(handle, cap, url=redact(url))
        except ShardNotFoundError:
            cache.remember_absent(url)
            return None
    node = node_cache(options.http.metadata_cache) if version is not None and scheme != "pipe" else None
    if node is not None:
        return node.read(url, version, lambda: read_small(url, options), cap)  # type: ignore[arg-type]
    if scheme in ("http", "https"):
        return read_http(url, options.http)
    try:
        if _native(scheme) and metadata_native(scheme):
            return read_object(url, options.object_store, cap)  # one GET
        if _is_fsspec(scheme) or _native(scheme):  # s3fs there: a main process kept free of obstore
            data = cat(url, 0, cap + 1)  # one GET: no HEAD first, no read-ahead, one byte past the cap
            if len(data) > cap:
                raise over_cap(redact(url), cap, "more than that")
            return data
        with _raw_open(url, 0, options) as stream:
            return read_capped(stream, cap, url=redact(url))
    except ShardNotFoundError:
        return None


def read_range(
    url: str, start: int, end: int, options: OpenOptions | None = None, *, sha256: str | None = None
) -> bytes:
    """Bytes [start, end) of an object: one pread locally, one bounded Range request over HTTP or fsspec;
    with a cache, from the cached copy (``sha256``: what a fresh fetch must hash to, as ``open_stream``)."""
    clock, started = thread_clock(), time.perf_counter()
    options = options or OpenOptions()
    scheme = scheme_of(url)
    if scheme == "file":
        try:
            with open_regular(local_path(url), buffering=0) as handle:
                # Never more than the file holds: offsets from a stale or hostile sidecar can say anything.
                have = max(0, min(end, os.fstat(handle.fileno()).st_size) - start)
                data = os.pread(handle.fileno(), have, start) if have else b""
        except FileNotFoundError as exc:
            raise ShardNotFoundError("not found", url=url) from exc
        except OSError as exc:
            raise ShardReadError(f"cannot read: {exc.strerror or exc}", url=url, offset=start) from exc
    elif scheme in ("http", "https") and options.cache_dir is None:
        with HttpStream(url, start, options.http, end=end) as stream:
            data = _read_exactly(stream, end - start)
    elif _native(scheme) and options.cache_dir is None and not is_compressed(url):
        data = read_object_range(url, start, end, options.object_store)  # one ranged GET
    elif _is_fsspec(scheme) and options.cache_dir is None and not is_compressed(url):
        data = cat(url, start, end)  # a stream would read ahead a block (s3fs: 50 MiB) past one sample
    else:
        with open_stream(url, start, options, sha256=sha256) as stream:
            data = _read_exactly(stream, end - start)
    if len(data) != end - start:
        raise ShardReadError(
            f"ends after {len(data)} of the {end - start} bytes asked for", url=redact(url), offset=start
        )
    IO.bytes += len(data)
    clock.add_io(time.perf_counter() - started)
    return data


def _read_exactly(stream: BinaryIO, count: int) -> bytes:
    parts = []
    while count > 0 and (chunk := stream.read(min(count, _BUFFER))):
        parts.append(chunk)
        count -= len(chunk)
    return b"".join(parts)
