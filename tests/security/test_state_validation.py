"""Damaged or foreign states (issue 32, item 7): one state loaded into a ShardDataset or a Mixture is checked
as strictly as the elastic path checks a list — identity, types, ranges, the chain's keys — at load, with a
ValueError naming the bad key, never a short epoch, a repeated sample or an error mid-iteration. A state
that ``state_dict`` gave still loads and continues exactly where it stood."""

from __future__ import annotations

import copy
import itertools
import json

import pytest

from streamer import ShardDataset
from streamer.mixture.mixture import Mixture
from tests.conftest import write_dataset

pytestmark = [pytest.mark.timeout(60), pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")]

COUNTS = [4, 4, 4]  # 12 samples an epoch: a short epoch or a repeat shows in the keys
HEAD = 3  # samples read before the checkpoint: the buffer (4) still filling, the reader in shard 2 of 3


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("states"), COUNTS)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixstates")
    return [str(write_dataset(root / n, c, prefix=n).parent) for n, c in (("a", [4, 4]), ("b", [6, 2]))]


def _dataset(index, **options):
    return ShardDataset(str(index), decode=False, buffer_size=4, **options)


def _mixture(sources, **options):
    return Mixture([{"path": p, "weight": 1, "decode": False} for p in sources], buffer_size=4, **options)


def _keys(samples):
    return [sample["__key__"] for sample in samples]


def _state_after(make, head=HEAD):
    dataset = make()
    keys = _keys(itertools.islice(iter(dataset), head))
    return keys, dataset.state_dict()


def _reader(state):
    return state["node"]["source"]


def _drop_identity(state):
    for key in ("dataset", "seed", "shuffle", "remainder"):
        del state[key]


def _buffer_repeats_first(state):
    buffer = state["node"]["buffer"]
    state["node"]["buffer"] = [buffer[0]] * len(buffer)


DATASET_DAMAGE = {
    "identity-missing": (_drop_identity, r"lacks \['dataset', 'seed', 'shuffle', 'remainder'\]"),
    "segment-past-the-plan": (lambda s: _reader(s).update(segment=10**9), r"segment=1000000000"),
    "done-past-the-segment": (lambda s: _reader(s).update(done=10**6), r"done=1000000"),
    "done-negative": (lambda s: _reader(s).update(done=-1), r"done=-1"),
    "segment-a-string": (lambda s: _reader(s).update(segment="1"), r"segment='1'"),
    "buffer-ids-duplicated": (_buffer_repeats_first, r"buffer holds sample \(0, 0\) 3 times, read 1"),
    "buffer-id-not-yet-read": (lambda s: s["node"]["buffer"].append([1, 0]), r"buffer holds sample \(1, 0\)"),
    "buffer-id-not-in-the-data": (
        lambda s: s["node"]["buffer"].append([7, 0]),
        r"buffer: sample \(7, 0\) is not in",
    ),
    "rng-garbage": (lambda s: s["node"].update(rng=[1, 2, 3]), r"rng=\[1, 2, 3\]"),
    "node-a-string": (lambda s: s.update(node="abc"), r"node='abc'"),
    "node-without-reader-keys": (lambda s: s["node"].update(source={"x": 1}), r"lacks \['done', 'segment'\]"),
    "epoch-negative": (lambda s: s.update(epoch=-7), r"epoch=-7"),
    "epoch-a-float": (lambda s: s.update(epoch=0.5), r"epoch=0.5"),
    "place-outside-its-world": (lambda s: s.update(place=[0, 1, 3, 2]), r"place=\[0, 1, 3, 2\]"),
    "plan-garbage": (lambda s: s.update(plan={"ids": [[0]], "spans": []}), r"plan"),
    "a-loader-state": (lambda s: s.update(_snapshot={}), r"StatefulDataLoader's state"),
}


@pytest.mark.parametrize("damage", DATASET_DAMAGE)
def test_a_damaged_dataset_state_is_refused_at_load_naming_the_key(index, damage):
    mutate, names = DATASET_DAMAGE[damage]
    _, state = _state_after(lambda: _dataset(index))
    mutate(state)
    with pytest.raises(ValueError, match=names):
        _dataset(index).load_state_dict(state)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"shuffle": False},
        {"decode": True},
        {"on_error": "skip"},
        {"defer_reads": True},
        {"buffer_size": 1},
    ],
    ids=["shuffled", "in-order", "decoded", "stand-ins", "deferred", "no-buffer"],
)
@pytest.mark.parametrize("head", [1, HEAD, 7, 12])
def test_a_saved_dataset_state_still_loads_and_continues_exactly(index, options, head):
    def make():
        return ShardDataset(str(index), **{"decode": False, "buffer_size": 4, **options})

    full = _keys(make())
    keys, state = _state_after(make, head)
    for saved in (state, json.loads(json.dumps(state))):  # plain data: a JSON round trip loads too
        restored = make()
        restored.load_state_dict(copy.deepcopy(saved))
        assert keys + _keys(restored) == full


def test_a_state_saved_with_another_remainder_is_refused(index):
    """remainder is part of a state's identity on both load paths (one state, every rank's list): on one
    rank the segments match either way, so only the identity check can see it."""
    _, state = _state_after(lambda: _dataset(index, remainder="pad"))
    for loaded in (state, [state]):
        with pytest.raises(ValueError, match=r"remainder='pad', not 'drop'"):
            _dataset(index).load_state_dict(loaded)


def _counts(state):
    return state["node"]["counts"]


MIXTURE_DAMAGE = {
    "identity-missing": (_drop_identity, r"lacks \['dataset', 'seed', 'shuffle', 'remainder'\]"),
    "counts-past-the-budget": (lambda s: _counts(s).__setitem__(0, 10**6), r"counts"),
    "counts-negative": (lambda s: _counts(s).__setitem__(0, -1), r"counts"),
    "counts-a-string": (lambda s: s["node"].update(counts="ab"), r"counts='ab'"),
    "node-a-string": (lambda s: s.update(node="abc"), r"node='abc'"),
    "epoch-negative": (lambda s: s.update(epoch=-7), r"epoch=-7"),
    "left-negative": (lambda s: s.update(left=-7), r"left=-7"),
    "sources-negative": (lambda s: s["sources"].update(a=[-5, 8]), r"sources.*-5"),
    "remainder-other-mid-epoch": (lambda s: s.update(remainder="pad"), r"remainder='pad', not 'drop'"),
    "dataset-other-mid-epoch": (lambda s: s.update(dataset="0" * 32), r"another dataset"),
    "place-outside-its-world": (lambda s: s.update(place=[2, 1, 0, 1]), r"place=\[2, 1, 0, 1\]"),
    "last-not-in-the-data": (
        lambda s: s.update(node={"owed": 0, "last": [99, 0], "source": s["node"]}),
        r"last",
    ),
}


@pytest.mark.parametrize("damage", MIXTURE_DAMAGE)
def test_a_damaged_mixture_state_is_refused_at_load_naming_the_key(sources, damage):
    mutate, names = MIXTURE_DAMAGE[damage]
    on_error = "skip" if damage == "last-not-in-the-data" else "raise"
    _, state = _state_after(lambda: _mixture(sources), 5)
    mutate(state)
    with pytest.raises(ValueError, match=names):
        _mixture(sources, on_error=on_error).load_state_dict(state)


@pytest.mark.parametrize(
    "options", [{}, {"stratify": 4}, {"on_error": "skip"}], ids=["plain", "stratified", "stand-ins"]
)
@pytest.mark.parametrize("head", [1, 5, 16])
def test_a_saved_mixture_state_still_loads_and_continues_exactly(sources, options, head):
    full = _keys(_mixture(sources, **options))
    keys, state = _state_after(lambda: _mixture(sources, **options), head)
    for saved in (state, json.loads(json.dumps(state))):
        restored = _mixture(sources, **options)
        restored.load_state_dict(copy.deepcopy(saved))
        assert keys + _keys(restored) == full


def test_a_mixture_with_another_buffer_size_refuses_a_state_saved_mid_epoch(sources):
    """Its per-source amounts are the same, but its windows are not: the saved counts would name other
    samples. At an epoch boundary the changed mixture loads (test_mixresume.py)."""
    _, state = _state_after(lambda: _mixture(sources), 5)
    other = Mixture([{"path": p, "weight": 1, "decode": False} for p in sources], buffer_size=8)
    with pytest.raises(ValueError, match="saved from another dataset"):
        other.load_state_dict(state)
