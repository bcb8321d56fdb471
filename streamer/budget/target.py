"""How many batches every rank and worker yields in an epoch: one number, the same everywhere.

``target = ceil(C / (S x budget x fill)) + 1``: C the epoch's cost as the overlong rule keeps it (the
weighed sums), S the slots (ranks x workers), ``fill`` how full the batcher's unpaced batches come out on
the first shards (a dataset probes them once, in index order; every worker reads them alike), and one
batch more for the window each worker drains at its end. No worker talks to another. The target is an
estimate of what each worker can fill; the batcher holds every worker to it exactly, so an estimate off
by a fraction moves only how full the batches are and how much is left out (both counted), never the
step count. (``probe`` also reports ``kept``, the share of cost the overlong rule keeps, for callers
that deal by raw cost.)
"""

from __future__ import annotations

from collections.abc import Iterable

from .batcher import unpaced_costs

OVERLONG = ("skip", "truncate", "error")
PROBE_SAMPLES = 4_096  # fill to about +-0.2% on a log-normal spread at window 64; a few columns read


def admit(cost: int, budget: int, overlong: str) -> int | None:
    """A sample's cost as the batcher sees it: itself within the budget; over it, None ("skip"), the budget
    ("truncate": the user cuts the sample to it), or a ValueError ("error")."""
    if cost <= budget:
        return cost
    if overlong == "skip":
        return None
    if overlong == "truncate":
        return budget
    raise ValueError(f"a sample costs {cost}, over the batch budget {budget} (overlong='error')")


def probe(costs: Iterable[int], *, budget: int, window: int, mode: str, overlong: str) -> tuple[float, float]:
    """(kept, fill) of a sample of the epoch's costs: the share of cost left after the overlong rule, and
    the mean batch cost over the budget, unpaced, leaving out the batches made while draining the window."""
    raw = kept = 0
    admitted = []
    for cost in costs:
        raw += cost
        cost_in = admit(cost, budget, overlong)
        if cost_in is not None:
            kept += cost_in
            admitted.append(cost_in)
    full = list(unpaced_costs(admitted, budget=budget, window=window, mode=mode))
    fill = sum(full) / (len(full) * budget) if full else 1.0
    return (kept / raw if raw else 1.0), max(fill, 1e-9)


def target_batches(total_cost: int, slots: int, *, budget: int, kept: float, fill: float) -> int:
    """Batches per rank and worker: at least 1."""
    if slots < 1:
        raise ValueError(f"slots must be >= 1, not {slots}")
    return max(1, -int(-(total_cost * kept) // (slots * budget * fill)) + 1)
