"""What ShardDataset asks of a token budget: the options checked at construction, a place's epoch plan.

Kept here so the dataset only names the budget (three calls), and the planning stays with its kind.
"""

from __future__ import annotations

from typing import Any

from .columns import CostColumns, check_costed
from .plan import BudgetOptions, SlotPlan, slot_plan

WINDOWS = {"pack": 64, "pad": 1024}  # pad needs runs of like costs, rare among 64 samples


def budget_options(
    shards: Any,
    placement: Any,
    opening: Any,
    tokens: int | None,
    batching: str,
    window: int | None,
    overlong: str,
) -> tuple[BudgetOptions, CostColumns] | tuple[None, None]:
    """The budget ``ShardDataset(batch_tokens=...)`` asked for and its cost column reader (``opening``:
    the dataset's OpenOptions), or Nones; ValueError naming the option."""
    if tokens is None:
        return None, None
    options = BudgetOptions(
        budget=tokens, mode=batching, window=window or WINDOWS.get(batching, 64), overlong=overlong
    )
    check_costed(shards)
    if placement.resampled:
        raise ValueError("batch_tokens plans each epoch from its samples; resampled=True draws forever")
    return options, CostColumns(shards, opening)


def budget_plan(dataset: Any, place: tuple[int, int, int, int], epoch: int) -> SlotPlan:
    """The epoch of one rank and worker under the dataset's budget."""
    rank, world, worker, workers = place
    p = dataset.placement
    return slot_plan(
        dataset.shards.counts,
        dataset.shards.cost_sums,
        dataset.costs,
        rank=rank,
        world=world,
        worker=worker,
        workers=workers,
        seed=p.seed,
        epoch=epoch,
        shuffle=p.shuffle,
        options=dataset.budget,
    )
