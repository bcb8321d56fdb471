"""A mixture's elastic restore on the pure functions: every source's epoch exactly once across restores,
equal ranks after each, on any (W1, K1) -> (W2, K2) -> (W3, K3), windows shuffling as the reader does."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.elastic.deal import Plan, join
from streamer.mixture.elastic import PlanStream, deal_sources, rank_shares, unread, worker_budgets
from streamer.mixture.passes import PassStream
from streamer.mixture.plan import Interleave, Share, plan_mixture


def handed(stream, run, window, count):
    """The positions a SourceWindows hands out first, ``count`` of them: window after window, each in
    its keyed order (written out here independently of ``unread``)."""
    begin, end = run
    out: list[int] = []
    position = begin
    while len(out) < count:
        lo, hi = stream.window(begin, end, window, position - begin)
        order = stream.window_order(lo, hi)
        for k in order[position - lo :]:
            if len(out) == count:
                break
            out.append(lo + k)
        position = hi
    if isinstance(stream, PlanStream):  # run positions -> pass-stream positions
        every = [x for a, b in stream.positions(0, stream.size) for x in range(a, b)]
        return [every[k] for k in out]
    return out


def counts_after(budgets, steps):
    interleave = Interleave(budgets)
    interleave.fill(steps)
    return list(interleave.counts)


class Worker:
    """One worker of a simulated run: per source a stream, a run and a window; its budgets."""

    def __init__(self, streams, runs, budgets, buffer):
        self.streams, self.runs, self.budgets = streams, runs, budgets
        length = sum(budgets)
        self.windows = [max(1, buffer * b // max(length, 1)) for b in budgets]

    def read(self, counts):
        return [
            handed(s, r, w, c)
            for s, r, w, c in zip(self.streams, self.runs, self.windows, counts, strict=True)
        ]

    def unread(self, counts):
        return [
            unread(s, r, w, c)
            for s, r, w, c in zip(self.streams, self.runs, self.windows, counts, strict=True)
        ]


def first_run(passes, shares, world, workers, buffer, starts):
    plan = plan_mixture(shares, world=world, workers=workers)
    places = {}
    for rank in range(world):
        for worker in range(workers):
            budgets = plan.budgets(worker)
            runs = []
            for j, start in enumerate(starts):
                begin, end = plan.worker_range(j, rank, worker)
                runs.append((start + begin, start + end))
            places[rank, worker] = Worker(passes, runs, budgets, buffer)
    return plan, places


def restored_run(passes, lefts, world, workers, remainder, buffer):
    places = {}
    for rank in range(world):
        for worker in range(workers):
            budgets, plans = deal_sources(
                lefts, rank=rank, world=world, worker=worker, workers=workers, remainder=remainder
            )
            streams = [PlanStream(p, plan.spans) for p, plan in zip(passes, plans, strict=True)]
            places[rank, worker] = Worker(streams, [(0, s.size) for s in streams], budgets, buffer)
    return places


def stop(places, rng, fraction):
    """Each worker stops somewhere (a DataLoader's workers run unevenly); returns its counts."""
    return {
        p: counts_after(w.budgets, int(sum(w.budgets) * fraction * rng.random())) for p, w in places.items()
    }


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 60), min_size=1, max_size=4),
    old=st.tuples(st.integers(1, 5), st.integers(1, 3)),
    new=st.tuples(st.integers(1, 6), st.integers(1, 4)),
    third=st.tuples(st.integers(1, 4), st.integers(1, 3)),
    remainder=st.sampled_from(["drop", "pad"]),
    buffer=st.sampled_from([1, 4, 16]),
    seed=st.integers(0, 10**6),
)
def test_a_mixture_restored_on_any_topology_reads_each_source_s_epoch_once(
    sizes, old, new, third, remainder, buffer, seed
):
    rng = random.Random(seed)
    shares = [Share(f"s{j}", n, "weight", rng.choice([1, 2, 3])) for j, n in enumerate(sizes)]
    passes = [
        PassStream(np.ones(n, dtype=np.int64), seed=seed, salt=s.name)
        for n, s in zip(sizes, shares, strict=True)
    ]
    starts = [rng.randrange(0, 3 * n) for n in sizes]  # sources part-way through their pass streams
    try:
        plan, places = first_run(passes, shares, *old, buffer, starts)
    except ValueError:
        return  # an epoch too small for this many workers: refused at plan time, as Mixture does
    per_epoch = plan.per_epoch()
    read: list[Counter[int]] = [Counter() for _ in sizes]
    lefts = None
    for topology in (new, third):
        counts = stop(places, rng, 1.0)
        spans = [[] for _ in sizes]
        for place in sorted(places):
            worker = places[place]
            for j, got in enumerate(worker.read(counts[place])):
                read[j].update(got)
            for j, rest in enumerate(worker.unread(counts[place])):
                assert all(start < stop for start, stop in rest)  # no empty span is handed on
                spans[j] += rest
        lefts = [Plan((), join(s)) for s in spans]
        left_total = sum(len(left) for left in lefts)
        places = restored_run(passes, lefts, *topology, remainder, buffer)
        world, workers = topology
        by_rank = Counter()
        for (rank, _), w in places.items():
            by_rank[rank] += sum(w.budgets)
        quota = left_total // world if remainder == "drop" else -(-left_total // world)
        assert set(by_rank.values()) <= {quota} and len(by_rank) == world
        for worker in range(workers):  # worker i of every rank equally long: equal batch counts
            assert len({sum(places[r, worker].budgets) for r in range(world)}) == 1
    for worker in places.values():  # the last topology reads to the end
        for j, got in enumerate(worker.read(worker.budgets)):
            read[j].update(got)
    dropped = padded = 0
    for j, start in enumerate(starts):
        epoch = set(range(start, start + per_epoch[j]))
        assert set(read[j]) <= epoch  # nothing from outside the epoch's runs
        missing = epoch - set(read[j])
        dropped += len(missing)
        padded += sum(n - 1 for n in read[j].values())
    # Each restore may drop (or pad) fewer than its world size; never both, never more.
    assert (dropped == 0 or remainder == "drop") and (padded == 0 or remainder == "pad")
    assert dropped + padded <= new[0] - 1 + third[0] - 1


@pytest.mark.parametrize(
    "lefts, world, remainder, expected",
    [
        ([7, 5], 3, "drop", [[3, 1], [2, 2], [2, 2]]),  # 12 samples: 4 a rank, the extras in turn
        ([7, 6], 3, "drop", [[2, 2], [2, 2], [2, 2]]),  # 13: the one extra dealt goes back
        ([7, 6], 3, "pad", [[3, 2], [3, 2], [2, 3]]),  # 13 -> 15: two more, source after source
        ([0, 2], 4, "pad", [[0, 1], [0, 1], [0, 1], [0, 1]]),  # only sources with samples pad
        ([1], 2, "drop", [[0], [0]]),
    ],
)
def test_rank_shares(lefts, world, remainder, expected):
    shares = rank_shares(lefts, world, remainder)
    assert shares == expected
    assert len({sum(s) for s in shares}) == 1
    for j in range(len(lefts)):
        assert max(s[j] for s in shares) - min(s[j] for s in shares) <= 1 or remainder == "pad"


def test_worker_budgets_keep_each_worker_s_length_and_the_rank_s_share():
    budgets = worker_budgets([10, 3, 0, 7], 3)
    assert [sum(b) for b in budgets] == [7, 7, 6]
    assert [sum(col) for col in zip(*budgets, strict=True)] == [10, 3, 0, 7]
    assert budgets[0] == [4, 1, 0, 2]  # each worker close to the rank's proportions


def test_unread_keeps_the_rest_of_a_window_and_the_run_after_it():
    stream = PassStream(np.ones(10, dtype=np.int64), seed=1, salt="a")
    run, window = (3, 17), 4  # crosses the pass boundary at 10: windows are cut there
    out = handed(stream, run, window, 5)
    left = unread(stream, run, window, 5)
    rest = [x for a, b in left for x in range(a, b)]
    assert sorted(out + rest) == list(range(3, 17)) and not set(out) & set(rest)
    assert unread(stream, run, window, 14) == [] and unread(stream, run, window, 0) != []


def test_deal_sources_cuts_each_source_in_place_order_and_drops_its_tail():
    lefts = [Plan((), ((0, 5),)), Plan((), ((100, 103),))]  # 8 samples: 4 a rank of 2
    dealt = [deal_sources(lefts, rank=r, world=2, worker=0, workers=1, remainder="drop") for r in range(2)]
    assert [(b, [p.spans for p in plans]) for b, plans in dealt] == [
        ([3, 1], [((0, 3),), ((100, 101),)]),
        ([2, 2], [((3, 5),), ((101, 103),)]),
    ]
    lefts = [Plan((), ((0, 4), (10, 12))), Plan((), ((100, 101),))]  # 7: the one extra goes back
    dealt = {
        (r, w): deal_sources(lefts, rank=r, world=2, worker=w, workers=2, remainder="drop")
        for r in range(2)
        for w in range(2)
    }
    assert {place: (b, [p.spans for p in plans]) for place, (b, plans) in dealt.items()} == {
        (0, 0): ([2, 0], [((0, 2),), ()]),
        (0, 1): ([1, 0], [((2, 3),), ()]),
        (1, 0): ([2, 0], [((3, 4), (10, 11)), ()]),
        (1, 1): ([1, 0], [((11, 12),), ()]),
    }


def test_a_plan_stream_reads_its_spans_pass_stream_segments_in_order():
    passes = PassStream(np.array([3, 2, 4]), seed=1, salt="a", base=10)
    stream = PlanStream(passes, ((2, 5), (9, 12)))
    assert stream.size == 6
    whole = list(passes.segments(2, 5)) + list(passes.segments(9, 12))
    assert list(stream.segments(0, 6)) == whole
    assert list(stream.segments(1, 4)) == list(passes.segments(3, 5)) + list(passes.segments(9, 10))
    assert list(stream.segments(4, 99)) == list(passes.segments(10, 12))  # clipped at the run's end
    assert stream.window(0, 6, 4, 5) == (4, 6) and stream.window(0, 6, 4, 1) == (0, 4)
