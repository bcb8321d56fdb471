"""Shuffle buffer, reader state and stand-ins at their edges: fill schedule, bounds, seeds, repeats."""

from __future__ import annotations

import json

import numpy as np
import pytest

from shardstream.errors import ShardReadError
from streamer.chain.node import Node
from streamer.chain.opener import ShardOpener
from streamer.chain.reader import SampleReader
from streamer.chain.recovery import Recovery
from streamer.chain.shuffle import ShuffleBuffer, buffer_seed, check_buffer
from streamer.chain.standins import StandIns
from streamer.datasets.options import Errors
from streamer.placement.segments import Segment, counted_segments
from streamer.placement.shards import ShardList
from tests.conftest import write_dataset

COUNTS = [30, 1, 12, 0, 7]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return ShardList.from_source(str(write_dataset(tmp_path_factory.mktemp("nodes"), COUNTS)))


def _in_order(shards, **place):
    place = {"rank": 0, "world": 1, "worker": 0, "workers": 1, **place}
    segments = counted_segments(shards.counts, seed=0, epoch=0, shuffle=False, **place)
    return SampleReader(ShardOpener(shards), segments)


def _ids(node):
    return [(shard, index) for shard, index, _ in node]


EVERY = [(s, i) for s, c in enumerate(COUNTS) for i in range(c)]


# -- check_buffer and buffer_seed --------------------------------------------------------------------------
def test_check_buffer_resolves_initial_and_accepts_the_bounds():
    assert check_buffer(1, None) == 1
    assert check_buffer(8, None) == 8
    assert check_buffer(8, 1) == 1
    assert check_buffer(8, 8) == 8


@pytest.mark.parametrize(
    ("size", "initial", "message"),
    [
        (0, None, r"^buffer_size must be >= 1, not 0$"),
        (-3, 1, r"^buffer_size must be >= 1, not -3$"),
        (8, 0, r"^initial must be in \[1, buffer_size=8\], not 0$"),
        (8, 9, r"^initial must be in \[1, buffer_size=8\], not 9$"),
    ],
)
def test_check_buffer_refuses_naming_the_argument_and_the_value(size, initial, message):
    with pytest.raises(ValueError, match=message):
        check_buffer(size, initial)


def test_buffer_seed_differs_for_every_place_seed_and_epoch_and_repeats_for_the_same():
    seeds = {}
    for world, workers in ((1, 1), (2, 1), (1, 2), (2, 2), (3, 2), (2, 3)):
        for rank in range(world):
            for worker in range(workers):
                for seed, epoch in ((0, 0), (1, 0), (0, 1), (1, 1)):
                    key = (seed, epoch, rank, world, worker, workers)
                    seeds[key] = buffer_seed(*key)
                    assert buffer_seed(*key) == seeds[key]
    assert len(set(seeds.values())) == len(seeds)


# -- the shuffle buffer ------------------------------------------------------------------------------------
def test_the_buffer_fills_to_initial_then_takes_two_in_per_one_out_until_full(shards):
    reader = _in_order(shards)
    buffer = ShuffleBuffer(reader, size=6, initial=2, seed=1)
    consumed, held = [], []
    for _ in range(8):
        next(buffer)
        consumed.append(reader.get_state()["done"])
        held.append(len(buffer.get_state()["buffer"]))
    # Two in before the first out; then one more in per out until six are held, then one in per out.
    assert consumed == [3, 5, 7, 9, 10, 11, 12, 13]
    assert held == [2, 3, 4, 5, 5, 5, 5, 5]


def test_a_full_initial_reads_size_samples_before_the_first(shards):
    reader = _in_order(shards)
    buffer = ShuffleBuffer(reader, size=5, initial=None, seed=1)
    next(buffer)
    assert reader.get_state()["done"] == 5 and len(buffer.get_state()["buffer"]) == 4


def test_the_buffer_hands_out_every_sample_once_and_drains_at_the_end(shards):
    for size, initial in ((1, None), (2, 1), (4, 4), (7, 2), (64, 3), (100, None)):
        got = _ids(ShuffleBuffer(_in_order(shards), size=size, initial=initial, seed=5))
        assert sorted(got) == EVERY, (size, initial)
        if size == 1:
            assert got == EVERY  # a buffer of one cannot reorder
        else:
            assert got != EVERY


def test_the_buffer_order_depends_on_the_seed_only(shards):
    runs = {seed: _ids(ShuffleBuffer(_in_order(shards), size=8, initial=3, seed=seed)) for seed in (0, 1, 2)}
    assert runs[0] == _ids(ShuffleBuffer(_in_order(shards), size=8, initial=3, seed=0))
    assert len({tuple(run) for run in runs.values()}) == 3


def test_a_full_buffer_spreads_samples_like_a_random_pick():
    """Every slot of a full buffer is picked alike: not the newest sample, not the oldest, not slot 0."""
    n, size = 4000, 16
    source = _Counting(n)
    out = [index for _, index, _ in ShuffleBuffer(source, size=size, initial=None, seed=11)]
    assert sorted(out) == list(range(n))
    delays = np.array([position - index for position, index in enumerate(out[: n - size])]) + size - 1
    # The delay of a sample (in picks) is geometric with p = 1/size: mean size - 1, no mass piled at 0 or 1.
    assert abs(delays.mean() - (size - 1)) < 1.5
    assert (delays == size - 1).mean() < 0.12
    in_a_row = np.mean(np.diff(out) == 1)
    assert in_a_row < 0.15


def test_the_draining_buffer_hands_out_its_samples_in_random_order():
    tails = set()
    for seed in range(40):
        out = [index for _, index, _ in ShuffleBuffer(_Counting(6), size=6, initial=None, seed=seed)]
        assert sorted(out) == list(range(6))
        tails.add(tuple(out))
    firsts = {tail[0] for tail in tails}
    lasts = {tail[-1] for tail in tails}
    assert firsts == set(range(6)) and lasts == set(range(6))


def test_a_restored_buffer_holds_the_same_samples_and_goes_on_identically(shards):
    make = lambda: ShuffleBuffer(_in_order(shards), size=6, initial=2, seed=3)  # noqa: E731
    full = _ids(make())
    for k in (0, 1, 2, 5, 9, 20, len(full) - 1, len(full)):
        first = make()
        head = [(s, i) for _, (s, i, _) in zip(range(k), first, strict=False)]
        state = json.loads(json.dumps(first.get_state()))
        assert state == {} if k == 0 else len(state["buffer"]) <= 6  # {}: not started, from the start
        second = make()
        second.reset(state)
        rest = list(second)
        assert head + [(s, i) for s, i, _ in rest] == full, k
        for s, i, sample in rest:  # samples re-read by id are the right ones, bytes and all
            assert sample["__key__"] == f"s{s:03d}-{i:05d}"


def test_reset_without_a_state_starts_the_same_stream_again(shards):
    buffer = ShuffleBuffer(_in_order(shards), size=6, initial=2, seed=3)
    full = _ids(buffer)
    for _ in zip(range(7), buffer, strict=False):
        pass
    buffer.reset()
    assert _ids(buffer) == full
    buffer.reset(None)
    assert _ids(buffer) == full


# -- the reader -------------------------------------------------------------------------------------------
def test_the_reader_state_counts_samples_done_in_the_current_segment(shards):
    segments = [Segment(2, 3, 6), Segment(0, 28, 30), Segment(4, 0, 7)]
    reader = SampleReader(ShardOpener(shards), segments)
    states = []
    for shard, index, sample in reader:
        assert sample["__key__"] == f"s{shard:03d}-{index:05d}"
        states.append((shard, index, reader.get_state()))
    assert [(s, i) for s, i, _ in states] == [
        (2, 3),
        (2, 4),
        (2, 5),
        (0, 28),
        (0, 29),
        *((4, i) for i in range(7)),
    ]
    assert [st for _, _, st in states[:5]] == [
        {"segment": 0, "done": 1},
        {"segment": 0, "done": 2},
        {"segment": 0, "done": 3},
        {"segment": 1, "done": 1},
        {"segment": 1, "done": 2},
    ]
    assert reader.get_state() == {"segment": 3, "done": 0}  # past the end: nothing left to read


def test_the_reader_resumes_mid_segment_and_at_a_segment_end(shards):
    segments = [Segment(2, 3, 6), Segment(0, 28, 30)]
    reader = SampleReader(ShardOpener(shards), segments)
    reader.reset({"segment": 0, "done": 2})
    assert _ids(reader) == [(2, 5), (0, 28), (0, 29)]
    reader.reset({"segment": 0, "done": 3})
    assert _ids(reader) == [(0, 28), (0, 29)]
    reader.reset({"segment": 2, "done": 0})
    assert _ids(reader) == []
    assert reader.get_state() == {"segment": 2, "done": 0}


def test_the_reader_reads_whole_shards_and_its_state_at_the_first_sample(shards):
    reader = SampleReader(ShardOpener(shards), [Segment(1, 0, None), Segment(4, 5, None)])
    assert reader.get_state() == {"segment": 0, "done": 0}
    assert _ids(reader) == [(1, 0), (4, 5), (4, 6)]
    assert reader.read_one(2, 11)["__key__"] == "s002-00011"


def _short_shard(root):
    """Shard 0 holds 4 samples but the index promises 5 (and there is no sidecar to say otherwise)."""
    index = write_dataset(root, [4, 2])
    doc = json.loads(index.read_text())
    doc["shards"][0][1] += 1
    index.write_text(json.dumps(doc))
    (root / "train-000000.tar.offsets").unlink()
    return ShardList.from_source(str(index))


def test_a_shard_shorter_than_its_count_is_a_read_error_naming_both(tmp_path):
    shards = _short_shard(tmp_path / "d")
    reader = SampleReader(ShardOpener(shards), [Segment(0, 1, 5), Segment(1, 0, 2)])
    got = []
    said = r"shard ended after sample 4; the index promises 5 \(cut short, or changed after it was indexed"
    with pytest.raises(ShardReadError, match=said) as info:
        got.extend((s, i) for s, i, _ in reader)
    assert got == [(0, 1), (0, 2), (0, 3)] and info.value.url == shards.urls[0]
    # A segment that stops before the shard's end never looks past its own end.
    within = SampleReader(ShardOpener(shards), [Segment(0, 1, 4), Segment(1, 0, 2)])
    assert _ids(within) == [(0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]


def test_a_short_shard_skipped_owes_its_missing_sample(tmp_path):
    shards = _short_shard(tmp_path / "d")
    recovery = Recovery(Errors(on_error="skip"))
    reader = SampleReader(ShardOpener(shards), [Segment(0, 0, 5), Segment(1, 0, 2)], recovery)
    assert _ids(StandIns(reader, recovery)) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 0), (1, 1)]
    counts = recovery.counters.counts()
    assert counts == {
        "samples_skipped": 1,
        "samples_repeated": 1,
        "shards_failed": 1,
        "decode_errors": 0,
        "samples_overlong": 0,
        "samples_left_out": 0,
        "samples_skipped_steps": 0,
    }


def test_a_node_without_a_source_cannot_read_by_id():
    with pytest.raises(NotImplementedError, match=r"^_Counting cannot read a sample by id$"):
        _Counting(3).read_one(0, 1)


# -- stand-ins ---------------------------------------------------------------------------------------------
def _standins(shards, **errors):
    recovery = Recovery(Errors(on_error="skip", **errors))
    segments = counted_segments(
        shards.counts, rank=0, world=1, worker=0, workers=1, seed=0, epoch=0, shuffle=False
    )
    return StandIns(SampleReader(ShardOpener(shards), segments, recovery), recovery), recovery


def test_stand_ins_repeat_the_sample_after_a_loss_once_per_sample_owed(shards):
    node, recovery = _standins(shards)
    got = []
    for shard, index, _ in node:
        got.append((shard, index))
        if len(got) == 5:
            recovery.owed += 3  # as a node that lost three samples would
    at = got.index((0, 4))
    assert got[at : at + 5] == [(0, 4), (0, 4), (0, 4), (0, 4), (0, 5)]
    assert len(got) == sum(COUNTS) + 3 and recovery.owed == 0
    assert recovery.counters.counts()["samples_repeated"] == 3


def test_stand_ins_owed_at_the_end_repeat_the_last_sample(shards):
    node, recovery = _standins(shards)
    got = []
    for shard, index, _ in node:
        got.append((shard, index))
        if (shard, index) == (4, 6) and len(got) == sum(COUNTS):
            recovery.owed += 2
    assert got[-3:] == [(4, 6), (4, 6), (4, 6)] and recovery.owed == 0


def test_samples_lost_after_the_last_good_one_are_paid_by_repeating_it(tmp_path):
    index = write_dataset(tmp_path / "d", [4, 3])
    (tmp_path / "d" / "train-000001.tar").unlink()  # the loss comes when nothing follows it
    node, recovery = _standins(ShardList.from_source(str(index)))
    assert _ids(node) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 3), (0, 3), (0, 3)]
    assert recovery.owed == 0 and recovery.counters.counts()["samples_repeated"] == 3


def test_each_repeat_is_a_fresh_dict(shards):
    node, recovery = _standins(shards)
    first = next(node)
    recovery.owed = 2
    repeats = [next(node), next(node)]
    first[2]["txt"] = b"changed"
    repeats[0][2]["txt"] = b"changed too"
    assert repeats[1][2]["txt"] == shards_text(shards, 0, 0)
    assert repeats[1][2] is not repeats[0][2] and repeats[0][2] is not first[2]


def test_a_state_saved_mid_repeat_repeats_the_same_sample_on_restore(shards):
    node, recovery = _standins(shards)
    next(node), next(node)
    recovery.owed = 2
    assert next(node)[:2] == (0, 1)  # the first repeat of sample 1
    state = json.loads(json.dumps(node.get_state()))
    assert state["owed"] == 1 and state["last"] == [0, 1]
    fresh, fresh_recovery = _standins(shards)
    fresh.reset(state)
    shard, index, sample = next(fresh)
    assert (shard, index) == (0, 1) and sample["__key__"] == "s000-00001"
    assert fresh_recovery.owed == 0 and next(fresh)[:2] == (0, 2)


def test_a_fresh_state_owes_nothing_and_names_no_sample(shards):
    node, recovery = _standins(shards)
    assert node.get_state() == {"source": {"segment": 0, "done": 0}, "owed": 0, "last": None}
    recovery.owed = 4  # left from an earlier pass: a reset starts clean
    node.reset()
    assert next(node)[:2] == (0, 0)
    assert node.get_state() == {"source": {"segment": 0, "done": 1}, "owed": 0, "last": [0, 0]}
    assert [(0, 0), *_ids(node)] == EVERY


def shards_text(shards, shard, index):
    samples, stream = ShardOpener(shards).samples(shard, index)
    with stream:
        return next(samples)["txt"]


class _Counting(Node):
    """Samples 0..n-1 of one shard, from memory: to see a buffer's picks over thousands of samples."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self._done = 0

    def _current_state(self):
        return {"done": self._done}

    def _generate(self, state):
        self._done = state["done"] if state else 0
        while self._done < self.n:
            self._done += 1
            yield 0, self._done - 1, {"__key__": str(self._done - 1)}
