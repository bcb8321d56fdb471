"""A refused state is refused where it is loaded: ``StatefulLoader.load_state_dict`` and ``check_state``
(issue 33 item 8). torchdata's StatefulDataLoader only keeps a state: its workers refuse it at the first
batch, as a worker's traceback. Real packed JPEG/PNG sets, real loaders with worker processes."""

from __future__ import annotations

import gc
import importlib
import pickle
import sys

import pytest
from torchdata.stateful_dataloader import StatefulDataLoader

from streamer import Mixture, ShardDataset, StatefulLoader
from tests.streamer.mixedset import pack_mixed

pytestmark = [
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated"),
    pytest.mark.filterwarnings("ignore:This DataLoader will create"),  # 3 workers on a 2-core runner
]

SEED, BATCH, STOP = 1, 2, 3  # the run that saves stops after STOP batches


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return str(pack_mixed(tmp_path_factory.mktemp("loaderstate"), n=30))


def _keys(batch):
    return [sample["__key__"] for sample in batch]


def _dataset(index, seed=SEED, **options):
    return ShardDataset(index, seed=seed, decode=False, buffer_size=8, **options)


def _loader(ds, workers, cls=StatefulLoader):
    return cls(ds, batch_size=BATCH, num_workers=workers, collate_fn=_keys)


def _saved(ds, workers, stop=STOP):
    """The keys read and the loader's state after ``stop`` batches, as after torch.save and load."""
    loader = _loader(ds, workers)
    read = []
    for n, batch in enumerate(loader):
        read += batch
        if n + 1 == stop:
            break
    return read, pickle.loads(pickle.dumps(loader.state_dict()))


@pytest.fixture(scope="module")
def saved(index):
    """A loader state saved mid-epoch with 2 workers, and the keys read up to it."""
    return _saved(_dataset(index), 2)


def test_a_state_of_another_seed_is_refused_at_load_state_dict(index, saved):
    _, state = saved
    with pytest.raises(ValueError, match="seed=1, not 2"):
        _loader(_dataset(index, seed=2), 2).load_state_dict(state)


@pytest.mark.slow  # torchdata then waits 5 s per worker for the workers to stop
def test_plain_statefuldataloader_refuses_only_at_the_first_batch(index):
    """Why StatefulLoader: torchdata's own loader keeps the state, and a worker refuses it, as a traceback."""
    _, state = _saved(_dataset(index), 1)
    plain = _loader(_dataset(index, seed=2), 1, cls=StatefulDataLoader)
    plain.load_state_dict(state)
    with pytest.raises(ValueError, match=r"(?s)DataLoader worker process 0.*seed=1, not 2") as caught:
        next(iter(plain))
    del caught, plain
    gc.collect()  # the workers stop here, in this test's time, not the next one's


def test_a_state_without_workers_is_refused_at_load_state_dict(index):
    _, state = _saved(_dataset(index), 0)
    with pytest.raises(ValueError, match="seed=1, not 3"):
        _loader(_dataset(index, seed=3), 0).load_state_dict(state)


@pytest.mark.parametrize(
    ("workers", "message"),
    [(3, "saved with 2 workers but this loader has 3"), (0, "2 workers but this loader has no workers")],
)
def test_a_worker_count_mismatch_is_named(index, saved, workers, message):
    with pytest.raises(ValueError, match=message):
        _loader(_dataset(index), workers).load_state_dict(saved[1])


def test_a_state_of_another_rank_is_refused_at_load_naming_the_place(index):
    _, state = _saved(_dataset(index, rank=0, world_size=2), 2, stop=1)
    with pytest.raises(ValueError, match=r"saved at .*\(0, 2, 0, 2\) but this run is at \(1, 2, 0, 2\)"):
        _loader(_dataset(index, rank=1, world_size=2), 2).load_state_dict(state)


@pytest.mark.parametrize("workers", [2, 0])
def test_a_good_state_loads_and_continues_identically(index, saved, workers):
    whole = [k for batch in _loader(_dataset(index), workers) for k in batch]
    before, state = saved if workers == 2 else _saved(_dataset(index), workers)
    loader = _loader(_dataset(index), workers)
    loader.load_state_dict(state)
    after = [k for batch in loader for k in batch]
    assert before + after == whole
    assert len(whole) == 30 and len(before) == STOP * BATCH


def test_check_state_changes_nothing(index, saved):
    fresh = [s["__key__"] for s in _dataset(index)]
    ds = _dataset(index)
    ds.check_state(saved[1], workers=2)  # a good loader state: checked, not loaded
    ds.check_state(ds.state_dict())
    with pytest.raises(ValueError, match="seed=2, not 1"):
        ds.check_state(_dataset(index, seed=2).state_dict())
    assert ds.state_dict()["node"] is None
    assert [s["__key__"] for s in ds] == fresh  # the next iteration with no state starts at the beginning


def _mixture(first, second, seed=SEED):
    sources = [
        {"path": first, "name": "a", "weight": 0.5, "decode": False},
        {"path": second, "name": "b", "weight": 0.5, "decode": False},
    ]
    return Mixture(sources, epoch_size=40, buffer_size=8, seed=seed)


def test_check_state_on_a_mixture(index, tmp_path):
    other = str(pack_mixed(tmp_path, n=20))
    mixture = _mixture(index, other)
    loader = _loader(mixture, 2)
    for n, _ in enumerate(loader):
        if n + 1 == STOP:
            break
    state = pickle.loads(pickle.dumps(loader.state_dict()))
    mixture.check_state(state, workers=2)
    with pytest.raises(ValueError, match="seed=1, not 2"):
        _mixture(index, other, seed=2).check_state(state)
    with pytest.raises(ValueError, match="saved with 2 workers but this loader has 3"):
        _loader(_mixture(index, other), 3).load_state_dict(state)
    with pytest.raises(ValueError, match="seed=1, not 2"):
        _loader(_mixture(index, other, seed=2), 2).load_state_dict(state)
    assert mixture.state_dict()["node"] is None  # checked, not loaded


def test_without_torchdata_the_loader_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchdata.stateful_dataloader", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "streamer.datasets.loader")
    with pytest.raises(ImportError, match="pip install torchdata"):
        importlib.import_module("streamer.datasets.loader")
