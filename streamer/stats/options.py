"""Monitoring options: how often the statistics are written, and the stall watchdog (off by default)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class MonitorOptions:
    """``interval``: seconds between two looks at the reading thread's clocks, each writing its row of
    statistics and giving the watchdog its look (0: no statistics, no watchdog, no thread; the clocks'
    cost against off: benchmarks/stream/stats_bench.py; the default 0.1 keeps rows and the live line
    fresh enough: a tick costs ~9 us, but each wakes the thread and takes the GIL from the reader);
    ``watchdog``: seconds a process may hand out no sample while inside the loader before it is reported
    (None: off); a report names the rank, the worker, the shard URL and byte offset, and the stack."""

    interval: float = 0.1
    watchdog: float | None = None

    def __post_init__(self) -> None:
        if (
            isinstance(self.interval, bool)
            or not isinstance(self.interval, (int, float))
            or self.interval < 0
        ):
            raise ValueError(f"interval must be >= 0 seconds, not {self.interval!r}")
        if self.watchdog is not None and (
            isinstance(self.watchdog, bool)
            or not isinstance(self.watchdog, (int, float))
            or not self.watchdog > 0
        ):
            raise ValueError(f"watchdog must be a positive number of seconds or None, not {self.watchdog!r}")
        if self.watchdog is not None and not self.interval:
            raise ValueError("watchdog needs interval > 0: the watchdog looks from the sampler's thread")

    @classmethod
    def of(cls, monitor: MonitorOptions | bool | None) -> MonitorOptions:
        """``monitor=`` as a dataset takes it: options, True/None (the defaults) or False (off)."""
        if monitor is None or monitor is True:
            return cls()
        if monitor is False:
            return cls(interval=0)
        if not isinstance(monitor, MonitorOptions):
            raise ValueError(f"monitor must be MonitorOptions, True or False, not {monitor!r}")
        return monitor
