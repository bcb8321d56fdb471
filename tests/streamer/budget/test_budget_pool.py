"""The budget pool's loops in C (streamer/budget/_pool.c) against the same loops in Python: the same pool,
batches, arrivals and costs for the same input, and no "pack" batch over its budget either way."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.budget.batcher import BatchCounts, paced_batches
from streamer.budget.node import feed_pool, pool_feed
from streamer.budget.pool import pool_costs, pool_loops, take_pack

NATIVE, PYTHON = pool_loops(True), pool_loops(False)
needs_c = pytest.mark.skipif(
    NATIVE.take is take_pack or pool_feed(True) is feed_pool,
    reason="streamer/budget/_pool.c is not built here",
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _pool(costs: list[int], seed: int) -> list[tuple[int, int, str]]:
    """A sorted pool of ``costs``, arrivals unique and shuffled (restored pools arrive in any order)."""
    arrivals = random.Random(seed).sample(range(10 * len(costs) + 1), len(costs))
    return sorted((c, a, f"id{a}") for c, a in zip(costs, arrivals, strict=True))


@needs_c
@SETTINGS
@given(
    budget=st.integers(1, 60),
    costs=st.lists(st.integers(0, 60), min_size=1, max_size=80),
    share=st.integers(0, 130),
    most=st.integers(1, 90),
    seed=st.integers(0, 2**16),
)
def test_the_c_take_is_the_python_take(budget, costs, share, most, seed):
    costs = [min(c, budget) for c in costs]
    pools = NATIVE.new(_pool(costs, seed)), PYTHON.new(_pool(costs, seed))
    cost_of = {ident: c for c, _, ident in pools[0]}
    (ids, total), (py_ids, py_total) = (
        NATIVE.take(pools[0], budget, share, most),
        PYTHON.take(pools[1], budget, share, most),
    )
    assert (ids, total) == (py_ids, py_total)
    assert pools[0] == pools[1]
    assert total == sum(cost_of[i] for i in ids) <= budget
    assert 1 <= len(ids) <= most
    # The last batch tops up and fits more in: the same in both, from where the take left off.
    extra = _pool([min(c, budget) for c in reversed(costs)], seed + 1)
    for cost, arrival, ident in extra:
        NATIVE.insort(pools[0], (cost, arrival + 10**6, "more" + ident))
        PYTHON.insort(pools[1], (cost, arrival + 10**6, "more" + ident))
        cost_of["more" + ident] = cost
    assert pools[0] == pools[1]
    more = NATIVE.fit(pools[0], ids, total, budget, share, most)
    assert more == PYTHON.fit(pools[1], py_ids, py_total, budget, share, most)
    assert ids == py_ids and pools[0] == pools[1]
    assert more == sum(cost_of[i] for i in ids) <= budget


def _greedy(pool: list, budget: int, share: int, most: int) -> tuple[list, int]:
    """The "pack" take written plainly: the largest first, then the largest (latest of equal costs) that
    still fits, while the batch holds less than ``share`` and ``most``."""
    pool = list(pool)
    taken = [pool.pop()]
    while pool and len(taken) < most and sum(c for c, _, _ in taken) < share:
        fits = [e for e in pool if e[0] <= budget - sum(c for c, _, _ in taken)]
        if not fits:
            break
        taken.append(max(fits))
        pool.remove(taken[-1])
    return [ident for _, _, ident in taken], sum(c for c, _, _ in taken)


@SETTINGS
@given(
    budget=st.integers(1, 60),
    costs=st.lists(st.integers(0, 60), min_size=1, max_size=60),
    share=st.integers(0, 130),
    most=st.integers(1, 70),
    seed=st.integers(0, 2**16),
)
def test_the_python_take_is_the_greedy_pack(budget, costs, share, most, seed):
    pool = _pool([min(c, budget) for c in costs], seed)
    expected = _greedy(pool, budget, share, most)
    assert PYTHON.take(pool, budget, share, most) == expected
    assert expected[1] <= budget


def test_the_python_feed_calls_over_only_past_the_budget():
    """A cost at the budget fits; one past it goes to ``over`` (here: skipped, counted)."""
    over_calls: list[int] = []
    pool: list = []
    items = iter([(0, 0, {}), (0, 1, {}), (0, 2, b"raw")])
    lists = {0: [10, 11, 4]}
    arrival = feed_pool(pool, items, 5, 7, lists, None, 10, lambda cost: over_calls.append(cost))
    assert over_calls == [11] and arrival == 9
    assert pool == [(4, 8, (0, 2, b"raw")), (10, 7, (0, 0, {"__cost__": 10}))]


@needs_c
def test_the_c_take_refuses_what_is_not_a_pool():
    with pytest.raises(IndexError):
        NATIVE.take(NATIVE.new(()), 10, 11, 5)
    with pytest.raises(TypeError):
        NATIVE.take([(1, 0, "a")], 10, 11, 5)  # a list is the Python pool's, not the C one's
    with pytest.raises(TypeError, match="cost, int arrival"):
        NATIVE.new([(1.5, 0, "a")])
    with pytest.raises(TypeError, match="cost, int arrival"):
        NATIVE.insort(NATIVE.new([(1, 0, "a")]), ("x", 1, "b"))
    with pytest.raises(TypeError, match="ids must be a list"):
        NATIVE.fit(NATIVE.new([(1, 0, "a")]), ("a",), 0, 10, 11, 5)


class _Id:
    """An id that can be watched: weakly referenced, so a test sees when the pool lets it go."""


@needs_c
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    costs=st.lists(st.integers(0, 50), min_size=0, max_size=150),
    cuts=st.lists(st.tuples(st.integers(0, 150), st.integers(0, 10)), max_size=5),
    seed=st.integers(0, 2**16),
)
def test_the_c_pool_reads_as_the_sorted_list(costs, cuts, seed):
    """As a sequence the C pool is the Python pool's sorted list of entries, through inserts (past its
    first 64 and growing), pops, cuts and clear; it lets go of every id it takes out."""
    import weakref

    arrivals = random.Random(seed).sample(range(10**6), len(costs))
    entries = [(c, a, _Id()) for c, a in zip(costs, arrivals, strict=True)]
    watched = [weakref.ref(ident) for _, _, ident in entries]
    pool, expected = NATIVE.new(entries[: len(entries) // 2]), sorted(entries[: len(entries) // 2])
    for c, a, ident in entries[len(entries) // 2 :]:
        NATIVE.insort(pool, (c, a, ident))
        PYTHON.insort(expected, (c, a, ident))
    ident = None  # the loop's last id, let go
    assert pool == expected and list(pool) == expected and len(pool) == len(expected)
    assert [pool[i] for i in range(-len(pool), len(pool))] == expected + expected
    assert pool_costs(pool).tolist() == pool_costs(expected).tolist() == [c for c, _, _ in expected]
    for lo, width in cuts:
        lo = min(lo, len(expected))
        hi = min(lo + width, len(expected))
        assert pool.cut(lo, hi) == expected[lo:hi]
        del expected[lo:hi]
        assert pool == expected
        assert pool_costs(pool).tolist() == [c for c, _, _ in expected]
    if expected:
        assert pool.pop() == expected.pop()
    with pytest.raises(IndexError):
        pool[len(expected)]
    with pytest.raises(IndexError):
        pool.cut(1, 0)
    del entries
    pool.clear()
    expected.clear()  # no cycles: the ids go as their last reference does, no collection needed
    assert len(pool) == 0 and not pool and all(ref() is None for ref in watched)
    with pytest.raises(IndexError):
        pool.pop()


@needs_c
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mode=st.sampled_from(["pack", "pad"]),
    budget=st.integers(1, 300),
    costs=st.lists(st.integers(0, 300), min_size=0, max_size=400),
    window=st.integers(1, 40),
    target=st.integers(1, 60),
    fill=st.floats(0.3, 1.0),
)
def test_c_and_python_batch_alike(mode, budget, costs, window, target, fill):
    items = [(min(c, budget), n) for n, c in enumerate(costs)]
    out = []
    for native in (True, False):
        counts = BatchCounts()
        batches = paced_batches(
            items,
            budget=budget,
            target=target,
            cost=sum(c for c, _ in items),
            samples=len(items),
            window=window,
            mode=mode,
            counts=counts,
            fill=fill,
            native=native,
        )
        out.append((list(batches), counts))
    assert out[0] == out[1]


def _source(sizes: list[int], seed: int) -> list:
    """(shard, index, sample) items: dict samples, a few not dicts, a few lists instead of tuples."""
    rng = random.Random(seed)
    items = []
    for _ in range(sum(sizes)):
        shard = rng.randrange(len(sizes))
        index = rng.randrange(sizes[shard])
        sample = {"n": len(items)} if rng.random() < 0.9 else b"raw"
        items.append((shard, index, sample) if rng.random() < 0.9 else [shard, index, sample])
    return items


@needs_c
@SETTINGS
@given(
    sizes=st.lists(st.integers(1, 30), min_size=1, max_size=6),
    budget=st.integers(1, 50),
    overlong=st.sampled_from(["skip", "truncate"]),
    wanted=st.integers(1, 70),
    seed=st.integers(0, 2**16),
)
def test_the_c_feed_is_the_python_feed(sizes, budget, overlong, wanted, seed):
    rng = random.Random(seed)
    columns = [[rng.randrange(0, 70) for _ in range(n)] for n in sizes]
    outcomes = []
    for feed, loops in ((pool_feed(True), NATIVE), (feed_pool, PYTHON)):
        items = _source(sizes, seed)
        source, pool, lists, calls = iter(items), loops.new(()), {}, []

        def load(shard, lists=lists, calls=calls):
            calls.append(("load", shard))
            if len(lists) >= 2:
                lists.clear()
            lists[shard] = list(columns[shard])
            return lists[shard]

        def over(cost, calls=calls):
            calls.append(("over", cost))
            return None if overlong == "skip" else budget

        arrivals = [5]
        for _ in range(3):  # three top-ups, each from where the one before stopped
            arrivals.append(feed(pool, source, wanted, arrivals[-1], lists, load, budget, over))
        samples = [item[2] for item in items]
        outcomes.append((pool, arrivals, calls, samples, next(source, None)))
    assert outcomes[0] == outcomes[1]
    assert all(0 <= cost <= budget for cost, _, _ in outcomes[0][0])


@needs_c
def test_the_c_feed_passes_errors_on():
    def broken():
        yield 0, 0, {}
        raise OSError("the shard went away")

    pool = NATIVE.new(())
    with pytest.raises(OSError, match="went away"):
        pool_feed(True)(pool, broken(), 5, 0, {0: [3]}, None, 10, None)
    assert pool == [(3, 0, (0, 0, {"__cost__": 3}))]

    def refuse(cost):
        raise ValueError(f"a sample costs {cost}, over the batch budget")

    with pytest.raises(ValueError, match="costs 30"):
        pool_feed(True)(NATIVE.new(()), iter([(0, 0, {})]), 5, 0, {0: [30]}, None, 10, refuse)
    with pytest.raises(ValueError, match="shard, index, sample"):
        pool_feed(True)(NATIVE.new(()), iter([(0, 0)]), 5, 0, {0: [3]}, None, 10, None)
