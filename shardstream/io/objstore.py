"""The object-store opener: s3://, gs:// and az:// shards read natively through obstore, as parallel
ranged GETs handed out in byte order.

Throughput from object storage comes from requests in flight, not from one stream: a shard read whole is
fetched as ``part_size`` ranges, up to ``parts_in_flight`` of them at once (threads calling obstore, which
releases the GIL), and handed to the tar reader strictly in byte order. Trade-off: memory, bounded per
process by ``bytes_in_flight`` across every open shard (``flight.py``: the shards the streamer's
read-ahead opens ask for their first parts while the current one is read, within the same budget). A
part whose answer is late is hedged (``hedge.py``), and every answer must be the span asked for (else an
error, never retried: a server that rewrites Range will do it again). A stream opens with its first
part's GET (``FIRST_PART``, smaller than the rest), whose answer pins the object's size and ETag; every
later part must carry that ETag (sent as If-Match and checked on the answer): an object replaced
mid-read is an error, never spliced bytes. Failures are classified and retried in ``objfailures.py``.
Every other scheme stays on fsspec, and ``$SHARDSTREAM_<SCHEME>_CLIENT`` (``s3fs``, ``gcsfs``,
``adlfs``) sends one of these back there too.
"""

from __future__ import annotations

import io
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from shardstream.errors import ShardNotFoundError, ShardReadError, redact_url

from .flight import budget_for
from .hedge import first_answer
from .iostats import IO
from .metadata import over_cap
from .objfailures import Retry, attempts, changed, checked_span, reason, status_of, wrong_span
from .objstoreoptions import ObjectStoreOptions, split, store_for

# The first part of a stream, smaller than the rest: the first sample waits for it (at 100 MB/s a
# connection, 1 MiB takes 10 ms where an 8 MiB part takes 84 ms, nearly three 30 ms round trips).
FIRST_PART = 1 << 20


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
    IO.requests += 1
    result = first_answer(lambda: obstore.get(store, key, options=options), *hedging)
    if etag is not None and result.meta.get("e_tag") != etag:  # ...and one that ignores If-Match is caught
        raise changed(shown, start)
    checked_span(result, start, end, shown)
    try:
        data = result.bytes()
    except Exception as exc:  # the body broke mid-part: the whole part again
        raise Retry(f"connection broke: {reason(exc)}") from exc
    if len(data) != min(end, result.meta["size"]) - start:
        raise Retry(f"short body: {len(data)} of {end - start} bytes")
    return data


def object_key(url: str, shown: str) -> str:
    """The object's key in its bucket; a key naming a folder is refused without a request."""
    key = split(url)[1]
    if not key or key.endswith("/"):
        raise ShardNotFoundError("is a folder, not an object (an index or shard URL was meant?)", url=shown)
    return key


def head(url: str, options: ObjectStoreOptions) -> dict[str, Any]:
    """The object's metadata (``size``, ``e_tag``); a key naming a folder is refused without a request."""
    import obstore

    shown = redact_url(url)
    key = object_key(url, shown)
    store = store_for(url, options)
    return attempts(shown, 0, options, lambda: obstore.head(store, key))


def read_object_range(url: str, start: int, end: int, options: ObjectStoreOptions) -> bytes:
    """Bytes [start, end) of the object in one ranged GET (fewer where the object ends first)."""
    if end <= start:
        return b""
    shown = redact_url(url)
    store, key = store_for(url, options), object_key(url, shown)
    hedging = (options.hedge_after, None)
    return bytes(
        attempts(shown, start, options, lambda: _get(store, key, (start, end), None, shown, hedging))
    )


def read_object(url: str, options: ObjectStoreOptions, cap: int) -> bytes:
    """A whole small object (an index, a sidecar) in one GET, at most ``cap`` bytes; ShardNotFoundError
    when it is not there."""
    import obstore

    shown = redact_url(url)
    key = object_key(url, shown)
    store = store_for(url, options)

    def fetch() -> bytes:
        result = obstore.get(store, key)
        size = result.meta["size"]
        if size > cap:  # refused before its body is read
            raise over_cap(shown, cap, f"{size} bytes ({size / (1 << 20):g} MiB)")
        try:
            data = bytes(result.bytes())
        except Exception as exc:
            raise Retry(f"connection broke: {reason(exc)}") from exc
        if len(data) != size:
            raise Retry(f"short body: {len(data)} of {size} bytes")
        return data

    return attempts(shown, 0, options, fetch)


class ObjectStream(io.RawIOBase):
    """One object's bytes from ``offset`` on, fetched as parallel ranged GETs and read in byte order.

    Parts are asked for within this process's ``bytes_in_flight`` budget, shared with every other open
    stream: ahead of need only where it leaves room (at open, and after each part handed out), and, when
    the reader has nothing in flight, by waiting for room. A stream starts small and grows as it is read:
    parts double from ``FIRST_PART`` to ``part_size`` (the first sample waits for little), and a stream
    has two parts in flight until two have been handed out, then ``parts_in_flight`` (a shard opened ahead
    of its turn holds two small parts, not the budget the shard being read needs). ``hedges``: the GETs sent
    again because their answer was late (``hedge_after``).
    """

    def __init__(self, url: str, offset: int = 0, options: ObjectStoreOptions | None = None) -> None:
        super().__init__()
        self.options = options or ObjectStoreOptions()
        self.shown = redact_url(url)
        self._store, self._key = store_for(url, self.options), object_key(url, self.shown)
        self.position = offset
        self.hedges = 0
        self._counting = threading.Lock()
        self._budget = budget_for(self.options.bytes_in_flight, self.options.part_size)
        self._pending: deque[tuple[Future[Any], int]] = deque()  # parts in flight and their sizes, in order
        self._current = memoryview(b"")
        self._pool = ThreadPoolExecutor(self.options.parts_in_flight, thread_name_prefix="shardstream-s3")
        self._requested = offset  # the first byte no part has asked for yet
        self._asked = self._handed = 0  # parts asked for and handed to the reader: how far it has grown
        self._open(url, offset)
        self._fill()

    def _open(self, url: str, offset: int) -> None:
        """The first part's GET, whose answer names the object's size and ETag: no HEAD first, so the first
        sample waits one round trip and ``FIRST_PART`` bytes, not two round trips and a whole part."""
        end = offset + min(FIRST_PART, self.options.part_size)
        self._budget.wait_for(end - offset)
        try:
            answer = attempts(self.shown, offset, self.options, lambda: self._answer(offset, end))
        except BaseException:
            self._budget.give(end - offset)
            raise
        if answer is None:  # no span at offset: the HEAD tells an offset at the end from one past it
            self._budget.give(end - offset)
            meta = head(url, self.options)
            self.size, self.etag = meta["size"], meta.get("e_tag")
            if offset > self.size:
                raise ShardReadError(
                    f"offset is past the end of the object ({self.size} bytes)", url=self.shown, offset=offset
                )
            if offset < self.size:  # bytes there, yet no span: a server that ignores Range
                raise wrong_span(self.shown, offset, "a whole object for a range")
            return
        self.size, self.etag = answer.meta["size"], answer.meta.get("e_tag")
        end = min(end, self.size)
        self._pending.append((self._pool.submit(self._body, answer, offset, end), end - offset))
        self._requested = end
        self._asked = 1

    def _answer(self, start: int, end: int) -> Any:
        """The first GET's answer, its headers read and its span checked; None where the store has no span
        at ``start`` (S3's 416 at or past the end, an empty object's too; or a whole answer, as nginx gives
        for an empty file: ``_open`` then asks a HEAD)."""
        import obstore

        hedging = (self.options.hedge_after, self._count_hedge)
        try:
            answer = first_answer(
                lambda: obstore.get(self._store, self._key, options={"range": (start, end)}), *hedging
            )
        except Exception as exc:
            if status_of(exc) == 416 or "non-partial response" in str(exc):
                return None
            raise
        checked_span(answer, start, end, self.shown)
        return answer

    def _body(self, answer: Any, start: int, end: int) -> Any:
        """The first part's body; should it break, the part again (as any part: of this ETag)."""
        try:
            data = answer.bytes()
            if len(data) == end - start:
                return data
        except Exception:  # the body broke mid-part
            pass
        return self._part(start, end)

    def _fill(self) -> None:
        """Ask for parts ahead of need until ``parts_in_flight`` are out, the object is all asked for, or
        the budget has no room to spare."""
        # Two parts handed out: the reader has it (a read-ahead takes one chunk), so all of them at once.
        ahead = self.options.parts_in_flight if self._handed >= 2 else min(self.options.parts_in_flight, 2)
        while len(self._pending) < ahead and self._requested < self.size:
            if not self._budget.take(self._next_size()):
                return
            self._ask()

    def _next_size(self) -> int:
        grown = min(self.options.part_size, FIRST_PART << min(self._asked, 40))
        return min(self.size, self._requested + grown) - self._requested

    def _ask(self) -> None:
        """The next part, its room in the budget already taken."""
        start = self._requested
        end = start + self._next_size()
        self._pending.append((self._pool.submit(self._part, start, end), end - start))
        self._requested = end
        self._asked += 1

    def _part(self, start: int, end: int) -> Any:
        store, key, etag, shown = self._store, self._key, self.etag, self.shown
        hedging = (self.options.hedge_after, self._count_hedge)
        return attempts(
            shown, start, self.options, lambda: _get(store, key, (start, end), etag, shown, hedging)
        )

    def _count_hedge(self) -> None:
        with self._counting:  # parts in several threads may count at once
            self.hedges += 1
            IO.hedges += 1

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
            self._handed += 1
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
        """The object's length, from the first answer at open."""
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
