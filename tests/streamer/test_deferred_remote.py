"""Deferred reads of s3:// shards (streamer/chain/coalesce.py) on the shaped S3 server: the buffer holds ids,
and a sample leaving it is read in one ranged GET with its buffered and coming neighbours. The stream equals
the front-to-back one sample for sample; requests are counted at the server; faults follow the policy.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from shardstream.errors import ShardReadError
from shardstream.io.objstoreoptions import ObjectStoreOptions
from shardstream.io.openers import OpenOptions
from streamer import ShardDataset
from streamer.chain.coalesce import CoalescedReads
from streamer.chain.deferred import DeferredReads
from streamer.chain.opener import ShardOpener
from streamer.placement.shards import ShardList
from tests.conftest import write_dataset
from tests.servers.fault_server import FaultServer
from tests.servers.shaped_s3 import ShapedS3Server

pytest_plugins = ["tests.servers.shaped_fixtures"]
pytest.importorskip("obstore", reason="native s3:// needs obstore: pip install obstore")

INDEX = "shardstream-index.json"
COUNTS = [900, 1100, 700]  # 2,700 samples of 0.5-4 KB in 3 shards
FAST = ObjectStoreOptions(retries=3, backoff=0.01, max_backoff=0.05)


@pytest.fixture
def served(pointed_s3: ShapedS3Server, tmp_path: Path) -> Iterator[tuple[ShapedS3Server, str]]:
    write_dataset(pointed_s3.root / "d", COUNTS, payload=200)
    yield pointed_s3, f"s3://{pointed_s3.bucket}/d/{INDEX}"


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[FaultServer]:
    (tmp_path / "www").mkdir()
    with FaultServer(tmp_path / "www") as server:
        yield server


def _samples(source, **kwargs) -> list[tuple[str, dict[str, bytes]]]:
    options = {"decode": False, "seed": 7, "object_store": FAST, **kwargs}
    return [
        (s["__key__"], {k: bytes(v) for k, v in s.items() if not k.startswith("__")})
        for s in ShardDataset(source, **options)
    ]


def _members(sample: dict) -> dict:
    return {k: v for k, v in sample.items() if k != "__url__"}


def _shard_gets(srv: ShapedS3Server) -> int:
    return sum(1 for r in srv.requests if r.path.endswith(".tar") and r.method == "GET")


def test_deferred_s3_stream_equals_the_local_one_with_few_requests_per_sample(served):
    srv, url = served
    local = _samples(str(srv.root / "d" / INDEX), defer_reads=False)
    srv.reset_log()
    deferred = _samples(url, defer_reads=True)
    gets = _shard_gets(srv)
    assert deferred == local  # same order, same bytes
    assert len({key for key, _ in deferred}) == len(deferred) == sum(COUNTS)
    assert gets / len(deferred) < 0.1, f"{gets} shard GETs for {len(deferred)} samples"
    # Deferred, not read front to back: every shard GET is a span of samples, none a whole shard's part
    # asked for before any sample left the buffer.
    spans = [r for r in srv.requests if r.path.endswith(".tar") and r.method == "GET"]
    assert spans and all(r.kind == "range" for r in spans)
    assert not any(r.path.endswith(".tar") and r.method == "HEAD" for r in srv.requests)  # no ObjectStream


def test_deferred_s3_matches_front_to_back_with_a_small_buffer_and_ranks(served):
    _, url = served
    for options in ({"buffer_size": 37, "initial": 5}, {"rank": 1, "world_size": 2}, {"fields": ["txt"]}):
        assert _samples(url, defer_reads=True, **options) == _samples(url, defer_reads=False, **options)


def test_deferred_http_shards_coalesce_too(http_server):
    """HTTP shards read through the general path (one Range request per span): same stream, few GETs."""
    write_dataset(http_server.root / "d", COUNTS, payload=200)
    url = f"{http_server.url}/d/{INDEX}"
    local = _samples(str(http_server.root / "d" / INDEX), defer_reads=False)
    before = len(http_server.requests)
    deferred = _samples(url, defer_reads=True)
    gets = [r for r in http_server.requests[before:] if r.path.endswith(".tar") and r.method == "GET"]
    assert deferred == local
    assert len(gets) / len(deferred) < 0.1 and all(r.range for r in gets)


def test_deferred_s3_through_two_dataloader_workers_every_sample_once(served):
    """Forked workers read their spans natively, or through fsspec where this process ran obstore first."""
    srv, url = served
    ds = ShardDataset(url, decode=False, seed=7, object_store=FAST, defer_reads=True)
    got = [(s["__key__"], bytes(s["txt"])) for s in DataLoader(ds, batch_size=None, num_workers=2)]
    local = {key: members["txt"] for key, members in _samples(str(srv.root / "d" / INDEX), shuffle=False)}
    assert len(got) == len(local) and dict(got) == local


def test_a_resume_from_s3_reads_the_restored_buffer_coalesced(served):
    """Resuming mid-epoch: the 1,000 buffered ids are read as they leave, a few spans, not a GET each."""
    srv, url = served
    whole = [key for key, _ in _samples(url, defer_reads=True)]
    first = ShardDataset(url, decode=False, seed=7, object_store=FAST, defer_reads=True)
    stream = iter(first)
    head = [next(stream)["__key__"] for _ in range(1500)]
    state = first.state_dict()
    srv.reset_log()
    second = ShardDataset(url, decode=False, seed=7, object_store=FAST, defer_reads=True)
    second.load_state_dict(state)
    tail = [s["__key__"] for s in second]
    assert head + tail == whole
    gets = _shard_gets(srv)
    assert gets / len(tail) < 0.1, f"{gets} shard GETs for the {len(tail)} samples after the restore"


def test_a_503_storm_during_a_coalesced_read_is_retried(served):
    srv, url = served
    ds = ShardDataset(url, decode=False, seed=7, object_store=FAST, defer_reads=True)
    stream = iter(ds)
    got = [next(stream)["__key__"] for _ in range(100)]
    srv.storm(3)  # within the 3 retries: the next span's GET answers on its 4th attempt
    got += [s["__key__"] for s in stream]
    assert got == [key for key, _ in _samples(url, defer_reads=True)]
    assert [r.status for r in srv.requests].count(503) == 3
    assert ds.errors.get("samples_skipped", 0) == 0


def test_a_dropped_connection_during_a_coalesced_read_is_retried(served):
    srv, url = served
    srv.drop_after("d/train-000001.tar", 1000)  # the first span of that shard breaks after 1000 bytes
    assert _samples(url, defer_reads=True) == _samples(url, defer_reads=False)
    drops = [r for r in srv.requests if r.fault == "drop"]
    assert len(drops) == 1 and drops[0].kind == "range"


def test_a_failed_coalesced_read_is_reported_with_url_and_offset_or_skipped(served):
    srv, url = served
    # Faults on the shard's GETs only (a storm would hit the sidecars too, which s3fs retries for long).
    once = ObjectStoreOptions(retries=0)  # a dropped connection fails its GET at once
    options = {"decode": False, "seed": 7, "object_store": once, "defer_reads": True}
    srv.drop_after("d/train-000002.tar", 100)  # the first span of that shard breaks: the policy's to decide
    with pytest.raises(ShardReadError, match="gave up after 0 retries") as caught:
        for _ in ShardDataset(url, **options):
            pass
    assert caught.value.url == f"s3://{srv.bucket}/d/train-000002.tar" and caught.value.offset is not None

    skipping = ShardDataset(url, on_error="skip", keep_length=False, **options)
    srv.drop_after("d/train-000002.tar", 100)  # the first span of that shard breaks, and only that one
    kept = [s["__key__"] for s in skipping]
    assert skipping.errors.get("samples_skipped", 0) == 1  # the sample that asked for it; its span read again
    whole = [key for key, _ in _samples(url, defer_reads=True)]
    assert len(kept) == len(whole) - 1 and [k for k in whole if k in set(kept)] == kept
    assert next(k for k in whole if k not in set(kept)).startswith("s002-")


def test_held_and_in_flight_bytes_stay_under_the_budget(served):
    """A 64 KiB budget with 16 KiB spans behind a buffer of 10 samples (about 30 KB): every GET asks for at
    most a span, the bytes held and in flight never pass the budget, every sample reads back as the local
    one."""
    srv, url = served
    shards = ShardList.from_source(url, OpenOptions())
    opener = ShardOpener(shards, OpenOptions(object_store=FAST))
    reads = DeferredReads(opener, small=0, remote=True)
    reads.coalesced = CoalescedReads(opener.options, span=16 << 10, budget=64 << 10)
    local = ShardOpener(ShardList.from_source(str(srv.root / "d" / INDEX), OpenOptions()))
    count = COUNTS[1]
    srv.reset_log()
    reads.advise(1, 0, count)  # every sample of shard 1 is wanted: they enter in order, leave at random
    buffer, rng = [], random.Random(3)
    for entering in range(count):
        buffer.append(entering)
        while len(buffer) >= 10 or (entering == count - 1 and buffer):
            index = buffer.pop(rng.randrange(len(buffer)))
            assert _members(reads.read(1, index)) == _members(local.read_one(1, index))
            assert reads.coalesced.taken <= 64 << 10
    reads.close()
    spans = [r.range.removeprefix("bytes=").split("-") for r in srv.requests if r.path.endswith(".tar")]
    sizes = [int(end) - int(start) + 1 for start, end in spans]
    biggest = max(int(b) - int(a) for a, b in itertools.pairwise(local.offsets(1)))
    assert max(sizes) <= max(16 << 10, biggest + 512)
    assert len(spans) < count / 3  # spans of about 4 samples: the budget left room for full ones
