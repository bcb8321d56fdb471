"""What the statistics exporters share: the snapshot flattened and made JSON-safe, checks, a ticking thread.

Split from ``export.py`` (the exporters) and ``prometheus.py``: one module per concept, each under 300 lines.
Trade-off: polled, so an export is as fresh as its last tick.
"""

from __future__ import annotations

import logging
import math
import numbers
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

Snapshot = Callable[[], Mapping[str, Any]]
log = logging.getLogger("shardstream")


def flatten(snapshot: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of ``snapshot`` by dotted name (``workers.0.seconds.io``); strings are dropped."""
    flat: dict[str, float] = {}
    for key, value in snapshot.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        elif isinstance(value, numbers.Real):
            flat[name] = float(value)
    return flat


def plain(value: Any) -> Any:
    """``value`` as JSON writes it: dicts and lists of numbers and strings; NaN and infinity as null, which
    every JSON reader takes (json.dumps would write ``NaN``, which jq and most others refuse)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value) if math.isfinite(value) else None
    return str(value)


def check_every(every: float, name: str = "every") -> float:
    if isinstance(every, bool) or not isinstance(every, numbers.Real) or not 0 < every < math.inf:
        raise ValueError(f"{name} must be a positive number of seconds, got {every!r}")
    return float(every)


def check_port(port: int, name: str = "port") -> int:
    if isinstance(port, bool) or not isinstance(port, numbers.Integral) or not 0 <= port <= 65535:
        raise ValueError(f"{name} must be a TCP port, 0 to 65535 (0 picks a free one), got {port!r}")
    return int(port)


class LogOnce:
    """Logs each kind of failure the first time only: a snapshot failing every tick must not flood the log."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.seen: set[str] = set()
        self.lock = threading.Lock()

    def __call__(self, kind: str, exc: BaseException, then: str) -> None:
        with self.lock:
            if kind in self.seen:
                return
            self.seen.add(kind)
        log.warning(
            "%s: %s failed (%s: %s); %s", self.where, kind, type(exc).__name__, exc, then, exc_info=exc
        )


class Closing:
    """``with`` for the exporters: leaving the block calls ``close()``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Ticker(Closing):
    """A daemon thread that writes ``snapshot()`` every ``every`` seconds, and once more on ``close()``.
    Subclasses give ``write(data, tick)`` (tick: 0, 1, 2, ...) and ``release()`` (closes the sink)."""

    def __init__(self, snapshot: Snapshot, every: float, where: str) -> None:
        self.snapshot = snapshot
        self.every = check_every(every)
        self.failed = LogOnce(where)
        self.started = time.monotonic()
        self.ticks = 0
        self.broken = False  # the sink failed: no more writes, only release() on close
        self.closed = False
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, name=f"shardstream-export-{where}", daemon=True)

    def run(self) -> None:
        while not self.stop.wait(self.every) and not self.broken:
            self.tick()

    def tick(self) -> None:
        tick = self.ticks
        self.ticks += 1
        try:
            data = self.snapshot()
        except Exception as exc:
            self.failed("snapshot()", exc, "the export goes on and tries again on the next tick")
            return
        try:
            self.write(data, tick)
        except Exception as exc:
            self.broken = True
            self.failed("writing", exc, "this export stops")

    def close(self) -> None:
        """Stops the thread, writes the last snapshot and closes the sink; a second call does nothing. Waits
        for a ``snapshot()`` in progress."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
        if not self.broken:
            self.tick()
        self.release()
