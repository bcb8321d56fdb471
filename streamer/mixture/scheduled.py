"""One epoch of a mixture under a weight schedule: each worker's budgets and running shares, per epoch.

The plan for constant weights (``plan.py``) is one per topology; under a schedule each epoch has its own,
since its steps meet other weights: worker w's local batch t is global step ``epoch x steps an epoch +
step_of(batches, w, t)`` (``chain/skips.py``), so the same worker index on every rank follows the same
running share and the same budgets, and every rank yields the same number of samples (the lengths are
the constant plan's). A source's run of the epoch is dealt in worker order, rank after rank, as in
``MixturePlan``; each epoch moves its pass stream by what that epoch's budgets add up to. Trade-off:
planning an epoch is O(workers x (batches the epoch's weight changes meet) x log batches), done once
per epoch and kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..chain.skips import step_of
from .plan import MixturePlan
from .schedule import Pieces, Schedule, pieces


class WorkerSteps(Sequence[int]):
    """A worker's batches' steps within the epoch, computed when asked (a bisect reads a few)."""

    def __init__(self, batches: Sequence[int], worker: int) -> None:
        self.batches, self.worker = list(batches), worker

    def __len__(self) -> int:
        return self.batches[self.worker]

    def __getitem__(self, t):  # type: ignore[override]
        if isinstance(t, slice):
            return [self[i] for i in range(*t.indices(len(self)))]
        if t < 0:
            t += len(self)
        if not 0 <= t < len(self):
            raise IndexError(t)
        return step_of(self.batches, self.worker, t)


@dataclass(frozen=True)
class ScheduledPlan:
    """``MixturePlan``'s interface for one ``epoch``: ``base`` (the lengths), ``shares`` and
    ``worker_budgets`` per worker index, ``steps`` (global steps an epoch: the same on every rank)."""

    base: MixturePlan
    epoch: int
    steps: int
    shares: tuple[Pieces, ...]
    worker_budgets: tuple[tuple[int, ...], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return self.base.names

    @property
    def world(self) -> int:
        return self.base.world

    @property
    def workers(self) -> int:
        return self.base.workers

    @property
    def rank_length(self) -> int:
        return self.base.rank_length

    def worker_length(self, worker: int) -> int:
        return self.base.worker_length(worker)

    def budgets(self, worker: int) -> tuple[int, ...]:
        return self.worker_budgets[worker]

    def per_rank(self) -> list[int]:
        return [sum(column) for column in zip(*self.worker_budgets, strict=True)]

    def per_epoch(self) -> list[int]:
        return [self.world * n for n in self.per_rank()]

    def worker_range(self, j: int, rank: int, worker: int) -> tuple[int, int]:
        """[begin, end) of source j's epoch run this worker reads: ranks in order, workers within each."""
        begin = rank * self.per_rank()[j] + sum(b[j] for b in self.worker_budgets[:worker])
        return begin, begin + self.worker_budgets[worker][j]


def worker_batches(lengths: Sequence[int], per_batch: int) -> list[int]:
    """Each worker's batches of ``per_batch`` samples (its last one part full) for these lengths."""
    return [-(-n // per_batch) for n in lengths]


def scheduled_plan(
    base: MixturePlan, schedules: Sequence[Schedule], *, per_batch: int, epoch: int
) -> ScheduledPlan:
    """Epoch ``epoch`` of ``base``'s topology under ``schedules`` (one per source, in order), batches of
    ``per_batch`` samples as the DataLoader makes them; ValueError when a step's weights are all 0."""
    batches = worker_batches([base.worker_length(w) for w in range(base.workers)], per_batch)
    steps = sum(batches)
    shares = tuple(
        pieces(
            schedules,
            length=base.worker_length(w),
            per_batch=per_batch,
            first_step=epoch * steps,
            steps=WorkerSteps(batches, w),
        )
        for w in range(base.workers)
    )
    return ScheduledPlan(base, epoch, steps, shares, tuple(tuple(s.budgets()) for s in shares))


def weight_schedules(
    sources: Sequence[Any], *, batch_size: Any, stratify: int | None, budgeted: bool, weight_by: str
) -> tuple[Schedule, ...] | None:
    """Each source's weight as a schedule when any is one (a constant one for the rest), else None;
    ValueError naming the source or the option a schedule cannot go with yet."""
    given = [source.schedule() for source in sources]
    if all(schedule is None for schedule in given):
        return None
    for source in sources:
        kind, _ = source.amount()
        if kind != "weight":
            raise ValueError(
                f"source {source.label()!r} has {kind}: with a weight schedule every source needs a weight"
            )
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(
            f"a weight schedule needs batch_size (the DataLoader's, an int >= 1) to know each sample's "
            f"step, not {batch_size!r}"
        )
    for refused, name in ((stratify is not None, "stratify"), (budgeted, "batch_tokens")):
        if refused:
            raise ValueError(f"a weight schedule does not go with {name} yet; give constant weights")
    if weight_by != "samples":
        raise ValueError("a weight schedule shares samples: weight_by='tokens' does not go with it yet")
    return tuple(
        schedule if schedule is not None else Schedule.of(source.amount()[1])
        for schedule, source in zip(given, sources, strict=True)
    )
