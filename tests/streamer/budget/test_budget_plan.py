"""Token-budget planning invariants (hypothesis): equal-cost slices, exactly the target's batches on every
rank and worker, each batch within the budget, every sample at most once, everything left out counted."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamer.budget.batcher import BatchCounts, batch_cost, paced_batches
from streamer.budget.deal import cost_segments
from streamer.budget.plan import BudgetOptions, epoch_probe, slot_items, slot_plan, weighed_sums

BUDGET = 1000


def _dataset(kind: str, shards: int, per: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    n = shards * per
    if kind == "lognormal":
        costs = np.exp(rng.normal(np.log(BUDGET / 12), 1.0, n)).astype(np.int64) + 1
    elif kind == "tail":  # 1% of samples 10x the budget
        costs = rng.integers(1, BUDGET // 4, n)
        costs[rng.random(n) < 0.01] = 10 * BUDGET
    elif kind == "equal":
        costs = np.full(n, BUDGET * 6 // 10)
    else:  # "zeros and ones": costs the deal must place though they add nothing
        costs = rng.integers(0, 2, n)
    sizes = rng.integers(0, 2 * per + 1, shards)  # uneven shards, some empty
    cuts = np.cumsum(sizes)[:-1] * n // max(int(sizes.sum()), 1)
    return [np.asarray(part, dtype=np.int64) for part in np.split(costs, cuts)]


def _run(shards: list[np.ndarray], world: int, workers: int, options: BudgetOptions, seed: int = 3):
    counts = np.array([len(s) for s in shards])
    column = shards.__getitem__
    sums = weighed_sums(counts, column, options)  # dealt as the overlong rule keeps the costs
    # Probed once, as a dataset does, and alike for every slot.
    probed = epoch_probe(
        counts, column, seed=seed, epoch=1, shuffle=True, options=options, slots=world * workers
    )
    out = []
    for rank in range(world):
        for worker in range(workers):
            plan = slot_plan(
                counts,
                sums,
                column,
                rank=rank,
                world=world,
                worker=worker,
                workers=workers,
                seed=seed,
                epoch=1,
                shuffle=True,
                options=options,
                probed=probed,
            )
            tally = BatchCounts()
            batches = list(
                paced_batches(
                    slot_items(plan.segments, column, options),
                    budget=options.budget,
                    target=plan.target,
                    cost=plan.cost,
                    samples=plan.samples,
                    window=options.window,
                    mode=options.mode,
                    counts=tally,
                    fill=plan.probe.fill,
                )
            )
            out.append((plan, batches, tally))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["lognormal", "tail", "equal", "zeros"]),
    shards=st.integers(1, 12),
    per=st.integers(1, 60),
    world=st.integers(1, 64),
    workers=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_every_sample_lands_in_exactly_one_slot_and_slots_cost_alike(kind, shards, per, world, workers, seed):
    data = _dataset(kind, shards, per, seed)
    counts = np.array([len(s) for s in data])
    sums = np.array([int(s.sum()) for s in data])
    seen: list[tuple[int, int]] = []
    slot_costs = []
    for rank in range(world):
        for worker in range(workers):
            segments = cost_segments(
                counts,
                sums,
                data.__getitem__,
                rank=rank,
                world=world,
                worker=worker,
                workers=workers,
                seed=seed,
                epoch=2,
            )
            ids = [(s.shard, i) for s in segments for i in range(s.start, s.stop)]
            seen += ids
            slot_costs.append(sum(int(data[a][b]) for a, b in ids))
    assert sorted(seen) == sorted((k, i) for k, s in enumerate(data) for i in range(len(s)))
    assert len(set(seen)) == len(seen)
    total, slots = int(sums.sum()), world * workers
    largest = max((int(s.max()) for s in data if len(s)), default=0)
    for cost in slot_costs:  # a slot's cost starts in its interval: off C/S by less than one sample
        assert abs(cost - total / slots) <= largest + 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["lognormal", "tail", "equal", "zeros"]),
    shards=st.integers(1, 10),
    per=st.integers(1, 80),
    world=st.integers(1, 16),
    workers=st.integers(1, 4),
    mode=st.sampled_from(["pack", "pad"]),
    overlong=st.sampled_from(["skip", "truncate"]),
    window=st.sampled_from([1, 8, 64]),
    seed=st.integers(0, 2**16),
)
# A small "pad" epoch whose run of like costs fits one more than the budget allows (the plant that took
# one too many survived a fresh run of 40 random examples)
@example(
    kind="lognormal", shards=1, per=2, world=1, workers=1, mode="pad", overlong="skip", window=8, seed=63
)
def test_every_rank_and_worker_yields_the_same_batches_within_budget_each_sample_at_most_once(
    kind, shards, per, world, workers, mode, overlong, window, seed
):
    data = _dataset(kind, shards, per, seed)
    options = BudgetOptions(budget=BUDGET, mode=mode, window=window, overlong=overlong, probe_samples=256)
    runs = _run(data, world, workers, options, seed)
    targets = {plan.target for plan, _, _ in runs}
    assert len(targets) == 1  # one number, computed alike everywhere
    target = targets.pop()
    used: list[tuple[int, int]] = []
    for plan, batches, tally in runs:
        assert len(batches) == target  # equal steps, whatever the slot holds
        for batch in batches:
            costs = [min(int(data[a][b]), BUDGET) for a, b in batch]
            assert batch_cost(costs, mode) <= BUDGET
        ids = [i for batch in batches for i in batch]
        repeats = len(ids) - len(set(ids))
        assert repeats == tally.repeated  # a sample twice only as a counted repeat
        assert tally.repeated == 0 or plan.samples < target  # and only when the slot ran short
        assert len(set(ids)) + tally.left_out == plan.samples  # everything kept is batched or counted
        used += list(set(ids))
    assert len(used) == len(set(used))  # at most once across every rank and worker


LEFT_OVER_BOUND = 0.005  # the README's: at most 0.5% of an epoch's kept samples, at the stated windows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["lognormal", "tail", "equal", "zeros"]),
    shards=st.integers(1, 12),
    per=st.integers(1, 300),
    world=st.integers(1, 64),
    workers=st.integers(0, 8),
    batching=st.sampled_from([("pack", 16), ("pack", 64), ("pad", 256), ("pad", 1024)]),
    seed=st.integers(0, 2**16),
)
# Slots of ~130 samples, all drain at a pad window of 1,024: one batch of margin left 1.1% over.
@example(kind="lognormal", shards=11, per=284, world=12, workers=2, batching=("pad", 1024), seed=39893)
def test_the_left_over_stays_within_the_stated_bound(kind, shards, per, world, workers, batching, seed):
    """Windows of at least 16 ("pack") and 256 ("pad"): what an epoch leaves over is at most 0.5% of the
    samples it keeps, on every spread, world (1-64) and worker count (0-8; 0 reads as one slot). Measured
    before this bound was stated: 0 left over in 1,500 random epochs of these shapes; before the drain
    was probed and the last batch filled to the budget, up to 57%."""
    data = _dataset(kind, shards, per, seed)
    mode, window = batching
    options = BudgetOptions(budget=BUDGET, mode=mode, window=window, probe_samples=256)
    runs = _run(data, world, max(workers, 1), options, seed)
    kept = sum(plan.samples for plan, _, _ in runs)
    left = sum(tally.left_out for _, _, tally in runs)
    assert left <= LEFT_OVER_BOUND * kept, (left, kept)


def test_overlong_error_names_the_cost_and_budget():
    data = [np.array([5, 50, 2000], dtype=np.int64)]
    with pytest.raises(ValueError, match="costs 2000, over the batch budget 1000"):
        _run(data, 1, 1, BudgetOptions(budget=BUDGET, overlong="error"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"budget": 0}, "budget must be a positive integer"),
        ({"budget": 10, "mode": "greedy"}, "batching must be one of pack, pad"),
        ({"budget": 10, "window": 0}, "window must be a positive integer"),
        ({"budget": 10, "overlong": "drop"}, "overlong must be one of skip, truncate, error"),
    ],
)
def test_bad_options_name_the_option(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BudgetOptions(**kwargs)


def test_a_llava_like_epoch_packs_full_with_little_left_over():
    """The issue's figures at a small scale: 40,000 samples, log-normal (median ~600, p99 ~6,000), budget
    8,192, 8 ranks x 2 workers; the samples over the budget are skipped, and weigh nothing in the deal."""
    rng = np.random.default_rng(0)
    costs = np.exp(rng.normal(np.log(600), 1.0, 40_000)).astype(np.int64) + 1
    data = [costs[i : i + 500] for i in range(0, len(costs), 500)]
    runs = _run(data, 8, 2, BudgetOptions(budget=8192))
    fills = [c for _, _, tally in runs for c in tally.costs]
    left = sum(tally.left_out for _, _, tally in runs)
    assert len({len(b) for _, b, _ in runs}) == 1
    assert sum(fills) / (len(fills) * 8192) >= 0.99
    assert left <= 0.005 * len(costs)


def test_a_batch_never_passes_the_budget_by_one():
    """Costs that fit only to the token: 501 + 500 is one over a budget of 1,000."""
    tally = BatchCounts()
    batches = list(
        paced_batches([(501, "a"), (500, "b")], budget=1000, target=1, cost=1001, samples=2, counts=tally)
    )
    assert batches == [["a"]] and tally.left_out == 1 and tally.left_out_cost == 500


def test_every_batch_still_owed_keeps_a_sample_when_the_totals_given_are_off():
    """A total told too high (samples that failed to read, say) paces batches too large; the batcher still
    leaves one sample for each batch it owes, so it repeats nothing while it has samples."""
    tally = BatchCounts()
    items = [(1, i) for i in range(5)]
    batches = list(paced_batches(items, budget=10, target=5, cost=1000, samples=5, counts=tally))
    assert [len(b) for b in batches] == [1, 1, 1, 1, 1] and tally.repeated == 0
