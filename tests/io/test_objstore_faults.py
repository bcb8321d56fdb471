"""s3:// read natively under faults at exact bytes (the shaped S3 server): a dropped connection resumed, a 503
storm retried or given up on in bounded time, every sample once over ranks and DataLoader workers.
"""

from __future__ import annotations

import multiprocessing.forkserver
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from packer import PackOptions, pack
from shardstream.errors import ShardReadError
from shardstream.io.objstoreoptions import ObjectStoreOptions
from shardstream.io.openers import OpenOptions, open_stream, read_range
from shardstream_cli.demo.synth import make_corpus
from streamer import ShardDataset
from tests.conftest import members_by_key
from tests.servers.shaped_s3 import ShapedS3Server

pytest_plugins = ["tests.servers.shaped_fixtures"]
pytest.importorskip("obstore", reason="native s3:// needs obstore: pip install obstore")

INDEX = "shardstream-index.json"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("faults") / "corpus", 16, video=False).files_dir


@pytest.fixture
def served(pointed_s3: ShapedS3Server, corpus: Path) -> Iterator[tuple[ShapedS3Server, str]]:
    """8 shards of 2 samples packed into the server's folder; this process and its children pointed at it."""
    pack(corpus, pointed_s3.root / "packed", PackOptions(max_count=2))
    yield pointed_s3, f"s3://{pointed_s3.bucket}/packed"


def _on_disk(srv: ShapedS3Server) -> dict[str, dict]:
    return members_by_key(ShardDataset(str(srv.root / "packed" / INDEX), decode=False, shuffle=False))


def _read_natively(srv: ShapedS3Server) -> set[str]:
    """The shards obstore asked for (its user agent): not s3fs, which reads the index."""
    agent = "object_store/"
    return {
        r.path
        for r in srv.requests
        if r.path.endswith(".tar") and r.headers.get("user-agent", "").startswith(agent)
    }


def _no_secret(exc: BaseException, srv: ShapedS3Server) -> str:
    shown = "".join(traceback.format_exception(exc))
    secrets = srv.environment()
    assert secrets["AWS_SECRET_ACCESS_KEY"] not in shown and secrets["AWS_ACCESS_KEY_ID"] not in shown
    return str(exc)


def test_a_connection_dropped_mid_shard_resumes_with_every_sample_intact(served):
    srv, url = served
    key = "packed/train-000001.tar"
    size = (srv.root / key).stat().st_size
    srv.drop_after(key, size // 2)  # inside the shard's one part (8 MiB by default)
    started = time.monotonic()
    samples = list(ShardDataset(f"{url}/{INDEX}", decode=False, shuffle=False))
    assert time.monotonic() - started < 10
    assert len(samples) == 16 and members_by_key(samples) == _on_disk(srv)
    reads = [r for r in srv.requests if r.path == f"/{srv.bucket}/{key}" and r.method == "GET"]
    assert [r.fault for r in reads][:1] == ["drop"] and 0 < reads[0].bytes_sent < size
    assert len(reads) >= 2 and reads[-1].fault is None and reads[-1].status in (200, 206)  # the retry
    assert f"/{srv.bucket}/{key}" in _read_natively(srv)


def test_a_drop_inside_one_of_many_parts_in_flight_retries_that_part_only(served):
    srv, url = served
    key = "packed/train-000004.tar"
    data = (srv.root / key).read_bytes()
    part = 2 << 10
    parts = -(-len(data) // part)
    assert parts >= 4, "the shard must span several parts"
    options = ObjectStoreOptions(part_size=part, parts_in_flight=4, backoff=0.01, max_backoff=0.05)
    srv.drop_after(key, part // 3)  # whichever part's GET comes first breaks a third of the way in
    with open_stream(f"{url}/train-000004.tar", 0, OpenOptions(object_store=options)) as stream:
        got = b""
        while chunk := stream.read(1 << 20):
            got += chunk
    assert got == data
    ranges = [r for r in srv.requests if r.path == f"/{srv.bucket}/{key}" and r.kind == "range"]
    assert [r.fault for r in ranges].count("drop") == 1
    assert len(ranges) == parts + 1  # the broken part asked again, whole; no other part twice
    dropped = next(r.range for r in ranges if r.fault == "drop")
    assert [r.range for r in ranges].count(dropped) == 2


def test_a_503_storm_within_the_retry_budget_is_retried(served):
    srv, url = served
    key = "packed/train-000002.tar"
    opening = OpenOptions(object_store=ObjectStoreOptions(retries=4, backoff=0.01, max_backoff=0.05))
    srv.storm(3)  # the first part's GET at open takes them: 3 failures, the 4th attempt answers
    with open_stream(f"{url}/train-000002.tar", 0, opening) as stream:
        got = stream.read()
    assert got == (srv.root / key).read_bytes()
    statuses = [r.status for r in srv.requests if r.path == f"/{srv.bucket}/{key}"]
    assert statuses[:4] == [503, 503, 503, 206] and 503 not in statuses[4:]


def test_a_503_storm_past_the_retry_budget_fails_naming_url_and_offset_in_bounded_time(served):
    srv, url = served
    shard = f"{url}/train-000003.tar"
    opening = OpenOptions(object_store=ObjectStoreOptions(retries=2, backoff=0.01, max_backoff=0.05))
    srv.storm(100)
    started = time.monotonic()
    with pytest.raises(ShardReadError, match="gave up after 2 retries") as caught:
        read_range(shard, 1000, 5000, opening)
    assert time.monotonic() - started < 2
    assert caught.value.offset == 1000
    message = _no_secret(caught.value, srv)
    assert shard in message and "1000" in message
    assert srv.kind_counts()["range"] == 3  # one attempt and two retries, no more
    with pytest.raises(ShardReadError, match="gave up after 2 retries") as caught:
        open_stream(shard, 0, opening)  # the HEAD at open, under the same budget
    assert shard in _no_secret(caught.value, srv)


def test_every_sample_once_over_two_ranks_of_two_forkserver_workers(served):
    """obstore is not fork-safe: forkserver workers are fresh interpreters that read natively."""
    srv, url = served
    multiprocessing.forkserver._forkserver._stop()  # type: ignore[attr-defined]  # new env: this server's
    seen: list[str] = []
    for rank in (0, 1):
        dataset = ShardDataset(f"{url}/{INDEX}", decode=False, seed=5, rank=rank, world_size=2)
        loader = DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context="forkserver")
        seen += [s["__key__"] for s in loader]
    assert sorted(seen) == sorted(_on_disk(srv)) and len(seen) == 16
    assert len(_read_natively(srv)) == 8  # every shard, by obstore in the workers (s3fs reads the index)


def test_shard_dataset_takes_object_store_options(served):
    """``ShardDataset(object_store=...)`` reaches the reader: 1 KiB parts make a shard that many ranges."""
    srv, url = served
    key = "packed/train-000004.tar"
    size = (srv.root / key).stat().st_size
    srv.reset_log()
    options = ObjectStoreOptions(part_size=1024, parts_in_flight=2)
    ds = ShardDataset(f"{url}/{INDEX}", decode=False, shuffle=False, prefetch=0, object_store=options)
    assert members_by_key(ds) == _on_disk(srv)
    ranges = [r for r in srv.requests if r.path == f"/{srv.bucket}/{key}" and r.kind == "range"]
    spans = [tuple(int(n) for n in r.range.removeprefix("bytes=").split("-")) for r in ranges]
    assert all(last + 1 - first <= 1024 for first, last in spans)
    # Every KiB up to the last sample; the archive's end blocks may be left unasked once it is read.
    assert -(-size // 1024) - 1 <= len(ranges) <= -(-size // 1024)
    with pytest.raises(ValueError, match="object_store must be an ObjectStoreOptions"):
        ShardDataset(f"{url}/{INDEX}", object_store={"part_size": 1024})
