"""State shared by the main process and its DataLoader workers: the epoch, the error counters, the statistics.

It lives in shared memory, so ``set_epoch`` reaches persistent workers and errors counted in workers are
readable from the dataset in the main process. Pickled outside a process start, it becomes a plain copy.

No lock: each process counts in a row of its own (the main process in row 0, DataLoader worker ``i`` in
row ``1 + i``) and ``counts()`` sums the rows, so no two processes read, add to and write back one value,
whatever the start method (fork, forkserver, spawn). A lock would have to be a named (spawn-context)
semaphore to reach spawned workers, and a named semaphore starts multiprocessing's resource tracker, a
Python interpreter of its own: ~40 ms of CPU when the first dataset is made, as much as a DataLoader
epoch of 10,000 raw samples takes (benchmarks/stream/raw_peers_bench.py). Trade-off: two DataLoaders
reading one dataset object at once share rows (as do workers past ``WORKER_ROWS``), and could lose a
count if two of their workers added to the same counter in the same instant.
"""

from __future__ import annotations

from multiprocessing.context import get_spawning_popen
from multiprocessing.sharedctypes import RawArray
from typing import Any

from ..stats.table import WORKER_ROWS, StatsTable, process_row

# samples_overlong: over a token budget, left out or cut (overlong=); samples_left_out: what a budgeted
# epoch's batches had no room for (streamer/budget/batcher.py); samples_skipped_steps: in the batches
# of skip_steps (streamer/chain/skips.py).
COUNTERS = (
    "samples_skipped",
    "samples_repeated",
    "shards_failed",
    "decode_errors",
    "samples_overlong",
    "samples_left_out",
    "samples_skipped_steps",
)
_EPOCH = 0  # the epoch, written by the main process only; then the rows of counters


class SharedState:
    def __init__(self, epoch: int = 0) -> None:
        self._values = RawArray("q", 1 + (1 + WORKER_ROWS) * len(COUNTERS))
        self._values[_EPOCH] = epoch
        self.stats = StatsTable()  # what each process's sampler measured (streamer/stats)

    @property
    def epoch(self) -> int:
        return int(self._values[_EPOCH])

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._values[_EPOCH] = value

    def add(self, name: str, count: int = 1) -> None:
        """Count in this process's own row: no other process writes there."""
        self._values[1 + process_row() * len(COUNTERS) + COUNTERS.index(name)] += count

    def counts(self) -> dict[str, int]:
        """Every counter summed over the main process and the workers."""
        rows = self._values[1:]
        return {name: sum(rows[i :: len(COUNTERS)]) for i, name in enumerate(COUNTERS)}

    def __getstate__(self) -> dict[str, Any]:
        if get_spawning_popen() is not None:
            return {"shared": self._values, "stats": self.stats}
        return {"epoch": self.epoch, "counts": self.counts(), "stats": self.stats}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "shared" in state:
            self._values, self.stats = state["shared"], state["stats"]
            return
        self.__init__(state["epoch"])  # type: ignore[misc]
        self.stats = state.get("stats", self.stats)
        for name, count in state["counts"].items():
            self._values[1 + COUNTERS.index(name)] = count
