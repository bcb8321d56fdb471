"""A ShardDataset worker's chain for its place and epoch: reader -> shuffle buffer -> fetch -> decode ->
stand-ins (or budgeted batches, or skips), only the nodes its options need.

Trade-off: as for a mixture (``mixture/chain.py``), a saved state's keys depend on the options, so a
state is checked against the chain the same options build (``reads`` False: the same chain without a
fetch stage, whose state is its source's, and so without opening a sidecar).
"""

from __future__ import annotations

import warnings
from typing import Any

from ..budget.node import BudgetBatches
from ..budget.plan import SlotPlan
from ..chain.deferred import Fetch, deferred_reads
from ..chain.mapper import Mapper
from ..chain.node import Node
from ..chain.opener import ShardOpener
from ..chain.reader import SampleReader
from ..chain.recovery import Recovery
from ..chain.shuffle import ShuffleBuffer, buffer_seed
from ..chain.skips import skipping
from ..chain.standins import StandIns
from ..decode.make import for_epoch
from ..elastic.deal import Plan, Stream
from ..placement.segments import (
    ResampledShards,
    Segments,
    WholeShards,
    counted_segments,
    rank_quota,
    shard_order,
)
from .base import Place


def build_shard_chain(
    ds: Any, place: Place, epoch: int, plan: Plan | None, slot: SlotPlan | None, *, reads: bool, counters: Any
) -> Node:
    """``ds``'s chain at ``place`` in ``epoch``. The fetch reads, as they leave the buffer, the samples the
    reader only named (``chain/deferred.py``). ``plan``: an elastic restore's deal (None: the place's
    own segments); ``slot``: a budget's plan for this place (None: no budget); ``counters``: the
    dataset's shared error counters."""
    reading, counted = ds.reading, ds.shards.counts is not None and not ds.placement.resampled
    opener = ShardOpener(
        ds.shards,
        reading.open,
        fields=reading.fields,
        prefetch=reading.prefetch,
        prefetch_bytes=reading.prefetch_bytes,
        zero_copy=reading.zero_copy,
    )
    recovery = Recovery(ds.error_handling, counters=counters, counted=counted, locate=opener.sample_offset)
    if slot is not None:
        segments: Segments = slot.segments
    else:
        segments = place_segments(ds, place, epoch) if plan is None else plan_segments(ds, plan, epoch)
    shuffled = ds.placement.shuffle and reading.buffer_size > 1
    deferred = None
    if shuffled and reads:
        first = _first_shard(segments)
        deferred = deferred_reads(opener, reading.defer_reads, first, remote=True)  # its reader advises
    node: Node = SampleReader(opener, segments, recovery, deferred=deferred)
    if shuffled:
        seed = buffer_seed(ds.placement.seed, epoch, *place)
        node = ShuffleBuffer(node, size=reading.buffer_size, initial=reading.initial, seed=seed)
    if deferred is not None:
        node = Fetch(node, deferred, recovery)
    if ds.decoder is not None:
        node = Mapper(node, for_epoch(ds.decoder, ds.placement.seed, epoch), recovery)
    if slot is not None:  # batches, exactly the target's: the count holds without stand-ins
        node = BudgetBatches(node, slot, ds.budget.options, ds.budget.costs, counters)
    elif recovery.owes:  # only a policy that skips, with a length promised, can owe stand-ins
        node = StandIns(node, recovery)
    # Skips leave an elastic restore's epoch alone: it is read whole, its deal is not a plan's.
    if ds.skips and plan is None:
        target = slot.target if slot is not None else None  # a budget's batches, else samples
        quota = rank_quota(ds.shards.total or 0, place[1], ds.placement.remainder)
        node = skipping(node, ds.skips, place, epoch, quota, ds.batch_size, target, counters)
    return node


def plan_segments(ds: Any, plan: Plan, epoch: int) -> Segments:
    """The segments of an elastic restore's deal ``plan`` in ``epoch``'s shard order."""
    p, counts = ds.placement, ds.shards.counts
    if counts is None:
        raise ValueError("an elastic restore's deal needs the index's per-shard counts")
    return Stream(counts, shard_order(len(ds.shards), p.seed, epoch, p.shuffle)).segments(plan)


def place_segments(ds: Any, place: Place, epoch: int) -> Segments:
    """The segments ``place`` reads in ``epoch``: counted, resampled, or (no counts) whole shards."""
    rank, world, worker, workers = place
    p, n = ds.placement, len(ds.shards)
    common = {
        "rank": rank,
        "world": world,
        "worker": worker,
        "workers": workers,
        "seed": p.seed,
        "epoch": epoch,
    }
    if p.resampled:
        return ResampledShards(n, **common)
    if ds.shards.counts is not None:
        return counted_segments(ds.shards.counts, shuffle=p.shuffle, remainder=p.remainder, **common)
    if world * workers > 1:
        warnings.warn(
            f"{ds.shards.source}: no per-shard sample counts (pass the packer's index), so shards are "
            "dealt whole and ranks may yield different sample counts (DDP can hang on the last step)",
            stacklevel=5,  # the caller of iter(dataset)
        )
    return WholeShards(n, shuffle=p.shuffle, **common)


def _first_shard(segments: Segments) -> int | None:
    try:
        return segments[0].shard
    except IndexError:  # nothing to read in this place
        return None
