"""Placement invariants (hypothesis): exactly once, equal per-rank counts and batches, new order per epoch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.placement.permute import Permutation
from streamer.placement.segments import Segment, WholeShards, counted_segments, rank_quota, worker_slice


def _ids(segments: list[Segment]) -> list[tuple[int, int]]:
    return [(s.shard, i) for s in segments for i in range(s.start, s.stop)]


def check(counts: list[int], world: int, workers: int, epoch: int, remainder: str, seed: int = 7):
    """Place every (rank, worker); assert the invariants; return the per-rank sample ids."""
    counts_arr = np.array(counts, dtype=np.int64)
    total = int(counts_arr.sum())
    loader_workers = max(workers, 1)
    per_rank: list[list[tuple[int, int]]] = []
    per_worker_counts: list[list[int]] = []
    for rank in range(world):
        ids, worker_counts = [], []
        for worker in range(loader_workers):
            segments = counted_segments(
                counts_arr,
                rank=rank,
                world=world,
                worker=worker,
                workers=loader_workers,
                seed=seed,
                epoch=epoch,
                remainder=remainder,
            )
            for segment in segments:
                assert 0 <= segment.start < segment.stop <= counts[segment.shard]
            got = _ids(segments)
            ids += got
            worker_counts.append(len(got))
        per_rank.append(ids)
        per_worker_counts.append(worker_counts)
    every = [i for ids in per_rank for i in ids]
    quota = rank_quota(total, world, remainder)
    assert all(len(ids) == quota for ids in per_rank)  # equal per-rank counts
    # DataLoader batches per worker, so worker i must yield the same count on every rank.
    assert all(c == per_worker_counts[0] for c in per_worker_counts)
    for batch in (1, 2, 3, 8, 64):
        batches = {sum(-(-c // batch) for c in wc) for wc in per_worker_counts}
        full_batches = {sum(c // batch for c in wc) for wc in per_worker_counts}
        assert len(batches) == 1 and len(full_batches) == 1
    if remainder == "drop":
        assert len(set(every)) == len(every)  # nothing twice
        assert total - len(every) < world  # at most world - 1 dropped
    else:
        assert {(s, i) for s, c in enumerate(counts) for i in range(c)} <= set(every)  # everything once+
        assert len(every) - total < world
    return per_rank


shard_counts = st.lists(st.integers(0, 60), min_size=1, max_size=12).filter(lambda c: sum(c) > 0)


remainders = st.sampled_from(["drop", "pad"])


@settings(max_examples=300, deadline=None)
@given(shard_counts, st.integers(1, 4), st.integers(0, 3), st.integers(0, 5), remainders)
def test_exactly_once_and_equal_counts(counts, world, workers, epoch, remainder):
    check(counts, world, workers, epoch, remainder)


def test_fewer_shards_than_ranks_times_workers_and_very_uneven_sizes():
    check([1000, 1, 0, 3], world=4, workers=3, epoch=0, remainder="drop")
    check([1], world=3, workers=2, epoch=0, remainder="pad")
    check([5, 0, 17, 1, 3, 400, 2], world=3, workers=2, epoch=2, remainder="pad")


def test_partitions_change_between_epochs_and_drop_different_samples():
    counts = [13, 7, 29, 5, 11, 3, 17]
    epochs = [check(counts, world=3, workers=2, epoch=e, remainder="drop") for e in range(4)]
    rank0 = [frozenset(ranks[0]) for ranks in epochs]
    assert len(set(rank0)) == 4
    every = {(s, i) for s, c in enumerate(counts) for i in range(c)}
    dropped = [frozenset(every - {i for ids in ranks for i in ids}) for ranks in epochs]
    assert len(set(dropped)) > 1


def test_same_inputs_same_placement():
    a = counted_segments(np.array([4, 9, 2]), rank=1, world=2, worker=0, workers=2, seed=3, epoch=1)
    b = counted_segments(np.array([4, 9, 2]), rank=1, world=2, worker=0, workers=2, seed=3, epoch=1)
    assert a == b


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5000), st.integers(0, 2**32), st.integers(0, 100))
def test_permutation_is_a_bijection(n, seed, epoch):
    perm = Permutation(n, seed, epoch)
    values = perm.array()
    assert sorted(values.tolist()) == list(range(n))
    for i in (0, n // 2, n - 1):
        assert perm(i) == values[i]


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 300), st.integers(1, 4), st.integers(1, 4), st.integers(0, 3))
def test_whole_shards_deal_every_shard_once(n, world, workers, epoch):
    dealt = []
    for rank in range(world):
        for worker in range(workers):
            plan = WholeShards(n, rank=rank, world=world, worker=worker, workers=workers, seed=1, epoch=epoch)
            dealt += [plan[k].shard for k in range(len(plan))]
    assert sorted(dealt) == list(range(n))


def test_whole_shards_are_constant_memory_at_ten_million():
    plan = WholeShards(10**7, rank=3, world=8, worker=1, workers=4, seed=0, epoch=0)
    assert len(plan) == 10**7 // 32
    assert 0 <= plan[len(plan) - 1].shard < 10**7


def test_worker_slices_tile_the_quota():
    for quota in range(0, 30):
        for workers in range(1, 5):
            spans = [worker_slice(quota, w, workers) for w in range(workers)]
            assert sum(length for _, length in spans) == quota
            assert all(spans[i][0] + spans[i][1] == spans[i + 1][0] for i in range(workers - 1))


def test_bad_place_is_a_value_error():
    with pytest.raises(ValueError, match="rank must be in"):
        counted_segments(np.array([3]), rank=2, world=2, worker=0, workers=1, seed=0, epoch=0)
    with pytest.raises(ValueError, match="remainder"):
        rank_quota(10, 2, "keep")


def test_rank_and_world_size_come_from_the_environment_without_torch_distributed(tmp_path, monkeypatch):
    import torch.distributed as dist

    from streamer import ShardDataset
    from tests.conftest import write_dataset

    assert not (dist.is_available() and dist.is_initialized())
    index = write_dataset(tmp_path / "d", [9, 4, 13, 6])

    def keys(**place):
        return [s["__key__"] for s in ShardDataset(index, decode=False, seed=5, buffer_size=4, **place)]

    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    rank0, rank1 = keys(rank=0, world_size=2), keys(rank=1, world_size=2)
    assert len(rank0) == len(rank1) == 16 and set(rank0).isdisjoint(rank1)
    assert len(keys()) == 32  # no environment: rank 0 of 1
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    ds = ShardDataset(index, decode=False, seed=5, buffer_size=4)
    assert len(ds) == 16
    assert [s["__key__"] for s in ds] == rank1
    assert keys(rank=0, world_size=2) == rank0  # arguments win over the environment
    monkeypatch.setenv("RANK", "0")
    assert keys() == rank0
