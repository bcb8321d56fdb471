"""Read-ahead of the next shards in a background thread per worker, into a bounded buffer.

While one shard is consumed, the next one or two are opened and their first ``max_bytes`` fetched, so
connection set-up and network latency overlap with compute. Once a shard's turn comes, the reader drains
what was fetched ahead and then reads the stream itself: bytes read ahead cost one more copy and a
thread hand-off each, which on a fast link made prefetching slower than reading inline.

A thread lives only while it reads: once the budget is fetched (or the reader has started) it parks the
stream for the reader and ends, rather than wait on a full queue. So an iterator abandoned mid-epoch, or a
main process that peeked at a sample before its DataLoader forks workers, keeps no thread of ours alive
(forking a multi-threaded process can deadlock the child; Python 3.12+ warns of it).
"""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from shardstream.buffers import CHUNKS, read_into

_END = object()  # the stream ended in the thread
_HANDOVER = object()  # the thread stopped reading: the stream is the reader's now


class ReadAhead(io.RawIOBase):
    """A stream read ahead by a daemon thread until its reader starts; errors surface on ``readinto``.

    The thread reads into 1 MiB buffers from the shared pool (at most ``max_bytes`` queued).
    """

    def __init__(self, open_stream: Callable[[], tuple[Any, BinaryIO]], *, max_bytes: int) -> None:
        super().__init__()
        self._budget = max(1, max_bytes // CHUNKS.size)  # chunks read ahead before the thread parks
        self._filled: queue.Queue[Any] = queue.Queue()  # never full: the budget bounds it, so puts never wait
        self._stop = threading.Event()
        self._closing = threading.Lock()  # no put lands after close() has drained the queue
        self._started = threading.Event()  # the reader has begun: read ahead no further
        self._current: memoryview | None = None  # the chunk being handed out, and how far
        self._start = self._end = 0
        self._done = False
        self._error: BaseException | None = None
        self._stream: BinaryIO | None = None  # once handed over
        self.extra: Any = None
        self._open_error: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._fill, args=(open_stream,), daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        with self._closing:
            if self._stop.is_set():
                return False
            self._filled.put(item)
            return True

    def _fill(self, open_stream: Callable[[], tuple[Any, BinaryIO]]) -> None:
        try:
            self.extra, stream = open_stream()
        except BaseException as exc:  # handed to the reader, which decides what an error means
            self._open_error = exc
            self._ready.set()
            self._put(exc)  # for a reader that skips wait_opened: an error, not a wait on an empty queue
            return
        self._ready.set()
        handed_over = False
        try:
            for chunk in range(self._budget + 1):
                if self._stop.is_set():
                    return
                if self._started.is_set() or chunk == self._budget:
                    handed_over = self._put((_HANDOVER, stream))
                    return
                buffer = CHUNKS.take()
                count, error = _read_full(stream, memoryview(buffer))
                if not count:
                    CHUNKS.give(buffer)
                elif not self._put((buffer, count)):
                    return
                if error is not None:
                    raise error
                if not count:
                    self._put(_END)
                    return
        except BaseException as exc:
            self._put(exc)
        finally:
            if not handed_over:
                stream.close()

    def wait_opened(self) -> Any:
        """Block until the stream is open; return what the opener returned beside it (or raise its error)."""
        self._ready.wait()
        if self._open_error is not None:
            raise self._open_error
        return self.extra

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._error is not None:
            raise self._error
        if self._stream is not None:
            return read_into(self._stream, buffer)
        self._started.set()
        while self._start >= self._end:
            if self._current is not None:
                buffer_done = self._current.obj
                self._current.release()
                CHUNKS.give(buffer_done)
                self._current = None
            if self._done:
                return 0
            item = self._filled.get()
            if item is _END:
                self._done = True
                return 0
            if isinstance(item, BaseException):
                self._error = item  # raised again on every later read: the thread has stopped
                raise item
            if item[0] is _HANDOVER:
                self._stream = item[1]
                return read_into(item[1], buffer)
            self._current, self._start, self._end = memoryview(item[0]), 0, item[1]
        count = min(len(buffer), self._end - self._start)
        buffer[:count] = self._current[self._start : self._start + count]  # type: ignore[index]
        self._start += count
        return count

    def close(self) -> None:
        with self._closing:
            self._stop.set()
        while True:  # give back the chunks read ahead, and close a stream handed over unread
            try:
                item = self._filled.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, tuple) and item[0] is _HANDOVER:
                item[1].close()
        if self._stream is not None:
            self._stream.close()
        super().close()


def _read_full(stream: BinaryIO, view: memoryview) -> tuple[int, BaseException | None]:
    """Fill ``view`` unless the stream ends first (sockets hand out less than asked): fewer, fuller chunks.

    An error after some bytes comes back beside them, so the bytes are handed out first: a reader that
    needs no more (the tar ended) never sees it, as when it reads the stream itself.
    """
    filled = 0
    while filled < len(view):
        try:
            count = read_into(stream, view[filled:])
        except Exception as exc:
            if not filled:
                raise
            return filled, exc
        if not count:
            break
        filled += count
    return filled, None


class Prefetcher:
    """Keeps up to ``depth`` read-aheads, keyed by segment number."""

    def __init__(self, depth: int, max_bytes: int) -> None:
        self.depth = depth
        self.max_bytes = max_bytes
        self._streams: dict[int, ReadAhead] = {}

    def schedule(
        self, key: int, open_stream: Callable[[], tuple[Any, BinaryIO]], max_bytes: int | None = None
    ) -> None:
        """Read segment ``key`` ahead: ``max_bytes`` of it (None: this prefetcher's own)."""
        if self.depth and key not in self._streams and len(self._streams) < self.depth:
            budget = self.max_bytes if max_bytes is None else max_bytes
            self._streams[key] = ReadAhead(open_stream, max_bytes=budget)

    def take(self, key: int) -> ReadAhead | None:
        return self._streams.pop(key, None)

    def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()
