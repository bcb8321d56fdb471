"""What both servers share: the loopback address, free ports, and the request log they keep."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

HOST = "127.0.0.1"


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


@dataclass
class Request:
    """One request as a server saw it. ``range`` is the Range header or None; ``bytes_sent`` counts body
    bytes; ``fault`` names the fault applied (``drop``, ``stall``, ``truncate``, ``status``, ``forbid``,
    ``redirect``, ``unauthorized``) or is None. ``headers`` (FaultServer only) holds the request headers,
    lower-cased names."""

    method: str
    path: str
    range: str | None
    status: int
    bytes_sent: int = 0
    fault: str | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)


class LocalServer:
    """A server on 127.0.0.1 that logs its requests: a subclass sets ``port`` and gives ``_logged()``."""

    port: int | None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def _logged(self) -> list[Request]:
        """The request log so far, a copy the caller may keep."""
        raise NotImplementedError

    @property
    def request_count(self) -> int:
        return len(self._logged())

    def wait_requests(self, count: int, timeout: float = 2.0) -> list[Request]:
        """The log once it holds at least ``count`` requests, or as it is after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            got = self._logged()
            if len(got) >= count or time.monotonic() >= deadline:
                return got
            time.sleep(0.01)
