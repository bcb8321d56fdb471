"""What ShardDataset and Mixture share: the epoch and error counters in shared memory, and pickling.

Both keep a ``SharedState`` (``_shared``), a ``Placement`` (``placement``) and the chain in use
(``_chain``); workers get a copy with the rank resolved in the parent and no chain.
"""

from __future__ import annotations

from typing import Any

from torch.utils.data import IterableDataset

from .options import Placement
from .shared import SharedState


class StreamBase(IterableDataset):
    _shared: SharedState
    placement: Placement

    def set_epoch(self, epoch: int) -> None:
        """Like DistributedSampler.set_epoch; reaches DataLoader workers, persistent ones too."""
        self._shared.epoch = epoch

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
