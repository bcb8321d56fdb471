"""How an s3:// stream opens, on the shaped S3 server: the first part's GET names the object's size and
ETag (no HEAD first), that part is small so the first sample waits for less, and an empty object or an
offset at the end reads as nothing while one past it is an error. Counted at the server; nothing mocked.
"""

from __future__ import annotations

import os
import time

import pytest

from shardstream.errors import ShardReadError
from shardstream.io.objstore import FIRST_PART, ObjectStream, read_object_range
from shardstream.io.objstoreoptions import ObjectStoreOptions
from tests.servers.shaped_s3 import ShapedS3Server

pytest_plugins = ["tests.servers.shaped_fixtures"]
pytest.importorskip("obstore", reason="native s3:// needs obstore: pip install obstore")


@pytest.fixture
def srv(pointed_s3: ShapedS3Server) -> ShapedS3Server:
    return pointed_s3


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
    # The parts double from there to part_size (8 MiB), so a stream read from the start grows to full
    # parts within four, while one opened ahead of its turn holds two small ones.
    spans = sorted(_span(r) for r in srv.requests)
    mib = 1 << 20
    sizes = [last + 1 - first for first, last in spans]
    assert sizes == [mib, 2 * mib, 4 * mib, 8 * mib, 8 * mib, len(data) - 23 * mib]


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


def test_a_stream_holds_two_parts_until_its_reader_has_taken_two(srv):
    data = os.urandom(40 << 20)
    url = _put(srv, "open/ahead.tar", data)
    srv.ttfb = 0.05  # parts stay in flight long enough to be counted
    with ObjectStream(url, options=ObjectStoreOptions(parts_in_flight=4)) as stream:
        first = stream.read(1 << 20)  # what a read-ahead takes: the first part
        time.sleep(0.3)  # whatever was asked by now has been answered and logged
        asked = len(srv.requests)
        assert asked <= 3, [_span(r) for r in srv.requests]  # the first, the second, and the third asked now
        rest = stream.read()
    assert first + rest == data
    assert srv.max_concurrent(kind="range") == 4  # once read, parts_in_flight at once


def test_a_byte_range_obstore_cannot_send_fails_at_once_not_after_retries(srv):
    url = _put(srv, "open/range.bin", b"x" * 5000)
    started = time.monotonic()
    with pytest.raises(ShardReadError, match="could not be made") as caught:
        ObjectStream(url, offset=-1)  # a damaged or hostile sidecar's offset
    assert caught.value.offset == -1
    with pytest.raises(ShardReadError, match="could not be made"):
        read_object_range(url, 10, 1 << 70, ObjectStoreOptions())
    assert time.monotonic() - started < 1  # refused, not retried with backoff (5 retries took 5-6 s)
    assert srv.requests == []  # nothing was sent
