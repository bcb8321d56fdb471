"""Iterator nodes with explicit state: ``next``, ``reset(state)``, ``get_state`` — what resumption needs.

A node's state says where it stands, not what it has read, so restoring costs seeks, not replays.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Node(Iterator[T], Generic[T]):
    """Subclasses implement ``_generate(state)`` and ``get_state()``, which must be current at every yield.

    Hot loops keep their position in plain attributes and build the state dict only when asked.
    """

    def __init__(self) -> None:
        self._it: Iterator[T] | None = None

    def reset(self, state: dict[str, Any] | None = None) -> None:
        """Start again from the beginning, or from a state ``get_state`` returned."""
        self._it = self._generate(dict(state) if state else None)

    def get_state(self) -> dict[str, Any]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[T]:
        # Loops run on the generator itself, skipping a Python-level __next__ per item; the state lives
        # on the node either way.
        if self._it is None:
            self.reset()
        return self._it  # type: ignore[return-value]

    def __next__(self) -> T:
        if self._it is None:
            self.reset()
        return next(self._it)  # type: ignore[arg-type]

    def _generate(self, state: dict[str, Any] | None) -> Iterator[T]:
        raise NotImplementedError
