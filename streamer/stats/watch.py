"""The trainer's view: how long each ``next(loader)`` blocked against the step between it; constant memory.

``for batch in watch(loader):`` yields the loader's batches unchanged and times two things per step:
the wait (inside ``next``) and the step (from handing a batch out to asking for the next one). The
exposed wait is wait / (wait + step): near 0 the loader keeps up, near 1 training waits on data.
Waits go into a histogram of log-spaced buckets (20 a decade, 1 us to 10^4 s), so p50/p99 are within
~6% and memory stays the same for a million steps. ``report()`` gives the numbers (with
``all_ranks=True``, every rank's, gathered over torch.distributed); ``stats()`` adds the dataset's
own statistics and the verdict those make with the trainer's view.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator
from typing import Any

from .verdict import verdict

PER_DECADE = 20
LOWEST = 1e-6
BUCKETS = PER_DECADE * 10 + 2  # 1 us .. 10^4 s, and one each side


class Watch:
    """``loader``: what is iterated (a DataLoader, or any iterable of batches); ``dataset``: whose
    ``stats()`` ``Watch.stats`` adds (None: ``loader.dataset`` when it has ``stats``)."""

    def __init__(self, loader: Iterable[Any], dataset: Any = None) -> None:
        self.loader = loader
        self.dataset = dataset if dataset is not None else getattr(loader, "dataset", None)
        self.steps = 0
        self.wait_seconds = self.step_seconds = self.first_wait = 0.0
        self.buckets = [0] * BUCKETS

    def __iter__(self) -> Iterator[Any]:
        it = iter(self.loader)
        clock = time.perf_counter
        handed = None  # when the last batch went to the trainer
        while True:
            asked = clock()
            if handed is not None:
                self.step_seconds += asked - handed
            try:
                batch = next(it)
            except StopIteration:
                return
            handed = clock()
            self._waited(handed - asked)
            yield batch

    def _waited(self, wait: float) -> None:
        self.steps += 1
        if self.steps == 1:  # workers starting, the buffer filling: once a run, reported on its own
            self.first_wait = wait
            return
        self.wait_seconds += wait
        at = 0 if wait < LOWEST else 1 + int(math.log10(wait / LOWEST) * PER_DECADE)
        self.buckets[min(at, BUCKETS - 1)] += 1

    def quantile(self, q: float) -> float:
        """The later waits' quantile ``q`` (a bucket's middle: ~6% off at most); 0 before the second step."""
        if self.steps < 2:
            return 0.0
        rank, seen = q * (self.steps - 1), 0
        for at, count in enumerate(self.buckets):
            seen += count
            if seen >= rank and count:
                return 0.0 if at == 0 else LOWEST * 10 ** ((at - 0.5) / PER_DECADE)
        return LOWEST * 10 ** ((BUCKETS - 1.5) / PER_DECADE)

    def report(self, all_ranks: bool = False) -> Any:
        """This rank's numbers: ``steps``, ``first_wait`` (the first batch's: workers starting, the buffer
        filling), ``wait_seconds`` (the later batches'), ``step_seconds``, ``exposed`` (the later waits over
        themselves plus the steps), ``wait_p50``, ``wait_p99`` (of the later waits), ``rank``.
        ``all_ranks``: a list of every rank's, gathered (torch.distributed must be
        initialized), each with ``slowest``: the rank that waited longest for data (under DDP the others
        then wait for it inside their steps)."""
        total = self.wait_seconds + self.step_seconds
        mine = {
            "steps": self.steps,
            "wait_seconds": self.wait_seconds,
            "step_seconds": self.step_seconds,
            "exposed": self.wait_seconds / total if total > 0 else 0.0,
            "wait_p50": self.quantile(0.5),
            "wait_p99": self.quantile(0.99),
            "first_wait": self.first_wait,
            "rank": _rank(),
        }
        if not all_ranks:
            return mine
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("all_ranks=True needs torch.distributed initialized (or leave it False)")
        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, mine)
        slowest = max(gathered, key=lambda r: r["wait_seconds"])["rank"]
        return [{**record, "slowest": slowest} for record in gathered]

    def stats(self) -> dict[str, Any]:
        """The dataset's ``stats()`` with ``trainer`` (this report) and the verdict made with both."""
        stats = (
            dict(self.dataset.stats()) if self.dataset is not None and hasattr(self.dataset, "stats") else {}
        )
        trainer = self.report()
        stats["trainer"] = trainer
        stats["verdict"] = verdict(stats, trainer)
        return stats


def watch(loader: Iterable[Any], dataset: Any = None) -> Watch:
    """``for batch in watch(loader):`` — see ``Watch``."""
    return Watch(loader, dataset)


def _rank() -> int:
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    except (ImportError, RuntimeError):
        return 0
