"""Read-ahead of the next shards in a background thread per worker, into a bounded buffer.

While one shard is decoded, the next one or two are already being fetched, so network latency overlaps
with compute; memory is capped at ``max_bytes`` per prefetched shard.
"""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

_CHUNK = 1 << 20
_END = object()


class ReadAhead(io.RawIOBase):
    """A stream filled by a daemon thread; errors in the thread surface on ``read``."""

    def __init__(self, open_stream: Callable[[], tuple[Any, BinaryIO]], *, max_bytes: int) -> None:
        super().__init__()
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, max_bytes // _CHUNK))
        self._stop = threading.Event()
        self._pending = b""
        self._done = False
        self.extra: Any = None
        self._open_error: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._fill, args=(open_stream,), daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _fill(self, open_stream: Callable[[], tuple[Any, BinaryIO]]) -> None:
        try:
            self.extra, stream = open_stream()
        except BaseException as exc:  # handed to the reader, which decides what an error means
            self._open_error = exc
            self._ready.set()
            return
        self._ready.set()
        with stream:
            try:
                while not self._stop.is_set():
                    chunk = stream.read(_CHUNK)
                    if not chunk:
                        break
                    if not self._put(chunk):
                        return
            except BaseException as exc:
                self._put(exc)
                return
        self._put(_END)

    def wait_opened(self) -> Any:
        """Block until the stream is open; return what the opener returned beside it (or raise its error)."""
        self._ready.wait()
        if self._open_error is not None:
            raise self._open_error
        return self.extra

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while not self._pending and not self._done:
            item = self._queue.get()
            if item is _END:
                self._done = True
            elif isinstance(item, BaseException):
                raise item
            else:
                self._pending = item
        if size is None or size < 0:
            size = len(self._pending)
        data, self._pending = self._pending[:size], self._pending[size:]
        return data

    def close(self) -> None:
        self._stop.set()
        while True:  # unblock a producer waiting on a full queue
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        super().close()


class Prefetcher:
    """Keeps up to ``depth`` read-aheads, keyed by segment number."""

    def __init__(self, depth: int, max_bytes: int) -> None:
        self.depth = depth
        self.max_bytes = max_bytes
        self._streams: dict[int, ReadAhead] = {}

    def schedule(self, key: int, open_stream: Callable[[], tuple[Any, BinaryIO]]) -> None:
        if self.depth and key not in self._streams and len(self._streams) < self.depth:
            self._streams[key] = ReadAhead(open_stream, max_bytes=self.max_bytes)

    def take(self, key: int) -> ReadAhead | None:
        return self._streams.pop(key, None)

    def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()
