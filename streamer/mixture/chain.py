"""A mixture worker's chain: reader -> fetch -> decode -> stand-ins (or budgeted batches), built per place.

Trade-off: the chain takes only the nodes these options need (no fetch stage without deferred reads, no
decoder without one), so a saved state's keys depend on the options: ``check_chain_state`` checks a state
against the chain that the same options build.
"""

from __future__ import annotations

from typing import Any

from ..budget.node import BudgetBatches
from ..chain.deferred import Fetch
from ..chain.mapper import Mapper
from ..chain.node import Node
from ..chain.recovery import Recovery
from ..chain.skips import skipping
from ..chain.standins import StandIns
from ..decode.make import for_epoch
from .budget import budget_deal, budget_first_step
from .elastic import PlanStream
from .fetch import SourceReads
from .passes import PassStream
from .plan import MixturePlan
from .reader import MixtureReader
from .rest import Restored
from .resume import Place
from .scheduled import ScheduledPlan
from .source import SampleOffsets, SourceDecoders, source_opener
from .windows import worker_windows


def build_chain(
    mix: Any, place: Place, epoch: int, restored: Restored | None, *, reads: bool, counters: Any
) -> Node:
    """``mix``'s chain at ``place`` in ``epoch``. ``restored``: an elastic restore's deal; ``reads``
    False: no fetch stage (its state is its source's) and no sidecar opened, for checking a saved state;
    ``counters``: the mixture's shared error counters."""
    plan = mix.shape.epoch_plan(place[1], place[3], epoch)
    slot = None
    if mix.budget is not None:
        restored, slot = budget_deal(mix, place, epoch)
    # An elastic restore deals each source spans of its pass stream: their budgets, not the plan's.
    budgets = restored.budgets if restored is not None else plan.budgets(place[2])
    openers = [source_opener(mix.shards, mix.reading, s) for s in mix.sources]
    recovery = Recovery(
        mix.error_handling, counters=counters, counted=True, locate=SampleOffsets(openers, mix.bases)
    )
    runs = [
        source_run(mix, j, at.start, plan, place, restored) for j, at in enumerate(mix.positions(epoch, plan))
    ]
    sizes = [mix.shape.window(budget, sum(budgets)) for budget in budgets]
    defer = mix.reading.defer_reads if reads else False
    windows = worker_windows(mix.names, openers, runs, sizes, recovery, defer)
    if restored is not None:  # a schedule's running shares come with a carried or changed epoch's deal
        shares = restored.shares
    else:
        shares = plan.shares[place[2]] if isinstance(plan, ScheduledPlan) else None
    reader = MixtureReader(
        windows, budgets, mix.bases, max_open=mix.max_open, stratify=mix.stratify, shares=shares
    )
    node: Node = reader
    if any(w.deferred is not None for w in windows):
        node = Fetch(node, SourceReads(windows, mix.bases, reader.touch), recovery)
    if any(decode is not None for decode in mix.decoders):  # one sample at a time, as they leave
        decoders = for_epoch(SourceDecoders(mix.names, mix.decoders), mix.placement.seed, epoch)
        node = Mapper(node, decoders, recovery)
    if slot is not None:  # batches, exactly the target's: the count holds without stand-ins
        node = BudgetBatches(node, slot, mix.budget.options, mix.budget.costs, counters)
    elif recovery.owes:
        node = StandIns(node, recovery)
    # Skips leave an epoch dealt after a change or an elastic restore alone: it is read whole.
    if mix.skips and (restored is None or restored.by in ("carry", "budget")):
        target, first = None, None  # a budget's batches (else samples), counted from the earlier epochs'
        if slot is not None:
            target, first = slot.target, budget_first_step(mix, place[1], place[3], epoch)
        node = skipping(
            node, mix.skips, place, epoch, plan.rank_length, mix.batch_size, target, counters, first
        )
    return node


def source_run(
    mix: Any, j: int, start: int, plan: MixturePlan | ScheduledPlan, place: Place, restored: Restored | None
) -> tuple[PassStream | PlanStream, int, int]:
    """Source ``j``'s stream for this worker and its run of it: the plan's range of the pass stream from
    ``start``, or an elastic restore's spans."""
    stream: PassStream | PlanStream = mix.shape.pass_stream(j)
    if restored is not None:
        stream = PlanStream(stream, restored.plans[j].spans)
        return stream, 0, stream.size
    begin, end = plan.worker_range(j, place[0], place[2])
    return stream, start + begin, start + end
