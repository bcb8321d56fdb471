"""A mixture's shape: its sources' names, shares and shard lists, and what follows from them, read-only.

What resuming and restoring read of a mixture, and all they read: the plan for a topology, each source's
window and pass stream, the identity a saved state must share. Nothing here changes once made, so
``resume.py`` and ``restore.py`` take a shape and return what they found, and only ``Mixture`` keeps state
(trade-off: a few values passed back and forth, for restore code that cannot reach into the dataset).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from ..datasets.options import Placement
from ..elastic.restore import dataset_digest
from ..placement.shards import ShardList
from .passes import PassStream
from .plan import MixturePlan, Share, apportion, epoch_targets, plan_mixture
from .schedule import Schedule
from .scheduled import ScheduledPlan, scheduled_plan

KEPT_EPOCHS = 4  # scheduled epochs' plans kept per topology (a resume asks for one, the chain another)


class MixtureShape:
    """``shares`` and ``shard_lists``: one per source, in order; ``bases``: where each source's shards begin
    in the mixture's shard list; ``placement``: its seed, shuffle and remainder are read (not its rank);
    ``epoch_size``: samples per epoch (None: the shares decide); ``buffer_size``: shared by the sources;
    ``extra``: more the identity must match (a token budget's options; "": nothing); ``schedules``: each
    source's weight over global steps (None: constant weights), in batches of ``per_batch``."""

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
        schedules: Sequence[Schedule] | None = None,
        per_batch: int | None = None,
    ) -> None:
        self.shares = tuple(shares)
        self.shard_lists = tuple(shard_lists)
        self.bases = tuple(bases)
        self.names = tuple(share.name for share in self.shares)
        self.placement = placement
        self.epoch_size = epoch_size
        self.buffer_size = buffer_size
        self.extra = extra  # what else the state must match (a token budget's options), in the digest
        self.budgeted = bool(extra)
        self.schedules = tuple(schedules) if schedules is not None else None
        self.per_batch = per_batch
        if self.schedules is not None:
            steps = ";".join(repr(s.to_state()) for s in self.schedules)
            self.extra += f"\x00schedules={steps}\x00batch={per_batch}"
        self._plans: dict[tuple[int, int], MixturePlan] = {}
        self._epochs: dict[tuple[int, int, int], ScheduledPlan] = {}
        self._moved: dict[tuple[int, int, int], tuple[int, list[int]]] = {}
        self._identity: dict[str, Any] | None = None
        self._kept: dict[tuple[Any, ...], Any] = {}

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

    def epoch_plan(self, world: int, workers: int, epoch: int) -> MixturePlan | ScheduledPlan:
        """Epoch ``epoch``'s plan: the topology's, or under a schedule that epoch's own (``scheduled.py``)."""
        if self.schedules is None:
            return self.plan(world, workers)
        key = (world, workers, epoch)
        plan = self._epochs.get(key)
        if plan is None:
            base = self.plan(world, workers)
            plan = scheduled_plan(base, self.schedules, per_batch=self.per_batch or 1, epoch=epoch)
            while len(self._epochs) >= KEPT_EPOCHS:
                del self._epochs[next(iter(self._epochs))]
            self._epochs[key] = plan
        return plan

    def kept(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        """``make()``, kept under ``key`` (the last KEPT_EPOCHS of them): what a deal computes from this
        shape alone, asked again for every place it deals (``rest.rest_budgets``)."""
        if key not in self._kept:
            while len(self._kept) >= KEPT_EPOCHS:
                del self._kept[next(iter(self._kept))]
            self._kept[key] = make()
        return self._kept[key]

    def moved(self, world: int, workers: int, since: int, epoch: int) -> list[int]:
        """How far each source's pass stream moves from the start of epoch ``since`` to that of ``epoch``."""
        if self.schedules is None:
            return [(epoch - since) * n for n in self.plan(world, workers).per_epoch()]
        key = (world, workers, since)
        at, out = self._moved.get(key, (since, [0] * len(self.names)))
        if at > epoch:
            at, out = since, [0] * len(self.names)
        for e in range(at, epoch):  # carried on from the last epoch asked: each epoch planned once
            out = [a + b for a, b in zip(out, self.epoch_plan(world, workers, e).per_epoch(), strict=True)]
        self._moved[key] = (epoch, out)
        return list(out)

    def rest_budgets(self, length: int) -> list[int]:
        """Per-source budgets of ``length`` samples under the constant shares (as a worker's in the plan)."""
        return apportion(epoch_targets(self.shares, self.epoch_size)[0], length)

    def weights_state(self) -> dict[str, Any]:
        """The shares and schedules as plain data (``"weights"`` in a state): what rebuilds the plan a
        state was saved under (``with_weights``) when a changed mixture takes it over mid-epoch."""
        return {
            "shares": [[s.name, s.kind, type(s.value).__name__, str(s.value)] for s in self.shares],
            "schedules": [s.to_state() for s in self.schedules] if self.schedules is not None else None,
            "batch": self.per_batch,
            "budgeted": self.budgeted,
        }

    def with_weights(self, saved: Any) -> MixtureShape:
        """This shape under the shares and schedules of ``saved`` (``weights_state``'s form): the same
        sources, data, placement, epoch and buffer; ValueError naming what does not fit."""
        try:
            shares = [_share(entry, share) for entry, share in zip(saved["shares"], self.shares, strict=True)]
            schedules = saved["schedules"]
            per_batch = saved["batch"]
            if schedules is not None:  # each {kind: [[step, "num/den"], ...]}, as to_state writes it
                schedules = [
                    Schedule.of(
                        {kind: [(step, Fraction(w)) for step, w in points] for kind, points in s.items()}
                    )
                    for s in schedules
                ]
        except (KeyError, TypeError, ValueError, ArithmeticError) as exc:  # "1/0", "1e999" as a Fraction
            raise ValueError(f"the state's weights={saved!r:.120} are not a mixture's ({exc})") from None
        return MixtureShape(
            shares,
            self.shard_lists,
            self.bases,
            placement=self.placement,
            epoch_size=self.epoch_size,
            buffer_size=self.buffer_size,
            schedules=schedules,
            per_batch=per_batch,
        )

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


VALUE_TYPES = {"int": int, "float": float, "Fraction": Fraction}


def _share(entry: Sequence[Any], share: Share) -> Share:
    """``entry`` ([name, kind, value type, value]) as a Share of the source ``share`` names."""
    name, kind, kind_of_value, value = entry
    if name != share.name:
        raise ValueError(f"source {name!r} where this mixture has {share.name!r}")
    return Share(share.name, share.size, str(kind), VALUE_TYPES[kind_of_value](value))
