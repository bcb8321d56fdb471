"""Placement at its edges: exact segments, quotas and slices, pad wrap-around, bad places, resampled draws."""

from __future__ import annotations

import numpy as np
import pytest

from streamer.placement import segments as placement
from streamer.placement.permute import Permutation
from streamer.placement.segments import (
    ResampledShards,
    Segment,
    WholeShards,
    counted_segments,
    rank_quota,
    shard_order,
    stream_ends,
    worker_slice,
)


def _place(counts, rank=0, world=1, worker=0, workers=1, **kwargs):
    kwargs = {"seed": 0, "epoch": 0, "shuffle": False, **kwargs}
    return counted_segments(
        np.array(counts), rank=rank, world=world, worker=worker, workers=workers, **kwargs
    )


def test_rank_quota_drops_or_pads_the_remainder():
    assert [rank_quota(10, 3, "drop"), rank_quota(10, 3, "pad")] == [3, 4]
    assert [rank_quota(9, 3, "drop"), rank_quota(9, 3, "pad")] == [3, 3]
    assert [rank_quota(2, 3, "drop"), rank_quota(2, 3, "pad")] == [0, 1]


def test_a_bad_remainder_names_the_choices_and_the_value():
    with pytest.raises(ValueError, match=r"^remainder must be one of \('drop', 'pad'\), not 'keep'$"):
        rank_quota(10, 2, "keep")


def test_worker_slices_give_the_first_workers_one_more():
    assert [worker_slice(10, w, 3) for w in range(3)] == [(0, 4), (4, 3), (7, 3)]
    assert [worker_slice(2, w, 3) for w in range(3)] == [(0, 1), (1, 1), (2, 0)]


def test_unshuffled_segments_are_the_stream_cut_in_equal_slices():
    counts = [3, 5, 2]
    assert _place(counts, rank=0, world=2) == [Segment(0, 0, 3), Segment(1, 0, 2)]
    assert _place(counts, rank=1, world=2) == [Segment(1, 2, 5), Segment(2, 0, 2)]
    assert _place(counts, rank=1, world=2, worker=0, workers=2) == [Segment(1, 2, 5)]
    assert _place(counts, rank=1, world=2, worker=1, workers=2) == [Segment(2, 0, 2)]
    assert _place(counts, rank=0, world=3, remainder="drop") == [Segment(0, 0, 3)]
    assert _place(counts, rank=2, world=3, remainder="drop") == [Segment(1, 3, 5), Segment(2, 0, 1)]


def test_empty_shards_give_no_segments():
    assert _place([2, 0, 3]) == [Segment(0, 0, 2), Segment(2, 0, 3)]
    assert _place([2, 0, 0, 3], rank=1, world=2, remainder="pad") == [Segment(3, 1, 3), Segment(0, 0, 1)]
    for shuffle in (False, True):
        assert _place(np.zeros(0, dtype=np.int64), shuffle=shuffle) == []
    assert _place([0, 4, 0], rank=0, world=2) == [Segment(1, 0, 2)]
    assert _place([0, 0], rank=0, world=1) == []
    assert _place([0, 0], rank=1, world=2, remainder="pad") == []


def test_pad_wraps_the_last_rank_around_to_the_stream_start():
    assert _place([3], rank=1, world=2, remainder="pad") == [Segment(0, 2, 3), Segment(0, 0, 1)]
    assert _place([2, 3], rank=2, world=3, remainder="pad") == [Segment(1, 2, 3), Segment(0, 0, 1)]
    # A rank whose whole quota lies past the end starts over at the beginning.
    assert _place([1], rank=2, world=3, remainder="pad") == [Segment(0, 0, 1)]


def test_shard_order_is_the_permutation_or_the_identity():
    assert shard_order(5, 3, 1, False).tolist() == [0, 1, 2, 3, 4]
    assert shard_order(5, 3, 1, True).tolist() == Permutation(5, 3, 1).array().tolist()
    shuffled = _place([1] * 6, shuffle=True, seed=3, epoch=1)
    assert [s.shard for s in shuffled] == Permutation(6, 3, 1).array().tolist()


@pytest.mark.parametrize("native", [True, False])
def test_stream_ends_are_int64_running_totals_whatever_integer_types_they_are_given(native, monkeypatch):
    # The C loop reads both buffers as int64 and numpy's cumsum keeps uint64 as uint64: each path converts.
    if not native:
        monkeypatch.setattr(placement, "_native_ends", None)
    elif placement._native_ends is None:
        pytest.skip("streamer/placement/_order.c is not built here")
    for counts_type in (np.int64, np.int32, np.uint64, np.uint8):
        counts = np.array([5, 0, 7, 2], dtype=counts_type)
        for order_type in (np.int64, np.int32, np.uint32):
            ends = stream_ends(counts, np.array([2, 0, 3, 1], dtype=order_type))
            assert ends.dtype == np.int64 and ends.tolist() == [7, 12, 14, 14], (counts_type, order_type)
    assert stream_ends([5, 0, 7, 2], [3, 3, 1]).tolist() == [2, 4, 4]
    big = stream_ends(np.array([2**40, 2**40 + 1], dtype=np.uint64), np.array([1, 0]))
    assert big.dtype == np.int64 and big.tolist() == [2**40 + 1, 2**41 + 1]
    empty = stream_ends(np.array([3], dtype=np.int32), np.array([], dtype=np.int64))
    assert empty.dtype == np.int64 and empty.tolist() == []


@pytest.mark.parametrize(
    ("place", "message"),
    [
        ({"rank": 2, "world": 2}, r"rank must be in \[0, world_size\), got rank=2, world_size=2$"),
        ({"rank": -1, "world": 2}, r"rank must be in \[0, world_size\), got rank=-1, world_size=2$"),
        ({"rank": 0, "world": 0}, r"rank must be in \[0, world_size\), got rank=0, world_size=0$"),
        ({"worker": 3, "workers": 3}, r"worker must be in \[0, workers\), got worker=3, workers=3$"),
        ({"worker": -1, "workers": 2}, r"worker must be in \[0, workers\), got worker=-1, workers=2$"),
        ({"worker": 0, "workers": 0}, r"worker must be in \[0, workers\), got worker=0, workers=0$"),
    ],
)
def test_a_bad_place_is_refused_by_every_plan_naming_the_arguments(place, message):
    place = {"rank": 0, "world": 1, "worker": 0, "workers": 1, **place}
    for plan in (
        lambda: counted_segments(np.array([3]), **place, seed=0, epoch=0),
        lambda: WholeShards(4, **place, seed=0, epoch=0),
        lambda: ResampledShards(4, **place, seed=0, epoch=0),
    ):
        with pytest.raises(ValueError, match=message):
            plan()


def test_the_last_valid_places_are_accepted():
    for plan in (WholeShards, ResampledShards):
        plan(4, rank=1, world=2, worker=2, workers=3, seed=0, epoch=0)
    assert _place([6], rank=1, world=2, worker=2, workers=3) == [Segment(0, 5, 6)]


def test_whole_shards_unshuffled_deal_round_robin():
    plan = WholeShards(7, rank=1, world=2, worker=0, workers=2, seed=0, epoch=0, shuffle=False)
    assert len(plan) == 2 and [plan[k] for k in range(2)] == [Segment(2, 0, None), Segment(6, 0, None)]
    plan = WholeShards(7, rank=1, world=2, worker=1, workers=2, seed=0, epoch=0, shuffle=False)
    assert len(plan) == 1 and plan[0] == Segment(3, 0, None)


def test_whole_shards_shuffled_follow_the_permutation():
    plan = WholeShards(9, rank=0, world=1, worker=1, workers=2, seed=4, epoch=2)
    order = Permutation(9, 4, 2).array().tolist()
    assert [plan[k].shard for k in range(len(plan))] == order[1::2]


def test_whole_shards_change_order_with_the_seed_and_the_epoch():
    def order(seed, epoch):
        plan = WholeShards(40, rank=0, world=1, worker=0, workers=1, seed=seed, epoch=epoch)
        return [plan[k].shard for k in range(len(plan))]

    orders = [order(seed, epoch) for seed, epoch in ((0, 0), (1, 0), (0, 1), (1, 1))]
    assert all(sorted(o) == list(range(40)) for o in orders)
    assert len({tuple(o) for o in orders}) == 4 and order(1, 1) == orders[3]


def test_whole_shards_past_the_last_raise_index_error_and_may_be_empty():
    plan = WholeShards(3, rank=0, world=1, worker=0, workers=2, seed=0, epoch=0, shuffle=False)
    assert len(plan) == 2
    for k in (2, -1):
        with pytest.raises(IndexError, match=rf"^{k}$"):  # the error names the index asked for
            plan[k]
    empty = WholeShards(2, rank=1, world=2, worker=1, workers=2, seed=0, epoch=0)
    assert len(empty) == 0 and list(empty) == []
    with pytest.raises(IndexError):
        empty[0]


def _draws(n=50, k=200, **place):
    place = {"rank": 0, "world": 1, "worker": 0, "workers": 1, "seed": 0, "epoch": 0, **place}
    plan = ResampledShards(n, **place)
    return [plan[i] for i in range(k)]


def test_resampled_draws_whole_shards_with_replacement_from_every_shard():
    draws = _draws(n=7, k=400)
    assert all(s.start == 0 and s.stop is None for s in draws)
    shards = [s.shard for s in draws]
    assert set(shards) == set(range(7))  # every shard comes up, none outside [0, n)
    assert len(set(shards[:20])) < 20  # with replacement: repeats soon
    assert _draws(n=1, k=5) == [Segment(0, 0, None)] * 5


def test_resampled_draws_differ_by_seed_epoch_and_place_but_repeat_for_the_same_ones():
    base = _draws()
    assert base == _draws() and _draws(seed=1) != base and _draws(epoch=1) != base
    for world, workers in ((2, 1), (1, 3), (2, 2), (3, 2), (2, 3), (4, 3)):
        # Within one run every (rank, worker) draws its own shards.
        places = [(rank, worker) for rank in range(world) for worker in range(workers)]
        draws = {tuple(_draws(rank=r, world=world, worker=w, workers=workers, k=40)) for r, w in places}
        assert len(draws) == len(places), (world, workers)


def test_resampled_draws_are_pinned_so_a_checkpoint_resumes_the_same_stream_after_an_upgrade():
    """The draws are part of what a saved state means: any change to them is a format change, on purpose."""
    place = {"rank": 1, "world": 2, "worker": 1, "workers": 3, "seed": 7, "epoch": 3}
    drawn = ResampledShards(1000, **place)
    assert [drawn[k].shard for k in range(12)] == [311, 499, 745, 271, 398, 833, 582, 824, 519, 390, 601, 711]
    first = ResampledShards(1000, rank=0, world=1, worker=0, workers=1, seed=0, epoch=0)
    assert [first[k].shard for k in range(12)] == [80, 337, 851, 856, 430, 448, 75, 233, 972, 286, 704, 237]
