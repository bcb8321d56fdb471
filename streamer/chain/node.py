"""Iterator nodes with explicit state: ``next``, ``reset(state)``, ``get_state`` — what resumption needs.

A chain is built by handing each node its source: reader -> shuffle buffer -> decoder (``Mapper``) ->
stand-ins. Items are ``(shard, index, sample)``: every sample keeps its id, so a node's state names
samples rather than holding their bytes, and a restore re-reads them by id through ``read_one``, which
each node answers from its source (applying its own change: a ``Mapper`` decodes). Any node composes
with any other, whatever their order.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

Item = tuple[int, int, Any]  # (shard, sample index in the shard, sample)


class Node(Iterator[Item]):
    """Subclasses implement ``_generate(state)`` and ``_current_state()``, current at every yield.

    Hot loops keep their position in plain attributes and build the state dict only when asked.
    """

    source: Node | None = None
    state_keys: ClassVar[frozenset[str]] = frozenset()  # the keys this node's own state always has

    def __init__(self) -> None:
        self._it: Iterator[Item] | None = None
        self._reset_to: dict[str, Any] | None = None

    def reset(self, state: dict[str, Any] | None = None) -> None:
        """Start again from the beginning (no state, or an empty one), or from a state ``get_state`` gave."""
        self._reset_to = dict(state) if state else None
        self._it = self._generate(dict(state) if state else None)

    def get_state(self) -> dict[str, Any]:
        """Where the node stands. Between ``reset`` and the next item its generator has not run, so its
        attributes still describe the past: the state it was reset to (``{}`` for the start) is the answer."""
        if self._it is not None and inspect.getgeneratorstate(self._it) == inspect.GEN_CREATED:  # type: ignore[arg-type]
            return copy.deepcopy(self._reset_to) if self._reset_to else {}
        return self._current_state()

    def _current_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def read_one(self, shard: int, index: int) -> Any:
        """Sample ``index`` of shard ``shard`` as this node hands samples out (for restoring a buffer)."""
        if self.source is None:
            raise NotImplementedError(f"{type(self).__name__} cannot read a sample by id")
        return self.source.read_one(shard, index)

    def __iter__(self) -> Iterator[Item]:
        # Loops run on the generator itself, skipping a Python-level __next__ per item; the state lives
        # on the node either way.
        if self._it is None:
            self.reset()
        return self._it  # type: ignore[return-value]

    def __next__(self) -> Item:
        if self._it is None:
            self.reset()
        return next(self._it)  # type: ignore[arg-type]

    def _generate(self, state: dict[str, Any] | None) -> Iterator[Item]:
        raise NotImplementedError

    def _source_state(self) -> dict[str, Any]:
        return self.source.get_state() if self.source is not None else {}


def saved_state_of(kind: type[Node], state: Any) -> dict[str, Any] | None:
    """The state of the first node of type ``kind`` in a saved chain's state (outermost first, each inner
    node's state under ``"source"``), known by the keys ``kind`` owns; None when the chain has none."""
    seen: set[int] = set()
    while isinstance(state, Mapping) and id(state) not in seen:  # a state that holds itself ends the walk
        if kind.state_keys and kind.state_keys <= state.keys():
            return dict(state)
        seen.add(id(state))
        state = state.get("source")
    return None
