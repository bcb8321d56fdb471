"""Remote shards over real servers: nginx (HTTP, HTTPS with a CA the tests make) and a fault injector.

Every client runs with short timeouts and backoff, so a hang would show as a failure, not a stuck suite.
"""

from __future__ import annotations

import dataclasses
import re
import time
from itertools import pairwise
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from shardstream.errors import ShardNotFoundError, ShardReadError
from shardstream.io.http import HttpOptions, HttpStream
from shardstream.io.responses import if_range
from streamer import ShardDataset
from tests.conftest import write_dataset
from tests.servers import Faults, FaultServer, nginx
from tests.servers.ranges import validators

COUNTS = [40, 3, 61, 12, 25]
FAST = HttpOptions(connect_timeout=2, read_timeout=0.5, retries=4, backoff=0.01, max_backoff=0.05)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("www")
    write_dataset(root / "d", COUNTS, payload=300)  # members up to ~3 kB: shards of 50-250 kB
    return root


def _keys(dataset, workers: int = 0) -> list[str]:
    loader = DataLoader(dataset, batch_size=None, num_workers=workers)
    return [sample["__key__"] for sample in loader]


def _local(root: Path, workers: int = 0, **kwargs) -> list[str]:
    index = root / "d" / "shardstream-index.json"
    return _keys(ShardDataset(index, decode=False, seed=3, **kwargs), workers)


@pytest.mark.parametrize("workers", [0, 2])
def test_http_through_nginx_equals_local_disk(served, workers):
    with nginx(served) as server:
        url = f"{server.url}/d/shardstream-index.json"
        for rank in range(2):
            remote = ShardDataset(url, decode=False, seed=3, rank=rank, world_size=2, http=FAST)
            local = _local(served, workers, rank=rank, world_size=2)
            assert _keys(remote, workers) == local and len(local) == sum(COUNTS) // 2


def test_https_with_a_private_ca_is_trusted_only_through_the_bundle(served):
    with nginx(served, https=True) as server:
        url = f"{server.https_url}/d/shardstream-index.json"
        trusted = HttpOptions(ca_bundle=str(server.ca_bundle), read_timeout=2, backoff=0.01)
        assert _keys(ShardDataset(url, decode=False, seed=3, http=trusted)) == _local(served)
        started = time.monotonic()
        expected = (
            rf"^{re.escape(url)}: TLS certificate not trusted; pass HttpOptions\(ca_bundle=\.\.\.\) for a "
            r"private CA$"
        )
        with pytest.raises(ShardReadError, match=expected):
            ShardDataset(url, decode=False, http=FAST)
        assert time.monotonic() - started < 5  # refused at once, not retried


def test_a_mid_shard_start_is_one_range_request(served):
    with nginx(served) as server:
        url = f"{server.url}/d/shardstream-index.json"
        ds = ShardDataset(url, decode=False, shuffle=False, rank=1, world_size=2, http=FAST)
        keys = _keys(ds)
        assert keys[0] != "s000-00000"
        log = server.wait_requests(2 + len(COUNTS) * 2)
        ranged = [r for r in log if r.range]
        assert ranged and all(r.status == 206 for r in ranged)
        first_shard = "train-" + keys[0].split("-")[0][1:].zfill(6)
        assert sum(1 for r in log if r.path.endswith(f"{first_shard}.tar")) == 1


def test_dropped_connections_resume_at_the_exact_byte(served):
    with FaultServer(served, faults=Faults(only="*.tar", drop_probability=0.6, seed=7)) as server:
        ds = ShardDataset(f"{server.url}/d/shardstream-index.json", decode=False, seed=3, http=FAST)
        assert _keys(ds) == _local(served)
        by_path: dict[str, list] = {}
        for request in server.requests:
            by_path.setdefault(request.path, []).append(request)
        resumes = 0
        for requests in by_path.values():
            for before, after in pairwise(requests):
                start = int(before.range[6:-1]) if before.range else 0
                if before.fault == "drop" and after.range:
                    assert after.range == f"bytes={start + before.bytes_sent}-"  # not a byte lost or repeated
                    resumes += 1
        assert resumes >= 5


def test_range_resume_asks_for_the_byte_where_it_broke(served):
    shard = served / "d" / "train-000002.tar"
    with FaultServer(served, faults=Faults(drop_after=[12_345])) as server:
        with HttpStream(f"{server.url}/d/{shard.name}", 0, FAST) as stream:
            data = stream.read()
        assert data == shard.read_bytes()
        assert [r.range for r in server.requests] == [None, "bytes=12345-"]


def test_stalls_503s_429s_and_truncated_bodies_are_ridden_through(served):
    faults = Faults(
        only="*.tar",
        status_codes=[503, 503, 429],
        stall_after=[2000, None],
        stall_seconds=1.0,
        truncate=[None, None, 5000],
    )
    with FaultServer(served, faults=faults) as server:
        started = time.monotonic()
        ds = ShardDataset(f"{server.url}/d/shardstream-index.json", decode=False, seed=3, http=FAST)
        assert _keys(ds) == _local(served)
        assert time.monotonic() - started < 20
        kinds = {r.fault for r in server.requests}
        assert {"status", "stall", "truncate"} <= kinds


def test_an_object_that_changes_mid_read_is_an_error_naming_the_url(served):
    with FaultServer(served, faults=Faults(only="*.tar", change_after=1, drop_after=[3000])) as server:
        url = f"{server.url}/d/train-000000.tar"
        with pytest.raises(ShardReadError, match=r"train-000000\.tar.*changed between requests"):
            HttpStream(url, 0, FAST).read()


def test_404_and_403_fail_at_once_naming_the_url_not_the_token(served, monkeypatch):
    monkeypatch.setenv("SHARDSTREAM_HTTP_HEADERS", '{"Authorization": "Bearer sekrit-token"}')
    with FaultServer(served, faults=Faults(forbid="*/train-000001.tar")) as server:
        started = time.monotonic()
        with pytest.raises(ShardNotFoundError, match=r"/d/nothing-000000\.tar: HTTP 404"):
            HttpStream(f"{server.url}/d/nothing-000000.tar", 0, FAST).read()
        with pytest.raises(ShardReadError, match=r"train-000001\.tar: HTTP 403") as info:
            HttpStream(f"http://user:pw@127.0.0.1:{server.port}/d/train-000001.tar", 0, FAST).read()
        assert len(server.requests) == 2  # no retries: each failed at its first answer
        assert time.monotonic() - started < 5
        assert "sekrit" not in str(info.value) and "pw@" not in str(info.value)
        assert server.requests[0].headers.get("authorization") == "Bearer sekrit-token"


def test_dead_server_gives_up_within_the_retry_budget(served):
    with FaultServer(served) as server:
        url = f"{server.url}/d/train-000000.tar"
    started = time.monotonic()
    with pytest.raises(ShardReadError, match="gave up after 4 retries"):
        HttpStream(url, 0, FAST)
    assert time.monotonic() - started < 5


def test_redirects_are_followed(served):
    with FaultServer(served) as server:
        data = HttpStream(f"{server.url}/r/d/train-000003.tar", 0, FAST).read()
        assert data == (served / "d" / "train-000003.tar").read_bytes()


def test_second_epoch_from_cache_with_nginx_stopped(served, tmp_path):
    with nginx(served) as server:
        url = f"{server.url}/d/shardstream-index.json"
        ds = ShardDataset(url, decode=False, seed=3, cache_dir=tmp_path / "cache", http=FAST)
        first = _keys(ds, workers=2)
        server.stop()
        ds.set_epoch(1)
        second = _keys(ds, workers=2)
    assert sorted(first) == sorted(second) and first != second
    ds.set_epoch(0)
    assert _keys(ds, workers=2) == first == _local(served, workers=2)


def test_cache_size_limit_holds_and_shared_cache_stays_intact(served, tmp_path):
    cache = tmp_path / "cache"
    shard_sizes = sorted(p.stat().st_size for p in (served / "d").glob("*.tar"))
    limit = shard_sizes[-1] + shard_sizes[-2]
    with nginx(served) as server:
        url = f"{server.url}/d/shardstream-index.json"
        datasets = [
            ShardDataset(url, decode=False, seed=s, cache_dir=cache, cache_size=limit, http=FAST)
            for s in (1, 2)
        ]
        for ds in datasets:
            assert sorted(_keys(ds, workers=2)) == sorted(_local(served))
    cached = [p for p in cache.rglob("*") if p.is_file() and p.suffix == ".tar"]
    assert sum(p.stat().st_size for p in cached) <= limit
    for path in cached:
        name = path.name.split("-", 1)[1]
        assert path.read_bytes() == (served / "d" / name).read_bytes()


def test_prefetch_reads_ahead_without_changing_the_stream(served):
    with nginx(served) as server:
        url = f"{server.url}/d/shardstream-index.json"
        for prefetch in (0, 1, 3):
            ds = ShardDataset(url, decode=False, seed=3, prefetch=prefetch, http=FAST)
            assert _keys(ds) == _local(served)


def test_a_resumed_request_names_the_version_it_continues_with_if_range(served):
    shard = served / "d" / "train-000002.tar"
    etag = validators(shard.stat(), 0)[0]
    with FaultServer(served, faults=Faults(drop_after=[10_000, 20_000])) as server:
        with HttpStream(f"{server.url}/d/{shard.name}", 0, FAST) as stream:
            assert stream.read() == shard.read_bytes()
        requests = server.requests
    assert [r.range for r in requests] == [None, "bytes=10000-", "bytes=30000-"]
    # If-Range makes an If-Range server answer a changed object with all of it (200), never a splice.
    assert [r.headers.get("if-range") for r in requests] == [None, etag, etag]


def test_a_server_that_ignores_if_range_cannot_splice_a_changed_object(served):
    """Where If-Range is not honoured, the client's own ETag/Last-Modified/length comparison catches it."""
    faults = Faults(only="*.tar", change_after=1, drop_after=[3000], ignore_if_range=True)
    with FaultServer(served, faults=faults) as server:
        url = f"{server.url}/d/train-000000.tar"
        with pytest.raises(ShardReadError, match=r"train-000000\.tar.*changed between requests"):
            HttpStream(url, 0, FAST).read()
        first, second = server.requests
    assert (first.status, first.fault) == (200, "drop")
    assert second.status == 206 and second.range == "bytes=3000-"  # the server sent the new version's bytes
    assert second.headers.get("if-range") is not None


def test_http_options_headers_reach_the_server_on_every_request(served):
    token = {"Authorization": "Bearer opt-token", "X-Team": "vision"}
    with FaultServer(served, faults=Faults(require_headers=token)) as server:
        url = f"{server.url}/d/shardstream-index.json"
        options = dataclasses.replace(FAST, headers=token)
        assert _keys(ShardDataset(url, decode=False, seed=3, http=options)) == _local(served)
        requests = server.requests
    paths = {r.path for r in requests}
    assert "/d/shardstream-index.json" in paths and "/d/train-000004.tar" in paths
    assert all(r.status in (200, 206) for r in requests)  # none refused: every request carried them
    assert all(r.headers.get("authorization") == "Bearer opt-token" for r in requests)
    assert all(r.headers.get("x-team") == "vision" for r in requests)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410])
def test_client_errors_fail_at_the_first_answer_without_a_retry(served, status):
    """The next answer would be the file: a client that retried would read it and not fail at all."""
    with FaultServer(served, faults=Faults(status_codes=[status])) as server:
        started = time.monotonic()
        with pytest.raises(ShardReadError, match=rf"train-000003\.tar: HTTP {status}"):
            HttpStream(f"{server.url}/d/train-000003.tar", 0, FAST).read()
        assert server.request_count == 1
        assert time.monotonic() - started < 1


def test_a_missing_token_is_refused_at_once_through_the_dataset(served):
    with FaultServer(served, faults=Faults(require_headers={"Authorization": "Bearer right"})) as server:
        url = f"{server.url}/d/shardstream-index.json"
        wrong = dataclasses.replace(FAST, headers={"Authorization": "Bearer wrong"})
        with pytest.raises(ShardReadError, match="HTTP 401"):
            ShardDataset(url, decode=False, http=wrong)
        assert [(r.status, r.fault) for r in server.requests] == [(401, "unauthorized")]


@pytest.mark.parametrize(
    ("etag", "modified", "sent"),
    [
        ('"abc"', "Mon, 30 Nov 2026 10:00:00 GMT", '"abc"'),
        ('W/"abc"', "Mon, 30 Nov 2026 10:00:00 GMT", "Mon, 30 Nov 2026 10:00:00 GMT"),
        ('W/"abc"', None, None),
        (None, None, None),
    ],
)
def test_if_range_sends_a_strong_etag_else_last_modified_never_a_weak_etag(etag, modified, sent):
    """A weak ETag never matches in If-Range, so every resume against such a server would be refused."""
    assert if_range((etag, modified, 1000)) == sent
    assert if_range(None) is None
