"""I/O counters per process (bytes, requests, retries, read-ahead hits) and clocks per thread, for statistics.

Counted where the work already happens once per chunk, request or shard, never per sample: ``read_into``
(every stream read a tar window takes: local, HTTP, object storage), ranged reads, each HTTP and object
store request and retry, each read-ahead taken or missed. A DataLoader worker is a process of its own, so
these are its numbers (a forked worker starts from its parent's: read them as differences, ``since``).
No lock: the read-ahead thread and the reader may add in the same instant and lose one update; these are
statistics, and a lock per 1 MiB read is not worth it. ``thread_clock()``: the calling thread's seconds
waiting on bytes and opening shards, two clock reads per chunk or shard.
"""

from __future__ import annotations

import threading

NAMES = ("bytes", "requests", "retries", "hedges", "shards", "readahead_hits", "readahead_misses")


class IOCounters:
    """One process's counters, each an int attribute named in ``NAMES``."""

    __slots__ = NAMES

    def __init__(self) -> None:
        for name in NAMES:
            setattr(self, name, 0)

    def values(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in NAMES}

    def since(self, before: dict[str, int]) -> dict[str, int]:
        """What was counted after ``before`` (a ``values()``)."""
        return {name: getattr(self, name) - before.get(name, 0) for name in NAMES}


IO = IOCounters()  # this process's


class ThreadClock:
    """One thread's seconds waiting on bytes (``io``) and opening shards (``open``, its reads included):
    each thread keeps its own, so a read-ahead thread's fetching, which overlaps the reading, is not
    counted as the reader's wait."""

    __slots__ = ("io", "open", "opening")

    def __init__(self) -> None:
        self.io = self.open = 0.0
        self.opening = False  # inside an open: its reads are the open's time, counted once there

    def add_io(self, seconds: float) -> None:
        if not self.opening:
            self.io += seconds


_local = threading.local()


def thread_clock() -> ThreadClock:
    """The calling thread's clock (made on first use)."""
    try:
        return _local.clock
    except AttributeError:
        _local.clock = ThreadClock()
        return _local.clock
