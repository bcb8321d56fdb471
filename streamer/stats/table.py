"""Loader statistics in shared memory, a row per process: what workers measured, read by the main process.

Like the error counters (``datasets/shared.py``), and by the same row rule (``process_row``): the main
process writes row 0, DataLoader worker ``i`` row ``1 + i``, so no two processes write one value and no
lock is needed; a row is written whole by its own process's sampler thread (``sampler.py``) every tick,
and ``snapshot()`` reads every row that was ever written. Trade-off: a reader may see a row halfway
through a write (one tick's difference), and the table is fixed at ``WORKER_ROWS``
workers (past that, workers share rows and the later one's numbers win).

A row holds, in order: seconds per stage of the reading thread (``STAGES``, from clocks: ``sampler.py``),
decode seconds per kind of member (``KINDS``), counts (``COUNTS``), ``fill_seconds`` (from an epoch's
start to its first sample: the shuffle buffer filling), ``wall`` (seconds measured), ``handoff``
(seconds the process's queue feeder thread spent pickling and sending batches) and ``run_queue`` (all
the seconds the reading thread was ready to run and waited for a CPU, inside the stages too).
"""

from __future__ import annotations

from multiprocessing.context import get_spawning_popen
from multiprocessing.sharedctypes import RawArray
from typing import Any

from torch.utils.data import get_worker_info

from shardstream.io.iostats import NAMES as IO_NAMES

from .timers import KINDS

# What the reading thread's wall time went to (sampler.py says how each is measured).
STAGES = ("open", "io", "decode", "other", "cpu_wait", "idle")
COUNTS = ("samples", *IO_NAMES)
SCALARS = ("fill_seconds", "wall", "handoff", "run_queue")
WIDTH = len(STAGES) + len(KINDS) + len(COUNTS) + len(SCALARS)
WORKER_ROWS = 256  # rows for DataLoader workers; the main process has one more
SOURCES = 64  # a Mixture's sources counted apart (samples handed out); past that, not counted


def process_row() -> int:
    """This process's row: 0 for the main process, ``1 + i`` for DataLoader worker ``i``."""
    info = get_worker_info()
    return 0 if info is None else 1 + info.id % WORKER_ROWS


def per_source(counts: list[int]) -> list[int]:
    """A Mixture's samples per source as a row holds them: ``SOURCES`` of them, cut or padded with 0."""
    return list(counts[:SOURCES]) + [0] * (SOURCES - min(len(counts), SOURCES))


def row_name(row: int) -> str:
    """How a row is named in a snapshot: ``"main"``, else the worker's number as a string."""
    return "main" if row == 0 else str(row - 1)


class StatsTable:
    """The rows; pickled to a starting worker it stays shared, pickled anywhere else it becomes a copy."""

    def __init__(self) -> None:
        self._values = RawArray("d", (1 + WORKER_ROWS) * WIDTH)
        self._sources = RawArray("q", (1 + WORKER_ROWS) * SOURCES)
        # This process's meter (sampler.py): kept with the table it writes, so it goes when the dataset
        # does; never pickled, and a forked child's copy is its parent's (told apart by the pid).
        self.meter: Any = None
        self.meter_pid: int | None = None

    def put_sources(self, row: int, counts: list[int]) -> None:
        """Row ``row``'s samples per source (a Mixture's, in its order; ``per_source``-d)."""
        self._sources[row * SOURCES : (row + 1) * SOURCES] = per_source(counts)

    def row(self, row: int) -> tuple[list[float], list[int]]:
        """Row ``row``'s values and its sources' counts as they stand."""
        return self._values[row * WIDTH : (row + 1) * WIDTH], self._sources[
            row * SOURCES : (row + 1) * SOURCES
        ]

    def sources(self, count: int) -> list[int]:
        """The first ``count`` sources' samples, summed over every row."""
        rows = self._sources[:]
        return [sum(rows[j::SOURCES]) for j in range(min(count, SOURCES))]

    def put(self, row: int, values: list[float]) -> None:
        """Row ``row`` written whole (``WIDTH`` values in the order the module docstring gives)."""
        if len(values) != WIDTH:
            raise ValueError(f"a stats row has {WIDTH} values, not {len(values)}")
        self._values[row * WIDTH : (row + 1) * WIDTH] = values

    def rows(self) -> dict[str, dict[str, Any]]:
        """Every row written so far (wall > 0), by name, as plain numbers."""
        out = {}
        for row in range(1 + WORKER_ROWS):
            values = self._values[row * WIDTH : (row + 1) * WIDTH]
            record = unpack(values)
            if record["wall"] > 0 or record["counts"]["samples"] > 0:
                out[row_name(row)] = record
        return out

    def __getstate__(self) -> dict[str, Any]:
        if get_spawning_popen() is not None:
            return {"shared": self._values, "sources": self._sources}
        return {"values": list(self._values), "source_values": list(self._sources)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "shared" in state:
            self._values, self._sources = state["shared"], state["sources"]
            self.meter, self.meter_pid = None, None
            return
        self.__init__()  # type: ignore[misc]
        self._values[:] = state["values"]
        self._sources[:] = state["source_values"]


def pack(
    seconds: dict[str, float],
    decode: dict[str, float],
    counts: dict[str, int],
    scalars: dict[str, float],
) -> list[float]:
    """One row's values from its parts (names missing count 0)."""
    return [
        *(float(seconds.get(s, 0.0)) for s in STAGES),
        *(float(decode.get(k, 0.0)) for k in KINDS),
        *(float(counts.get(c, 0)) for c in COUNTS),
        *(float(scalars.get(s, 0.0)) for s in SCALARS),
    ]


def unpack(values: list[float]) -> dict[str, Any]:
    """One row as the snapshot names it: ``seconds``, ``decode``, ``counts`` and the scalars."""
    it = iter(values)
    record: dict[str, Any] = {
        "seconds": {s: next(it) for s in STAGES},
        "decode": {k: next(it) for k in KINDS},
        "counts": {c: int(next(it)) for c in COUNTS},
    }
    record.update({s: next(it) for s in SCALARS})
    return record


def total(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The rows summed (``fill_seconds``: the largest, since workers fill their buffers at once)."""
    out = unpack([0.0] * WIDTH)
    for record in rows.values():
        for part in ("seconds", "decode", "counts"):
            for name, value in record[part].items():
                out[part][name] += value
        for name in ("wall", "handoff", "run_queue"):
            out[name] += record[name]
        out["fill_seconds"] = max(out["fill_seconds"], record["fill_seconds"])
    return out
