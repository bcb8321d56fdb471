"""What ShardDataset asks of a token budget: the options checked at construction, a place's epoch plan.

Kept here so the dataset only names the budget (three calls), and the planning stays with its kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
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


def budget_identity(options: BudgetOptions | None) -> dict[str, Any]:
    """What a saved state must share with the dataset that loads it: the budget's options ({} without)."""
    return {} if options is None else {"budget": asdict(options)}


def check_budget_state(
    state: Mapping[str, Any] | Sequence[Mapping[str, Any]], options: BudgetOptions | None
) -> None:
    """ValueError unless ``state`` was saved with this budget (or both without one); an elastic restore
    (a list of states) of budgeted batches is refused: its re-deal of what is left is not written yet."""
    if isinstance(state, Sequence):
        budgeted = options is not None or any(isinstance(s, Mapping) and s.get("budget") for s in state)
        if budgeted:
            raise ValueError(
                "an elastic restore (a list of states) with batch_tokens is not supported yet: resume on the "
                "same world size and workers with this rank's own state"
            )
        return
    saved, wanted = state.get("budget"), budget_identity(options).get("budget")
    if saved != wanted:
        raise ValueError(
            f"the state was saved with batch_tokens options {saved}, not {wanted}: batches depend on them, "
            "so load it into a dataset made with the same batch_tokens, batching, batch_window and overlong"
        )
