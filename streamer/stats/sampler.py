"""A thread per process reads the reading thread's clocks every tick, writes its row, runs the watchdog.

``watch_iteration`` is called where a dataset's iteration starts (in each DataLoader worker, or in the
main process without workers), in the thread that will read. A row's stages come from clocks, none
from guessing (a Python thread sampling stacks sees other threads only where they release the GIL, so
it finds them waiting far more often than they do):

- ``open``, ``io``: seconds the reading thread spent opening shards and waiting on bytes
  (``shardstream.io.iostats.thread_clock``: two clock reads per shard or chunk);
- ``decode``: seconds decoding (``timers.py``: two clock reads per decoded sample), split by kind;
- ``other``: the reading thread's CPU time (its own thread CPU clock) less decoding: parsing, shuffling,
  collating, the loader's bookkeeping (at most what the wall time leaves);
- ``cpu_wait``: of the rest, the time the thread was ready to run and waited for a CPU (the kernel's
  run-queue delay, ``/proc/self/task/<tid>/schedstat``; 0 where there is none): more busy processes
  than cores. A wait inside a timed stage (a decode slowed by a crowded CPU) stays that stage's; the
  row's ``run_queue`` is all of it;
- ``idle``: the rest of the wall time: not running, not waiting on bytes or for a CPU, i.e. waiting
  for the main process to ask for more (a DataLoader worker ahead of the trainer); without workers, the
  training step;
- ``handoff``: the CPU time of the process's queue feeder thread (pickling and sending batches).

Samples handed out are read from the iteration's counter (``counted``: an ``itertools.count`` the
iteration steps in C, read by its repr). Trade-off: the loader's per-sample path runs nothing but that
counter's step; the row is at most one tick (``interval``) old until the iteration ends and flushes it.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from shardstream.forklock import ForkLock
from shardstream.io.iostats import IO

from .clocks import Reading, thread_cpu
from .table import SOURCES, WIDTH, StatsTable, pack, per_source, process_row
from .watchdog import Watchdog

SourceCounts = Callable[[], list[int]]  # a Mixture's samples per source so far this epoch
FEEDER = "QueueFeederThread"  # multiprocessing.Queue's sender: a DataLoader worker's hand-off


def counted(items: Iterator[Any]) -> tuple[Iterator[Any], itertools.count]:
    """``items`` passed through unchanged, and the counter they step (its next value - 1 were handed out):
    ``compress`` against an endless count of truthy numbers, both in C."""
    counter = itertools.count(1)
    return itertools.compress(items, counter), counter


def handed_out(counter: itertools.count) -> int:
    """How many items the counter from ``counted`` has let through (read without stepping it)."""
    return int(repr(counter)[6:-1]) - 1


class Meter:
    """One process's measurement for one table, kept across iterations: ``row`` of ``table`` is where it
    writes. Each iteration is ``begin``-ed and ``end``-ed and measured from its own start (the thread's
    clocks and the process's I/O counts then), so what the thread does between two iterations, another
    dataset's reading included, is not this one's; the iterations' numbers add up."""

    def __init__(self, table: StatsTable, row: int) -> None:
        self.table, self.row = table, row
        # What earlier processes in this row measured (a DataLoader's workers are new processes every
        # epoch unless persistent): this one's numbers are added to them, not written over them.
        self.row_before, self.sources_row_before = table.row(row)
        self.done = [0.0] * WIDTH  # the ended iterations' numbers (fill and hand-off kept apart)
        self.reading: Reading | None = None
        self.io_base: dict[str, int] = {}
        self.counter: itertools.count | None = None
        self.fill = 0.0
        self.started = 0.0
        self.first_seen = False
        self.feeder: int | None = None  # the feeder thread's native id: all its CPU is hand-off
        self.watchdog: Watchdog | None = None
        self.source_counts: SourceCounts | None = None  # a Mixture's samples per source, this epoch
        self.sources_before = [0] * SOURCES  # and the epochs' before
        self.lock = threading.RLock()  # re-entered by a finalizer run by a collection inside
        self.pid = os.getpid()  # a forked child's copy is its parent's: never ended there (see finish)

    def begin(
        self, ident: int, counter: itertools.count, watchdog: Watchdog | None, sources: SourceCounts | None
    ) -> None:
        with self.lock:
            self._fold(time.perf_counter())
            self.reading, self.io_base = Reading(ident), IO.values()
            self.counter, self.watchdog, self.source_counts = counter, watchdog, sources
            self.started, self.first_seen = time.perf_counter(), False

    def first_sample(self) -> None:
        """The iteration's first sample is out: the time since it began was the fill."""
        with self.lock:
            if not self.first_seen:
                self.first_seen = True
                self.fill += time.perf_counter() - self.started

    def end(self) -> None:
        """The iteration is over (run out or dropped): its last numbers written, its time closed."""
        with self.lock:
            now = time.perf_counter()
            self.look_for_feeder()
            self.tick(now)
            self._fold(now)

    def _fold(self, now: float) -> None:
        if self.counter is not None:
            self.done = [a + b for a, b in zip(self.done, self._iteration(now), strict=True)]
            self.sources_before = self._sources()
            self.counter = None

    def _iteration(self, now: float) -> list[float]:
        """The current iteration's numbers, as a row (no fill, no hand-off: those are the meter's)."""
        if self.counter is None or self.reading is None:
            return [0.0] * WIDTH
        wall = now - self.started
        seconds, decode = self.reading.seconds(wall)
        counts = IO.since(self.io_base)
        counts["samples"] = handed_out(self.counter)
        return pack(seconds, decode, counts, {"wall": wall, "run_queue": self.reading.run_queue})

    def _sources(self) -> list[int]:
        """Samples per source (``per_source``-d), this epoch's added to the epochs' before."""
        now = self.source_counts() if self.source_counts is not None and self.counter is not None else []
        return [a + b for a, b in zip(per_source(now), self.sources_before, strict=True)]

    def look_for_feeder(self) -> None:
        if self.feeder is None:  # it starts with the first batch sent
            self.feeder = next((t.native_id for t in threading.enumerate() if t.name == FEEDER), None)

    def tick(self, now: float) -> bool:
        """One look (call with ``lock`` held); False once the reading thread is gone."""
        reading = self.reading
        if reading is None:
            return True
        frame = _frame_of(reading.ident)
        if frame is None:
            return False
        handoff = thread_cpu(self.feeder) or 0.0
        own = pack({}, {}, {}, {"fill_seconds": self.fill, "handoff": handoff})
        parts = zip(self.row_before, self.done, self._iteration(now), own, strict=True)
        self.table.put(self.row, [sum(values) for values in parts])
        if self.source_counts is not None or any(self.sources_before):
            parts = zip(self.sources_row_before, self._sources(), strict=True)
            self.table.put_sources(self.row, [a + b for a, b in parts])
        if self.watchdog is not None and self.counter is not None:
            samples = handed_out(self.counter)
            self.watchdog.tick(now, samples, frame, waiting=_waiting_for_consumer(frame))
        return True


class Sampler(threading.Thread):
    """The thread that ticks a ``Meter`` every ``interval`` seconds while one iteration runs."""

    def __init__(self, meter: Meter, interval: float) -> None:
        super().__init__(name="shardstream-stats", daemon=True)
        self.meter, self.interval = meter, interval
        self.stopping = threading.Event()

    def run(self) -> None:
        ticks = 0
        meter = self.meter
        while not self.stopping.wait(self.interval):
            if _dropped:
                finish_dropped()
                if self.stopping.is_set():
                    return
            if ticks % 10 == 0:
                meter.look_for_feeder()
            ticks += 1
            with meter.lock:
                if not meter.tick(time.perf_counter()):
                    return


def _frame_of(ident: int) -> Any:
    return sys._current_frames().get(ident)


# Told apart by the innermost frame that is either: the loader's own (or the DataLoader's fetch, which
# calls it), or a DataLoader worker's loop (which waits there for the main process to ask for more). The
# innermost, because a forked worker's stack still holds, further out, the frames its parent forked from.
_SEP = os.sep
_LOADER_PARTS = (
    f"{_SEP}streamer{_SEP}",
    f"{_SEP}shardstream{_SEP}",
    f"{_SEP}torch{_SEP}utils{_SEP}data{_SEP}_utils{_SEP}fetch.py",
)
_WORKER_LOOP = f"{_SEP}torch{_SEP}utils{_SEP}data{_SEP}_utils{_SEP}worker.py"


def _waiting_for_consumer(frame: Any) -> bool:
    """Whether the thread is waiting for its consumer rather than inside the loader: in a DataLoader
    worker's loop, or (without workers) in the training step, with no frame of the loader inside it."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if _WORKER_LOOP in filename:
            return True
        if any(part in filename for part in _LOADER_PARTS):
            return False
        frame = frame.f_back
    return True


_running: Sampler | None = None
_guard = ForkLock(reentrant=True)  # (so is this; a forked child gets its own: forklock.py)


def _forked() -> None:
    """In a forked child (a DataLoader worker): none of the parent's sampling. Its thread is not here, and
    its dropped iterations are not this process's to finish (the lock is renewed by ``ForkLock``)."""
    global _running
    _running = None
    _dropped.clear()


os.register_at_fork(after_in_child=_forked)


def watch_iteration(
    table: StatsTable,
    interval: float,
    counter: itertools.count,
    watchdog: Watchdog | None,
    sources: SourceCounts | None = None,
) -> Meter:
    """Measure the calling thread's iteration from now on: one meter per process and table, one sampling
    thread per process (a new iteration takes it over); ``finish`` ends it."""
    global _running
    finish_dropped()
    with _guard:
        meter = table.meter
        if meter is None or table.meter_pid != os.getpid():  # none yet, or a forked parent's
            meter = table.meter = Meter(table, process_row())
            table.meter_pid = os.getpid()
        meter.begin(threading.get_ident(), counter, watchdog, sources)
        if _running is not None:
            _running.stopping.set()
        sampler = _running = Sampler(meter, interval)
    # Started with no lock held: a thread starting may run a finalizer (a collection), which must not
    # wait for a lock this thread holds while it waits for that thread to start.
    sampler.start()
    return meter


def finish(meter: Meter, counter: itertools.count) -> None:
    """The iteration stepping ``counter`` is over: its numbers written and its thread stopped; nothing if
    a newer iteration has taken the meter over since (an old iterator freed late), or the meter is a
    forked parent's (its iterator collected in the child: its numbers are the parent's to write, and its
    lock may have been held at the fork by a thread the child lacks; a worker hung here in CI)."""
    global _running
    if meter.pid != os.getpid():
        return
    with _guard:
        if meter.counter is not counter:
            return
        if _running is not None and _running.meter is meter:
            _running.stopping.set()
            _running = None
        meter.end()


# Iterations whose iterators were dropped unfinished, to be finished by the sampler's thread (or the next
# iteration): the finalizer that notices runs wherever a collection happens, maybe inside our locks or
# while another thread waits on this one, so it only appends here (atomic) and takes no lock.
_dropped: list[tuple[Meter, itertools.count]] = []


def _was_dropped(meter: Meter, counter: itertools.count) -> None:
    _dropped.append((meter, counter))


def finish_dropped() -> None:
    """``finish`` every dropped iteration noted so far (from a thread holding none of our locks)."""
    while _dropped:
        try:
            meter, counter = _dropped.pop()
        except IndexError:  # another thread took the last one
            return
        finish(meter, counter)


def flushed_at_end(items: Iterator[Any], meter: Meter, counter: itertools.count) -> Iterator[Any]:
    """``items``, the first timed (the fill) by a generator that hands out that one alone, then
    ``finish``: when they run out, or, when the iteration is dropped unfinished, within a tick (chained
    in C: nothing per item after the first; a finalizer on the chain's last part notes the drop)."""
    last = _finish(meter, counter)
    weakref.finalize(last, _was_dropped, meter, counter)
    return itertools.chain(_first(items, meter), items, last)


def _first(items: Iterator[Any], meter: Meter) -> Iterator[Any]:
    for item in items:
        meter.first_sample()
        yield item
        return


def _finish(meter: Meter, counter: itertools.count) -> Iterator[Any]:
    finish(meter, counter)
    return
    yield  # a generator: the finish runs when the chain reaches it


def source_counter(chain: Any) -> SourceCounts | None:
    """The ``source_counts`` of the first node down ``chain`` (through ``source``) that has one (a
    Mixture's reader), or None."""
    node = chain
    while node is not None:
        counts = getattr(node, "source_counts", None)
        if callable(counts):
            return counts
        node = getattr(node, "source", None)
    return None
