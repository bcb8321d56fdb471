"""Elastic restore on real shards and StatefulDataLoaders: a checkpoint of every rank, gathered, continues
the epoch on other (world, workers) with every sample once, ranks equal; bad states are refused at load."""

from __future__ import annotations

import pickle
import random
from collections import Counter

import pytest
from torchdata.stateful_dataloader import StatefulDataLoader

from streamer import ShardDataset
from tests.conftest import write_dataset

COUNTS = [23, 4, 61, 0, 9, 30, 2, 17, 40]
EPOCH, SEED, BATCH = 2, 5, 4


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("elastic"), COUNTS)


def _keys(batch):
    return [sample["__key__"] for sample in batch]


def _dataset(index, rank, world, **options):
    options = {"decode": False, "buffer_size": 16, "seed": SEED, **options}
    ds = ShardDataset(index, rank=rank, world_size=world, **options)
    ds.set_epoch(EPOCH)
    return ds


def _loader(ds, workers, **options):
    return StatefulDataLoader(ds, batch_size=BATCH, num_workers=workers, collate_fn=_keys, **options)


def _run(index, world, workers, *, states=None, stops=None, **options):
    """Every rank in turn: keys yielded per rank, and (when stopping) each rank's loader state at the stop.

    ``stops[rank]`` batches are read before the state is taken; None reads the epoch to its end."""
    keys, saved = [], []
    for rank in range(world):
        ds = _dataset(index, rank, world, **options)
        if states is not None:
            ds.load_state_dict(pickle.loads(pickle.dumps(states)))  # as after torch.save and load
        loader = _loader(ds, workers)
        got = []
        for n, batch in enumerate(loader):
            got += batch
            if stops is not None and n + 1 == stops:
                saved.append(loader.state_dict())
                break
        else:
            if stops is not None:
                saved.append(loader.state_dict())
        keys.append(got)
    return keys, saved


def _epoch(index, world, workers):
    keys, _ = _run(index, world, workers)
    return [k for rank in keys for k in rank]


def _check(epoch_keys, runs, restores_worlds):
    """Keys across the runs: each at most once, none outside the epoch, fewer than the worlds dropped."""
    got = Counter(k for run in runs for rank in run for k in rank)
    assert max(got.values()) == 1, [k for k, n in got.items() if n > 1][:5]
    assert set(got) <= set(epoch_keys)
    assert len(epoch_keys) - len(got) <= sum(w - 1 for w in restores_worlds)


@pytest.mark.parametrize(
    ("old", "new"),
    [((3, 2), (2, 3)), ((2, 0), (3, 2)), ((1, 2), (4, 0)), ((2, 2), (2, 2)), ((4, 1), (1, 1))],
)
def test_a_checkpoint_continues_on_another_topology_with_every_sample_once(index, old, new):
    (w1, k1), (w2, k2) = old, new
    epoch_keys = _epoch(index, w1, k1)
    stops = random.Random(w1 * 10 + k1).randint(1, len(epoch_keys) // w1 // BATCH - 1)
    before, states = _run(index, w1, k1, stops=stops)
    assert {len(rank) for rank in before} == {stops * BATCH}
    after, _ = _run(index, w2, k2, states=states)
    assert len({len(rank) for rank in after}) == 1  # every new rank yields the same number of samples
    _check(epoch_keys, [before, after], [w2])


@pytest.mark.parametrize("second_stop", [1, 4])  # 1: two of the three workers have not begun their deal
def test_a_restored_run_restores_elastically_again(index, second_stop):
    epoch_keys = _epoch(index, 3, 2)
    first, states = _run(index, 3, 2, stops=3)
    second, states2 = _run(index, 2, 3, states=states, stops=second_stop)
    third, _ = _run(index, 4, 1, states=states2)
    assert len({len(rank) for rank in third}) == 1
    _check(epoch_keys, [first, second, third], [2, 4])


def test_the_same_topology_from_its_own_state_is_still_identical(index):
    full, _ = _run(index, 2, 2)
    head, states = _run(index, 2, 2, stops=3)
    for rank in range(2):
        ds = _dataset(index, rank, 2)
        loader = _loader(ds, 2)
        loader.load_state_dict(states[rank])
        tail = [k for batch in loader for k in batch]
        assert head[rank] + tail == full[rank]


def test_a_state_saved_after_an_elastic_load_before_reading_still_holds_the_rest(index):
    epoch_keys = _epoch(index, 2, 2)
    first, states = _run(index, 2, 2, stops=2)
    pending = []
    for rank in range(3):  # 3 ranks, no workers: load, then checkpoint before the first sample
        ds = _dataset(index, rank, 3)
        ds.load_state_dict(states)
        pending.append(ds.state_dict())
    after, _ = _run(index, 1, 2, states=pending)
    assert sorted(first[0] + first[1] + after[0]) == sorted(set(epoch_keys))  # one rank: nothing dropped


def test_states_of_an_ended_epoch_start_the_next_afresh(index):
    _, states = _run(index, 2, 1, stops=10_000)
    ds = _dataset(index, 0, 3)
    ds.load_state_dict(states)
    ds.set_epoch(EPOCH + 1)
    assert len([k for batch in _loader(ds, 2) for k in batch]) == len(ds)


@pytest.mark.parametrize("persistent", [False, True])
def test_the_epoch_after_a_restore_is_a_fresh_runs_on_the_new_topology(index, persistent):
    """DataLoader workers read the restore from their own copies of the dataset; the next epoch must not
    get it again from the parent's (it did, before set_epoch dropped a pending state behind the epoch)."""
    _, states = _run(index, 3, 1, stops=2)
    for rank in range(2):
        ds = _dataset(index, rank, 2)
        ds.load_state_dict(states)
        loader = _loader(ds, 2, persistent_workers=persistent)
        restored = [k for batch in loader for k in batch]
        ds.set_epoch(EPOCH + 1)
        nxt = [k for batch in loader for k in batch]
        fresh = _dataset(index, rank, 2)
        fresh.set_epoch(EPOCH + 1)
        assert nxt == [k for batch in _loader(fresh, 2) for k in batch] and len(nxt) == len(ds)
        assert len(restored) < len(ds)


def test_bad_states_are_refused_at_load(index, tmp_path):
    _, states = _run(index, 2, 2, stops=2)
    ds = _dataset(index, 0, 3)
    said = r"saved on 2 ranks but 1 were given: pass every rank's state, gathered"
    with pytest.raises(ValueError, match=said):
        ds.load_state_dict(states[:1])
    with pytest.raises(ValueError, match=r"the state was saved from seed=5, not 6; the epoch's order"):
        _dataset(index, 0, 3, seed=6).load_state_dict(states)
    other = write_dataset(tmp_path / "other", [c + 1 for c in COUNTS])
    with pytest.raises(ValueError, match="the state was saved from another dataset"):
        _dataset(other, 0, 3).load_state_dict(states)
    with pytest.raises(ValueError, match="state 1 is a str, not a state dict"):
        ds.load_state_dict([states[0], "garbage"])
    damaged = pickle.loads(pickle.dumps(states))
    snapshot = damaged[1]["_snapshot"]["_worker_snapshots"]["worker_0"]["dataset_state"]
    del snapshot["node"]["source"]["segment"]
    with pytest.raises(ValueError, match=r"the state of rank 1 worker 0 is damaged: KeyError\('segment'\)"):
        ds.load_state_dict(damaged)
    old = pickle.loads(pickle.dumps(states))
    for rank_state in old:
        for worker in rank_state["_snapshot"]["_worker_snapshots"].values():
            del worker["dataset_state"]["dataset"]
    with pytest.raises(ValueError, match=r"lacks \['dataset'\]: it was saved by a shardstream without"):
        ds.load_state_dict(old)
    with pytest.raises(ValueError, match="the list of states is empty"):
        ds.load_state_dict([])


def test_a_stale_loader_snapshot_is_refused(index):
    ds = _dataset(index, 0, 1)
    loader = _loader(ds, 2, snapshot_every_n_steps=2)
    it = iter(loader)
    for _ in range(3):
        next(it)
    state = loader.state_dict()
    del it
    with pytest.raises(ValueError, match=r"snapshots are 1 steps behind \(snapshot_every_n_steps > 1\)"):
        _dataset(index, 0, 2).load_state_dict([state])


def test_an_elastic_restore_needs_the_counts(index):
    pattern = str(index.parent / "train-{000000..000008}.tar")
    ds = ShardDataset(pattern, decode=False)
    with pytest.raises(ValueError, match="needs per-shard sample counts: pass the packer's index"):
        ds.load_state_dict([{"epoch": 0, "node": None}])
