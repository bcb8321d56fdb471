"""One reading thread's clocks over one iteration: where its wall time went, by stage, from clocks only.

``Reading`` is made in the reading thread when an iteration begins (it takes that thread's own clocks)
and read from the sampler's thread: seconds opening, waiting on bytes and decoding (the loader's
clocks), its CPU clock, and the kernel's run-queue delay. Trade-off: the stages are wall time as the
clocks saw it; what none of them covers is split between waiting for a CPU (known on Linux) and idle.
"""

from __future__ import annotations

import threading

from shardstream.io.iostats import ThreadClock, thread_clock

from .timers import DecodeClock, decode_clock


def schedstat(native_id: int | None) -> tuple[float, float] | None:
    """(CPU seconds, run-queue seconds) of the thread ``native_id`` (``threading.get_native_id()``), from
    one read of ``/proc/self/task/<id>/schedstat``; None where the platform cannot tell or the thread has
    ended. Never ``pthread_getcpuclockid``: a thread may end between a check and the call, and its freed
    handle then crashed the process (a segfault in CI, reading an ended DataLoader queue's feeder thread)."""
    if native_id is None:
        return None
    try:
        with open(f"/proc/self/task/{native_id}/schedstat", "rb") as handle:
            fields = handle.read().split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def thread_cpu(native_id: int | None) -> float | None:
    """Seconds of CPU the thread ``native_id`` has used, or None (see ``schedstat``)."""
    stat = schedstat(native_id)
    return stat[0] if stat is not None else None


class Reading:
    """What a meter reads of one reading thread for one iteration: its ident, clocks and CPU time, and
    where each stood when the iteration began (so neither a forked worker's inherited numbers nor the
    thread's work between iterations count)."""

    def __init__(self, ident: int) -> None:
        self.ident = ident
        self.clock: ThreadClock = thread_clock()  # called in the reading thread: its own
        self.decoding: DecodeClock = decode_clock()
        self.native_id = threading.get_native_id()  # called in the reading thread: its own
        cpu, delay = schedstat(self.native_id) or (0.0, 0.0)
        self.base = (self.clock.open, self.clock.io, self.decoding.decode, cpu)
        self.delay_base = delay
        self.run_queue = 0.0  # all the run-queue delay, as of the last ``seconds``
        self.kinds_base = dict(self.decoding.kinds)

    def seconds(self, wall: float) -> tuple[dict[str, float], dict[str, float]]:
        """(stage seconds, decode seconds by kind) since the iteration began, ``wall`` seconds ago."""
        opened, waited, decoded, cpu_base = self.base
        opening, io = self.clock.open - opened, self.clock.io - waited
        decode = self.decoding.decode - decoded
        stat = schedstat(self.native_id)  # (cpu, run-queue delay); None: not Linux, or the thread ended
        used = max(0.0, (stat[0] - cpu_base) if stat is not None else decode)
        other = max(0.0, min(used - decode, wall - opening - io - decode))
        self.run_queue = max(0.0, stat[1] - self.delay_base) if stat is not None else 0.0
        left = max(0.0, wall - opening - io - decode - other)
        cpu_wait = min(self.run_queue, left)  # a wait inside a timed stage stays that stage's
        idle = left - cpu_wait
        kinds = {k: v - self.kinds_base.get(k, 0.0) for k, v in self.decoding.kinds.items()}
        measured = sum(kinds.values())
        split = {k: decode * v / measured for k, v in kinds.items()} if measured > 0 else {}
        stages = {"open": opening, "io": io, "decode": decode, "other": other, "cpu_wait": cpu_wait}
        return stages | {"idle": idle}, split
