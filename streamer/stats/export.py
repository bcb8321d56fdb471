"""Exporting loader statistics (JSON lines, TensorBoard, Prometheus): polled, so as fresh as the last tick.

The shared pieces are in ``ticker.py``, the Prometheus endpoint in ``prometheus.py``.

The snapshot is what ``ds.stats()`` and ``watch(loader).report()`` return: a nested dict of plain numbers,
whose only strings are the verdict's code and text. Any key may be missing::

    {"workers": {"main": {"seconds": {"open": 0.1, "io": 2.0, "decode": 3.0, "other": 0.5, "idle": 1.0},
                          "decode": {"image": 2.5, "audio": 0.0, "video": 0.0, "text": 0.5, "other": 0.0},
                          "counts": {"samples": 1000, "bytes": 123456, "requests": 4, "retries": 0,
                                     "hedges": 0, "shards": 3, "readahead_hits": 2, "readahead_misses": 1},
                          "fill_seconds": 0.4, "wall": 7.0, "handoff": 0.2},
                 "0": {...}, "1": {...}},
     "total": {"seconds": {...}, "decode": {...}, "counts": {...}, "fill_seconds": 0.4, "wall": 14.0, ...},
     "verdict": {"code": "decode-bound", "text": "workers spend 61% of their busy time decoding: ..."},
     "trainer": {"steps": 100, "first_wait": 0.3, "exposed": 0.42, "wait_p50": 0.01, "wait_p99": 0.2,
                 "wait_seconds": 4.2, "step_seconds": 10.0, "rank": 0}}

Example, all three at once (TensorBoard and Prometheus need ``pip install 'shardstream[export]'``)::

    from streamer.stats.export import export

    with export(ds.stats, json_lines="stats.jsonl", tensorboard="runs/tb", prometheus_port=9108, every=10):
        for batch in loader:
            ...

The exporters never raise out of their threads: a ``snapshot()`` that raises is logged once (logger
``shardstream``) and the next tick or scrape tries again; a file or writer that fails is logged once and that
exporter stops.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shardstream.extras import require

from .prometheus import PrometheusExporter
from .ticker import Closing, Snapshot, Ticker, check_every, check_port, flatten, plain

__all__ = ["Exports", "JsonLinesExporter", "PrometheusExporter", "TensorBoardExporter", "export", "flatten"]


class JsonLinesExporter(Ticker):
    """Appends the snapshot to ``path`` as one JSON object per line every ``every`` seconds, plus ``time``
    (unix seconds) and ``elapsed`` (seconds since the exporter started), flushed at each line; one last line
    on ``close()``.

    path: the file, opened for appending (a restarted run adds to it); its folder must exist.
    every: seconds between lines (default 10).
    """

    def __init__(self, path: str | Path, snapshot: Snapshot, *, every: float = 10.0) -> None:
        path = Path(path)
        if not path.parent.is_dir():
            raise ValueError(
                f"path {str(path)!r}: the folder {str(path.parent)!r} does not exist; create it first"
            )
        super().__init__(snapshot, every, f"json lines {path}")
        self.path = path
        self.file = path.open("a", encoding="utf-8")
        self.thread.start()

    def write(self, data: Mapping[str, Any], tick: int) -> None:
        line = {"time": time.time(), "elapsed": time.monotonic() - self.started}
        for key, value in plain(data).items():
            line.setdefault(key, value)
        self.file.write(json.dumps(line, allow_nan=False) + "\n")
        self.file.flush()

    def release(self) -> None:
        self.file.close()


class TensorBoardExporter(Ticker):
    """Writes every number of the snapshot as a TensorBoard scalar every ``every`` seconds (tag: the dotted
    name with ``/``, e.g. ``workers/0/seconds/io``), and the verdict as text (tag ``verdict``) whenever its
    code changes; once more on ``close()``. Needs ``pip install 'shardstream[export]'``.

    log_dir: the run's folder, as ``tensorboard --logdir`` reads it (created if missing).
    every: seconds between writes (default 10). The global step is the trainer's step count when the
    snapshot has ``trainer.steps``, else the tick number (0, 1, 2, ...).
    """

    def __init__(self, log_dir: str | Path, snapshot: Snapshot, *, every: float = 10.0) -> None:
        require("tensorboard", "TensorBoard export", "export")
        tensorboard = require("torch.utils.tensorboard", "TensorBoard export", "export")
        super().__init__(snapshot, every, f"tensorboard {log_dir}")
        self.writer = tensorboard.SummaryWriter(log_dir=str(log_dir))
        self.verdict: str | None = None
        self.thread.start()

    def write(self, data: Mapping[str, Any], tick: int) -> None:
        flat = flatten(data)
        step = int(flat["trainer.steps"]) if "trainer.steps" in flat else tick
        for name, value in flat.items():
            self.writer.add_scalar(name.replace(".", "/"), value, global_step=step)
        verdict = data.get("verdict")
        code = verdict.get("code") if isinstance(verdict, Mapping) else None
        if isinstance(code, str) and code != self.verdict:
            self.writer.add_text("verdict", f"**{code}**: {verdict.get('text', '')}", global_step=step)
            self.verdict = code
        self.writer.flush()  # a live TensorBoard sees each tick, not the writer's 2-minute flush

    def release(self) -> None:
        self.writer.close()


# (name, help, labels): the families each scrape yields, in this order.
class Exports(Closing):
    """The exporters ``export()`` started (None for those not asked for); ``close()`` closes them all."""

    def __init__(self) -> None:
        self.json_lines: JsonLinesExporter | None = None
        self.tensorboard: TensorBoardExporter | None = None
        self.prometheus: PrometheusExporter | None = None

    def close(self) -> None:
        for exporter in (self.json_lines, self.tensorboard, self.prometheus):
            if exporter is not None:
                exporter.close()


def export(
    snapshot: Snapshot,
    *,
    json_lines: str | Path | None = None,
    tensorboard: str | Path | None = None,
    prometheus_port: int | None = None,
    every: float = 10.0,
) -> Exports:
    """Starts the exports asked for: JSON lines appended to the file ``json_lines``, TensorBoard scalars in
    the folder ``tensorboard``, a Prometheus endpoint on 127.0.0.1:``prometheus_port`` (0: a free port); the
    first two every ``every`` seconds. Every value is checked before anything starts."""
    check_every(every)
    if prometheus_port is not None:
        check_port(prometheus_port, "prometheus_port")
    exports = Exports()
    try:
        if json_lines is not None:
            exports.json_lines = JsonLinesExporter(json_lines, snapshot, every=every)
        if tensorboard is not None:
            exports.tensorboard = TensorBoardExporter(tensorboard, snapshot, every=every)
        if prometheus_port is not None:
            exports.prometheus = PrometheusExporter(snapshot, port=prometheus_port)
    except BaseException:
        exports.close()  # what started before the failure (a port in use, a missing extra) does not leak
        raise
    return exports
