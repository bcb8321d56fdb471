"""Elastic budget invariants (hypothesis): a budgeted worker's span is exactly its equal-cost slice, and
``deal_by_cost`` cuts any leftover (ids, then spans) into parts that hold each sample once, equal in cost
to within one sample."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.budget.deal import WeighedStream, cost_segments, slot_span
from streamer.budget.elastic import deal_by_cost, left_cost
from streamer.budget.plan import BudgetOptions, weighed_sums, weights
from streamer.elastic.deal import Plan, Stream
from streamer.placement.segments import shard_order
from tests.streamer.budget.test_budget_plan import _dataset

OPTIONS = BudgetOptions(budget=1000)


def _stream(data, seed, epoch=1):
    counts = np.array([len(s) for s in data])
    order = shard_order(len(counts), seed, epoch, True)
    sums = weighed_sums(counts, data.__getitem__, OPTIONS)
    return WeighedStream(counts, sums, order, data.__getitem__, weights(OPTIONS)), counts, sums


def _positions(stream: WeighedStream, counts, plan: Plan) -> list[tuple[int, int]]:
    return [(s.shard, i) for s in Stream(counts, stream.order).segments(plan) for i in range(s.start, s.stop)]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["lognormal", "tail", "equal", "zeros"]),
    shards=st.integers(1, 10),
    per=st.integers(1, 50),
    world=st.integers(1, 16),
    workers=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_a_budgeted_workers_span_is_its_cost_slice(kind, shards, per, world, workers, seed):
    """Against a plain walk of the stream: a sample belongs to the slot whose cost interval holds the
    cost before it (the last slot takes the rest), and the deal's segments read exactly those."""
    data = _dataset(kind, shards, per, seed)
    stream, counts, sums = _stream(data, seed)
    slots, weigh = world * workers, weights(OPTIONS)
    walk = [(int(shard), i) for shard in stream.order for i in range(len(data[shard]))]
    costs = [int(weigh(data[shard][i : i + 1])[0]) for shard, i in walk]
    before = np.concatenate(([0], np.cumsum(costs, dtype=np.int64)))[:-1]
    total = int(sum(costs))
    owner = [
        min(slots - 1, next((k for k in range(slots) if c < (k + 1) * total // slots), slots - 1))
        for c in before
    ]
    for rank in range(world):
        for worker in range(workers):
            place = {"rank": rank, "world": world, "worker": worker, "workers": workers}
            slot = rank * workers + worker
            expected = [id_ for id_, k in zip(walk, owner, strict=True) if k == slot]
            assert _positions(stream, counts, slot_span(stream, **place)) == expected
            segments = cost_segments(counts, sums, data.__getitem__, **place, seed=seed, epoch=1, weigh=weigh)
            assert [(s.shard, i) for s in segments for i in range(s.start, s.stop)] == expected


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["lognormal", "tail", "equal", "zeros"]),
    shards=st.integers(1, 10),
    per=st.integers(1, 50),
    slots=st.integers(1, 24),
    cuts=st.lists(st.floats(0, 1), min_size=0, max_size=6),
    ids=st.integers(0, 20),
    seed=st.integers(0, 2**16),
)
def test_a_leftover_is_dealt_by_cost_each_sample_once(kind, shards, per, slots, cuts, ids, seed):
    data = _dataset(kind, shards, per, seed)
    stream, counts, _ = _stream(data, seed)
    if stream.total == 0:
        return
    points = sorted({int(c * stream.total) for c in cuts} | {0, stream.total})
    spans = tuple((a, b) for a, b in zip(points[::2], points[1::2], strict=False) if b > a)
    every = _positions(stream, counts, Plan((), ((0, stream.total),)))
    in_spans = set(_positions(stream, counts, Plan((), spans)))
    spare = [p for p in every if p not in in_spans][:ids]  # ids: samples held in some buffer
    left = Plan(np.array(spare, dtype=np.int64).reshape(-1, 2), spans)
    total = left_cost(stream, left)
    got, costs = [], []
    weigh = weights(OPTIONS)
    for slot in range(slots):
        part = deal_by_cost(stream, left, rank=slot, world=slots, worker=0, workers=1)
        mine = _positions(stream, counts, part)
        got += mine
        costs.append(sum(int(weigh(data[s][i : i + 1])[0]) for s, i in mine))
    assert sorted(got) == sorted(spare + list(in_spans))  # each sample of the leftover, once
    largest = max((int(weigh(s).max()) for s in data if len(s)), default=0)
    assert all(abs(c - total / slots) <= largest + 1 for c in costs)
