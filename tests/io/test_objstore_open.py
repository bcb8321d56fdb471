"""How an s3:// stream opens, on the shaped S3 server: the first part's GET names the object's size and
ETag (no HEAD first), that part is small so the first sample waits for less, and an empty object or an
offset at the end reads as nothing while one past it is an error. Counted at the server; nothing mocked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from shardstream.errors import ShardReadError
from shardstream.io.objstore import FIRST_PART, ObjectStream
from shardstream.io.objstoreoptions import ObjectStoreOptions
from tests.servers.shaped_s3 import ShapedS3Server

pytest_plugins = ["tests.servers.shaped_fixtures"]
pytest.importorskip("obstore", reason="native s3:// needs obstore: pip install obstore")


@pytest.fixture
def srv(shaped_s3: ShapedS3Server, monkeypatch) -> Iterator[ShapedS3Server]:
    for name, value in shaped_s3.environment().items():
        monkeypatch.setenv(name, value)
    yield shaped_s3


def _span(request) -> tuple[int, int]:
    first, last = request.range.removeprefix("bytes=").split("-")
    return int(first), int(last)


def _put(srv: ShapedS3Server, key: str, data: bytes) -> str:
    path = srv.root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return f"s3://{srv.bucket}/{key}"


def test_a_stream_opens_with_its_first_part_not_a_head(srv):
    data = os.urandom(3 * (8 << 20) + 12345)
    url = _put(srv, "open/a.tar", data)
    with ObjectStream(url) as stream:
        assert stream.length() == len(data) and stream.etag
        first = srv.requests[0]
        # 1 MiB: at 100 MB/s a connection, 10 ms after the first byte (an 8 MiB part: 84 ms)
        assert (first.method, _span(first)) == ("GET", (0, (1 << 20) - 1)), first
        assert stream.read() == data
    assert srv.kind_counts()["HEAD"] == 0
    # The rest in part_size pieces after the first: 1 MiB, then three 8 MiB parts reach the end.
    spans = sorted(_span(r) for r in srv.requests)
    assert spans[0] == (0, FIRST_PART - 1) and spans[1] == (FIRST_PART, FIRST_PART + (8 << 20) - 1)
    assert spans[-1][1] == len(data) - 1 and len(spans) == 4


def test_an_offset_opens_there_and_a_small_object_in_one_get(srv):
    data = os.urandom(5000)
    url = _put(srv, "open/small.bin", data)
    with ObjectStream(url, offset=1000) as stream:
        assert stream.read() == data[1000:]
    assert [(r.method, _span(r)) for r in srv.requests] == [("GET", (1000, 1000 + FIRST_PART - 1))]


def test_an_empty_object_and_an_offset_at_the_end_read_as_nothing_one_past_it_is_an_error(srv):
    empty = _put(srv, "open/empty.bin", b"")
    with ObjectStream(empty) as stream:
        assert stream.length() == 0 and stream.read() == b""
    url = _put(srv, "open/five.bin", b"12345")
    with ObjectStream(url, offset=5) as stream:
        assert stream.read() == b""
    with pytest.raises(ShardReadError, match=r"past the end of the object \(5 bytes\)") as caught:
        ObjectStream(url, offset=6)
    assert caught.value.url == url and caught.value.offset == 6


def test_a_first_part_whose_body_breaks_is_asked_again(srv):
    data = os.urandom(3 << 20)
    url = _put(srv, "open/drop.bin", data)
    srv.drop_after("open/drop.bin", 1000)
    with ObjectStream(url, options=ObjectStoreOptions(backoff=0.01)) as stream:
        assert stream.read() == data
    again = [r for r in srv.requests if _span(r) == (0, FIRST_PART - 1)]
    assert len(again) == 2 and again[0].fault == "drop" and again[1].fault is None
