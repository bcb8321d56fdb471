"""What ShardDataset and Mixture share: one ``__iter__``, the place and state checks, counters, pickling.

Both keep a ``SharedState`` (``_shared``), a ``Placement`` (``placement``), a loaded state not yet read
(``_pending``) and the chain in use (``_chain``); workers get a copy with the rank resolved in the parent
and no chain. Each says only where its chain starts (``_start``) and how it is built (``_assemble``).
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from torch.utils.data import IterableDataset, get_worker_info

from ..chain.node import Node
from ..elastic.restore import loader_dataset_states
from ..stats.options import MonitorOptions
from ..stats.sampler import counted, flushed_at_end, source_counter, watch_iteration
from ..stats.table import total
from ..stats.verdict import verdict
from ..stats.watchdog import Watchdog, readers_where, who_is
from .options import Placement
from .shared import SharedState

Place = tuple[int, int, int, int]  # rank, world, worker, workers
_sample_of = operator.itemgetter(2)  # (shard, index, sample) -> sample


def check_place(saved: Sequence[int], place: Place) -> None:
    """A state saved at one place continues only there; ValueError naming both, and the way out."""
    if tuple(saved) != place:
        raise ValueError(
            f"state was saved at (rank, world, worker, workers)={tuple(saved)} but this run is at {place}; "
            "the stream depends on world size and worker count, so resume with the same ones, or load "
            "the list of every rank's states to continue on another (an elastic restore)"
        )


class StreamBase(IterableDataset):
    placement: Placement

    def __init__(self) -> None:
        super().__init__()
        self._shared = SharedState()
        self._pending: dict[str, Any] | None = None  # a loaded state, until the next iteration reads it
        self._chain: tuple[Node, int, Place] | None = None  # the chain in use, its epoch and place
        self.monitor = MonitorOptions()  # statistics and the watchdog (the datasets' monitor= sets it)

    def __iter__(self) -> Iterator[Any]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        place = (*self.placement.resolve(), worker, workers)
        pending, self._pending = self._pending, None
        start = self._start(pending, place)
        if start is None:  # nothing left of the epoch the loaded state names
            self._chain = None
            return iter(())
        epoch, node_state = start
        chain = self._assemble(place, epoch)
        chain.reset(node_state)
        self._chain = (chain, epoch, place)
        samples = map(_sample_of, chain)  # the per-sample loop runs in C
        return self._monitored(samples, chain, place, in_worker=info is not None)

    def _monitored(
        self, samples: Iterator[Any], chain: Node, place: Place, *, in_worker: bool
    ) -> Iterator[Any]:
        """``samples``, watched by this process's sampler (statistics, the watchdog) unless it is off."""
        monitor = self.monitor
        if not monitor.interval:
            return samples
        samples, counter = counted(samples)
        watchdog = None
        if monitor.watchdog is not None:
            rank, world, worker, workers = place
            who = who_is(rank, world, worker if in_worker else None, workers)
            watchdog = Watchdog(monitor.watchdog, who, partial(readers_where, chain))
        sources = source_counter(chain)
        meter = watch_iteration(self._shared.stats, monitor.interval, counter, watchdog, sources)
        return flushed_at_end(samples, meter, counter)

    def stats(self) -> dict[str, Any]:
        """Where the loader's time went, per process (``workers``: ``"main"`` and each DataLoader worker by
        number) and summed (``total``), with the ``verdict``; plain numbers (see ``streamer/stats``).
        Seconds come from clocks (``streamer/stats/sampler.py`` says which); counts are exact. Cumulative
        from the first iteration."""
        rows = self._shared.stats.rows()
        stats: dict[str, Any] = {"workers": rows, "total": total(rows)}
        names = self._source_names()
        if names:  # a Mixture's samples handed out per source, over every process
            per_source = self._shared.stats.sources(len(names))
            stats["sources"] = {name: {"samples": n} for name, n in zip(names, per_source, strict=False)}
        stats["verdict"] = verdict(stats)
        return stats

    def _start(self, pending: dict[str, Any] | None, place: Place) -> tuple[int, Any] | None:
        """The epoch to read and the chain state to start from, given the loaded state (None: none)."""
        raise NotImplementedError

    def _assemble(self, place: Place, epoch: int) -> Node:
        """This place's chain for ``epoch``."""
        raise NotImplementedError

    def _source_names(self) -> Sequence[str]:
        """The sources whose samples ``stats`` counts apart, in the reader's order (none: one dataset)."""
        return ()

    def load_state_dict(self, state: Any) -> None:
        """Each dataset's own: continue where ``state`` stood, or raise ValueError."""
        raise NotImplementedError

    def check_state(self, state: Any, *, workers: int | None = None) -> None:
        """Raise the ValueError loading ``state`` would, and change nothing (a refusal at the first batch
        comes from a DataLoader worker, as a traceback; this one comes where it is called).

        ``state``: what ``load_state_dict`` takes, checked by loading it into a shallow copy of this
        dataset (``load_state_dict`` only rebinds attributes; what it fills in place are caches); or a
        ``StatefulDataLoader``'s ``state_dict()``, checked as its workers would load it: each worker's
        dataset state loaded into a copy, and, where it holds a chain's state, its place checked against
        (this rank, this world size, that worker, the loader's workers) as that worker's first batch
        checks it. ``workers``: the ``num_workers`` of the loader that will load a loader's state (None:
        the state's own); a loader state saved with another worker count is refused, naming both counts.
        """
        loader = loader_dataset_states(state) if isinstance(state, Mapping) else None
        if loader is None:
            copy.copy(self).load_state_dict(state)
            return
        saved, states = loader
        if workers is not None and workers != saved:
            raise ValueError(
                f"the loader state was saved with {_workers(saved)} but this loader has {_workers(workers)}: "
                "the stream depends on the worker count, so resume with the same num_workers, or load the "
                "list of every rank's states into the dataset to continue on another (an elastic restore)"
            )
        rank, world = self.placement.resolve()
        for worker, state_i in states.items():
            if not state_i:  # the worker saved nothing: it starts afresh
                continue
            worker_copy = copy.copy(self)
            worker_copy.load_state_dict(state_i)
            # What the worker's first iteration reads of the state, its place checked, before any read.
            worker_copy._start(worker_copy._pending, (rank, world, worker, max(saved, 1)))

    def set_epoch(self, epoch: int) -> None:
        """Like DistributedSampler.set_epoch; reaches DataLoader workers, persistent ones too.

        A loaded state not yet read is dropped once the epoch moves past the state's: DataLoader workers
        read it from their own copies, so this one would otherwise hand it to the next epoch's workers too.
        """
        self._shared.epoch = epoch
        pending = self._pending
        if pending is not None and epoch > int(pending.get("epoch", epoch)):
            self._pending = None

    @property
    def epoch(self) -> int:
        return self._shared.epoch

    @property
    def errors(self) -> dict[str, int]:
        """Samples and shards skipped (on_error="skip"/"warn"), counted across all workers."""
        return self._shared.counts()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        # Spawned workers cannot see the parent's process group; resolve the rank here, in the parent.
        state["placement"] = self.placement.resolved()
        state["_chain"] = None
        return state


def _workers(n: int) -> str:
    return f"{n} worker{'s' if n != 1 else ''}" if n else "no workers (num_workers=0)"
