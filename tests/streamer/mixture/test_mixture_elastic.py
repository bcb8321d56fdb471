"""A mixture's elastic restore on real shards and StatefulDataLoaders: every old rank's checkpoint, gathered,
continues the epoch on other (world, workers), each source's samples once and ranks equal; the epochs
after carry every source on; bad or changed states are refused at load."""

from __future__ import annotations

import io
import pickle
import random
from collections import Counter

import pytest
import torch
from torchdata.stateful_dataloader import StatefulDataLoader

from streamer.mixture.mixture import Mixture
from tests.conftest import write_dataset

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")

# Weighted by size: an epoch reads each source once, so keys name samples.
SOURCES = {"a": [23, 4, 61, 0, 9], "b": [30, 2, 17], "c": [40, 11]}  # 97 + 49 + 51 samples
EPOCH, SEED, BATCH = 0, 3, 4  # epoch 0: every source's run lies in its first pass


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixelastic")
    return {name: write_dataset(root / name, counts, prefix=name).parent for name, counts in SOURCES.items()}


def _keys(batch):
    return [(sample["__source__"], sample["__key__"]) for sample in batch]


def _mixture(paths, rank, world, **options):
    weights = options.pop("weights", {name: sum(counts) for name, counts in SOURCES.items()})
    sources = [{"path": str(paths[n]), "weight": w, "decode": False} for n, w in weights.items()]
    mixture = Mixture(sources, rank=rank, world_size=world, **{"buffer_size": 24, "seed": SEED, **options})
    mixture.set_epoch(EPOCH)
    return mixture


def _run(paths, world, workers, *, states=None, stops=None, epochs=(EPOCH,), **options):
    """Every rank in turn: keys per rank (per epoch), and each rank's loader state at its stop."""
    keys, saved = [], []
    for rank in range(world):
        mixture = _mixture(paths, rank, world, **options)
        if states is not None:  # through torch.save and torch.load, as a checkpoint: plain data only
            buffer = io.BytesIO()
            torch.save(states, buffer)
            mixture.load_state_dict(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))
        loader = StatefulDataLoader(mixture, batch_size=BATCH, num_workers=workers, collate_fn=_keys)
        got = []
        for epoch in epochs:
            mixture.set_epoch(epoch)
            run = []
            for n, batch in enumerate(loader):
                run += batch
                if stops is not None and n + 1 == stops:
                    saved.append(loader.state_dict())
                    break
            got.append(run)
        keys.append(got if len(epochs) > 1 else got[0])
    return keys, saved


def _check_once(epoch_keys, runs, worlds):
    """Keys across the runs: none more often than the uninterrupted epoch has it (a source read past its
    pass end has a few twice), none outside it, fewer than the worlds missing."""
    epoch, got = Counter(epoch_keys), Counter(k for run in runs for rank in run for k in rank)
    assert not got - epoch, list(got - epoch)[:5]
    assert sum((epoch - got).values()) <= sum(w - 1 for w in worlds)


@pytest.mark.parametrize(
    ("old", "new"), [((3, 2), (2, 3)), ((2, 0), (3, 1)), ((1, 2), (4, 0)), ((2, 1), (2, 1))]
)
def test_a_mixture_checkpoint_continues_on_another_topology_with_every_sample_once(paths, old, new):
    (w1, k1), (w2, k2) = old, new
    full, _ = _run(paths, w1, k1)
    epoch_keys = [k for rank in full for k in rank]
    stops = random.Random(w1 * 10 + k1).randint(1, len(full[0]) // BATCH - 1)
    before, states = _run(paths, w1, k1, stops=stops)
    after, _ = _run(paths, w2, k2, states=states)
    assert len({len(rank) for rank in after}) == 1
    _check_once(epoch_keys, [before, after], [w2])


@pytest.mark.parametrize("second_stop", [1, 2])  # 1: two of the three workers have not begun their deal
def test_a_restored_mixture_restores_again_and_then_carries_every_source_on(paths, second_stop):
    full, _ = _run(paths, 3, 2)
    epoch_keys = [k for rank in full for k in rank]
    first, states = _run(paths, 3, 2, stops=3)
    second, states2 = _run(paths, 2, 3, states=states, stops=second_stop)
    third, _ = _run(paths, 4, 1, states=states2, epochs=(EPOCH, EPOCH + 1))
    assert len({len(rank[0]) for rank in third}) == 1
    _check_once(epoch_keys, [first, second, [rank[0] for rank in third]], [2, 4])
    # The next epoch: 4 ranks of a fresh mixture's length, each source going on where the last one ended.
    nxt = [rank[1] for rank in third]
    assert {len(rank) for rank in nxt} == {len(_mixture(paths, 0, 4))}
    by_source = Counter(name for rank in nxt for name, _ in rank)
    assert [by_source[name] for name in SOURCES] == _mixture(paths, 0, 4).plan(4, 1).per_epoch()


def test_a_smaller_epoch_restored_leaves_each_source_where_the_saved_epoch_ends(paths):
    """Two epochs of 90 read under one pass of every source: the restored epoch and the one after read
    each source's stream onward, so no sample comes twice (starting a source over would repeat some)."""
    full, _ = _run(paths, 2, 2, epoch_size=90)
    head, states = _run(paths, 2, 2, epoch_size=90, stops=5)
    tail, _ = _run(paths, 3, 1, states=states, epoch_size=90, epochs=(EPOCH, EPOCH + 1))
    epoch_keys = [k for rank in full for k in rank]
    _check_once(epoch_keys, [head, [rank[0] for rank in tail]], [3])
    both = Counter(k for rank in head for k in rank) + Counter(k for rank in tail for k in rank[0] + rank[1])
    assert max(both.values()) == 1 and sum(both.values()) >= 2 * 90 - 2 - 1


def test_the_same_topology_from_a_restored_state_is_identical(paths):
    _, states = _run(paths, 3, 1, stops=4)
    whole, _ = _run(paths, 2, 2, states=states)
    head, states2 = _run(paths, 2, 2, states=states, stops=3)
    for rank in range(2):
        mixture = _mixture(paths, rank, 2)
        loader = StatefulDataLoader(mixture, batch_size=BATCH, num_workers=2, collate_fn=_keys)
        loader.load_state_dict(states2[rank])
        assert head[rank] + [k for batch in loader for k in batch] == whole[rank]


def test_a_pending_restore_saved_before_reading_restores_the_same(paths):
    _, states = _run(paths, 2, 1, stops=3)
    direct, _ = _run(paths, 3, 1, states=states)
    pending = []
    for rank in range(2):  # loaded, then checkpointed before any sample: the pending restore is kept
        mixture = _mixture(paths, rank, 2)
        mixture.load_state_dict(states)
        pending.append(mixture.state_dict())
    again, _ = _run(paths, 3, 1, states=pending)
    assert again == direct


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seed": SEED + 1}, "seed=3, not 4"),
        ({"buffer_size": 25}, "another dataset"),
        ({"epoch_size": 150}, "another dataset"),
    ],
)
def test_states_from_another_mixture_are_refused_before_reading(paths, change, message):
    _, states = _run(paths, 2, 1, stops=2)
    with pytest.raises(ValueError, match=message):
        _mixture(paths, 0, 3, **change).load_state_dict(states)


def test_an_own_state_from_another_seed_is_refused(paths):
    _, states = _run(paths, 1, 0, stops=2)
    with pytest.raises(ValueError, match=r"saved with seed=3, not 4; every source's pass stream"):
        _mixture(paths, 0, 1, seed=SEED + 1).load_state_dict(states[0])


def test_damaged_or_incomplete_state_lists_are_refused_by_name(paths):
    _, states = _run(paths, 2, 2, stops=2)
    mixture = _mixture(paths, 0, 3)
    with pytest.raises(ValueError, match="saved on 2 ranks but 1 were given"):
        mixture.load_state_dict(states[:1])
    with pytest.raises(ValueError, match="the list of states is empty"):
        mixture.load_state_dict([])
    broken = pickle.loads(pickle.dumps(states))
    snapshot = broken[1]["_snapshot"]["_worker_snapshots"]["worker_1"]["dataset_state"]
    snapshot["node"]["counts"] = [10**6, 0, 0]
    with pytest.raises(ValueError, match=r"the state of rank 1 worker 1 is damaged: .*handed out of a run"):
        mixture.load_state_dict(broken)
    moved = pickle.loads(pickle.dumps(states))
    moved[0]["_snapshot"]["_worker_snapshots"]["worker_0"]["dataset_state"]["sources"]["a"][0] += 1
    with pytest.raises(ValueError, match="disagree on where the sources stood"):
        mixture.load_state_dict(moved)
