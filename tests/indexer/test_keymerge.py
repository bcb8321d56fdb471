"""The key merge: any runs, ascending across shards or not, give the one sorted file, in chains or rounds."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardstream.format.keyfile import KeyFileWriter, key_line
from shardstream.indexer import keymerge


@settings(max_examples=60, deadline=None)
@given(
    runs=st.lists(st.lists(st.text(alphabet="abc", max_size=4), max_size=20), min_size=1, max_size=12),
    fan_in=st.sampled_from([2, 3, 256]),
)
def test_runs_merge_into_the_sorted_union(tmp_path_factory, runs, fan_in):
    folder = tmp_path_factory.mktemp("runs")
    paths, every = [], []
    for shard, keys in enumerate(runs):
        lines = sorted(key_line(k, shard, i) for i, k in enumerate(keys))
        every.extend(lines)
        path = folder / f"{shard}.keys"
        path.write_bytes(b"".join(lines))
        paths.append(str(path))
    original = keymerge.FAN_IN
    keymerge.FAN_IN = fan_in
    try:
        with KeyFileWriter(folder / "out") as writer:
            keymerge.merge_runs(paths, writer, folder)
    finally:
        keymerge.FAN_IN = original
    assert (folder / "out").read_bytes() == b"".join(sorted(every))


def test_ascending_shards_form_one_chain_and_mixed_ones_several(tmp_path):
    paths = []
    for shard in range(5):
        path = tmp_path / f"{shard}.keys"
        path.write_bytes(b"".join(key_line(f"k{shard}{i}", shard, i) for i in range(3)))
        paths.append(str(path))
    assert len(keymerge._chains(paths)) == 1
    random.Random(1).shuffle(paths)
    assert 1 < len(keymerge._chains(paths)) <= 5


@pytest.mark.parametrize("length", [10, 70_000])
def test_the_last_line_is_found_whatever_its_length(tmp_path, length):
    path = tmp_path / "r.keys"
    path.write_bytes(key_line("a", 0, 0) + key_line("b", 0, 1) + key_line("c" * length, 0, 2))
    assert keymerge._ends(str(path)) == (key_line("a", 0, 0), key_line("c" * length, 0, 2))


def test_shards_left_out_renumber_the_ones_after_them(tmp_path):
    runs = []
    kept = (3, 16, 26)  # hex 3, 10, 1a: every digit of the shard field is read as hex
    for shard in kept:
        path = tmp_path / f"{shard}.keys"
        path.write_bytes(b"".join(key_line(f"{shard}-{i}", shard, i) for i in range(2)))
        runs.append(str(path))
    remap = [0] * 27
    remap[3], remap[16], remap[26] = 10, 11, 12  # renumbered to hex a, b, c
    with KeyFileWriter(tmp_path / "out") as writer:
        keymerge.merge_runs(runs, writer, tmp_path, remap)
    expected = sorted(key_line(f"{shard}-{i}", remap[shard], i) for shard in kept for i in range(2))
    assert (tmp_path / "out").read_bytes() == b"".join(expected)
    assert writer.lines == 6 and writer.repeated == 0
