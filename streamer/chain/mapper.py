"""Apply a function to every sample (decoding, above all); a sample it fails on goes to the Recovery.

Placed after the shuffle buffer, so the buffer holds compact bytes rather than decoded tensors.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from shardstream.errors import StreamError

from ..stats.timers import decode_clock
from .node import Item, Node, state_keys_of
from .recovery import Recovery


class Mapper(Node):
    """``fn(sample)`` for every sample of ``source``; a ``StreamError`` from ``fn`` is the Recovery's.

    ``recovery``: what such an error costs (None: a Recovery of its own, which raises it).
    """

    def __init__(self, source: Node, fn: Callable[[Any], Any], recovery: Recovery | None = None) -> None:
        super().__init__()
        self.source = source
        self.fn = fn
        self.recovery = recovery or Recovery()

    def _current_state(self) -> dict[str, Any]:
        return {"source": self._source_state()}

    def check_state(self, state: Any) -> None:
        state_keys_of(self, state, {"source"})  # its own state is only its source's, under "source"

    def read_one(self, shard: int, index: int) -> Any:
        return self.fn(super().read_one(shard, index))

    def _generate(self, state: dict[str, Any] | None) -> Iterator[Item]:
        self.source.reset(state["source"] if state else None)  # type: ignore[union-attr]
        fn, recovery = self.fn, self.recovery
        clock, now = decode_clock(), time.perf_counter  # the loader's statistics: two reads a sample
        for shard, index, sample in self.source:  # type: ignore[union-attr]
            started = now()
            try:
                out = fn(sample)
            except StreamError as exc:
                recovery.after_sample_error(exc, shard, index)
                continue
            finally:
                clock.decode += now() - started
            yield shard, index, out
