"""Resumption: a restored stream continues exactly where it stood, in a new process, without replay."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from streamer.chain.mapper import Mapper
from streamer.chain.opener import ShardOpener
from streamer.chain.reader import SampleReader
from streamer.chain.recovery import Recovery
from streamer.chain.shuffle import ShuffleBuffer
from streamer.chain.standins import StandIns
from streamer.datasets.options import Errors
from streamer.decode.sample import SampleDecoder
from streamer.placement.segments import WholeShards, counted_segments
from streamer.placement.shards import ShardList
from tests.conftest import write_dataset

SCRIPT = Path(__file__).parents[1] / "scripts" / "resume_run.py"
COUNTS = [23, 4, 61, 9, 30, 2, 17]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("resume"), COUNTS)


def _run(*args: str) -> list[list[str]]:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=180, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.mark.parametrize(("workers", "context"), [(0, "fork"), (2, "fork"), (2, "forkserver"), (2, "spawn")])
def test_stateful_dataloader_resume_in_a_new_process_equals_the_uninterrupted_run(
    index, tmp_path, workers, context
):
    common = (str(index), "--workers", str(workers), "--epoch", "2", "--context", context)
    full = _run(*common)
    assert len(full) > 6
    rng = random.Random(workers)
    stops = {1, rng.randrange(2, len(full) - 1), len(full) - 1}
    if context != "fork":  # each run starts its workers afresh (seconds each); one mid-epoch stop suffices
        stops = {rng.randrange(2, len(full) - 1)}
    for stop in sorted(stops):
        saved = tmp_path / f"state-{stop}.pt"
        head = _run(*common, "--stop-after", str(stop), "--save", str(saved))
        tail = _run(*common, "--resume", str(saved))
        assert head == full[:stop]
        assert tail == full[stop:], f"resume after batch {stop}"


def _node_factories(index):
    shards = ShardList.from_source(str(index))
    counts = shards.counts

    def reader():
        segments = counted_segments(counts, rank=0, world=1, worker=0, workers=1, seed=3, epoch=1)
        return SampleReader(ShardOpener(shards), segments)

    def whole():
        segments = WholeShards(len(COUNTS), rank=0, world=1, worker=0, workers=1, seed=2, epoch=0)
        return SampleReader(ShardOpener(shards), segments)

    def buffered():
        return ShuffleBuffer(reader(), size=16, initial=5, seed=99)

    def split():
        segments = counted_segments(counts, rank=1, world=3, worker=1, workers=2, seed=3, epoch=1)
        return ShuffleBuffer(SampleReader(ShardOpener(shards), segments), size=8, initial=8, seed=1)

    def decoded():  # a decoder before the buffer: restoring re-reads and decodes the buffered samples
        return ShuffleBuffer(Mapper(reader(), SampleDecoder()), size=8, initial=3, seed=4)

    def stand_ins():
        recovery = Recovery(Errors(on_error="skip"))
        return StandIns(Mapper(buffered(), SampleDecoder(), recovery), recovery)

    return {
        "reader": reader,
        "whole-shards": whole,
        "buffer": buffered,
        "split-shards": split,
        "decoded-then-buffered": decoded,
        "stand-ins": stand_ins,
    }


@pytest.mark.parametrize(
    "node", ["reader", "whole-shards", "buffer", "split-shards", "decoded-then-buffered", "stand-ins"]
)
def test_every_node_honours_the_save_load_contract(index, node):
    """For every node: take k, save, load into a fresh node, and the rest equals the uninterrupted rest."""
    make = _node_factories(index)[node]
    full = [(s, i, d["__key__"]) for s, i, d in make()]
    assert len(full) > 3
    for k in sorted({0, 1, len(full) // 3, len(full) // 2, len(full) - 1, len(full)}):
        first = make()
        head = [(s, i, d["__key__"]) for _, (s, i, d) in zip(range(k), first, strict=False)]
        state = json.loads(json.dumps(first.get_state()))  # states survive JSON, not only pickle
        second = make()
        second.reset(state)
        assert head + [(s, i, d["__key__"]) for s, i, d in second] == full, f"{node} at {k}"


def test_restoring_reads_by_offset_not_by_replay(index, monkeypatch):
    """Resume from deep in a shard: the reader seeks to the sample, it does not read what came before."""
    shards = ShardList.from_source(str(index))
    segments = counted_segments(
        np.array(COUNTS), rank=0, world=1, worker=0, workers=1, seed=0, epoch=0, shuffle=False
    )
    reader = SampleReader(ShardOpener(shards), segments)
    reader.reset({"segment": 2, "done": 55})
    import streamer.chain.opener as opener_module

    opened = []
    original = opener_module.open_stream

    def spy(url, offset=0, *args, **kwargs):
        opened.append((url, offset))
        return original(url, offset, *args, **kwargs)

    monkeypatch.setattr(opener_module, "open_stream", spy)
    sample = next(reader)
    assert sample[2]["__key__"] == "s002-00055"
    assert opened[0][1] == reader.opener.offsets(2)[55] > 0


def test_repeats_owed_for_damage_survive_save_and_load(tmp_path):
    """Stand-ins for skipped samples are part of the state: resuming mid-repeat gives the same stream."""
    index = write_dataset(tmp_path / "damaged", [6, 5, 7])
    (index.parent / "train-000001.tar").unlink()  # 5 samples owed, paid with repeats

    def make():
        shards = ShardList.from_source(str(index))
        segments = counted_segments(
            shards.counts, rank=0, world=1, worker=0, workers=1, seed=3, epoch=0, shuffle=False
        )
        recovery = Recovery(Errors(on_error="skip"))
        reader = SampleReader(ShardOpener(shards), segments, recovery)
        return StandIns(ShuffleBuffer(reader, size=4, initial=2, seed=5), recovery)

    full = [(s, i, d["__key__"]) for s, i, d in make()]
    assert len(full) == 18 and len({key for _, _, key in full}) == 13
    for k in range(len(full) + 1):
        first = make()
        head = [(s, i, d["__key__"]) for _, (s, i, d) in zip(range(k), first, strict=False)]
        state = json.loads(json.dumps(first.get_state()))
        second = make()
        second.reset(state)
        assert head + [(s, i, d["__key__"]) for s, i, d in second] == full, f"at {k}"
