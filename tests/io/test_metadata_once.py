"""Metadata once per node: an s3:// dataset's sidecars are fetched once per node, not once per DataLoader
worker per rank (requests counted at the shaped S3 server); a re-indexed dataset or a damaged cache file
is fetched again, never served stale.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from packer import PackOptions, pack
from shardstream.errors import ShardReadError
from shardstream.io.httpoptions import HttpOptions
from shardstream.io.openers import OpenOptions, read_small
from shardstream_cli.demo.synth import make_corpus
from streamer import ShardDataset
from tests.servers.fault_server import FaultServer
from tests.servers.shaped_s3 import ShapedS3Server

pytest_plugins = ["tests.servers.shaped_fixtures"]
pytest.importorskip("obstore", reason="native s3:// needs obstore: pip install obstore")

INDEX = "shardstream-index.json"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("meta") / "corpus", 16, video=False).files_dir


@pytest.fixture
def served(
    pointed_s3: ShapedS3Server, corpus: Path, tmp_path: Path, monkeypatch
) -> Iterator[tuple[ShapedS3Server, str]]:
    """4 shards of 4 samples on the server; this process and its children pointed at it, with a node
    cache folder of the test's own ($SHARDSTREAM_CACHE, which workers and other ranks inherit)."""
    pack(corpus, pointed_s3.root / "packed", PackOptions(max_count=4))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("SHARDSTREAM_CACHE", str(tmp_path / "node-cache"))
    pointed_s3.reset_log()
    yield pointed_s3, f"s3://{pointed_s3.bucket}/packed/{INDEX}"


def _on_disk(srv: ShapedS3Server) -> list[str]:
    return _on_disk_at(srv.root / "packed")


def _on_disk_at(folder: Path) -> list[str]:
    return sorted(s["__key__"] for s in ShardDataset(str(folder / INDEX), decode=False))


def _gets(srv: ShapedS3Server, suffix: str) -> Counter[str]:
    """GETs per object whose name ends in ``suffix`` (HEADs too: any request for it counts)."""
    return Counter(r.path.rsplit("/", 1)[-1] for r in srv.requests if r.path.endswith(suffix))


def _read(url: str, workers: int, **options) -> list[str]:
    dataset = ShardDataset(url, decode=False, seed=3, **options)
    return [s["__key__"] for s in DataLoader(dataset, batch_size=None, num_workers=workers)]


def test_an_8_worker_loader_fetches_the_index_once_and_each_sidecar_once(served):
    """8 workers over 4 shards: two workers read each shard, and one fetch of its sidecar serves both.
    (Fresh interpreters, as forkserver and spawn workers are, share it too: the two-rank test below.)"""
    srv, url = served
    keys = _read(url, 8)
    assert sorted(keys) == _on_disk(srv) and len(keys) == 16  # every sample exactly once
    assert _gets(srv, INDEX) == {INDEX: 1}
    sidecars = _gets(srv, ".offsets")
    assert len(sidecars) == 4 and set(sidecars.values()) == {1}, sidecars


def test_a_second_loader_on_the_node_asks_for_no_metadata(served):
    srv, url = served
    dataset = ShardDataset(url, decode=False, seed=3)
    first = [s["__key__"] for s in DataLoader(dataset, batch_size=None, num_workers=4)]
    srv.reset_log()
    keys = [s["__key__"] for s in DataLoader(dataset, batch_size=None, num_workers=8)]  # 8 new processes
    assert sorted(keys) == sorted(first) == _on_disk(srv)
    assert _gets(srv, ".offsets") == {} and _gets(srv, INDEX) == {}


RANK = textwrap.dedent(
    """
    import json, sys
    from torch.utils.data import DataLoader
    from streamer import ShardDataset
    url, rank = sys.argv[1], int(sys.argv[2])
    dataset = ShardDataset(url, decode=False, seed=3, rank=rank, world_size=2)
    print(json.dumps([s["__key__"] for s in DataLoader(dataset, batch_size=None, num_workers=4)]))
    """
)


def test_two_ranks_of_four_workers_fetch_each_sidecar_once_per_node(served):
    """Two ranks on one node, started together: their 8 workers share one fetch of each sidecar; each
    rank's main process reads the index (what vouches for the sidecars) once, its workers never."""
    srv, url = served
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK, url, str(rank)], stdout=subprocess.PIPE, env=env, cwd=ROOT
        )
        for rank in (0, 1)
    ]
    outputs = [rank.communicate(timeout=120)[0] for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0]
    keys = [key for out in outputs for key in json.loads(out.decode().strip().splitlines()[-1])]
    assert sorted(keys) == _on_disk(srv) and len(keys) == 16
    assert _gets(srv, INDEX) == {INDEX: 2}  # one per rank's main process, none from the 8 workers
    sidecars = _gets(srv, ".offsets")
    assert len(sidecars) == 4 and set(sidecars.values()) == {1}, sidecars


def test_a_re_indexed_dataset_has_its_sidecars_fetched_again(served, corpus):
    """The same shard names packed again with other boundaries: the new index keys new cache entries, so
    the old sidecars (their offsets now wrong) are never served for the new shards."""
    srv, url = served
    assert sorted(_read(url, 0)) == _on_disk(srv)
    pack(corpus, srv.root / "packed", PackOptions(max_count=3, overwrite=True))
    srv.reset_log()
    keys = _read(url, 2)
    assert sorted(keys) == _on_disk(srv) and len(keys) == 16
    sidecars = _gets(srv, ".offsets")
    assert len(sidecars) == 6 and set(sidecars.values()) == {1}, sidecars


def test_a_damaged_cache_file_is_fetched_again(served, tmp_path):
    srv, url = served
    assert sorted(_read(url, 0)) == _on_disk(srv)  # in this process: its warnings are seen here
    cached = [p for p in (tmp_path / "node-cache").rglob("*") if p.name.endswith("offsets.meta")]
    assert len(cached) == 4, cached
    cached[0].write_bytes(cached[0].read_bytes()[:-3])  # cut short
    data = bytearray(cached[1].read_bytes())
    data[-1] ^= 0xFF  # same size, one byte changed
    cached[1].write_bytes(bytes(data))
    srv.reset_log()
    with pytest.warns(UserWarning, match="damaged"):
        keys = _read(url, 0)
    assert sorted(keys) == _on_disk(srv)
    assert sum(_gets(srv, ".offsets").values()) == 2  # the two damaged files, and no other


def test_the_knob_turns_it_off_or_names_its_folder(served, tmp_path):
    srv, url = served
    off = HttpOptions(metadata_cache=False)
    assert sorted(_read(url, 8, http=off)) == _on_disk(srv)
    assert max(_gets(srv, ".offsets").values()) == 2  # each of the two workers of a shard asks itself
    folder = tmp_path / "mine"
    srv.reset_log()
    assert sorted(_read(url, 8, http=HttpOptions(metadata_cache=folder))) == _on_disk(srv)
    assert set(_gets(srv, ".offsets").values()) == {1}
    assert len([p for p in folder.rglob("*.offsets.meta")]) == 4
    with pytest.raises(ValueError, match="metadata_cache"):
        HttpOptions(metadata_cache=3)


def test_the_metadata_cap_holds_for_a_cached_file(served):
    srv, url = served
    sidecar = url.replace(INDEX, "train-000000.tar.offsets")
    data = read_small(sidecar, OpenOptions(), version="v1")
    assert data == (srv.root / "packed" / "train-000000.tar.offsets").read_bytes()
    small = OpenOptions(http=HttpOptions(max_metadata_size=len(data) - 1))
    with pytest.raises(ShardReadError, match="over the cap"):
        read_small(sidecar, small, version="v1")  # from the cache now: the cap still applies


def test_an_http_dataset_fetches_each_sidecar_once_too(corpus, tmp_path, monkeypatch):
    """https?:// reads metadata through the same path: 8 workers, one request per sidecar."""
    monkeypatch.setenv("SHARDSTREAM_CACHE", str(tmp_path / "node-cache"))
    (tmp_path / "www").mkdir()
    with FaultServer(tmp_path / "www") as srv:
        pack(corpus, srv.root / "packed", PackOptions(max_count=4))
        keys = _read(f"{srv.url}/packed/{INDEX}", 8)
        paths = Counter(r.path.rsplit("/", 1)[-1] for r in srv.requests)
    assert sorted(keys) == sorted(_on_disk_at(srv.root / "packed")) and len(keys) == 16
    assert paths[INDEX] == 1
    sidecars = {name: n for name, n in paths.items() if name.endswith(".offsets")}
    assert len(sidecars) == 4 and set(sidecars.values()) == {1}, sidecars


def test_entries_untouched_for_weeks_are_pruned_once_a_day(tmp_path):
    from shardstream.io.metacache import PRUNE_AGE, MetadataCache

    cache = MetadataCache(tmp_path)
    assert cache.read("s3://b/old.offsets", "v0", lambda: b"old", 1 << 20) == b"old"
    old = cache.path_for("s3://b/old.offsets", "v0")
    weeks_ago = old.stat().st_mtime - PRUNE_AGE - 60
    os.utime(old, (weeks_ago, weeks_ago))
    (tmp_path / ".pruned").unlink()  # the first publish pruned (nothing old then) and left its marker
    assert MetadataCache(tmp_path).read("s3://b/new.offsets", "v1", lambda: None, 1 << 20) is None
    assert not old.exists() and cache.read("s3://b/old.offsets", "v0", lambda: b"again", 1 << 20) == b"again"
    os.utime(old, (weeks_ago, weeks_ago))
    assert MetadataCache(tmp_path).read("s3://b/x.offsets", "v1", lambda: b"x", 1 << 20) == b"x"
    assert old.exists()  # pruned less than a day ago: not again
