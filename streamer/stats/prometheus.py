"""The Prometheus exporter: ``/metrics`` read from the snapshot at each scrape, never copied on a timer.

Trade-off: a scrape costs one ``snapshot()`` call; workers only (a total series would count twice).
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from shardstream.extras import require

from .ticker import Closing, LogOnce, Snapshot, check_port

FAMILIES = (
    ("shardstream_seconds", "Seconds per worker and stage", ("worker", "stage")),
    ("shardstream_decode_seconds", "Seconds decoding per worker and member kind", ("worker", "kind")),
    ("shardstream_count", "Samples, shards, bytes, requests, retries, read-ahead hits", ("worker", "name")),
    ("shardstream_fill_seconds", "Seconds waiting for the shuffle buffer to fill", ("worker",)),
    ("shardstream_wall_seconds", "Seconds each worker has been running", ("worker",)),
    ("shardstream_trainer", "The training loop's steps, exposed data wait and its percentiles", ("name",)),
    ("shardstream_verdict", "Where the time goes: 1 for the current verdict's code", ("code",)),
)
# The per-worker families: (family, the key in the worker's dict: a dict of numbers, or one number).
LABELLED = (
    ("shardstream_seconds", "seconds"),
    ("shardstream_decode_seconds", "decode"),
    ("shardstream_count", "counts"),
)
SINGLE = (("shardstream_fill_seconds", "fill_seconds"), ("shardstream_wall_seconds", "wall"))


def numeric_items(mapping: Any) -> Iterator[tuple[str, float]]:
    if isinstance(mapping, Mapping):
        for key, value in mapping.items():
            if isinstance(value, numbers.Real):
                yield str(key), float(value)


def families(data: Mapping[str, Any], gauge: type) -> list:
    """The snapshot as Prometheus gauges. Per worker only: the total is ``sum without (worker)``, and a
    ``worker="total"`` series would make that sum count everything twice."""
    out = {name: gauge(name, help_text, labels=list(labels)) for name, help_text, labels in FAMILIES}
    workers = data.get("workers")
    for worker, stats in sorted(workers.items()) if isinstance(workers, Mapping) else ():
        if not isinstance(stats, Mapping):
            continue
        worker = str(worker)
        for family, key in LABELLED:
            for name, value in numeric_items(stats.get(key)):
                out[family].add_metric([worker, name], value)
        for family, key in SINGLE:
            if isinstance(stats.get(key), numbers.Real):
                out[family].add_metric([worker], float(stats[key]))
    for name, value in numeric_items(data.get("trainer")):
        out["shardstream_trainer"].add_metric([name], value)
    verdict = data.get("verdict")
    if isinstance(verdict, Mapping) and isinstance(verdict.get("code"), str):
        out["shardstream_verdict"].add_metric([verdict["code"]], 1.0)
    return list(out.values())


class SnapshotCollector:
    """A Prometheus collector calling ``snapshot()`` at each scrape: a scrape sees the loader as it is."""

    def __init__(self, snapshot: Snapshot, gauge: type, failed: LogOnce) -> None:
        self.snapshot = snapshot
        self.gauge = gauge
        self.failed = failed

    def collect(self) -> Iterator:
        try:
            data = self.snapshot()
        except Exception as exc:
            # A scrape without shardstream's series (not an HTTP 500, which reads as "the target is down").
            self.failed("snapshot()", exc, "this scrape has no shardstream series; the next one tries again")
            return
        yield from families(data, self.gauge)


class PrometheusExporter(Closing):
    """Serves ``/metrics`` over HTTP for Prometheus, each scrape reading ``snapshot()`` anew: per worker
    ``shardstream_seconds{worker,stage}``, ``shardstream_decode_seconds{worker,kind}``,
    ``shardstream_count{worker,name}``, ``shardstream_fill_seconds{worker}``,
    ``shardstream_wall_seconds{worker}``; ``shardstream_trainer{name}`` and ``shardstream_verdict{code} 1``.
    Needs ``pip install 'shardstream[export]'``.

    port: the TCP port (default 0: a free one, then read ``.port``).
    addr: the address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 for a Prometheus elsewhere).
    """

    def __init__(self, snapshot: Snapshot, *, port: int = 0, addr: str = "127.0.0.1") -> None:
        port = check_port(port)
        client = require("prometheus_client", "Prometheus export", "export")
        metrics = require("prometheus_client.core", "Prometheus export", "export")
        # Its own registry: two exporters in one process (two datasets) serve their own series, no clash.
        self.registry = client.CollectorRegistry()
        self.registry.register(
            SnapshotCollector(snapshot, metrics.GaugeMetricFamily, LogOnce(f"prometheus {addr}"))
        )
        self.server, self.thread = client.start_http_server(port, addr=addr, registry=self.registry)
        self.port: int = self.server.server_port
        self.closed = False
        self.lock = threading.Lock()

    def close(self) -> None:
        """Stops serving and frees the port; a second call does nothing."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
