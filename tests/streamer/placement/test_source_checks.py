"""A wrong local path is refused where the dataset is made, with the fix, not later inside a worker.

Issue 33 item 3: ``ShardDataset("shards/nope")`` used to construct (read as a one-shard pattern) and fail only
when iterated; a pattern wider than the shards on disk failed at the first missing shard in shuffled order.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from shardstream.errors import FormatError
from shardstream.format import INDEX_NAME
from streamer import Mixture, ShardDataset, ShardMap
from streamer.placement.shards import ShardList
from tests.conftest import write_dataset

# The three ways a user names a dataset; each reaches its shards through ShardList.from_source.
MAKERS: dict[str, Callable[[str], Any]] = {
    "ShardDataset": lambda source: ShardDataset(source, decode=False),
    "ShardMap": lambda source: ShardMap(source, decode=False),
    "Mixture": lambda source: Mixture([{"path": source, "weight": 1, "decode": False}]),
}


@pytest.fixture
def shards(tmp_path: Path) -> Path:
    """A packed folder of two shards (train-000000.tar, train-000001.tar) and its index."""
    return write_dataset(tmp_path / "shards", [3, 4]).parent


def _refused(maker: str, source: str) -> str:
    """The message with which ``maker`` refuses ``source`` at construction (Mixture names it a ValueError)."""
    with pytest.raises(ValueError if maker == "Mixture" else FormatError) as caught:
        MAKERS[maker](source)
    return str(caught.value)


@pytest.mark.parametrize("maker", MAKERS)
@pytest.mark.parametrize("name", ["nope", "nope/", "shards-typo.tar"])
def test_a_path_that_does_not_exist_is_refused_at_construction_with_the_fix(shards, maker, name):
    missing = f"{shards}/{name}"
    message = _refused(maker, missing)
    assert missing in message and "does not exist" in message
    assert "shardstream pack" in message and INDEX_NAME in message


@pytest.mark.parametrize("maker", MAKERS)
def test_a_missing_index_names_itself_and_the_fix(shards, maker):
    missing = f"{shards}/nope/{INDEX_NAME}"
    message = _refused(maker, missing)
    assert missing in message and "index not found" in message and "shardstream pack" in message


@pytest.mark.parametrize("maker", MAKERS)
def test_a_folder_without_an_index_says_how_to_make_one(shards, maker):
    (shards / "empty").mkdir()
    message = _refused(maker, str(shards / "empty"))
    assert f"{shards / 'empty'}" in message and "index not found" in message
    assert "shardstream index" in message and "shardstream pack" in message


@pytest.mark.parametrize("maker", MAKERS)
def test_a_pattern_wider_than_the_shards_on_disk_names_its_last_shard(shards, maker):
    message = _refused(maker, f"{shards}/train-{{000000..000099}}.tar")
    assert f"names 100 shards; the last, {shards}/train-000099.tar, does not exist" in message
    assert "wider than the shards on disk" in message and f"ls {shards}" in message


@pytest.mark.parametrize("maker", MAKERS)
def test_a_pattern_whose_first_shard_is_missing_names_it(shards, maker):
    message = _refused(maker, f"{shards}/val-{{000000..000001}}.tar")
    assert f"the first, {shards}/val-000000.tar, does not exist" in message and f"ls {shards}" in message


def test_a_pattern_into_a_folder_that_does_not_exist_says_so(shards):
    message = _refused("ShardDataset", f"{shards}/nope/train-{{000000..000001}}.tar")
    assert f"no such folder {shards}/nope" in message


def test_each_pattern_of_a_list_is_checked(shards):
    good = f"{shards}/train-{{000000..000001}}.tar"
    message = _refused("ShardDataset", [good, f"{shards}/train-{{000002..000003}}.tar"])  # type: ignore[arg-type]
    assert f"the first, {shards}/train-000002.tar, does not exist" in message


def test_a_file_url_is_checked_as_the_path_it_names(shards):
    message = _refused("ShardDataset", f"file://{shards}/train-{{000000..000009}}.tar")
    assert f"{shards}/train-000009.tar" in message and "does not exist" in message


def test_valid_local_sources_still_construct(shards):
    pattern = f"{shards}/train-{{000000..000001}}.tar"
    for source in (shards, str(shards / INDEX_NAME), pattern, str(shards / "train-000001.tar"), [pattern]):
        assert len(ShardDataset(source, decode=False).shards) in (1, 2)
    for source in (shards, str(shards / INDEX_NAME)):
        assert len(ShardMap(source, decode=False)) == 7
        assert len(Mixture([{"path": source, "weight": 1, "decode": False}])) == 7
    # A pattern whose inner shards are missing is still made: two stats, never one per shard.
    (shards / "train-000002.tar").write_bytes((shards / "train-000001.tar").read_bytes())
    (shards / "train-000001.tar").unlink()
    assert len(ShardList.from_source(f"{shards}/train-{{000000..000002}}.tar")) == 3


@pytest.fixture
def listener() -> Iterator[tuple[str, socket.socket]]:
    """A port that listens but never answers: a connection to it waits in its backlog, for the test to see."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield f"http://127.0.0.1:{server.getsockname()[1]}", server
    server.close()


def _connected(server: socket.socket) -> bool:
    return bool(select.select([server], [], [], 0.2)[0])


def test_remote_and_piped_sources_stay_lazy(listener):
    url, server = listener
    pattern = f"{url}/d/train-{{000000..000099}}.tar"
    assert len(ShardDataset(pattern, decode=False).shards) == 100
    assert len(ShardDataset([pattern, f"{url}/e/x.tar"], decode=False).shards) == 101
    assert len(ShardDataset("pipe:cat /nowhere/train-{0..9}.tar", decode=False).shards) == 10
    assert len(ShardDataset("s3://no-such-bucket-x/d/train-{000000..000009}.tar", decode=False).shards) == 10
    # ShardMap and Mixture need an index's counts, and say so, still without a request.
    with pytest.raises(ValueError, match="is not an index"):
        ShardMap(pattern, decode=False)
    with pytest.raises(ValueError, match="no per-shard sample counts"):
        Mixture([{"path": pattern, "weight": 1, "decode": False}])
    assert not _connected(server)
