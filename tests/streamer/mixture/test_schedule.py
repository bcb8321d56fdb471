"""Mixture schedules, planned: a worker's picks follow the schedule's running share within one sample at
every prefix, end exactly on its budgets, and continue from any counts as the uninterrupted run does."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamer.chain.skips import step_of
from streamer.mixture.schedule import Schedule, ScheduledOrder, pieces, shares_at


def _steps(length: int, per_batch: int, worker: int, workers: int, lengths: list[int]) -> list[int]:
    batches = [-(-n // per_batch) for n in lengths]
    return [step_of(batches, worker, t) for t in range(-(-length // per_batch))]


def _running(schedules, length, per_batch, first_step, steps):
    """Q_j(p) for p = 0..length by brute force: one position at a time, its batch's step's shares."""
    q = [[Fraction(0)] for _ in schedules]
    for p in range(length):
        shares = shares_at(schedules, first_step + steps[p // per_batch])
        for j, share in enumerate(shares):
            q[j].append(q[j][-1] + share)
    return q


def check(schedules, length, per_batch, worker, workers, first_step, cut):
    lengths = [length + (1 if w < worker else 0) for w in range(workers)]
    steps = _steps(length, per_batch, worker, workers, lengths)
    shares = pieces(schedules, length=length, per_batch=per_batch, first_step=first_step, steps=steps)
    budgets = shares.budgets()
    q = _running(schedules, length, per_batch, first_step, steps)
    assert [shares.total(j) for j in range(len(schedules))] == [row[-1] for row in q]
    assert sum(budgets) == length
    assert all(abs(b - row[-1]) < 1 for b, row in zip(budgets, q, strict=True))
    order = ScheduledOrder(shares, budgets)
    picks = order.fill(length + 5)
    assert len(picks) == length and list(order.counts) == budgets
    counts = [0] * len(schedules)
    for p, j in enumerate(picks, start=1):
        counts[j] += 1
        for i, count in enumerate(counts):  # every prefix within one sample of the running share
            assert abs(count - q[i][p]) < 1, (p, i, count, q[i][p])
    # From the counts at any cut, the same continuation (the state is the counts alone).
    done = [picks[:cut].count(j) for j in range(len(schedules))]
    again = ScheduledOrder(shares, budgets, done)
    assert again.fill(length) == picks[cut:]


ODD = [Fraction(1, 10), Fraction(7, 3), Fraction(1, 1000)]
weights = st.integers(0, 6).map(Fraction) | st.sampled_from(ODD)


@st.composite
def schedules(draw):
    count = draw(st.integers(1, 4))
    out = []
    for _ in range(count):
        kind = draw(st.sampled_from(["stages", "ramp"]))
        steps = sorted(set(draw(st.lists(st.integers(0, 60), min_size=1, max_size=4))))
        out.append(Schedule(points=tuple((s, draw(weights)) for s in steps), kind=kind))
    # Every step reads something: the last source never drops to 0.
    last = out[-1]
    out[-1] = Schedule(points=tuple((s, w + 1) for s, w in last.points), kind=last.kind)
    return out


@settings(max_examples=150, deadline=None)
@given(
    schedules(),
    st.integers(1, 90),
    st.integers(1, 7),
    st.integers(1, 4),
    st.integers(0, 40),
    st.data(),
)
@example(
    [Schedule.of(1), Schedule.of({"ramp": [[0, 0], [3, 5]]})],
    40,
    4,
    2,
    0,
    None,
)
def test_every_prefix_is_within_one_sample_of_the_running_share(
    plans, length, per_batch, workers, first_step, data
):
    worker = data.draw(st.integers(0, workers - 1)) if data is not None else 0
    cut = data.draw(st.integers(0, length)) if data is not None else length // 2
    check(plans, length, per_batch, worker, workers, first_step, cut)


def test_a_stage_change_moves_the_share_at_its_step_on_every_worker():
    """Two workers, batches of 4, source b from 0 to all of it at global step 4 (each worker's third
    batch: steps 0, 2 and 4 are worker 0's): the picks change at that batch, not before."""
    plans = [Schedule.of({"stages": [[0, 1], [4, 0]]}), Schedule.of({"stages": [[0, 0], [4, 1]]})]
    for worker in range(2):
        steps = _steps(16, 4, worker, 2, [16, 16])
        shares = pieces(plans, length=16, per_batch=4, first_step=0, steps=steps)
        picks = ScheduledOrder(shares, shares.budgets()).fill(16)
        change = 8  # local batch 2: step 4 (worker 0) or 5 (worker 1)
        assert picks[:change] == [0] * change and picks[change:] == [1] * (16 - change)


def test_schedules_parse_from_plain_data_and_refuse_bad_input():
    ramp = Schedule.of({"ramp": [[0, 0.1], [10, 0.3]]})
    assert ramp.at(0) == Fraction(1, 10) and ramp.at(5) == Fraction(2, 10) and ramp.at(99) == Fraction(3, 10)
    assert ramp.changes(0, 100) == list(range(1, 11))
    stages = Schedule.of({"stages": [[100, 2], [200, 1]]})
    assert stages.at(0) == 2 and stages.at(150) == 2 and stages.at(200) == 1
    assert stages.changes(0, 1000) == [100, 200] and stages.changes(150, 1000) == [200]
    assert Schedule.of(0.5).constant and not stages.constant
    for bad, named in [
        ({"stage": [[0, 1]]}, "stages"),
        ({"stages": [[0, -1]]}, ">= 0"),
        ({"stages": [[5, 1], [5, 2]]}, "increase"),
        ({"stages": [[-1, 1]]}, ">= 0"),
        ({"stages": []}, "at least one"),
        ({"ramp": [1, 2]}, "pairs"),
        ("x", "number"),
    ]:
        with pytest.raises(ValueError, match=named):
            Schedule.of(bad)
    with pytest.raises(ValueError, match="every source's weight is 0"):
        shares_at([Schedule.of({"stages": [[0, 1], [3, 0]]})], 3)


def test_a_sample_due_where_the_share_reaches_a_whole_number_is_not_late():
    """Steps 0-1: weights 1, 1, 2 (the last source's share reaches exactly 1 after two samples); then 1,
    1, 0. Its sample is due at position 2, not when the share passes 1 (never): three sources ready at
    once, the earlier two first on a tie, would leave it a whole sample behind."""
    check([Schedule.of(1), Schedule.of(1), Schedule.of({"stages": [[0, 2], [2, 0]]})], 4, 1, 0, 1, 0, 2)


@settings(max_examples=60, deadline=None)
@given(
    schedules(),
    st.lists(st.integers(1, 200), min_size=4, max_size=4),
    st.integers(1, 5),
    st.integers(1, 4),
    st.integers(1, 6),
    st.integers(0, 3),
)
def test_a_scheduled_epoch_deals_every_source_run_once_with_equal_ranks(
    plans, sizes, world, workers, per_batch, epoch
):
    """Over ranks x workers: every rank the same length; each source's epoch run dealt exactly once (the
    workers' ranges tile it); worker i's budgets the same on every rank and its picks within one sample
    of the running share its steps give; the epoch's steps the same on every rank."""
    from streamer.mixture.plan import Share, plan_mixture
    from streamer.mixture.scheduled import scheduled_plan

    shares = [Share(f"s{j}", sizes[j]) for j in range(len(plans))]
    size = sum(sizes[: len(plans)])
    if size // world < workers:
        return
    base = plan_mixture(shares, world=world, workers=workers, epoch_size=size)
    plan = scheduled_plan(base, plans, per_batch=per_batch, epoch=epoch)
    per_epoch = plan.per_epoch()
    for j in range(len(plans)):
        spans = sorted(plan.worker_range(j, r, w) for r in range(world) for w in range(workers))
        assert spans[0][0] == 0 and spans[-1][1] == per_epoch[j]
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))  # tiled: nothing twice or skipped
    assert sum(per_epoch) == world * base.rank_length
    batches = [-(-base.worker_length(w) // per_batch) for w in range(workers)]
    for w in range(workers):
        length = base.worker_length(w)
        steps = [step_of(batches, w, t) for t in range(batches[w])]
        q = _running(plans, length, per_batch, epoch * sum(batches), steps)
        picks = ScheduledOrder(plan.shares[w], plan.budgets(w)).fill(length)
        counts = [0] * len(plans)
        for p, j in enumerate(picks, start=1):
            counts[j] += 1
            assert all(abs(c - q[i][p]) < 1 for i, c in enumerate(counts))
