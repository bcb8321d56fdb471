"""The shaped S3 server (tests/servers/shaped_s3.py) checked with real clients: obstore, boto3, s3fs."""

from __future__ import annotations

import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.servers.s3 import CLEARED
from tests.servers.shaped_s3 import ShapedS3Server

pytest_plugins = ["tests.servers.shaped_fixtures"]

obstore = pytest.importorskip("obstore", reason="pip install 'obstore>=0.12'")
from obstore.store import S3Store  # noqa: E402

DATA = random.Random(35).randbytes(3_000_000)


@pytest.fixture
def srv(shaped_s3: ShapedS3Server, monkeypatch: pytest.MonkeyPatch) -> ShapedS3Server:
    """The server with ``a/data.bin`` (3 MB), ``a/b/c.txt`` and ``top.txt``, and this process's environment
    pointed at it for botocore and s3fs."""
    (shaped_s3.root / "a" / "b").mkdir(parents=True)
    (shaped_s3.root / "a" / "data.bin").write_bytes(DATA)
    (shaped_s3.root / "a" / "b" / "c.txt").write_bytes(b"c")
    (shaped_s3.root / "top.txt").write_bytes(b"top")
    for name in CLEARED:
        monkeypatch.delenv(name, raising=False)
    for name, value in shaped_s3.environment().items():
        monkeypatch.setenv(name, value)
    return shaped_s3


def store(srv: ShapedS3Server) -> S3Store:
    return S3Store(srv.bucket, endpoint=srv.endpoint_url, **srv.obstore_config())


def boto(srv: ShapedS3Server):
    import boto3

    return boto3.client("s3")


def test_obstore_reads_ranges_whole_objects_and_lists(srv: ShapedS3Server) -> None:
    st = store(srv)
    assert bytes(obstore.get_range(st, "a/data.bin", start=12345, end=23456)) == DATA[12345:23456]
    starts, ends = [0, 1_000_000, 2_999_000], [100, 2_000_000, 3_000_000]
    got = obstore.get_ranges(st, "a/data.bin", starts=starts, ends=ends)
    assert [bytes(g) for g in got] == [DATA[s:e] for s, e in zip(starts, ends, strict=True)]
    assert bytes(obstore.get(st, "a/data.bin").bytes()) == DATA
    meta = obstore.head(st, "a/data.bin")
    assert meta["size"] == len(DATA) and meta["e_tag"].startswith('"')
    assert sorted(m["path"] for batch in obstore.list(st, prefix="a") for m in batch) == [
        "a/b/c.txt",
        "a/data.bin",
    ]
    listed = obstore.list_with_delimiter(st)
    assert listed["common_prefixes"] == ["a"] and [m["path"] for m in listed["objects"]] == ["top.txt"]
    with pytest.raises(FileNotFoundError):
        obstore.get(st, "a/missing.bin")


def test_boto3_and_s3fs_read_ranges_and_whole_objects(srv: ShapedS3Server) -> None:
    s3fs = pytest.importorskip("s3fs")
    client = boto(srv)
    part = client.get_object(Bucket=srv.bucket, Key="a/data.bin", Range="bytes=100-199")
    assert part["Body"].read() == DATA[100:200] and part["ContentRange"] == f"bytes 100-199/{len(DATA)}"
    assert client.get_object(Bucket=srv.bucket, Key="a/data.bin")["Body"].read() == DATA
    head = client.head_object(Bucket=srv.bucket, Key="a/data.bin")
    assert head["ContentLength"] == len(DATA) and head["ETag"] == part["ETag"] and head["LastModified"]
    page = client.list_objects_v2(Bucket=srv.bucket, Prefix="a/", MaxKeys=1)
    assert [o["Key"] for o in page["Contents"]] == ["a/b/c.txt"] and page["IsTruncated"]
    rest = client.list_objects_v2(
        Bucket=srv.bucket, Prefix="a/", ContinuationToken=page["NextContinuationToken"]
    )
    assert [o["Key"] for o in rest["Contents"]] == ["a/data.bin"] and not rest["IsTruncated"]

    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    assert sorted(fs.ls(srv.bucket)) == [f"{srv.bucket}/a", f"{srv.bucket}/top.txt"]
    assert (
        fs.cat_file(f"{srv.bucket}/a/data.bin", start=2_000_000, end=2_100_000) == DATA[2_000_000:2_100_000]
    )
    assert fs.cat_file(f"{srv.bucket}/a/data.bin") == DATA
    s3fs.S3FileSystem.clear_instance_cache()


def test_a_range_costs_its_bytes_not_the_object(srv: ShapedS3Server) -> None:
    """What moto gets wrong: a range of a huge object reads only the range (a sparse 64 GiB file here)."""
    huge = 64 << 30
    with open(srv.root / "huge.bin", "wb") as f:
        f.truncate(huge)
    st = store(srv)
    began = time.perf_counter()
    for i in range(20):
        assert bytes(obstore.get_range(st, "huge.bin", start=huge - (i + 1) * 2**20, length=2**20)) == bytes(
            2**20
        )
    assert time.perf_counter() - began < 2.0
    assert obstore.head(st, "huge.bin")["size"] == huge


def test_ttfb_delays_every_response(srv: ShapedS3Server) -> None:
    st = store(srv)
    obstore.head(st, "top.txt")  # the connection made before timing
    srv.ttfb = 0.05
    began = time.perf_counter()
    for _ in range(4):
        assert bytes(obstore.get(st, "top.txt").bytes()) == b"top"
    assert 0.2 <= time.perf_counter() - began < 2.0
    srv.ttfb = 0
    began = time.perf_counter()
    for _ in range(4):
        obstore.get(st, "top.txt").bytes()
    assert time.perf_counter() - began < 0.15


def test_rate_caps_each_connection_not_the_server(srv: ShapedS3Server) -> None:
    data = random.Random(1).randbytes(8_000_000)
    (srv.root / "eight.bin").write_bytes(data)
    st = store(srv)
    srv.rate = 20e6
    began = time.perf_counter()
    assert bytes(obstore.get(st, "eight.bin").bytes()) == data
    alone = time.perf_counter() - began
    assert alone >= 0.35  # 8 MB at 20 MB/s: 0.4 s, less the first 64 KiB write

    def quarter(i: int) -> tuple[bytes, float]:
        start = time.perf_counter()
        got = bytes(obstore.get_range(st, "eight.bin", start=i * 2_000_000, length=2_000_000))
        return got, time.perf_counter() - start

    began = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(quarter, range(4)))
    together = time.perf_counter() - began
    assert b"".join(got for got, _ in results) == data
    assert all(0.08 <= took < 0.3 for _, took in results), [took for _, took in results]
    assert together < alone * 0.6


def test_a_dropped_connection_is_seen_by_the_client(srv: ShapedS3Server) -> None:
    client = boto(srv)
    srv.drop_after("a/data.bin", 100_000)
    body = client.get_object(Bucket=srv.bucket, Key="a/data.bin")["Body"]
    with pytest.raises(Exception, match=r"(?i)incomplete|connection|read"):
        body.read()
    # obstore resumes a dropped body with a range from where it was cut
    srv.reset_log()
    srv.drop_after("a/data.bin", 100_000)
    assert bytes(obstore.get(store(srv), "a/data.bin").bytes()) == DATA
    log = srv.requests
    assert [(r.kind, r.bytes_sent, r.fault) for r in log] == [
        ("GET", 100_000, "drop"),
        ("range", 2_900_000, None),
    ]
    assert log[1].range == f"bytes=100000-{len(DATA) - 1}"


def test_503_storm_then_success_and_403(srv: ShapedS3Server) -> None:
    srv.storm(2)
    assert bytes(obstore.get(store(srv), "top.txt").bytes()) == b"top"
    assert [(r.status, r.fault) for r in srv.requests] == [(503, "status"), (503, "status"), (200, None)]
    srv.forbid("top.txt")
    with pytest.raises(Exception, match="403 Forbidden"):
        obstore.get(store(srv), "top.txt")
    assert bytes(obstore.get_range(store(srv), "a/data.bin", start=0, end=10)) == DATA[:10]
    srv.forbid()
    with pytest.raises(Exception, match="AccessDenied"):
        boto(srv).get_object(Bucket=srv.bucket, Key="a/data.bin")
    srv.allow()
    assert boto(srv).head_object(Bucket=srv.bucket, Key="top.txt")["ContentLength"] == 3


def test_an_object_replaced_mid_read_gets_a_new_etag(srv: ShapedS3Server) -> None:
    url = f"{srv.endpoint_url}/{srv.bucket}/a/data.bin"
    new = random.Random(2).randbytes(len(DATA))
    srv.replace_mid_read("a/data.bin", new, after=500_000)
    srv.drop_after("a/data.bin", 500_000)
    with httpx.Client(timeout=5) as client:
        got = bytearray()
        with pytest.raises(httpx.TransportError), client.stream("GET", url) as response:
            old_etag = response.headers["etag"]
            for chunk in response.iter_raw():
                got += chunk
        assert bytes(got) == DATA[:500_000]  # the old bytes up to the cut, never the new ones
        resumed = client.get(url, headers={"Range": "bytes=500000-", "If-Match": old_etag})
        assert resumed.status_code == 412 and b"PreconditionFailed" in resumed.content
        fresh = client.get(url)
        assert fresh.content == new and fresh.headers["etag"] != old_etag
    # obstore, resuming the cut body, notices the new ETag: an error, never spliced bytes
    srv.replace_mid_read("a/data.bin", DATA, after=500_000)
    srv.drop_after("a/data.bin", 500_000)
    with pytest.raises(Exception, match=r"(?i)error"):
        obstore.get(store(srv), "a/data.bin").bytes()


def test_request_counts_by_kind_and_path(srv: ShapedS3Server) -> None:
    st = store(srv)
    obstore.head(st, "a/data.bin")
    obstore.get(st, "a/data.bin").bytes()
    obstore.get_range(st, "a/data.bin", start=0, end=10)
    obstore.get_range(st, "top.txt", start=0, end=1)
    list(obstore.list(st, prefix="a"))
    assert srv.kind_counts() == {"HEAD": 1, "GET": 1, "range": 2, "list": 1}
    assert srv.path_counts() == {
        f"/{srv.bucket}/a/data.bin": 3,
        f"/{srv.bucket}/top.txt": 1,
        f"/{srv.bucket}": 1,
    }
    assert srv.request_count == 5
    srv.reset_log()
    assert srv.kind_counts() == {}


def test_bad_shaping_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ttfb"):
        ShapedS3Server(tmp_path, ttfb=-1)
    with pytest.raises(ValueError, match="rate"):
        ShapedS3Server(tmp_path, rate=0)
    assert os.listdir(tmp_path) == []
