"""A mixture changed mid-epoch, on the pure functions: the rest of the epoch and the epoch after, dealt
from one rank's counts, read every source's stream without a repeat or a skip (what is read plus what is
carried is always a prefix of the stream, each position once), with equal ranks and the new shares, for
random weights, topologies, windows and change points; and schedules turned round at the change."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.chain.skips import step_of
from streamer.datasets.options import Placement
from streamer.mixture.carry import Position, positions_of
from streamer.mixture.plan import Share
from streamer.mixture.rest import changed_pending, place_deal, scheduled_after
from streamer.mixture.restore import elastic_pending
from streamer.mixture.resume import resume_point
from streamer.mixture.schedule import Schedule
from streamer.mixture.shape import MixtureShape
from streamer.placement.shards import ShardList
from tests.streamer.mixture.test_mixelastic import counts_after, handed


def _shape(sizes, weights, *, world, epoch_size, buffer, seed, schedules=None, per_batch=None):
    lists = [
        ShardList([f"s{j}-{i}" for i in range(len(c))], np.asarray(c, dtype=np.int64), source=f"s{j}")
        for j, c in enumerate(sizes)
    ]
    bases = [0, *itertools.accumulate(len(c) for c in sizes)][:-1]
    shares = [
        Share(f"s{j}", sum(c), "weight", w) for j, (c, w) in enumerate(zip(sizes, weights, strict=True))
    ]
    placement = Placement(shuffle=True, seed=seed, remainder="drop", rank=0, world_size=world)
    return MixtureShape(
        shares,
        lists,
        bases,
        placement=placement,
        epoch_size=epoch_size,
        buffer_size=buffer,
        schedules=schedules,
        per_batch=per_batch,
    )


def _read_deal(deal):
    """Every pass-stream position a place's deal reads, per source (read whole: its order does not matter)."""
    return [[x for a, b in plan.spans for x in range(a, b)] for plan in deal.plans]


def _check_prefix(read, carried, j):
    """Source j: read positions each once, and with what is still carried, exactly [0, n)."""
    assert max(read.values(), default=1) == 1, (j, [p for p, n in read.items() if n > 1][:5])
    every = sorted([*read, *(x for a, b in carried for x in range(a, b))])
    assert every == list(range(len(every))), (j, every[:20])


def _change(old, new, *, world, workers, fraction, rng, epoch=0):
    """Epoch ``epoch`` under ``old`` from the sources' starts (0), each worker index stopped part-way (the
    same on every rank); the rest under ``new``. Returns the positions read per source, the pending, and
    each rank's samples."""
    plan = old.epoch_plan(world, workers, epoch)
    names = old.names
    stops = [int(plan.worker_length(w) * fraction * rng.random()) for w in range(workers)]
    counts = [counts_after(plan.budgets(w), stops[w]) for w in range(workers)]
    read = [Counter() for _ in names]
    per_rank = Counter()
    for rank, w in itertools.product(range(world), range(workers)):
        budgets = plan.budgets(w)
        for j in range(len(names)):
            begin, end = plan.worker_range(j, rank, w)
            window = old.window(budgets[j], sum(budgets))
            read[j].update(handed(old.pass_stream(j), (begin, end), max(1, window), counts[w][j]))
        per_rank[rank] += stops[w]
    per_epoch = plan.per_epoch()
    states = [
        {
            "epoch": epoch,
            "place": [0, world, w, workers],
            "node": {"counts": counts[w]},
            "left": plan.worker_length(w) - stops[w],
            "sources": {n: [0, m] for n, m in zip(names, per_epoch, strict=True)},
            "weights": old.weights_state(),
            **old.identity(),
        }
        for w in range(workers)
    ]
    pending = changed_pending(new, states, whole=True)
    at = positions_of(pending, names)
    for rank, w in itertools.product(range(world), range(workers)):
        deal = place_deal(new, epoch, at, (rank, world, w, workers), pending["rest"])
        assert sum(deal.budgets) == pending["rest"]["lengths"][w] == plan.worker_length(w) - stops[w]
        for j, positions in enumerate(_read_deal(deal)):
            assert len(positions) == deal.budgets[j]
            read[j].update(positions)
        per_rank[rank] += sum(deal.budgets)
    return read, pending, per_rank, plan


@settings(max_examples=120, deadline=None)
@given(
    sizes=st.lists(st.lists(st.integers(1, 40), min_size=1, max_size=3), min_size=2, max_size=3),
    before=st.lists(st.integers(1, 5), min_size=3, max_size=3),
    after=st.lists(st.integers(1, 5), min_size=3, max_size=3),
    world=st.integers(1, 3),
    workers=st.integers(1, 3),
    epoch_size=st.integers(12, 300),
    buffer=st.sampled_from([1, 4, 32]),
    fraction=st.sampled_from([0.0, 0.5, 1.0]),
    seed=st.integers(0, 10**6),
)
def test_a_change_mid_epoch_reads_every_stream_as_a_prefix_with_equal_ranks_and_the_new_shares(
    sizes, before, after, world, workers, epoch_size, buffer, fraction, seed
):
    rng = random.Random(seed)
    k = len(sizes)
    options = {"world": world, "epoch_size": epoch_size, "buffer": buffer, "seed": seed}
    old, new = _shape(sizes, before[:k], **options), _shape(sizes, after[:k], **options)
    try:
        old.plan(world, workers)
    except ValueError:
        return  # an epoch too small for this many workers: refused at plan time, as Mixture does
    read, pending, per_rank, plan = _change(
        old, new, world=world, workers=workers, fraction=fraction, rng=rng
    )
    assert set(per_rank.values()) == {plan.rank_length}  # every rank its whole epoch, the same length
    for w, length in enumerate(pending["rest"]["lengths"]):  # the rest in the new shares, each within 1
        deal = place_deal(new, 0, positions_of(pending, new.names), (0, world, w, workers), pending["rest"])
        for j, budget in enumerate(deal.budgets):
            assert abs(budget - Fraction(after[j], sum(after[:k])) * length) < 1
    # What every source has read or carries is a prefix of its stream, each position once, after the rest
    # and after each of two epochs under the new weights (which read any carry first).
    at = {
        n: Position(p.carry, p.start).advance(int(pending["sources"][n][1]))
        for n, p in positions_of(pending, new.names).items()
    }
    for j, name in enumerate(new.names):
        _check_prefix(read[j], at[name].carry, j)
    for epoch in (1, 2):
        epoch_plan = new.epoch_plan(world, workers, epoch)
        for rank, w in itertools.product(range(world), range(workers)):
            deal = place_deal(new, epoch, at, (rank, world, w, workers))
            assert sum(deal.budgets) == epoch_plan.worker_length(w)
            for j, positions in enumerate(_read_deal(deal)):
                read[j].update(positions)
        at = {n: at[n].advance(m) for n, m in zip(new.names, epoch_plan.per_epoch(), strict=True)}
        for j, name in enumerate(new.names):
            _check_prefix(read[j], at[name].carry, j)


@settings(max_examples=40, deadline=None)
@given(
    world=st.integers(1, 3),
    workers=st.integers(1, 3),
    change=st.integers(0, 30),
    turn=st.integers(1, 40),
    per_batch=st.sampled_from([1, 4, 8]),
    seed=st.integers(0, 10**6),
)
def test_a_schedule_turned_round_mid_epoch_takes_the_new_weights_from_the_next_step(
    world, workers, change, turn, per_batch, seed
):
    """Stages before: s0 only until ``turn``, s1 after; after the change, the reverse. Every worker's rest
    reads only the source its steps' new weights name, and every stream stays a prefix."""
    rng = random.Random(seed)
    sizes = [[50, 70], [90]]
    first = (Schedule.of({"stages": [[0, 1], [turn, 0]]}), Schedule.of({"stages": [[0, 0], [turn, 1]]}))
    second = (first[1], first[0])
    options = {"world": world, "epoch_size": 240, "buffer": 8, "seed": seed, "per_batch": per_batch}
    old = _shape(sizes, [1, 1], schedules=first, **options)
    new = _shape(sizes, [1, 1], schedules=second, **options)
    read, pending, per_rank, plan = _change(old, new, world=world, workers=workers, fraction=1.0, rng=rng)
    assert set(per_rank.values()) == {plan.rank_length}
    step = pending["rest"]["step"]
    assert step <= plan.steps
    at = positions_of(pending, new.names)
    lengths = pending["rest"]["lengths"]
    batches = [-(-n // per_batch) for n in lengths]
    for w in range(workers):
        deal = place_deal(new, 0, at, (0, world, w, workers), pending["rest"])
        if deal.shares is None:
            assert lengths[w] == 0
            continue
        # The rest's share of s0 at each of its pieces: 1 from step ``turn`` on, 0 before (the new stages),
        # the step counted from the change's: the global step of the worker's rest batch there.
        for k, start in enumerate(deal.shares.starts):
            global_step = step + step_of(batches, w, start // per_batch)
            assert deal.shares.rate[0][k] == (1 if global_step >= turn else 0), (w, k, global_step)
        assert deal.budgets == deal.shares.budgets()
    ends = {n: p.advance(int(pending["sources"][n][1])) for n, p in at.items()}
    for j, name in enumerate(new.names):
        _check_prefix(read[j], ends[name].carry, j)


def _loader_state(states):
    """A StatefulDataLoader's state holding these worker states (its shape is all the restore reads)."""
    snapshots = {f"worker_{w}": {"dataset_state": s} for w, s in enumerate(states)}
    return {"_snapshot": {"_worker_snapshots": snapshots}, "_steps_since_snapshot": 0}


@settings(max_examples=60, deadline=None)
@given(
    old=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    new=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    turn=st.integers(1, 40),
    per_batch=st.sampled_from([1, 4, 8]),
    fraction=st.sampled_from([0.3, 1.0]),
    seed=st.integers(0, 10**6),
)
def test_a_scheduled_elastic_restore_keeps_the_schedule_and_reads_every_stream_as_a_prefix(
    old, new, turn, per_batch, fraction, seed
):
    """A stage switch at ``turn``; a checkpoint on ``old`` (world, workers), every rank's states gathered,
    restored on ``new``: every new rank the same quota, each worker's rest in the schedule's shares from
    the checkpoint's step, and every source's reads plus its carry a prefix of its stream, each position
    once, after the restored epoch and the next."""
    rng = random.Random(seed)
    sizes = [[50, 70], [90]]
    schedules = (Schedule.of({"stages": [[0, 1], [turn, 0]]}), Schedule.of({"stages": [[0, 0], [turn, 1]]}))
    options = {"epoch_size": 240, "buffer": 8, "seed": seed, "per_batch": per_batch, "schedules": schedules}
    world, workers = old
    shape = _shape(sizes, [1, 1], world=world, **options)
    plan = shape.epoch_plan(world, workers, 0)
    stops = [
        int(plan.worker_length(w) * fraction * rng.random()) // per_batch * per_batch for w in range(workers)
    ]
    counts = [counts_after(plan.budgets(w), stops[w]) for w in range(workers)]
    read = [Counter() for _ in shape.names]
    ranks = []
    for rank in range(world):
        states = []
        for w in range(workers):
            budgets = plan.budgets(w)
            for j in range(len(sizes)):
                run = plan.worker_range(j, rank, w)
                window = max(1, shape.window(budgets[j], sum(budgets)))
                read[j].update(handed(shape.pass_stream(j), run, window, counts[w][j]))
            states.append(
                {
                    "epoch": 0,
                    "place": [rank, world, w, workers],
                    "node": {"counts": counts[w]},
                    "left": plan.worker_length(w) - stops[w],
                    "sources": {n: [0, m] for n, m in zip(shape.names, plan.per_epoch(), strict=True)},
                    **shape.identity(),
                }
            )
        ranks.append(_loader_state(states))
    pending, _ = elastic_pending(shape, ranks, per_batch=per_batch)
    steps_done = sum(-(-s // per_batch) for s in stops)
    assert pending["step"] == steps_done
    world, workers = new
    totals = Counter()
    for rank, w in itertools.product(range(world), range(workers)):
        _, _, deal = resume_point(shape, pending, (rank, world, w, workers), 0)
        totals[rank] += sum(deal.budgets)
        for j, positions in enumerate(_read_deal(deal)):
            read[j].update(positions)
        if deal.shares is not None:  # the schedule from the checkpoint's step on
            batches = [-(-n // per_batch) for n in deal.rest["lengths"]]
            for k, start in enumerate(deal.shares.starts):
                step = steps_done + step_of(batches, w, start // per_batch)
                assert deal.shares.rate[0][k] == (1 if step < turn else 0), (w, k, step)
    assert len(set(totals.values())) == 1
    at = {n: p for n, (_, p) in scheduled_after(shape, pending, world, workers).items()}
    for j, name in enumerate(shape.names):
        _check_prefix(read[j], at[name].carry, j)
    for rank, w in itertools.product(range(world), range(workers)):
        for j, positions in enumerate(_read_deal(place_deal(shape, 1, at, (rank, world, w, workers)))):
            read[j].update(positions)
    moved = shape.epoch_plan(world, workers, 1).per_epoch()
    for j, name in enumerate(shape.names):
        _check_prefix(read[j], at[name].advance(moved[j]).carry, j)
