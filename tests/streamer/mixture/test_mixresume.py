"""Restoring mixtures from every kind of saved state: the mixture's own, before and after an epoch, and a
StatefulDataLoader's with no workers, with workers, and with snapshots taken less often than every step."""

from __future__ import annotations

import collections

import pytest
from torchdata.stateful_dataloader import StatefulDataLoader

from streamer.mixture.mixture import Mixture
from tests.conftest import write_dataset

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")

FIRST = {"tiny": 0.2, "mid": 0.3, "big": 0.5}
CHANGED = {"tiny": 0.5, "big": 0.5}  # a weight changed, a source removed


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixresume")
    return {
        "tiny": write_dataset(root / "tiny", [7], prefix="tiny").parent,
        "mid": write_dataset(root / "mid", [30, 70], prefix="mid").parent,
        "big": write_dataset(root / "big", [500] * 4, prefix="big").parent,
    }


def _mixture(paths, weights, **options):
    sources = [{"path": str(paths[n]), "weight": w, "decode": False} for n, w in weights.items()]
    return Mixture(sources, epoch_size=400, buffer_size=20, **options)


def _keys(batch):
    return [(sample["__source__"], sample["__key__"]) for sample in batch]


def _check_carried_on(reads_before, reads_after, sources):
    """Every remaining source read k or k + 1 times per sample: no pass repeated or skipped; big < 1 pass."""
    for source in sources:
        reads = collections.Counter(k for name, k in reads_before + reads_after if name == source)
        assert max(reads.values()) - min(reads.values()) <= 1, source
    big = [k for name, k in reads_before + reads_after if name == "big"]
    assert len(big) == len(set(big))


def test_a_state_saved_before_the_first_sample_restores_the_whole_epoch(paths):
    full = _keys(_mixture(paths, FIRST, seed=1).__iter__())
    saved = _mixture(paths, FIRST, seed=1)
    saved.set_epoch(2)
    state = saved.state_dict()
    assert state["node"] is None and state["epoch"] == 2
    restored = _mixture(paths, FIRST, seed=1)
    restored.load_state_dict(state)
    second = _mixture(paths, FIRST, seed=1)
    second.set_epoch(2)
    assert _keys(restored) == _keys(second) != full


def test_a_changed_mixture_takes_the_mixtures_own_state_from_an_epochs_end(paths):
    mixture = _mixture(paths, FIRST)
    epoch0 = _keys(mixture)
    changed = _mixture(paths, CHANGED)
    changed.load_state_dict(mixture.state_dict())
    assert _keys(changed) == []  # that epoch is over
    changed.set_epoch(1)
    epoch1 = _keys(changed)
    assert len(epoch1) == 400
    _check_carried_on(epoch0, epoch1, CHANGED)


@pytest.mark.parametrize(("workers", "every"), [(0, 1), (2, 1000)], ids=["no-workers", "stale-snapshots"])
def test_a_changed_mixture_takes_a_loader_state_from_an_epochs_end(paths, workers, every):
    """Stale snapshots: the loader's last worker states are from mid-epoch, but it says the epoch ended. The
    loader would replay the steps since through its workers, which a changed mixture cannot: the state goes
    into the mixture only, and a loader given it too fails in its workers with that fix named."""

    def loader(weights, epoch):
        mixture = _mixture(paths, weights)
        mixture.set_epoch(epoch)
        return mixture, StatefulDataLoader(
            mixture, batch_size=8, num_workers=workers, collate_fn=_keys, snapshot_every_n_steps=every
        )

    _, first = loader(FIRST, 0)
    epoch0 = [key for batch in first for key in batch]
    state = first.state_dict()
    assert state["_iterator_finished"]
    changed, second = loader(CHANGED, 1)
    changed.load_state_dict(state)
    assert changed.state_dict()["node"] is None  # nothing pending in the parent: the workers get the state
    if every > 1:
        replaying = loader(CHANGED, 1)
        replaying[0].load_state_dict(state)
        replaying[1].load_state_dict(state)
        with pytest.raises(ValueError) as refused:
            next(iter(replaying[1]))
        last_line = (
            "ValueError: a DataLoader worker was handed a snapshot from before the end of epoch 0 (the "
            "loader state was saved with snapshot_every_n_steps > 1) to replay the steps since, which the "
            "changed mixture cannot do; load the state into the mixture only "
            "(mixture.load_state_dict(state)), not into the loader: the epoch is over, and the mixture "
            "carries every source on from there"
        )
        # the worker's traceback ends in the error's own line
        assert str(refused.value).rstrip().endswith(last_line)
    else:
        second.load_state_dict(state)
    epoch1 = [key for batch in second for key in batch]
    assert len(epoch1) == 400
    _check_carried_on(epoch0, epoch1, CHANGED)


def test_a_loader_state_from_before_the_first_batch_lets_the_epoch_begin_under_the_changed_mixture(paths):
    for workers in (0, 2):
        mixture = _mixture(paths, FIRST)
        loader = StatefulDataLoader(mixture, batch_size=8, num_workers=workers, collate_fn=_keys)
        changed = _mixture(paths, CHANGED)
        changed.load_state_dict(loader.state_dict())
        assert collections.Counter(name for name, _ in _keys(changed)) == {"tiny": 200, "big": 200}


def test_a_loader_state_without_dataset_states_is_refused(paths):
    for state in (
        {"_snapshot": {"_worker_snapshots": {}}, "_iterator_finished": True},
        {"dataset_state": None, "_iterator_finished": False},
    ):
        with pytest.raises(ValueError) as refused:
            _mixture(paths, CHANGED).load_state_dict(state)
        assert str(refused.value) == (
            "the loader state holds no dataset state (was it saved before the first batch?)"
        )


def test_a_mixture_state_names_what_is_missing_when_it_is_not_one(paths):
    with pytest.raises(ValueError) as refused:
        _mixture(paths, FIRST).load_state_dict({"epoch": 0, "place": None, "node": None})
    assert str(refused.value) == "not a Mixture state: it has no 'sources' (was it saved by a ShardDataset?)"


def test_a_changed_mixture_in_the_middle_of_an_epoch_is_refused_with_the_whole_reason(paths):
    mixture = _mixture(paths, FIRST)
    stream = iter(mixture)
    for _ in range(10):
        next(stream)
    with pytest.raises(ValueError) as refused:
        _mixture(paths, CHANGED).load_state_dict(mixture.state_dict())
    assert str(refused.value) == (
        "the mixture changed (saved sources ['big', 'mid', 'tiny'] with per-epoch amounts {'tiny': 80, "
        "'mid': 120, 'big': 200}, now {'tiny': 200, 'big': 200}) but the state was saved in the middle of "
        "epoch 0; change its sources at an epoch boundary (a state saved after an epoch's last sample, or "
        "before its first); in the middle only weights and schedules may change"
    )


def test_the_same_mixture_takes_a_loader_state_from_the_middle_of_an_epoch_in_the_parent_too(paths):
    """Equal thirds over 2 workers plan 134/134/132 an epoch, where one worker would plan 134/133/133: the
    parent must judge 'unchanged' by the topology the state was saved on, not its own."""
    thirds = {"tiny": 1, "mid": 1, "big": 1}

    def loader():
        return StatefulDataLoader(_mixture(paths, thirds), batch_size=8, num_workers=2, collate_fn=_keys)

    full = list(loader())
    head_loader = loader()
    batches = iter(head_loader)
    head = [next(batches) for _ in range(7)]
    state = head_loader.state_dict()
    mixture = _mixture(paths, thirds)
    mixture.load_state_dict(state)  # what a user resuming a changed mixture does, here with the same one
    restored = StatefulDataLoader(mixture, batch_size=8, num_workers=2, collate_fn=_keys)
    restored.load_state_dict(state)
    assert head + list(restored) == full


def test_a_state_from_another_place_in_the_middle_of_an_epoch_is_refused_by_name(paths):
    saved = _mixture(paths, FIRST, rank=0, world_size=2)
    stream = iter(saved)
    for _ in range(5):
        next(stream)
    elsewhere = _mixture(paths, FIRST, rank=1, world_size=2)
    elsewhere.load_state_dict(saved.state_dict())
    with pytest.raises(ValueError) as refused:
        iter(elsewhere)
    assert str(refused.value) == (
        "state was saved at (rank, world, worker, workers)=(0, 2, 0, 1) but this run is at (1, 2, 0, 1); the "
        "stream depends on world size and worker count, so resume with the same ones, or load the list of "
        "every rank's states to continue on another (an elastic restore)"
    )
