"""HTTP reading at its edges: the exact retry budget, backoff and Retry-After, statuses, reads of any size."""

from __future__ import annotations

import base64
import os
import random
import ssl
import time

import pytest
from urllib3 import HTTPResponse
from urllib3.exceptions import MaxRetryError, ProtocolError, SSLError

from shardstream.errors import ShardNotFoundError, ShardReadError
from shardstream.io.http import HttpOptions, HttpStream, read_http
from shardstream.io.responses import certificate_problem, total_length
from tests.servers import Faults, FaultServer

SIZE = 300_000
FAST = HttpOptions(connect_timeout=2, read_timeout=0.5, retries=4, backoff=0.001, max_backoff=0.01)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("http-edges")
    (root / "blob.bin").write_bytes(os.urandom(SIZE))
    return root


@pytest.fixture
def data(root):
    return (root / "blob.bin").read_bytes()


def _options(**changes):
    values = {"connect_timeout": 2, "read_timeout": 0.5, "retries": 4, "backoff": 0.001, "max_backoff": 0.01}
    return HttpOptions(**{**values, **changes})


def _read(server, offset=0, options=FAST, path="blob.bin"):
    with HttpStream(f"{server.url}/{path}", offset, options) as stream:
        return stream.read()


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_the_retry_budget_is_exactly_retries_failures(root, data, retries):
    with FaultServer(root, faults=Faults(status_codes=[503] * retries)) as server:
        assert _read(server, options=_options(retries=retries)) == data
        assert [r.status for r in server.requests] == [503] * retries + [200]
    with FaultServer(root, faults=Faults(status_codes=[503] * (retries + 1))) as server:
        with pytest.raises(
            ShardReadError, match=rf"blob\.bin at byte 0: HTTP 503; gave up after {retries} retries$"
        ):
            _read(server, options=_options(retries=retries))
        assert server.request_count == retries + 1


@pytest.mark.parametrize("status", [429, 500, 502, 503, 599])
def test_429_and_every_5xx_are_retried(root, data, status):
    with FaultServer(root, faults=Faults(status_codes=[status, status])) as server:
        assert _read(server) == data
        assert [r.status for r in server.requests] == [status, status, 200]


@pytest.mark.parametrize("status", [304, 402, 418, 499])
def test_another_status_is_an_error_at_once_naming_it(root, status):
    with FaultServer(root, faults=Faults(status_codes=[status])) as server:
        with pytest.raises(ShardReadError, match=rf"blob\.bin: unexpected HTTP {status}$") as info:
            _read(server)
        assert server.request_count == 1 and not isinstance(info.value, ShardNotFoundError)


@pytest.mark.parametrize(("status", "name"), [(404, "not found"), (410, "gone")])
def test_a_missing_object_is_not_found_and_read_http_says_none(root, status, name):
    with (
        FaultServer(root, faults=Faults(status_codes=[status])) as server,
        pytest.raises(ShardNotFoundError, match=rf"blob\.bin: HTTP {status} {name}$"),
    ):
        _read(server)
    with FaultServer(root, faults=Faults(status_codes=[status])) as server:
        assert read_http(f"{server.url}/blob.bin", FAST) is None
        assert read_http(f"{server.url}/blob.bin", FAST) == (root / "blob.bin").read_bytes()


@pytest.mark.parametrize(
    ("status", "name"), [(400, "bad request"), (401, "unauthorized"), (403, "forbidden")]
)
def test_client_errors_name_their_status(root, status, name):
    with FaultServer(root, faults=Faults(status_codes=[status, status])) as server:
        with pytest.raises(ShardReadError, match=rf"blob\.bin: HTTP {status} {name}$") as info:
            _read(server)
        assert not isinstance(info.value, ShardNotFoundError)
        with pytest.raises(ShardReadError, match=rf"blob\.bin: HTTP {status} {name}$"):
            read_http(f"{server.url}/blob.bin", FAST)  # only a missing object is None
        assert server.request_count == 2


def test_an_offset_at_or_past_the_end_is_416_naming_the_offset(root):
    with FaultServer(root) as server:
        for offset in (SIZE, SIZE + 10):
            with pytest.raises(
                ShardReadError, match=rf"blob\.bin at byte {offset}: HTTP 416: offset is past the end"
            ):
                _read(server, offset)
        assert server.request_count == 2  # not retried
        assert _read(server, SIZE - 1) == (root / "blob.bin").read_bytes()[-1:]


def test_progress_renews_the_retry_budget(root, data):
    faults = Faults(drop_after=[20_000] * 6)
    with FaultServer(root, faults=faults) as server:
        assert _read(server, options=_options(retries=1)) == data
        assert len(server.requests) == 7 and [r.fault for r in server.requests][:6] == ["drop"] * 6


def test_a_drop_without_progress_uses_the_budget(root):
    faults = Faults(drop_after=[5000, 0, 0])  # after the progress to 5000: one retry, then out
    with FaultServer(root, faults=faults) as server:
        with pytest.raises(
            ShardReadError, match=r"at byte 5000: connection broke: \w+; gave up after 1 retries$"
        ):
            _read(server, options=_options(retries=1))
        assert [r.range for r in server.requests] == [None, "bytes=5000-"]


def test_a_dead_server_is_a_connect_error_after_the_budget():
    with FaultServer(os.getcwd()) as server:
        url = f"{server.url}/nothing"
    with pytest.raises(
        ShardReadError, match=r"at byte 0: cannot connect: NewConnectionError; gave up after 2 ret"
    ) as info:
        HttpStream(url, 0, _options(retries=2))
    assert info.value.__cause__ is not None  # urllib3's error, for the traceback


def test_backoff_doubles_from_backoff_with_jitter_capped_at_max_backoff(root, data, monkeypatch):
    waits: list[float] = []
    sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: waits.append(s) or sleep(s))
    random.seed(20261201)
    options = _options(retries=6, backoff=0.002, max_backoff=0.02)
    with FaultServer(root, faults=Faults(status_codes=[503] * 6)) as server:
        assert _read(server, options=options) == data
    bases = [0.002, 0.004, 0.008, 0.016, 0.02, 0.02]
    ratios = [wait / base for wait, base in zip(waits, bases, strict=True)]
    assert all(0.5 <= r <= 1.5 for r in ratios), ratios
    assert max(ratios) - min(ratios) > 0.2 and len(set(ratios)) == len(ratios), ratios  # jittered


def test_retry_after_lengthens_the_wait_up_to_max_backoff(root, data, monkeypatch):
    waits: list[float] = []
    sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: waits.append(s) or sleep(s))
    with FaultServer(root, faults=Faults(status_codes=[503], retry_after="0.2")) as server:
        assert _read(server, options=_options(max_backoff=5)) == data
    with FaultServer(root, faults=Faults(status_codes=[429], retry_after="3")) as server:
        assert _read(server, options=_options(max_backoff=0.05)) == data
    with FaultServer(
        root, faults=Faults(status_codes=[503], retry_after="Wed, 21 Oct 2015 07:28:00 GMT")
    ) as server:
        assert _read(server, options=_options(max_backoff=5)) == data
    assert waits[0] == 0.2 and waits[1] == 0.05 and waits[2] <= 0.0015


@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 20])
def test_reads_of_any_size_give_the_bytes_in_order_through_drops(root, data, size):
    with (
        FaultServer(root, faults=Faults(drop_after=[10_001, 50_000])) as server,
        HttpStream(f"{server.url}/blob.bin", 0, FAST) as stream,
    ):
        parts = []
        while chunk := stream.read(size):
            assert len(chunk) <= size
            parts.append(chunk)
            if size == 1 and len(parts) == 20_000:
                parts.append(stream.read())  # then the rest at once
        assert stream.read(size) == b"" and stream.position == SIZE
    assert b"".join(parts) == data


def test_readinto_fills_the_callers_buffer_through_drops_and_ends_with_zero(root, data):
    with (
        FaultServer(root, faults=Faults(drop_after=[10_001, 50_000], only="*.bin")) as server,
        HttpStream(f"{server.url}/blob.bin", 100, FAST) as stream,
    ):
        buffer, got = bytearray(65536), bytearray()
        while count := stream.readinto(buffer):
            got += buffer[:count]
        assert stream.readinto(buffer) == 0 and stream.position == SIZE
    assert bytes(got) == data[100:]
    assert [r.range for r in server.requests] == ["bytes=100-", "bytes=10101-", "bytes=60101-"]


def test_read_none_and_minus_one_read_to_the_end(root, data):
    with FaultServer(root) as server:
        with HttpStream(f"{server.url}/blob.bin", 5, FAST) as stream:
            assert stream.read(None) == data[5:]
        with HttpStream(f"{server.url}/blob.bin", 0, FAST) as stream:
            assert stream.read(3) == data[:3] and stream.read(-1) == data[3:] and stream.read() == b""
        assert HttpStream(f"{server.url}/blob.bin", 0, FAST).readable()


def test_readinto_progress_renews_the_retry_budget_too(root, data):
    with FaultServer(root, faults=Faults(drop_after=[20_000] * 6)) as server:
        with HttpStream(f"{server.url}/blob.bin", 0, _options(retries=1)) as stream:
            buffer, got = bytearray(8192), bytearray()
            while count := stream.readinto(buffer):
                got += buffer[:count]
        assert bytes(got) == data and server.request_count == 7


@pytest.mark.parametrize("size", [1, 999, 1000, 1001, 65536])
def test_a_server_that_ignores_range_has_the_bytes_before_the_offset_dropped(root, data, size):
    with FaultServer(root, faults=Faults(ignore_range=True)) as server:
        with HttpStream(f"{server.url}/blob.bin", 1000, FAST) as stream:
            first = stream.read(size)
            assert first == data[1000 : 1000 + size] and stream.position == 1000 + size
            assert first + stream.read() == data[1000:]
        with HttpStream(f"{server.url}/blob.bin", 1000, FAST) as stream:
            buffer, got = bytearray(size), bytearray()
            while count := stream.readinto(buffer):
                assert count <= size == len(buffer)  # never more than the caller's buffer holds
                got += buffer[:count]
            assert bytes(got) == data[1000:]
        assert [(r.range, r.status) for r in server.requests] == [("bytes=1000-", 200)] * 2


def test_a_resume_answered_with_the_whole_object_is_refused_not_spliced(root):
    """Without a range the client cannot know the bytes continue its copy: an error, never a splice."""
    with FaultServer(root, faults=Faults(ignore_range=True, drop_after=[7000])) as server:
        expected = (
            r"blob\.bin at byte 7000: the object changed between requests \(ETag, Last-Modified or length "
            r"differ\); its shard cannot be resumed without mixing two versions$"
        )
        with pytest.raises(ShardReadError, match=expected):
            _read(server)
        assert [(r.range, r.status) for r in server.requests] == [(None, 200), ("bytes=7000-", 200)]


@pytest.mark.parametrize("no_length", [False, True], ids=["with-length", "no-length"])
def test_an_offset_at_or_past_the_end_from_a_server_that_ignores_range_is_an_error_not_a_spin(
    root, data, no_length
):
    """The 200 answer's body is all before the offset: an error like the 416 case, at once, not a loop.

    Without a length, a body that ends exactly at the offset cannot be told from an empty rest: b"".
    """
    with FaultServer(root, faults=Faults(ignore_range=True, no_length=no_length)) as server:
        past = (SIZE + 10, SIZE + 1) if no_length else (SIZE, SIZE + 10)
        for offset in past:
            with pytest.raises(ShardReadError, match=rf"blob\.bin at byte {offset}: offset is past the end"):
                _read(server, offset)
        assert server.request_count == 2  # not retried
        if no_length:
            assert _read(server, SIZE) == b""
        assert _read(server, SIZE - 1) == data[-1:]
        assert _read(server, 1000) == data[1000:]


@pytest.mark.parametrize("drops", [None, [100_000]], ids=["whole", "dropped"])
def test_read_and_readinto_mixed_give_every_byte_and_end_cleanly(root, data, drops):
    """urllib3 counts only the bytes read through it; readinto's must not make the end look short."""
    with FaultServer(root, faults=Faults(drop_after=drops)) as server:
        with HttpStream(f"{server.url}/blob.bin", 0, FAST) as stream:
            got, buffer, turn = bytearray(), bytearray(70_000), 0
            while True:
                chunk = bytes(buffer[: stream.readinto(buffer)]) if turn % 2 else stream.read(50_000)
                if not chunk:
                    break
                got += chunk
                turn += 1
            assert bytes(got) == data and stream.read(10) == b"" and stream.readinto(buffer) == 0
        assert len(server.requests) == (1 if drops is None else 2)


def test_credentials_in_the_url_are_sent_as_basic_auth_and_an_explicit_header_wins(root, data):
    token = base64.b64encode(b"user name:p@ss:word").decode()
    needed = {"Authorization": f"Basic {token}"}
    with FaultServer(root, faults=Faults(require_headers=needed)) as server:
        url = f"http://user%20name:p%40ss%3Aword@127.0.0.1:{server.port}/blob.bin"
        with HttpStream(url, 0, FAST) as stream:
            assert stream.read() == data
        with HttpStream(url, 1000, FAST) as stream:  # a resume carries them too
            assert stream.read() == data[1000:]
        with pytest.raises(ShardReadError, match=r"HTTP 401 unauthorized") as info:
            HttpStream(f"{server.url}/blob.bin", 0, FAST)
        assert "p@ss" not in str(info.value)
        wrong = _options(headers={"authorization": "Bearer other"})
        with pytest.raises(ShardReadError, match=r"^http://127\.0\.0\.1:\d+/blob\.bin: HTTP 401") as info:
            HttpStream(url, 0, wrong)
        assert "p%40ss" not in str(info.value) and "user" not in str(info.value)
        assert [r.status for r in server.requests] == [200, 206, 401, 401]


def test_read_of_zero_bytes_reads_nothing(root, data):
    with FaultServer(root) as server, HttpStream(f"{server.url}/blob.bin", 100, FAST) as stream:
        assert stream.read(0) == b"" and stream.position == 100
        assert stream.read(10) == data[100:110]


@pytest.mark.parametrize(("how", "error"), [("read", "ProtocolError"), ("readinto", "ConnectionResetError")])
def test_a_connection_that_breaks_every_time_names_the_break_and_chains_its_cause(root, how, error):
    faults = Faults(drop_after=[0, 0], reset=True)
    options = _options(retries=1)
    with FaultServer(root, faults=faults) as server, HttpStream(f"{server.url}/blob.bin", 0, options) as fh:
        expected = rf"at byte 0: connection broke: {error}; gave up after 1 retries$"
        with pytest.raises(ShardReadError, match=expected) as info:
            if how == "read":
                fh.read()
            else:
                fh.readinto(bytearray(65536))
    assert info.value.__cause__ is not None  # what it broke with, for the traceback


def _verify_failed():
    return ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")


def _chained(error, cause=None, context=None):
    error.__cause__, error.__context__ = cause, context
    return error


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (_verify_failed(), True),
        (ssl.SSLError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"), True),  # by its text
        (MaxRetryError(None, "u", reason=_chained(SSLError("handshake"), cause=_verify_failed())), True),
        (_chained(ProtocolError("broke"), cause=_verify_failed()), True),
        (_chained(ProtocolError("broke"), context=_verify_failed()), True),
        (_chained(ProtocolError("broke"), cause=ProtocolError("again"), context=_verify_failed()), False),
        (ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"), False),
        (ssl.SSLError(1, "certificate_verify_failed in lower case is not OpenSSL's"), False),
        (MaxRetryError(None, "https://h/a.tar", reason=ProtocolError("reset")), False),
    ],
    ids=[
        "verify-error",
        "by-text",
        "max-retry-reason-cause",
        "cause",
        "context",
        "cause-first",
        "other-ssl",
        "lower-case",
        "no-tls",
    ],
)
def test_a_certificate_problem_is_found_anywhere_in_the_exception_chain(exc, expected):
    assert certificate_problem(exc) is expected


@pytest.mark.parametrize("how", ["read", "readinto"])
def test_a_server_that_caps_its_range_answers_is_read_on_to_the_end(root, data, how):
    """The length is the Content-Range's total, not the answer's: a short 206 is followed by another."""
    with FaultServer(root, faults=Faults(max_range=70_000)) as server:
        with HttpStream(f"{server.url}/blob.bin", 1000, FAST) as stream:
            if how == "read":
                got = stream.read()
            else:
                buffer, got = bytearray(65536), b""
                while count := stream.readinto(buffer):
                    got += bytes(buffer[:count])
        assert got == data[1000:]
        starts = range(1000, SIZE, 70_000)
        assert [(r.range, r.status) for r in server.requests] == [(f"bytes={s}-", 206) for s in starts]


def test_without_an_etag_a_changed_object_is_caught_by_its_last_modified(root):
    with FaultServer(root, faults=Faults(no_etag=True, change_after=1, drop_after=[7000])) as server:
        with pytest.raises(ShardReadError, match=r"at byte 7000: the object changed between requests"):
            _read(server)
        assert [r.range for r in server.requests] == [None, "bytes=7000-"]


def _answer(status, **headers):
    """A real urllib3 response with these headers and no body (what total_length reads)."""
    return HTTPResponse(body=b"", headers=headers, status=status, preload_content=False)


@pytest.mark.parametrize(
    ("response", "offset", "total"),
    [
        (_answer(206, **{"Content-Range": "bytes 1000-1999/300000", "Content-Length": "1000"}), 1000, 300000),
        (_answer(206, **{"Content-Range": "bytes 1000-1999/*", "Content-Length": "1000"}), 1000, None),
        (_answer(206, **{"Content-Length": "1000"}), 1000, 2000),  # no Content-Range: the offset is added
        (_answer(200, **{"Content-Length": "300000"}), 0, 300000),
        (_answer(200, **{"Content-Length": "300000"}), 1000, 300000),  # a 200 is the whole object
        (_answer(200, **{"Content-Length": "many"}), 0, None),
        (_answer(200), 0, None),
    ],
    ids=["range-total", "range-unknown", "206-by-length", "200", "200-at-offset", "bad-length", "no-length"],
)
def test_the_objects_length_comes_from_content_range_else_content_length(response, offset, total):
    assert total_length(response, offset) == total


def _sockets() -> int:
    """Sockets this process holds open (client and in-process server sides alike)."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own fd, gone by now
            continue
    return sum(name.startswith("socket:") for name in names)


def test_closing_a_half_read_stream_drops_its_connection(root):
    with FaultServer(root) as server:
        before = _sockets()
        stream = HttpStream(f"{server.url}/blob.bin", 0, FAST)
        assert len(stream.read(1000)) == 1000
        assert _sockets() > before
        stream.close()  # the stream object stays alive: only close() can let the connection go
        deadline = time.monotonic() + 5
        while _sockets() > before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _sockets() == before
        stream.close()  # closing again is harmless
