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
        """Like DistributedSampler.set_epoch; reaches DataLoader workers, persistent ones too.

        A loaded state not yet read is dropped once the epoch moves past the state's: DataLoader workers
        read it from their own copies, so this one would otherwise hand it to the next epoch's workers too.
        """
        self._shared.epoch = epoch
        pending = getattr(self, "_pending", None)
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
