"""Stand-ins for lost samples, paid in one place: after a loss, the next good sample is repeated.

A rank promised ``len(ds)`` samples must yield that many, or DDP hangs on the last step. Nodes that lose
a sample (damaged bytes, an undecodable member) tell the ``Recovery``, which owes a stand-in; this node,
last in the chain, pays: it repeats the sample that follows a loss (or, at the end, the last one) once
per sample owed. Its state is what is still owed and the last sample's id, so a restore mid-repeat goes
on repeating the same sample.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .node import Item, Node, state_id, state_int, state_keys_of
from .recovery import Recovery


class StandIns(Node):
    """State: ``{"source": ..., "owed": n, "last": [shard, index] | None}``.

    ``source``: the chain before it; ``recovery``: the Recovery shared with the nodes that lose samples,
    whose ``owed`` count this node pays off.
    """

    state_keys = frozenset({"owed", "last"})

    def __init__(self, source: Node, recovery: Recovery) -> None:
        super().__init__()
        self.source = source
        self.recovery = recovery
        self._last: Item | None = None  # the last item handed out; its sample None when known by id only

    def _current_state(self) -> dict[str, Any]:
        last = [self._last[0], self._last[1]] if self._last is not None else None
        return {"source": self._source_state(), "owed": self.recovery.owed, "last": last}

    def check_state(self, state: Any) -> None:
        """``owed`` an int >= 0, ``last`` None or a (shard, index) id; ValueError naming the key."""
        state_keys_of(self, state, self.state_keys | {"source"})
        state_int(self, state, "owed")
        if state["last"] is not None:
            state_id(self, state["last"], "last")

    def _generate(self, state: dict[str, Any] | None) -> Iterator[Item]:
        self.recovery.owed = state["owed"] if state else 0
        last = state.get("last") if state else None
        self._last = (last[0], last[1], None) if last is not None else None
        self.source.reset(state["source"] if state else None)  # type: ignore[union-attr]
        recovery = self.recovery
        if recovery.owed and self._last is not None:  # saved while repeats were still owed
            yield from self._repeats(self._last)
        for item in self.source:  # type: ignore[union-attr]
            self._last = item
            yield item
            if recovery.owed:
                yield from self._repeats(item)
        if recovery.owed and self._last is not None:  # the loss came last: repeat from before it
            yield from self._repeats(self._last)

    def _repeats(self, item: Item) -> Iterator[Item]:
        shard, index, sample = item
        if sample is None:  # known by id only, from a saved state
            sample = self.read_one(shard, index)
            self._last = (shard, index, sample)
        counters = self.recovery.counters
        while self.recovery.owed:
            self.recovery.owed -= 1
            counters.add("samples_repeated", 1)
            yield shard, index, _copy(sample)


def _copy(sample: Any) -> Any:
    # A fresh dict per repeat: a consumer that edits one sample in place must not edit the others.
    return dict(sample) if isinstance(sample, dict) else sample
