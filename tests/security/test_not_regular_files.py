"""FIFOs, devices and endless files (issue 32, item 4): a shard, sidecar or index row that is not a regular
file is a bad shard named by its path, never a hang. Every reader that opens a local file: ``index DIR``,
``ls``, ``stats``, ``verify``, ``ShardDataset`` (front to back, deferred, zero-copy) and ``ShardMap``.

Each CLI run is a subprocess with a deadline: opening a FIFO for reading blocks in the kernel until a
writer comes, and only a separate process can be given up on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shardstream.errors import ShardReadError
from shardstream.format import offsets_name
from shardstream.io.localfiles import NotRegularFile, open_regular
from streamer import ShardDataset, ShardMap
from tests.conftest import write_dataset

pytestmark = pytest.mark.timeout(60)

DEADLINE = 30  # seconds: each run takes about one; a hang is the bug


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "shardstream_cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE)


def _fifo_in_place_of(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


@pytest.fixture
def fifo_shard(tmp_path: Path) -> tuple[Path, Path]:
    """Three shards of 5 samples and their index; the middle shard is now a FIFO no one writes to."""
    index = write_dataset(tmp_path / "d", [5, 5, 5], payload=300)
    fifo = index.parent / "train-000001.tar"
    _fifo_in_place_of(fifo)
    return index, fifo


def test_open_regular_names_what_the_path_is(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    cases = {
        "a FIFO (named pipe)": tmp_path / "pipe",
        "a character device": Path("/dev/zero"),
        "a directory": tmp_path,
    }
    for kind, path in cases.items():
        with pytest.raises(NotRegularFile, match=re.escape(f"{path} is {kind}, not a regular file")):
            open_regular(path)
    (tmp_path / "f").write_bytes(b"abc")
    with open_regular(tmp_path / "f", buffering=0) as handle:
        assert handle.read() == b"abc" and handle.name == str(tmp_path / "f")


def test_index_of_a_folder_reports_a_fifo_shard_and_indexes_the_rest(tmp_path, fifo_shard):
    _, fifo = fifo_shard
    folder = fifo.parent
    for name in os.listdir(folder):
        if not name.endswith(".tar"):
            os.unlink(folder / name)
    run = _cli("index", str(folder), "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["shards"] == 2 and report["samples"] == 10 and report["skipped"] == {"damaged-shard": 1}
    [problem] = report["problems"]
    assert problem["shard"] == str(fifo) and "not a regular file: it is a FIFO" in problem["reason"]


@pytest.mark.parametrize("command", ["ls", "stats"])
def test_ls_and_stats_name_a_fifo_shard(fifo_shard, command):
    _, fifo = fifo_shard
    run = _cli(command, str(fifo))
    said = run.stdout + run.stderr
    assert run.returncode != 0
    assert "train-000001.tar" in said and "not a regular file: it is a FIFO" in said, said


def test_verify_reports_an_index_row_naming_an_endless_device(tmp_path):
    index = write_dataset(tmp_path / "d", [5, 5], payload=300)
    doc = json.loads(index.read_text())
    doc["shards"][1][0] = "/dev/zero"  # name, samples, bytes, sha256: hashing it would never end
    index.write_text(json.dumps(doc))
    run = _cli("verify", str(index))
    assert run.returncode == 1, run.stdout + run.stderr
    assert "/dev/zero" in run.stdout + run.stderr and "not a regular file" in run.stdout + run.stderr


@pytest.mark.parametrize(
    "mode",
    [dict(defer_reads=False), dict(defer_reads=True), dict(zero_copy=True)],
    ids=["front-to-back", "deferred", "zero-copy"],
)
def test_dataset_counts_a_fifo_shard_as_failed(fifo_shard, mode):
    index, _ = fifo_shard
    with pytest.raises(ShardReadError, match=r"train-000001\.tar.*not a regular file"):
        list(ShardDataset(index, decode=False, seed=1, **mode))
    skipping = ShardDataset(index, decode=False, seed=1, on_error="skip", keep_length=False, **mode)
    keys = [s["__key__"] for s in skipping]
    assert sorted(keys) == [f"s{n:03d}-{i:05d}" for n in (0, 2) for i in range(5)]
    assert skipping.errors["shards_failed"] == 1


def test_a_fifo_sidecar_fails_its_shard_and_does_not_hang(tmp_path):
    index = write_dataset(tmp_path / "d", [5, 5], payload=300)
    _fifo_in_place_of(Path(offsets_name(str(index.parent / "train-000001.tar"))))
    with pytest.raises(ShardReadError, match=r"train-000001\.tar\.offsets.*not a regular file"):
        list(ShardDataset(index, decode=False, seed=1, defer_reads=True))
    skipping = ShardDataset(index, decode=False, seed=1, defer_reads=True, on_error="skip", keep_length=False)
    assert sorted(s["__key__"] for s in skipping) == [f"s000-{i:05d}" for i in range(5)]
    assert skipping.errors["shards_failed"] == 1


def test_random_access_names_a_fifo_shard(fifo_shard):
    index, _ = fifo_shard
    samples = ShardMap(index, decode=False)
    assert samples[0]["__key__"] == "s000-00000"
    with pytest.raises(ShardReadError, match=r"train-000001\.tar.*not a regular file"):
        samples[5]
