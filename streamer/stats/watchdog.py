"""The stall watchdog: a process handing out nothing for ``after`` seconds is named, with its read and stack.

It runs in the sampler's thread (``sampler.py``), so it sees the stuck thread from beside it and
needs no signal, whatever the start method (fork, forkserver, spawn): the report says which rank and
worker, which shard URL and byte offset its reader is in, and the thread's Python stack; once when the
stall passes ``after``, again every ``after`` while it lasts, and a line when samples flow again. It
kills nothing. Trade-off: a thread stuck in C holding the GIL stops the watchdog too (a read waiting on
the network releases it); the stack is the Python one (``faulthandler`` prints the same frames).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

LOG = logging.getLogger("shardstream")
Where = Callable[[], Iterable[tuple[str, int | None]]]  # the readers' (shard URL, byte offset) now


class Watchdog:
    """``after``: seconds without a sample handed out before a report; ``who``: the process as reports
    name it (``who_is``); ``where``: the readers' places; ``emit``: where reports go (a logging warning)."""

    def __init__(
        self,
        after: float,
        who: str,
        where: Where,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        if not after > 0:
            raise ValueError(f"watchdog must be a positive number of seconds, not {after!r}")
        self.after, self.who, self.where = after, who, where
        self.emit = emit or LOG.warning
        self.progress = -1
        self.since = 0.0  # when progress last moved
        self.reported = 0.0  # the stall's length at the last report (0: none yet)
        self.reports = 0

    def tick(self, now: float, progress: int, frame: FrameType | None, waiting: bool = False) -> None:
        """One look: ``progress`` (samples handed out so far), the reading thread's innermost frame, and
        whether it is ``waiting`` for its consumer (a worker not asked for more, a training step): not a
        stall, so it counts as progress."""
        if progress != self.progress or waiting:
            if self.reported:
                self.emit(f"{self.who} is moving again after {now - self.since:.1f} s")
            self.progress, self.since, self.reported = progress, now, 0.0
            return
        stalled = now - self.since
        if stalled < self.after or stalled - self.reported < self.after:
            return
        self.reported = stalled
        self.reports += 1
        self.emit(self.report(stalled, frame))

    def report(self, stalled: float, frame: FrameType | None) -> str:
        """The text of one report."""
        places = [f"{url} at byte {offset if offset is not None else '?'}" for url, offset in self.where()]
        reading = "; ".join(places) if places else "no shard open"
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "  (thread gone)\n"
        return (
            f"{self.who} has handed out no sample for {stalled:.0f} s (watchdog={self.after:g}); "
            f"reading {reading}. Its stack, innermost last:\n{stack}"
        )


def who_is(rank: int, world: int, worker: int | None, workers: int) -> str:
    """How a report names a process: its rank, and its DataLoader worker (None: the main process)."""
    name = "the main process" if worker is None else f"DataLoader worker {worker} of {workers}"
    return f"rank {rank} of {world}, {name}"


def readers_where(chain: Any) -> list[tuple[str, int]]:
    """Every reader's (shard URL, byte offset) in ``chain``, found by walking ``source`` (and a node's
    ``sources``) for nodes that answer ``where()``."""
    found, seen, todo = [], set(), [chain]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        where = getattr(node, "where", None)
        if callable(where):
            place = where()
            if place is not None:
                found.append(place)
        todo.append(getattr(node, "source", None))
        todo.extend(getattr(node, "sources", None) or ())
    return found
