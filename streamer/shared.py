"""State shared by the main process and its DataLoader workers: the epoch and the error counters.

It lives in shared memory, so ``set_epoch`` reaches persistent workers and errors counted in workers are
readable from the dataset in the main process. Pickled outside a process start, it becomes a plain copy.

Its lock is made in the spawn context whatever the default is: a fork-context semaphore is unlinked at
birth and cannot be handed to a spawned or forkserver worker, while a named (spawn) one works under all
three start methods. The price is the resource tracker process that named semaphores need.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import get_spawning_popen
from typing import Any

COUNTERS = ("samples_skipped", "samples_repeated", "shards_failed", "decode_errors")
_EPOCH = 0
_CONTEXT = multiprocessing.get_context("spawn")  # see the module docstring


class SharedState:
    def __init__(self, epoch: int = 0) -> None:
        self._values = _CONTEXT.Array("q", 1 + len(COUNTERS))
        self._values[_EPOCH] = epoch

    @property
    def epoch(self) -> int:
        return int(self._values[_EPOCH])

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._values[_EPOCH] = value

    def add(self, name: str, count: int = 1) -> None:
        with self._values.get_lock():
            self._values[1 + COUNTERS.index(name)] += count

    def counts(self) -> dict[str, int]:
        return {name: int(self._values[1 + i]) for i, name in enumerate(COUNTERS)}

    def __getstate__(self) -> dict[str, Any]:
        if get_spawning_popen() is not None:
            return {"shared": self._values}
        return {"copy": list(self._values)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "shared" in state:
            self._values = state["shared"]
        else:
            self._values = _CONTEXT.Array("q", len(state["copy"]))
            self._values[:] = state["copy"]
