"""A hostile HTTP server: every request answered by a coroutine the test gives (asyncio, in a daemon thread).

Where the FaultServer misbehaves within HTTP's rules on files, this one says whatever a test scripts: a 206
from the wrong byte, a redirect to another origin, a body that never ends or trickles, a gzip answer
nobody asked for. Trade-off: each test writes its own answers (a few lines) instead of picking a fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import threading
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tests.servers.common import HOST, LocalServer, Request


@dataclass
class Asked:
    """One request: ``headers`` with lower-cased names; ``count``: how many requests for this path so far."""

    method: str
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    count: int = 1


# Answers a request through the writer; returns whether the connection may serve another one.
Answer = Callable[[Asked, asyncio.StreamWriter], Awaitable[bool]]


async def reply(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    *,
    send: int | None = None,
) -> bool:
    """Status, headers (Content-Length: the body's, unless given) and the body, or only its first ``send``
    bytes and then the connection closes (False)."""
    head = {"Content-Length": str(len(body)), **(headers or {})}
    lines = [f"HTTP/1.1 {status} {http.client.responses.get(status, 'Status')}"]
    lines += [f"{name}: {value}" for name, value in head.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    writer.write(body if send is None else body[:send])
    await writer.drain()
    return send is None


async def write_head(writer: asyncio.StreamWriter, status: int, headers: dict[str, str]) -> None:
    """Only the status line and headers: the test writes the body as it likes (forever, a byte at a time)."""
    lines = [f"HTTP/1.1 {status} {http.client.responses.get(status, 'Status')}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    await writer.drain()


class HostileServer(LocalServer):
    """``with HostileServer(answer) as srv:``; ``srv.url``; ``srv.requests`` (``Request`` with headers).

    ``host`` is what ``url`` names ("127.0.0.1", or "localhost" for a second origin on the same address)."""

    def __init__(self, answer: Answer, *, host: str = HOST) -> None:
        self.answer = answer
        self.host = host
        self.port: int | None = None
        self.errors: list[str] = []  # tracebacks of answers that failed (tests assert it is empty)
        self._log: list[Request] = []
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _logged(self) -> list[Request]:
        with self._lock:
            return list(self._log)

    @property
    def requests(self) -> list[Request]:
        return self._logged()

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    def start(self) -> HostileServer:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def listen() -> None:
            server = await asyncio.start_server(self._serve, HOST, 0)
            self.port = server.sockets[0].getsockname()[1]
            self._server = server

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(listen())
            ready.set()
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="HostileServer", daemon=True)
        self._thread.start()
        if not ready.wait(5):
            raise RuntimeError("the hostile server did not start")
        return self

    def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return

        def shut() -> None:
            self._server.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.call_soon(loop.stop)

        loop.call_soon_threadsafe(shut)
        if self._thread is not None:
            self._thread.join(5)
        with contextlib.suppress(RuntimeError):
            loop.close()

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                asked = self._asked(head)
                if not await self.answer(asked, writer):
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        except Exception:
            self.errors.append(traceback.format_exc())
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def _asked(self, head: bytes) -> Asked:
        first, *lines = head.decode("latin-1").split("\r\n")
        method, path, _ = first.split(" ", 2)
        headers = {}
        for line in lines:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        with self._lock:
            self._counts[path] = self._counts.get(path, 0) + 1
            self._log.append(Request(method, path, headers.get("range"), 0, headers=headers))
            return Asked(method, path, headers, self._counts[path])
