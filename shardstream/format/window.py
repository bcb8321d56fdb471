"""A reused read buffer over a stream: refilled by readinto, sliced into bytes; fewer copies, no page faults.

The buffer comes from the shared pool (``shardstream.buffers``) and goes back to it when the shard is
done, so the next shard's window finds its pages already mapped.
"""

from __future__ import annotations

from typing import BinaryIO

from ..buffers import CHUNK, CHUNKS, anonymous_map, read_into


class ReadWindow:
    """``buf[pos:end]`` holds the stream's next bytes; readers slice ``buf`` and move ``pos`` themselves."""

    __slots__ = ("buf", "end", "pos", "stream", "view")

    def __init__(self, stream: BinaryIO, capacity: int = CHUNK) -> None:
        self.stream = stream
        self.buf = CHUNKS.take() if capacity == CHUNKS.size else anonymous_map(capacity)
        self.view = memoryview(self.buf)
        self.pos = 0
        self.end = 0

    def release(self) -> None:
        """Hand the buffer on to a later window; this one is done (its stream is the caller's to close)."""
        self.view.release()
        CHUNKS.give(self.buf)
        self.pos = self.end = 0

    def fill(self, need: int) -> int:
        """Make ``need`` bytes (at most the capacity) available at ``pos``; return how many are."""
        have = self.end - self.pos
        if have >= need:
            return have
        if self.pos:
            self.buf.move(0, self.pos, have)
            self.pos, self.end = 0, have
        while self.end - self.pos < need:
            count = read_into(self.stream, self.view[self.end :])
            if not count:
                break
            self.end += count
        return self.end - self.pos

    def take(self, size: int) -> bytes:
        """The next ``size`` bytes, or fewer at the end of the stream."""
        if size > len(self.buf):  # larger than the buffer: around it
            parts = [self.buf[self.pos : self.end]]
            have = len(parts[0])
            self.pos = self.end = 0
            while have < size:
                more = self.stream.read(size - have)
                if not more:
                    break
                parts.append(more)
                have += len(more)
            return b"".join(parts)
        size = min(size, self.fill(size))
        data = self.buf[self.pos : self.pos + size]
        self.pos += size
        return data
