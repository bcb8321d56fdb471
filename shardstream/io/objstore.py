"""The object-store opener: s3:// shards read natively through obstore, as parallel ranged GETs in order.

Throughput from object storage comes from requests in flight, not from one stream: a shard read whole is
fetched as ``part_size`` ranges, up to ``parts_in_flight`` of them at once (threads calling obstore, which
releases the GIL), and handed to the tar reader strictly in byte order. Trade-off: memory, bounded per
process by ``bytes_in_flight`` across every open shard (``flight.py``: the shards the streamer's
read-ahead opens ask for their first parts while the current one is read, within the same budget). A
part whose answer is late is hedged (``hedge.py``), and every answer must be the span asked for (else an
error, never retried: a server that rewrites Range will do it again). The object's ETag is pinned by a
HEAD at open and every part must carry it (sent as If-Match and checked on the answer): an object replaced
mid-read is an error, never spliced bytes. gs:// and az:// are not native yet (obstore has both stores);
they, and every other scheme, stay on fsspec, and ``$SHARDSTREAM_S3_CLIENT=s3fs`` sends s3:// back there
too. The packer's writes stay on fsspec.
"""

from __future__ import annotations

import io
import os
import random
import re
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from shardstream.errors import ShardNotFoundError, ShardReadError, redact_url

from .flight import budget_for
from .hedge import first_answer
from .metadata import over_cap
from .objstoreoptions import ObjectStoreOptions, split, store_for

_STATUS = re.compile(r"status code: (\d{3})")
# obstore's own checks of a ranged answer (object_store's GetResultError): another span, or no span at all
_WRONG_SPAN = re.compile(
    r"Requested \d+\.\.\d+, got \d+\.\.\d+|non-partial response when range requested|"
    r"Content-Range header not present"
)
_DENIED = (
    "access denied (HTTP 401/403): check the credentials in the environment (AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY; for AWS_PROFILE set SHARDSTREAM_S3_CLIENT=s3fs), the bucket's policy and "
    "the region (AWS_DEFAULT_REGION)"
)


class _Retry(Exception):
    """A failure worth another attempt (5xx, 429/SlowDown, a broken connection, a short body)."""


def _reason(exc: BaseException) -> str:
    """The backend's first line, without URLs' secrets and without any credential of the environment."""
    text = str(exc).strip()
    first = redact_url(text.splitlines()[0]) if text else type(exc).__name__
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID"):
        secret = os.environ.get(name)
        if secret:
            first = first.replace(secret, "***")
    return first


def _classified(exc: Exception, shown: str, offset: int | None) -> Exception:
    """obstore's error as ours: a ShardReadError that says the fix, or ``_Retry`` for a passing failure."""
    from obstore import exceptions as obstore_errors

    if isinstance(exc, FileNotFoundError):
        return ShardNotFoundError("not found (no such object, or no such bucket)", url=shown)
    if isinstance(exc, obstore_errors.PreconditionError):
        return _changed(shown, offset)
    if isinstance(exc, (obstore_errors.PermissionDeniedError, obstore_errors.UnauthenticatedError)):
        return ShardReadError(_DENIED, url=shown)
    if (found := _WRONG_SPAN.search(str(exc))) is not None:
        return _wrong_span(shown, offset, found.group(0))
    found = _STATUS.search(str(exc))
    status = int(found.group(1)) if found else None
    if status in (401, 403):
        return ShardReadError(_DENIED, url=shown)
    if status == 416:
        return ShardReadError("offset is past the end of the object", url=shown, offset=offset)
    if status is not None and 400 <= status < 500 and status not in (408, 429):
        return ShardReadError(f"refused: {_reason(exc)}", url=shown, offset=offset)
    return _Retry(_reason(exc))


def _changed(shown: str, offset: int | None) -> ShardReadError:
    return ShardReadError(
        "the object changed while it was read (its ETag differs from the one at open); its shard cannot "
        "be read on without mixing two versions: read it again",
        url=shown,
        offset=offset,
    )


def _wrong_span(shown: str, offset: int | None, what: str) -> ShardReadError:
    return ShardReadError(
        f"the store answered another span than the range asked for ({what}); its bytes are not used and "
        "not asked for again: check the endpoint (a proxy or server that ignores or rewrites Range)",
        url=shown,
        offset=offset,
    )


def _attempts(shown: str, offset: int, options: ObjectStoreOptions, call: Any) -> Any:
    """``call()``, retried on passing failures with backoff and jitter; then a ShardReadError."""
    failures = 0
    while True:
        try:
            return call()
        except ShardReadError:
            raise
        except Exception as exc:
            failure = exc if isinstance(exc, _Retry) else _classified(exc, shown, offset)
            if not isinstance(failure, _Retry):
                raise failure from exc
            failures += 1
            if failures > options.retries:
                message = f"{failure}; gave up after {options.retries} retries"
                raise ShardReadError(message, url=shown, offset=offset) from exc
            wait = min(options.max_backoff, options.backoff * 2 ** (failures - 1))
            time.sleep(wait * random.uniform(0.5, 1.5))


def _get(
    store: Any, key: str, span: tuple[int, int], etag: str | None, shown: str, hedging: tuple[Any, Any]
) -> Any:
    """Bytes ``span`` = [start, end) in one GET, hedged per ``hedging`` = (``hedge_after``, a callable
    counting a hedge); with ``etag``, only of that version of the object."""
    import obstore

    start, end = span
    options: dict[str, Any] = {"range": (start, end)}
    if etag is not None:
        options["if_match"] = etag  # the server refuses another version (412)...
    result = first_answer(lambda: obstore.get(store, key, options=options), *hedging)
    if etag is not None and result.meta.get("e_tag") != etag:  # ...and one that ignores If-Match is caught
        raise _changed(shown, start)
    got, size = tuple(result.range), result.meta["size"]
    if got != (start, min(end, size)):  # obstore checks Content-Range first; this holds should it stop
        raise _wrong_span(shown, start, f"bytes {got[0]}..{got[1]} for {start}..{min(end, size)}")
    try:
        data = result.bytes()
    except Exception as exc:  # the body broke mid-part: the whole part again
        raise _Retry(f"connection broke: {_reason(exc)}") from exc
    if len(data) != min(end, result.meta["size"]) - start:
        raise _Retry(f"short body: {len(data)} of {end - start} bytes")
    return data


def head(url: str, options: ObjectStoreOptions) -> dict[str, Any]:
    """The object's metadata (``size``, ``e_tag``); a key naming a folder is refused without a request."""
    import obstore

    shown = redact_url(url)
    key = split(url)[1]
    if not key or key.endswith("/"):
        raise ShardNotFoundError("is a folder, not an object (an index or shard URL was meant?)", url=shown)
    store = store_for(url, options)
    return _attempts(shown, 0, options, lambda: obstore.head(store, key))


def read_object_range(url: str, start: int, end: int, options: ObjectStoreOptions) -> bytes:
    """Bytes [start, end) of the object in one ranged GET (fewer where the object ends first)."""
    if end <= start:
        return b""
    shown = redact_url(url)
    store, key = store_for(url, options), split(url)[1]
    hedging = (options.hedge_after, None)
    return bytes(
        _attempts(shown, start, options, lambda: _get(store, key, (start, end), None, shown, hedging))
    )


def read_object(url: str, options: ObjectStoreOptions, cap: int) -> bytes:
    """A whole small object (an index, a sidecar) in one GET, at most ``cap`` bytes; ShardNotFoundError
    when it is not there."""
    import obstore

    shown = redact_url(url)
    key = split(url)[1]
    if not key or key.endswith("/"):
        raise ShardNotFoundError("is a folder, not an object", url=shown)
    store = store_for(url, options)

    def fetch() -> bytes:
        result = obstore.get(store, key)
        size = result.meta["size"]
        if size > cap:  # refused before its body is read
            raise over_cap(shown, cap, f"{size} bytes ({size / (1 << 20):g} MiB)")
        try:
            data = bytes(result.bytes())
        except Exception as exc:
            raise _Retry(f"connection broke: {_reason(exc)}") from exc
        if len(data) != size:
            raise _Retry(f"short body: {len(data)} of {size} bytes")
        return data

    return _attempts(shown, 0, options, fetch)


class ObjectStream(io.RawIOBase):
    """One object's bytes from ``offset`` on, fetched as parallel ranged GETs and read in byte order.

    Parts are asked for within this process's ``bytes_in_flight`` budget, shared with every other open
    stream: ahead of need only where it leaves room (at open, and after each part handed out), and, when
    the reader has nothing in flight, by waiting for room. ``hedges``: the GETs sent again because their
    answer was late (``hedge_after``).
    """

    def __init__(self, url: str, offset: int = 0, options: ObjectStoreOptions | None = None) -> None:
        super().__init__()
        self.options = options or ObjectStoreOptions()
        self.shown = redact_url(url)
        meta = head(url, self.options)
        self.size: int = meta["size"]
        self.etag: str | None = meta.get("e_tag")
        if offset > self.size:
            raise ShardReadError(
                f"offset is past the end of the object ({self.size} bytes)", url=self.shown, offset=offset
            )
        self._store, self._key = store_for(url, self.options), split(url)[1]
        self.position = offset
        self.hedges = 0
        self._counting = threading.Lock()
        self._budget = budget_for(self.options.bytes_in_flight, self.options.part_size)
        self._requested = offset  # the first byte no part has asked for yet
        self._pending: deque[tuple[Future[Any], int]] = deque()  # parts in flight and their sizes, in order
        self._current = memoryview(b"")
        self._pool = ThreadPoolExecutor(self.options.parts_in_flight, thread_name_prefix="shardstream-s3")
        self._fill()

    def _fill(self) -> None:
        """Ask for parts ahead of need until ``parts_in_flight`` are out, the object is all asked for, or
        the budget has no room to spare."""
        while len(self._pending) < self.options.parts_in_flight and self._requested < self.size:
            if not self._budget.take(self._next_size()):
                return
            self._ask()

    def _next_size(self) -> int:
        return min(self.size, self._requested + self.options.part_size) - self._requested

    def _ask(self) -> None:
        """The next part, its room in the budget already taken."""
        start = self._requested
        end = start + self._next_size()
        self._pending.append((self._pool.submit(self._part, start, end), end - start))
        self._requested = end

    def _part(self, start: int, end: int) -> Any:
        store, key, etag, shown = self._store, self._key, self.etag, self.shown
        hedging = (self.options.hedge_after, self._count_hedge)
        return _attempts(
            shown, start, self.options, lambda: _get(store, key, (start, end), etag, shown, hedging)
        )

    def _count_hedge(self) -> None:
        with self._counting:  # parts in several threads may count at once
            self.hedges += 1

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._current:
            if not self._pending:
                if self._requested >= self.size:
                    return 0
                self._budget.wait_for(self._next_size())  # nothing in flight: this reader's turn
                self._ask()
            future, nbytes = self._pending.popleft()  # the next in byte order
            try:
                self._current = memoryview(future.result()).cast("B")
            finally:
                self._budget.give(nbytes)  # handed out (or failed): its room is the next part's
            self._fill()
        view = memoryview(buffer).cast("B")
        count = min(view.nbytes, self._current.nbytes)
        view[:count] = self._current[:count]
        self._current = self._current[count:]
        self.position += count
        return count

    def length(self) -> int:
        """The object's length, from its HEAD at open."""
        return self.size

    def close(self) -> None:
        if not self.closed:
            for future, nbytes in self._pending:
                future.cancel()  # a part already running finishes in its thread and is dropped:
                future.add_done_callback(lambda _, n=nbytes: self._budget.give(n))  # its room back then
            self._pending.clear()
            self._current = memoryview(b"")
            self._pool.shutdown(wait=False)  # a part in flight finishes in its thread and is dropped
        super().close()
