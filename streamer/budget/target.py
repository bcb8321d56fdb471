"""How many batches every rank and worker yields in an epoch: one number, the same everywhere.

A probe batches the epoch's first samples unpaced (as full as batches get) through the window a slot
has, as one slot would: the batches made while the window is full give ``fill`` (their mean cost over
the budget); the window drained at the end gives ``drain_cost`` and ``drain_batches`` (draining, the
pool runs out of partners and fills worse: for "pad" at a window of 1,024, that is dozens of batches).
With C the epoch's cost as the overlong rule keeps it (the weighed sums) and S the slots (ranks x
workers), ``target = ceil(max(C/S - drain_cost, 0) / (budget x fill)) + drain_batches + margin``, the
margin 1 (a slot may cost a sample more than the mean), for "pad" ``ceil(sqrt(drain_batches))``: its
drain varies by about that much. A slot holding fewer samples than the probe wants is
probed at its own size, all of it a drain. No worker talks to another. The target is an estimate of
what each worker can fill; the batcher holds every worker to it exactly, so an estimate off by a
fraction moves only how full the batches are and how much is left out (both counted), never the step
count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from .batcher import unpaced_batches

OVERLONG = ("skip", "truncate", "error")
PROBE_SAMPLES = 4_096  # fill to about +-0.2% on a log-normal spread at window 64; a few columns read


@dataclass(frozen=True, kw_only=True)
class Probe:
    """What unpaced batching made of the probed costs: ``kept`` (the share of cost the overlong rule
    keeps), ``fill`` (mean cost over the budget of the batches made with the window full; 1 when none
    were), ``drain_cost`` and ``drain_batches`` (the window drained at the end), ``margin`` (batches
    planned past the estimate)."""

    kept: float = 1.0
    fill: float = 1.0
    drain_cost: int = 0
    drain_batches: int = 0
    margin: int = 1

    def weighed(self) -> Probe:
        """This probe for costs the overlong rule has already weighed (the weighed sums): all kept."""
        return replace(self, kept=1.0)


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


def probe(costs: Iterable[int], *, budget: int, window: int, mode: str, overlong: str) -> Probe:
    """The probe of a sample of the epoch's costs (see the module)."""
    raw = kept = 0
    admitted = []
    for cost in costs:
        raw += cost
        cost_in = admit(cost, budget, overlong)
        if cost_in is not None:
            kept += cost_in
            admitted.append(cost_in)
    full, drained = unpaced_batches(admitted, budget=budget, window=window, mode=mode)
    # No full batch, or only batches of zero cost (count-limited: costs carry no information): fill 1.
    fill = sum(full) / (len(full) * budget) if sum(full) else 1.0
    # The margin: one batch for a slot costing a sample more than the mean; "pad" drains in runs of like
    # costs that a slot's own samples may lack, so its drain varies by about its square root in batches
    # (a small slot's whole epoch is a drain: there the +1 alone left 1.1% over). "pack" drains in a few
    # full batches: the +1 left nothing over in 1,500 random epochs, and each batch more costs fill.
    margin = max(1, math.ceil(math.sqrt(len(drained)))) if mode == "pad" else 1
    return Probe(
        kept=kept / raw if raw else 1.0,
        fill=fill,
        drain_cost=sum(drained),
        drain_batches=len(drained),
        margin=margin,
    )


def target_batches(total_cost: int, slots: int, *, budget: int, probe: Probe) -> int:
    """Batches per rank and worker: at least 1."""
    if slots < 1:
        raise ValueError(f"slots must be >= 1, not {slots}")
    per_slot = total_cost * probe.kept / slots
    # Exact in integers where it can be: C/S - drain over budget x fill, rounded up.
    steady = max(per_slot - probe.drain_cost, 0.0)
    return max(1, int(-(-steady // (budget * probe.fill))) + probe.drain_batches + probe.margin)
