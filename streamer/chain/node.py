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
import numbers
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
        """Start again from the beginning (no state, or an empty one), or from a state ``get_state`` gave;
        ValueError naming the key if the node's own part of ``state`` is not one it could have given."""
        if state:
            self.check_state(state)
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

    def check_state(self, state: Any) -> None:
        """ValueError naming the key unless ``state`` holds this node's own keys, of the types and in the
        ranges ``get_state`` gives; its source's part is the source's to check. Here: a dict with
        ``state_keys``; nodes with state check the rest."""
        state_keys_of(self, state, self.state_keys)

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


def check_saved_chain(chain: Node, state: Any) -> None:
    """Every node's own check of its part of a saved chain's state, outermost first, as ``reset`` would
    make them one by one while the chain starts: a load can refuse a bad state before reading anything.
    ``chain``: built as the run that saved ``state`` built its own, each node's part under ``"source"``."""
    node: Node | None = chain
    while node is not None and state:  # an empty part starts afresh, and so does every node under it
        node.check_state(state)
        state = state.get("source") if node.source is not None else None
        node = node.source


def state_keys_of(node: Node, state: Any, keys: frozenset[str] | set[str]) -> Mapping[str, Any]:
    """``state`` as a mapping holding ``keys``; ValueError naming the node and what lacks."""
    name = type(node).__name__
    if not isinstance(state, Mapping):
        raise ValueError(f"the saved {name} state is a {type(state).__name__} ({state!r:.60}), not a dict")
    missing = sorted(keys - state.keys())
    if missing:
        raise ValueError(
            f"the saved {name} state lacks {missing} (it has {sorted(state)}): it was saved by another "
            "chain (other shuffle, decode or on_error options) or is damaged"
        )
    return state


def state_int(node: Node, state: Mapping[str, Any], key: str, low: int = 0, high: int | None = None) -> int:
    """``state[key]``, an int in [low, high]; ValueError naming the node, the key and the value."""
    value = state[key]
    if not is_int(value) or value < low or (high is not None and value > high):
        where = f">= {low}" if high is None else f"in [{low}, {high}]"
        name = type(node).__name__
        raise ValueError(f"the saved {name} state has {key}={value!r:.60}; it must be an int {where}")
    return int(value)


def state_id(node: Node, value: Any, key: str) -> tuple[int, int]:
    """A saved sample id: a (shard, index) pair of ints >= 0; ValueError naming the node and the key."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(is_int(v) and v >= 0 for v in value):
        return int(value[0]), int(value[1])
    name = type(node).__name__
    raise ValueError(
        f"the saved {name} state has {key} {value!r:.60}: not a (shard, index) pair of ints >= 0"
    )


def is_int(value: Any) -> bool:
    """An integer, numpy's included, and not a bool (a saved True is no count)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


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
