"""skip_steps (issue 37): the batches of chosen global steps left out on every rank alike, from the plan;
the rest exactly the uninterrupted run's batches, resumable, counted."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader

from packer import PackOptions, pack
from streamer import ShardDataset, StatefulLoader
from streamer.chain.skips import check_skips, step_of

SAMPLES = 203


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("skips")
    with open(root / "m.jsonl", "w") as handle:
        for i in range(SAMPLES):
            handle.write(json.dumps({"id": f"k{i:04d}", "txt": "x", "num_tokens": 1 + i % 37}) + "\n")
    pack(root / "m.jsonl", root / "d", PackOptions(cost="num_tokens", max_count=30), progress=False)
    return root / "d"


def _batches(ds, workers, batch_size=4):
    loader = DataLoader(ds, batch_size=batch_size, num_workers=workers, collate_fn=list)
    return [tuple(s["__key__"] for s in batch) for batch in loader]


def _minus(full, skips):
    return [batch for step, batch in enumerate(full) if not any(a <= step < b for a, b in skips)]


@pytest.mark.parametrize("workers", [0, 2])
def test_the_skipped_steps_batches_are_left_out_on_every_rank_and_the_rest_are_the_runs(dataset, workers):
    skips = [(3, 6), (10, 11)]
    counts = set()
    for rank in range(2):
        full = _batches(ShardDataset(dataset, decode=False, rank=rank, world_size=2), workers)
        ds = ShardDataset(dataset, decode=False, rank=rank, world_size=2, skip_steps=skips, batch_size=4)
        got = _batches(ds, workers)
        want = _minus(full, skips)
        assert sorted(got) == sorted(want)  # the same batches; with workers, the order round a gap may differ
        if workers == 0:
            assert got == want
        counts.add(len(got))
        assert ds.errors["samples_skipped_steps"] == sum(map(len, full)) - sum(map(len, got))
    assert len(counts) == 1


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    starts=st.lists(st.tuples(st.integers(0, 60), st.integers(1, 8)), max_size=3),
    world=st.integers(1, 3),
    batch=st.integers(1, 9),
    epoch=st.integers(0, 1),
)
def test_random_skips_over_epochs_leave_out_exactly_their_steps(dataset, starts, world, batch, epoch):
    skips = [(a, a + n) for a, n in starts]
    sizes = set()
    for rank in range(world):
        plain = ShardDataset(dataset, decode=False, rank=rank, world_size=world)
        plain.set_epoch(epoch)
        full = _batches(plain, 0, batch)
        ds = ShardDataset(
            dataset, decode=False, rank=rank, world_size=world, skip_steps=skips, batch_size=batch
        )
        ds.set_epoch(epoch)
        first = epoch * len(full)  # one worker: a step is a batch, epochs end to end
        shifted = [(a - first, b - first) for a, b in skips]
        assert _batches(ds, 0, batch) == _minus(full, shifted)
        sizes.add(len(_minus(full, shifted)))
    assert len(sizes) == 1


def test_token_budget_batches_are_skipped_by_step(dataset):
    plain = list(DataLoader(ShardDataset(dataset, decode=False, batch_tokens=64), batch_size=None))
    ds = ShardDataset(dataset, decode=False, batch_tokens=64, skip_steps=[(0, 2), (7, 9)])
    got = list(DataLoader(ds, batch_size=None))
    keys = [[s["__key__"] for s in b] for b in got]
    assert keys == _minus([[s["__key__"] for s in b] for b in plain], [(0, 2), (7, 9)])
    assert ds.errors["samples_skipped_steps"] == sum(len(plain[i]) for i in (0, 1, 7, 8))


def test_a_resumed_run_with_skips_equals_the_uninterrupted_one(dataset):
    def loader():
        ds = ShardDataset(dataset, decode=False, buffer_size=20, skip_steps=[(4, 9)], batch_size=3)
        return StatefulLoader(ds, batch_size=3, num_workers=2, collate_fn=list)

    whole = [tuple(s["__key__"] for s in b) for b in loader()]
    first = loader()
    it, head = iter(first), []
    for _ in range(6):
        head.append(tuple(s["__key__"] for s in next(it)))
    state = pickle.loads(pickle.dumps(first.state_dict()))
    del it
    second = loader()
    second.load_state_dict(state)
    assert head + [tuple(s["__key__"] for s in b) for b in second] == whole


def test_step_of_follows_the_dataloaders_round_robin():
    # two workers of 3 and 2 batches: w0 b0, w1 b0, w0 b1, w1 b1, w0 b2
    assert [step_of([3, 2], w, j) for w, j in [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]] == [0, 1, 2, 3, 4]
    assert check_skips([(5, 8), (1, 3), (7, 10)]) == ((1, 3), (5, 10))


def test_bad_skips_and_a_missing_batch_size_are_refused_naming_them(dataset):
    for bad in ([(3, 3)], [(-1, 2)], [(1.5, 2)], "0-10", [(True, 3)]):
        with pytest.raises(ValueError, match="skip_steps"):
            ShardDataset(dataset, skip_steps=bad, batch_size=2)
    with pytest.raises(ValueError, match="needs batch_size"):
        ShardDataset(dataset, skip_steps=[(0, 1)])
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        ShardDataset(dataset, skip_steps=[(0, 1)], batch_size=0)
