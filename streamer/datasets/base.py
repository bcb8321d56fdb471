"""What ShardDataset and Mixture share: the one ``__iter__``, the place check, the counters, pickling.

Both keep a ``SharedState`` (``_shared``), a ``Placement`` (``placement``), a loaded state not yet read
(``_pending``) and the chain in use (``_chain``); workers get a copy with the rank resolved in the parent
and no chain. Each says only where its chain starts (``_start``) and how it is built (``_assemble``).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import Any

from torch.utils.data import IterableDataset, get_worker_info

from ..chain.node import Node
from .options import Placement
from .shared import SharedState

Place = tuple[int, int, int, int]  # rank, world, worker, workers
_sample_of = operator.itemgetter(2)  # (shard, index, sample) -> sample


def check_place(saved: Sequence[int], place: Place) -> None:
    """A state saved at one place continues only there; ValueError naming both, and the way out."""
    if tuple(saved) != place:
        raise ValueError(
            f"state was saved at (rank, world, worker, workers)={tuple(saved)} but this run is at {place}; "
            "the stream depends on world size and worker count, so resume with the same ones, or load "
            "the list of every rank's states to continue on another (an elastic restore)"
        )


class StreamBase(IterableDataset):
    placement: Placement

    def __init__(self) -> None:
        super().__init__()
        self._shared = SharedState()
        self._pending: dict[str, Any] | None = None  # a loaded state, until the next iteration reads it
        self._chain: tuple[Node, int, Place] | None = None  # the chain in use, its epoch and place

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        place = (*self.placement.resolve(), worker, workers)
        pending, self._pending = self._pending, None
        start = self._start(pending, place)
        if start is None:  # nothing left of the epoch the loaded state names
            self._chain = None
            return iter(())
        epoch, node_state = start
        chain = self._assemble(place, epoch)
        chain.reset(node_state)
        self._chain = (chain, epoch, place)
        return map(_sample_of, chain)  # the per-sample loop runs in C

    def _start(self, pending: dict[str, Any] | None, place: Place) -> tuple[int, Any] | None:
        """The epoch to read and the chain state to start from, given the loaded state (None: none)."""
        raise NotImplementedError

    def _assemble(self, place: Place, epoch: int) -> Node:
        """This place's chain for ``epoch``."""
        raise NotImplementedError

    def set_epoch(self, epoch: int) -> None:
        """Like DistributedSampler.set_epoch; reaches DataLoader workers, persistent ones too.

        A loaded state not yet read is dropped once the epoch moves past the state's: DataLoader workers
        read it from their own copies, so this one would otherwise hand it to the next epoch's workers too.
        """
        self._shared.epoch = epoch
        pending = self._pending
        if pending is not None and epoch > int(pending.get("epoch", epoch)):
            self._pending = None

    @property
    def epoch(self) -> int:
        return self._shared.epoch

    @property
    def errors(self) -> dict[str, int]:
        """Samples and shards skipped (on_error="skip"/"warn"), counted across all workers."""
        return self._shared.counts()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        # Spawned workers cannot see the parent's process group; resolve the rank here, in the parent.
        state["placement"] = self.placement.resolved()
        state["_chain"] = None
        return state
