"""A local S3 server with real latency (time to first byte, a per-connection rate cap) and faults: it serves
one folder as one bucket, reading only the bytes a range asks for; it is no S3 (GET/HEAD/ListObjectsV2 only).

Use it where moto's figures mean nothing (moto copies the whole object for every range and answers at
once) and where a test needs a fault at an exact byte::

    with ShapedS3Server(folder, ttfb=0.03, rate=100e6) as srv:   # or the ``shaped_s3`` fixture below
        srv.endpoint_url                      # http://127.0.0.1:PORT, path-style: /BUCKET/KEY
        srv.bucket                            # "shardstream-test" unless told
        srv.environment()                     # AWS_ENDPOINT_URL_S3 + dummy credentials (botocore, s3fs)
        srv.ttfb = 0.05; srv.rate = 20e6      # change the shaping at any time (None: no cap)
        srv.drop_after("a/b.tar", 1000)       # the next GET of that key is cut after 1000 body bytes
        srv.storm(3)                          # the next 3 requests (any) answer 503 SlowDown
        srv.forbid("a/b.tar"); srv.forbid()   # 403 AccessDenied for that key / for everything; allow() undoes
        srv.replace_mid_read("a/b.tar", new_bytes, after=4096)  # see below
        srv.stall("a/b.tar", 5.0)             # the next GET of that key waits 5 s more for its first byte
        srv.shift_range("a/b.tar", 4096)      # the next range GET answers the span 4096 bytes further on
        srv.kind_counts()                     # Counter of HEAD / GET / range / list
        srv.path_counts()                     # Counter of "/bucket/key"
        srv.requests; srv.reset_log()         # the log as ShapedRequest (method, path, range, status, ...)
        srv.max_concurrent(kind="range")      # the most such requests open at once (from began/ended)

obstore: ``S3Store(srv.bucket, endpoint=srv.endpoint_url, **srv.obstore_config())``.

Knobs (constructor and attributes): ``ttfb`` seconds slept before the status line of every response
(default 0); ``rate`` bytes/s cap of each response body, paced in 64 KiB writes (default None: unshaped,
1 MiB writes); ``bucket``. Requests are not authenticated: any SigV4 signature (or none) is accepted.
``replace_mid_read`` swaps the object's bytes (by rename: a new ETag) once ``after`` body bytes of the next
GET of that key have left; that response goes on with the old bytes, as S3 serves a consistent object, and
later requests see the new ones; ``If-Match`` with the old ETag then answers 412 PreconditionFailed.
Combine it with ``drop_after(key, after)`` to make the client resume into the replaced object.

Fixture: ``shaped_s3`` (a fresh unshaped server on an empty folder per test: fill ``srv.root``), reached
with ``pytest_plugins = ["tests.servers.shaped_fixtures"]`` in a test module.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from pathlib import Path

from tests.servers.common import HOST, LocalServer
from tests.servers.s3 import ACCESS_KEY, BUCKET, SECRET_KEY, s3_environment
from tests.servers.shaped_s3_http import S3State, ShapedRequest, handle_connection


class ShapedS3Server(LocalServer):
    """The folder ``root`` as bucket ``bucket`` on 127.0.0.1, in a daemon thread with its own event loop.

    ``ttfb``: seconds before the first byte of every response (>= 0). ``rate``: bytes/s cap per response
    (> 0, or None for none). Both may be changed while it runs; the next response uses the new values."""

    def __init__(
        self, root: Path, *, bucket: str = BUCKET, ttfb: float = 0.0, rate: float | None = None
    ) -> None:
        self.state = S3State(Path(root).resolve(), bucket)
        self.ttfb, self.rate = ttfb, rate
        self.port: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def root(self) -> Path:
        return self.state.root

    @property
    def bucket(self) -> str:
        return self.state.bucket

    @property
    def ttfb(self) -> float:
        return self.state.ttfb

    @ttfb.setter
    def ttfb(self, seconds: float) -> None:
        if not seconds >= 0:
            raise ValueError(f"ttfb must be >= 0 seconds, got {seconds!r}")
        self.state.ttfb = float(seconds)

    @property
    def rate(self) -> float | None:
        return self.state.rate

    @rate.setter
    def rate(self, bytes_per_second: float | None) -> None:
        if bytes_per_second is not None and not bytes_per_second > 0:
            raise ValueError(f"rate must be > 0 bytes/s or None, got {bytes_per_second!r}")
        self.state.rate = bytes_per_second

    @property
    def endpoint_url(self) -> str:
        return self.url

    def environment(self) -> dict[str, str]:
        """The environment that points botocore/s3fs (and child processes) here, dummy credentials."""
        return s3_environment(self.endpoint_url)

    def obstore_config(self) -> dict[str, object]:
        """Keyword arguments for ``obstore.store.S3Store(bucket, endpoint=..., **these)``."""
        return {
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
            "region": "us-east-1",
            "client_options": {"allow_http": True},
        }

    # ---------------------------------------------------------------------------------------- faults

    def drop_after(self, key: str, nbytes: int) -> None:
        """Cut the connection after ``nbytes`` body bytes of the next GET of ``key`` (none if shorter)."""
        with self.state.lock:
            self.state.drops[key] = nbytes

    def storm(self, count: int) -> None:
        """Answer the next ``count`` requests, whatever they ask, with 503 SlowDown."""
        with self.state.lock:
            self.state.storm = count

    def forbid(self, key: str | None = None) -> None:
        """403 AccessDenied for ``key`` from now on; for every request when ``key`` is None."""
        with self.state.lock:
            self.state.forbidden.add(key)

    def allow(self) -> None:
        """Undo every ``forbid``."""
        with self.state.lock:
            self.state.forbidden.clear()

    def replace_mid_read(self, key: str, data: bytes, *, after: int = 0) -> None:
        """Replace ``key``'s bytes with ``data`` once ``after`` body bytes of its next GET have been sent."""
        with self.state.lock:
            self.state.replaces[key] = (after, bytes(data))

    def stall(self, key: str, seconds: float, *, count: int = 1) -> None:
        """The next ``count`` GETs of ``key`` wait ``seconds`` more (beyond ``ttfb``) for their first byte."""
        with self.state.lock:
            self.state.stalls.setdefault(key, []).extend([float(seconds)] * count)

    def shift_range(self, key: str, by: int) -> None:
        """The next range GET of ``key`` answers ``by`` bytes further on (its Content-Range saying so)."""
        with self.state.lock:
            self.state.shifts[key] = by

    # ------------------------------------------------------------------------------------------ log

    def _logged(self) -> list[ShapedRequest]:
        with self.state.lock:
            return list(self.state.log)

    @property
    def requests(self) -> list[ShapedRequest]:
        return self._logged()

    def kind_counts(self) -> Counter[str]:
        return Counter(r.kind for r in self._logged())

    def path_counts(self) -> Counter[str]:
        return Counter(r.path for r in self._logged())

    def max_concurrent(self, *, kind: str = "range", path_suffix: str = "") -> int:
        """The most ``kind`` requests (paths ending ``path_suffix``) open at once, from arrival to answer."""
        now = time.monotonic()
        events = []
        for r in self._logged():
            if r.kind == kind and r.path.endswith(path_suffix):
                events += [(r.began, 1), (r.ended if r.ended is not None else now, -1)]
        most = current = 0
        for _, step in sorted(events, key=lambda e: (e[0], e[1])):  # an end before a start at one instant
            current += step
            most = max(most, current)
        return most

    def reset_log(self) -> None:
        with self.state.lock:
            self.state.log.clear()

    # ------------------------------------------------------------------------------------ lifecycle

    def start(self) -> ShapedS3Server:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="shaped-s3", daemon=True)
        self._thread.start()
        if not ready.wait(10) or self.port is None:
            raise RuntimeError("the shaped S3 server did not start listening within 10 s")
        return self

    def _run(self, ready: threading.Event) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        tasks: set[asyncio.Task] = set()

        async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            tasks.add(task)
            try:
                await handle_connection(self.state, reader, writer)
            except asyncio.CancelledError:
                writer.transport.abort()  # stop(): an idle keep-alive connection, nothing to log
            finally:
                tasks.discard(task)

        try:
            server = loop.run_until_complete(asyncio.start_server(connected, HOST, 0, backlog=512))
            self.port = server.sockets[0].getsockname()[1]
        finally:
            ready.set()
        loop.run_forever()
        server.close()
        for task in list(tasks):
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.close()

    def stop(self) -> None:
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)

    def __enter__(self) -> ShapedS3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
