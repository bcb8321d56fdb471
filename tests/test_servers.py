"""The HTTP tests' servers, checked with httpx: nginx (HTTP and HTTPS) and the fault-injecting server."""

from __future__ import annotations

import random
import ssl
import threading
import time
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.servers import Faults, FaultServer, NginxServer, nginx, parse_range

DATA = random.Random(0).randbytes(200_000)
TIMEOUT = httpx.Timeout(5.0)


@pytest.fixture
def www(tmp_path: Path) -> Path:
    root = tmp_path / "www"
    (root / "sub").mkdir(parents=True)
    (root / "data.bin").write_bytes(DATA)
    (root / "sub" / "meta.json").write_bytes(b'{"a": 1}')
    (root / "empty.bin").write_bytes(b"")
    return root


def read_until_error(client: httpx.Client, url: str, **kw) -> tuple[httpx.Response, bytes, Exception | None]:
    """Stream a GET; what arrived before the transport failed, and the failure (None if it didn't)."""
    got = bytearray()
    with client.stream("GET", url, **kw) as response:
        try:
            for chunk in response.iter_raw():
                got += chunk
        except httpx.TransportError as error:
            return response, bytes(got), error
    return response, bytes(got), None


# --------------------------------------------------------------------------------------------- nginx


def test_nginx_serves_files_with_range_and_etag(www: Path) -> None:
    with nginx(www) as srv, httpx.Client(timeout=TIMEOUT) as client:
        assert srv.url == f"http://127.0.0.1:{srv.port}"
        full = client.get(f"{srv.url}/data.bin")
        assert full.status_code == 200 and full.content == DATA
        assert full.headers["etag"].startswith('"') and full.headers["last-modified"]
        assert full.headers["accept-ranges"] == "bytes"

        part = client.get(f"{srv.url}/data.bin", headers={"Range": "bytes=12345-23455"})
        assert part.status_code == 206
        assert part.content == DATA[12345:23456]
        assert part.headers["content-range"] == f"bytes 12345-23455/{len(DATA)}"
        assert part.headers["etag"] == full.headers["etag"]
        tail = client.get(f"{srv.url}/data.bin", headers={"Range": "bytes=199000-"})
        assert tail.status_code == 206 and tail.content == DATA[199000:]
        assert client.get(f"{srv.url}/data.bin", headers={"Range": "bytes=200000-"}).status_code == 416
        assert client.get(f"{srv.url}/missing.bin").status_code == 404
        assert client.get(f"{srv.url}/sub/meta.json").content == b'{"a": 1}'

        log = srv.wait_requests(6)
        assert [(r.method, r.path, r.range, r.status) for r in log] == [
            ("GET", "/data.bin", None, 200),
            ("GET", "/data.bin", "bytes=12345-23455", 206),
            ("GET", "/data.bin", "bytes=199000-", 206),
            ("GET", "/data.bin", "bytes=200000-", 416),
            ("GET", "/missing.bin", None, 404),
            ("GET", "/sub/meta.json", None, 200),
        ]
        assert log[0].bytes_sent == len(DATA) and log[1].bytes_sent == 23456 - 12345
        assert srv.request_count == 6  # the readiness probe is not logged
        assert srv.access_log.is_file()
        prefix = srv.prefix
    assert not prefix.exists()


def test_nginx_https_needs_the_ca_bundle(www: Path) -> None:
    with nginx(www, https=True) as srv:
        assert srv.https_url.startswith("https://127.0.0.1:") and srv.https_port != srv.port
        assert b"BEGIN CERTIFICATE" in srv.ca_bundle.read_bytes()
        trusting = ssl.create_default_context(cafile=str(srv.ca_bundle))
        with httpx.Client(timeout=TIMEOUT, verify=trusting) as client:
            response = client.get(f"{srv.https_url}/data.bin", headers={"Range": "bytes=0-99"})
            assert response.status_code == 206 and response.content == DATA[:100]
            localhost = srv.https_url.replace("127.0.0.1", "localhost")
            assert client.get(f"{localhost}/sub/meta.json").content == b'{"a": 1}'
        with httpx.Client(timeout=TIMEOUT) as client, pytest.raises(httpx.ConnectError, match="CERTIFICATE"):
            client.get(f"{srv.https_url}/data.bin")  # the default trust store does not know our CA
        with httpx.Client(timeout=TIMEOUT) as client:  # plain HTTP keeps working beside it
            assert client.get(f"{srv.url}/data.bin").content == DATA


def test_nginx_https_attributes_need_https(www: Path) -> None:
    with nginx(www) as srv:
        with pytest.raises(AttributeError):
            _ = srv.https_url
        with pytest.raises(AttributeError):
            _ = srv.ca_bundle


def test_nginx_stops_and_restarts_on_the_same_url(www: Path) -> None:
    with nginx(www) as srv, httpx.Client(timeout=TIMEOUT) as client:
        url = srv.url
        assert client.get(f"{url}/data.bin").status_code == 200
        srv.stop()
        assert not srv.running
        with pytest.raises(httpx.ConnectError):
            client.get(f"{url}/data.bin")
        srv.start()
        assert srv.url == url and srv.running
        assert client.get(f"{url}/data.bin").content == DATA
        assert [r.status for r in srv.wait_requests(2)] == [200, 200]
    with httpx.Client(timeout=TIMEOUT) as client, pytest.raises(httpx.ConnectError):
        client.get(f"{url}/data.bin")


def test_nginx_missing_binary_names_the_package(www: Path, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="apt-get install nginx-light"):
        NginxServer(www, binary=str(tmp_path / "no-nginx"))


RANGES = [
    "bytes=0-0",
    "bytes=-1",
    "bytes=5-",
    "bytes=199999-",
    "bytes=200000-",
    "bytes=10-5",
    "bytes=0-999999",
    "bytes=-0",
    "bytes=-999999",
    "bytes=abc",
    "bytes= 3 - 4",
    "BYTES=3-4",
    "bytes=-",
    "bytes=3-4,",
    "bytes=1-2,300000-",
    "bytes=00-01",
    "items=0-1",
]


def test_fault_server_answers_ranges_and_conditions_like_nginx(www: Path) -> None:
    def view(response: httpx.Response) -> tuple:
        body = response.content if response.status_code in (200, 206) else None
        return response.status_code, response.headers.get("content-range"), body

    with nginx(www) as ngx, FaultServer(www) as fault, httpx.Client(timeout=TIMEOUT) as client:
        for name in ("data.bin", "empty.bin"):
            for value in RANGES:
                ours = client.get(f"{fault.url}/{name}", headers={"Range": value})
                theirs = client.get(f"{ngx.url}/{name}", headers={"Range": value})
                assert view(ours) == view(theirs), (name, value)
        for server in (ngx, fault):
            head = client.head(f"{server.url}/data.bin", headers={"Range": "bytes=1-2"})
            assert (head.status_code, head.headers["content-length"], head.content) == (206, "2", b"")
            first = client.get(f"{server.url}/data.bin")
            etag, modified = first.headers["etag"], first.headers["last-modified"]
            for if_range, status in ((etag, 206), (modified, 206), ('"other"', 200)):
                headers = {"Range": "bytes=5-9", "If-Range": if_range}
                got = client.get(f"{server.url}/data.bin", headers=headers)
                assert got.status_code == status, (server, if_range)
                assert got.content == (DATA[5:10] if status == 206 else DATA)
            assert client.get(f"{server.url}/data.bin", headers={"If-None-Match": etag}).status_code == 304
            assert client.get(f"{server.url}/data.bin", headers={"If-Match": '"other"'}).status_code == 412
            assert client.get(f"{server.url}/data.bin", headers={"If-Match": etag}).status_code == 200
        assert fault.errors == []


# -------------------------------------------------------------------------------------- FaultServer


def test_fault_server_serves_files(www: Path) -> None:
    (www.parent / "secret.txt").write_text("outside the root")
    with FaultServer(www) as srv, httpx.Client(timeout=TIMEOUT) as client:
        assert srv.url == f"http://127.0.0.1:{srv.port}"
        full = client.get(f"{srv.url}/data.bin")
        assert full.status_code == 200 and full.content == DATA
        assert full.headers["content-length"] == str(len(DATA))
        assert full.headers["etag"] and full.headers["last-modified"]
        assert full.headers["accept-ranges"] == "bytes"
        part = client.get(f"{srv.url}/data.bin", headers={"Range": "bytes=100-199"})
        assert part.status_code == 206 and part.content == DATA[100:200]
        assert part.headers["content-range"] == f"bytes 100-199/{len(DATA)}"
        head = client.head(f"{srv.url}/data.bin")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-length"] == str(len(DATA))
        assert client.get(f"{srv.url}/data.bin", headers={"Range": "bytes=200000-"}).status_code == 416
        assert client.get(f"{srv.url}/nope.bin").status_code == 404
        assert client.get(f"{srv.url}/sub").status_code == 404  # folders are not served
        assert client.get(f"{srv.url}/%2e%2e/secret.txt").status_code == 404  # nor anything outside root
        assert client.get(f"{srv.url}/sub/meta.json?x=1").content == b'{"a": 1}'
        log = srv.requests
        assert [(r.method, r.path, r.range, r.status, r.fault) for r in log[:3]] == [
            ("GET", "/data.bin", None, 200, None),
            ("GET", "/data.bin", "bytes=100-199", 206, None),
            ("HEAD", "/data.bin", None, 200, None),
        ]
        assert [r.bytes_sent for r in log[:3]] == [len(DATA), 100, 0]
        assert srv.request_count == 8 and len(srv.requests_for("sub/meta.json")) == 1
        assert log[1].headers["range"] == "bytes=100-199"
        srv.clear_log()
        assert srv.request_count == 0
        assert srv.errors == []


def test_fault_server_ranges_are_exact(www: Path) -> None:
    size = len(DATA)
    with FaultServer(www) as srv, httpx.Client(timeout=TIMEOUT) as client:

        @settings(max_examples=60, deadline=None)
        @given(st.integers(0, size + 10), st.none() | st.integers(0, size + 10))
        def check(start: int, end: int | None) -> None:
            header = f"bytes={start}-" + ("" if end is None else str(end))
            response = client.get(f"{srv.url}/data.bin", headers={"Range": header})
            expected = parse_range(header, size)
            if start >= size or (end is not None and end < start):
                assert response.status_code == 416 and expected == "unsatisfiable"
                assert response.headers["content-range"] == f"bytes */{size}"
            else:
                stop = size if end is None else min(end + 1, size)
                assert response.status_code == 206 and response.content == DATA[start:stop]
                assert response.headers["content-range"] == f"bytes {start}-{stop - 1}/{size}"

        check()
        assert srv.errors == []


def test_drop_breaks_the_body_and_a_range_request_resumes(www: Path) -> None:
    with FaultServer(www) as srv, httpx.Client(timeout=TIMEOUT) as client:
        srv.set_faults(drop_after=[12345])
        response, got, error = read_until_error(client, f"{srv.url}/data.bin")
        assert response.status_code == 200 and response.headers["content-length"] == str(len(DATA))
        assert isinstance(error, httpx.RemoteProtocolError)
        assert got == DATA[:12345]
        rest = client.get(f"{srv.url}/data.bin", headers={"Range": f"bytes={len(got)}-"})
        assert rest.status_code == 206 and got + rest.content == DATA
        log = srv.requests
        assert [(r.range, r.status, r.bytes_sent, r.fault) for r in log] == [
            (None, 200, 12345, "drop"),
            ("bytes=12345-", 206, len(DATA) - 12345, None),
        ]
        assert srv.faults.drop_after == []  # consumed
        assert srv.errors == []


def test_drop_with_reset_and_on_every_request(www: Path) -> None:
    faults = Faults(drop_after=1000, reset=True)
    with FaultServer(www, faults=faults) as srv, httpx.Client(timeout=TIMEOUT) as c:
        for _ in range(3):
            _, got, error = read_until_error(c, f"{srv.url}/data.bin")
            assert isinstance(error, httpx.TransportError) and len(got) <= 1000
        assert [r.fault for r in srv.requests] == ["drop"] * 3
        assert srv.errors == []


def test_random_drops_are_reproducible(www: Path) -> None:
    def run() -> list[tuple[str | None, int]]:
        with FaultServer(www) as srv, httpx.Client(timeout=TIMEOUT) as client:
            srv.set_faults(drop_probability=0.5, seed=2)
            for _ in range(8):
                _, got, error = read_until_error(client, f"{srv.url}/data.bin")
                assert (error is None) == (got == DATA)
            assert srv.errors == []
            return [(r.fault, r.bytes_sent) for r in srv.requests]

    first = run()
    assert first == run()
    assert {fault for fault, _ in first} == {"drop", None}
    assert all(n < len(DATA) for fault, n in first if fault == "drop")


def test_stall_exceeds_a_read_timeout(www: Path) -> None:
    with FaultServer(www) as srv, httpx.Client(timeout=httpx.Timeout(5.0, read=0.5)) as client:
        srv.set_faults(stall_after=[100], stall_seconds=3.0)
        began = time.monotonic()
        _, got, error = read_until_error(client, f"{srv.url}/data.bin")
        assert isinstance(error, httpx.ReadTimeout)
        assert 0.4 < time.monotonic() - began < 2.5
        assert got == DATA[:100]
        assert srv.requests[0].fault == "stall"
        assert client.get(f"{srv.url}/data.bin").content == DATA  # the list is consumed
    assert srv.errors == []


def test_status_codes_come_in_order_on_matching_paths(www: Path) -> None:
    with FaultServer(www) as srv, httpx.Client(timeout=TIMEOUT) as client:
        srv.set_faults(status_codes=[503, 503, 429], retry_after=1, only="*.bin")
        assert client.get(f"{srv.url}/sub/meta.json").status_code == 200  # not matched, nothing consumed
        answers = [client.get(f"{srv.url}/data.bin") for _ in range(4)]
        assert [a.status_code for a in answers] == [503, 503, 429, 200]
        assert [a.headers.get("retry-after") for a in answers] == ["1", "1", "1", None]
        assert answers[-1].content == DATA
        assert [r.fault for r in srv.requests] == [None, "status", "status", "status", None]
        assert srv.errors == []


def test_truncate_announces_more_than_it_sends(www: Path) -> None:
    with FaultServer(www) as srv, httpx.Client(timeout=TIMEOUT) as client:
        srv.set_faults(truncate=[10])
        response, got, error = read_until_error(client, f"{srv.url}/data.bin")
        assert response.headers["content-length"] == str(len(DATA) + 10)
        assert isinstance(error, httpx.RemoteProtocolError)
        assert got == DATA
        assert srv.requests[0].fault == "truncate"
        assert srv.errors == []


def test_change_gives_new_bytes_and_a_new_etag(www: Path) -> None:
    with FaultServer(www) as srv, httpx.Client(timeout=TIMEOUT) as client:
        srv.set_faults(change_after=1)
        first = client.get(f"{srv.url}/data.bin")
        second = client.get(f"{srv.url}/data.bin")
        assert first.content == DATA
        assert second.headers["etag"] != first.headers["etag"]
        assert second.headers["last-modified"] != first.headers["last-modified"]
        diff = [i for i, (a, b) in enumerate(zip(first.content, second.content, strict=True)) if a != b]
        assert diff == [len(DATA) // 2] and len(second.content) == len(DATA)
        # A resume that names the old version gets the new whole object (If-Range) or a refusal (If-Match).
        old = first.headers["etag"]
        resumed = client.get(f"{srv.url}/data.bin", headers={"Range": "bytes=100-", "If-Range": old})
        assert resumed.status_code == 200 and resumed.content == second.content
        assert client.get(f"{srv.url}/data.bin", headers={"If-Match": old}).status_code == 412
        srv.change("data.bin")  # and on demand
        third = client.get(f"{srv.url}/data.bin")
        assert third.headers["etag"] not in (first.headers["etag"], second.headers["etag"])
        assert third.content != second.content
        assert srv.errors == []


def test_forbid_and_redirect(www: Path) -> None:
    with FaultServer(www) as srv, httpx.Client(timeout=TIMEOUT) as client:
        srv.set_faults(forbid=["sub/*"])
        assert client.get(f"{srv.url}/sub/meta.json").status_code == 403
        moved = client.get(f"{srv.url}/r/data.bin")
        assert moved.status_code == 302 and moved.headers["location"] == "/data.bin"
        followed = client.get(f"{srv.url}/r/data.bin", follow_redirects=True)
        assert followed.status_code == 200 and followed.content == DATA
        assert [r.fault for r in srv.requests] == ["forbid", "redirect", "redirect", None]
        srv.clear_faults()
        assert client.get(f"{srv.url}/sub/meta.json").status_code == 200
        assert srv.errors == []


def test_faults_are_validated() -> None:
    with pytest.raises(ValueError):
        Faults(stall_seconds=60)
    with pytest.raises(ValueError):
        Faults(status_codes=[42])


def test_fault_server_stops_promptly_and_restarts(www: Path) -> None:
    srv = FaultServer(www).start()
    idle = httpx.Client(timeout=TIMEOUT)
    assert idle.get(f"{srv.url}/sub/meta.json").status_code == 200  # leaves a keep-alive connection open
    srv.set_faults(stall_after=10, stall_seconds=5.0)
    outcome: list[object] = []

    def stalled() -> None:
        with httpx.Client(timeout=TIMEOUT) as client:
            try:
                outcome.append(read_until_error(client, f"{srv.url}/data.bin")[2])
            except httpx.TransportError as error:  # stopped before the headers went out (seen on 3.10)
                outcome.append(error)

    thread = threading.Thread(target=stalled, daemon=True)
    thread.start()
    assert srv.wait_requests(2, timeout=10)[-1].fault == "stall"
    began = time.monotonic()
    srv.stop()
    thread.join(3)
    assert time.monotonic() - began < 2.0 and not thread.is_alive()  # not the 5 s stall
    assert isinstance(outcome[0], httpx.RemoteProtocolError)  # the stall was cut short
    with pytest.raises(httpx.TransportError):
        idle.get(f"{srv.url}/sub/meta.json")
    port = srv.port
    with srv:  # back on the same port
        srv.clear_faults()
        assert srv.port == port and idle.get(f"{srv.url}/data.bin").content == DATA
    idle.close()
    assert srv.errors == []
