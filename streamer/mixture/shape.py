"""A mixture's shape: its sources' names, shares and shard lists, and what follows from them, read-only.

What resuming and restoring read of a mixture, and all they read: the plan for a topology, each source's
window and pass stream, the identity a saved state must share. Nothing here changes once made, so
``resume.py`` and ``restore.py`` take a shape and return what they found, and only ``Mixture`` keeps state
(trade-off: a few values passed back and forth, for restore code that cannot reach into the dataset).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ..datasets.options import Placement
from ..elastic.restore import dataset_digest
from ..placement.shards import ShardList
from .passes import PassStream
from .plan import MixturePlan, Share, plan_mixture


class MixtureShape:
    """``shares`` and ``shard_lists``: one per source, in order; ``bases``: where each source's shards begin
    in the mixture's shard list; ``placement``: its seed, shuffle and remainder are read (not its rank);
    ``epoch_size``: samples per epoch (None: the shares decide); ``buffer_size``: shared by the sources;
    ``extra``: more the identity must match (a token budget's options; "": nothing)."""

    def __init__(
        self,
        shares: Sequence[Share],
        shard_lists: Sequence[ShardList],
        bases: Sequence[int],
        *,
        placement: Placement,
        epoch_size: int | None,
        buffer_size: int,
        extra: str = "",
    ) -> None:
        self.shares = tuple(shares)
        self.shard_lists = tuple(shard_lists)
        self.bases = tuple(bases)
        self.names = tuple(share.name for share in self.shares)
        self.placement = placement
        self.epoch_size = epoch_size
        self.buffer_size = buffer_size
        self.extra = extra  # what else the state must match (a token budget's options), in the digest
        self._plans: dict[tuple[int, int], MixturePlan] = {}
        self._identity: dict[str, Any] | None = None

    def plan(self, world: int, workers: int) -> MixturePlan:
        """The epoch's plan for this topology, made once: state_dict asks for it at every batch."""
        plan = self._plans.get((world, workers))
        if plan is None:
            remainder = self.placement.remainder
            plan = plan_mixture(
                self.shares, world=world, workers=workers, epoch_size=self.epoch_size, remainder=remainder
            )
            self._plans[world, workers] = plan
        return plan

    def window(self, budget: int, length: int) -> int:
        """A source's window in a worker's stream: its share of the shuffle buffer (1 without shuffling)."""
        return self.buffer_size * budget // max(length, 1) if self.placement.shuffle else 1

    def pass_stream(self, j: int) -> PassStream:
        """Source ``j``'s pass stream: pass after pass over its shards."""
        p = self.placement
        counts = self.shard_lists[j].counts
        return PassStream(counts, seed=p.seed, salt=self.names[j], shuffle=p.shuffle, base=self.bases[j])

    def identity(self) -> dict[str, Any]:
        """What a state must share with this mixture to load: data, shares, epoch and buffer size, seed."""
        if self._identity is None:
            digest = hashlib.blake2b(digest_size=16)
            for share, shards in zip(self.shares, self.shard_lists, strict=True):
                line = f"{share.name}\x00{share.kind}\x00{share.value!r}\x00{dataset_digest(shards)}\x00"
                digest.update(line.encode())
            digest.update(f"{self.epoch_size}\x00{self.buffer_size}".encode())
            if self.extra:
                digest.update(f"\x00{self.extra}".encode())
            p = self.placement
            self._identity = {
                "dataset": digest.hexdigest(),
                "seed": p.seed,
                "shuffle": p.shuffle,
                "remainder": p.remainder,
            }
        return self._identity
