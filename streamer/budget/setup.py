"""What ShardDataset asks of a token budget: the options checked at construction, a place's epoch plan.

Kept here so the dataset only names the budget (a few calls), and the planning stays with its kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from .columns import CostColumns, check_costed
from .plan import BudgetOptions, SlotPlan, slot_plan, weighed_sums

WINDOWS = {"pack": 64, "pad": 1024}  # pad needs runs of like costs, rare among 64 samples


class Budget:
    """A dataset's budget: its ``options``, its cost column reader (``costs``) and every shard's cost
    as the overlong rule keeps it (``sums``, read once when the dataset is made)."""

    def __init__(self, options: BudgetOptions, costs: CostColumns, sums: Any) -> None:
        self.options, self.costs, self.sums = options, costs, sums


def budget_of(
    shards: Any,
    placement: Any,
    opening: Any,
    tokens: int | None,
    batching: str,
    window: int | None,
    overlong: str,
) -> Budget | None:
    """The budget ``ShardDataset(batch_tokens=...)`` asked for (``opening``: the dataset's OpenOptions),
    or None; ValueError naming the option. Reads every shard's cost column once, for the deal."""
    if tokens is None:
        return None
    options = BudgetOptions(
        budget=tokens, mode=batching, window=window or WINDOWS.get(batching, 64), overlong=overlong
    )
    check_costed(shards)
    if placement.resampled:
        raise ValueError("batch_tokens plans each epoch from its samples; resampled=True draws forever")
    costs = CostColumns(shards, opening)
    return Budget(options, costs, weighed_sums(shards.counts, costs, options))


def budget_plan(dataset: Any, place: tuple[int, int, int, int], epoch: int) -> SlotPlan:
    """The epoch of one rank and worker under the dataset's budget."""
    rank, world, worker, workers = place
    p, budget = dataset.placement, dataset.budget
    return slot_plan(
        dataset.shards.counts,
        budget.sums,
        budget.costs,
        rank=rank,
        world=world,
        worker=worker,
        workers=workers,
        seed=p.seed,
        epoch=epoch,
        shuffle=p.shuffle,
        options=budget.options,
    )


def budget_identity(budget: Budget | None) -> dict[str, Any]:
    """What a saved state must share with the dataset that loads it: the budget's options ({} without)."""
    return {} if budget is None else {"budget": asdict(budget.options)}


def check_budget_state(state: Mapping[str, Any] | Sequence[Mapping[str, Any]], budget: Budget | None) -> None:
    """ValueError unless ``state`` was saved with this budget (or both without one); an elastic restore
    (a list of states) of budgeted batches is refused: its re-deal of what is left is not written yet."""
    if isinstance(state, Sequence):
        budgeted = budget is not None or any(isinstance(s, Mapping) and s.get("budget") for s in state)
        if budgeted:
            raise ValueError(
                "an elastic restore (a list of states) with batch_tokens is not supported yet: resume on the "
                "same world size and workers with this rank's own state"
            )
        return
    saved, wanted = state.get("budget"), budget_identity(budget).get("budget")
    if saved != wanted:
        raise ValueError(
            f"the state was saved with batch_tokens options {saved}, not {wanted}: batches depend on them, "
            "so load it into a dataset made with the same batch_tokens, batching, batch_window and overlong"
        )
