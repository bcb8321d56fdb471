"""The per-process budget of object-store bytes in flight, shared by every open shard stream.

Trade-off: one budget across shards bounds a worker's memory however many shards are open (the one read,
the ones read ahead), at the price of a shard read ahead sometimes waiting for room while another holds
parts it has not handed out yet. So that this never stalls the shard being read, one part of the budget
is kept for a reader with nothing in flight ("hungry"): parts asked for ahead of need may fill only the
rest, and while a reader waits for room nobody else takes any.
"""

from __future__ import annotations

import os
import threading

from ..forklock import ForkLock

_budgets: dict[tuple[int, int, int], FlightBudget] = {}
_made = ForkLock()  # a forked child gets its own (forklock.py)


class FlightBudget:
    """``limit`` bytes in flight at most, ``reserve`` of them only for hungry readers. ``used`` and
    ``peak`` (the most ever held at once) are there to be looked at."""

    def __init__(self, limit: int, reserve: int) -> None:
        if not 0 < reserve <= limit:
            raise ValueError(f"reserve must be within 1..limit ({limit}), not {reserve}")
        self.limit, self.reserve = limit, reserve
        self.used = self.peak = 0
        self._hungry = 0
        self._room = threading.Condition()

    def take(self, nbytes: int) -> bool:
        """Room for ``nbytes`` asked for ahead of need: taken now, or False (nothing waits)."""
        with self._room:
            if self._hungry or self.used + nbytes > self.limit - self.reserve:
                return False
            self._hold(nbytes)
            return True

    def wait_for(self, nbytes: int) -> None:
        """Room for ``nbytes`` a reader needs now (it has nothing in flight): waits until it is there."""
        nbytes = min(nbytes, self.limit)
        with self._room:
            self._hungry += 1
            try:
                while self.used + nbytes > self.limit:
                    self._room.wait()
            finally:
                self._hungry -= 1
            self._hold(nbytes)

    def give(self, nbytes: int) -> None:
        """``nbytes`` handed out (or dropped): room for others."""
        with self._room:
            self.used -= nbytes
            self._room.notify_all()

    def _hold(self, nbytes: int) -> None:
        self.used += nbytes
        self.peak = max(self.peak, self.used)


def budget_for(limit: int, part_size: int) -> FlightBudget:
    """This process's budget of ``limit`` bytes (parts of ``part_size``): one per process, so a forked
    DataLoader worker has its own, and every stream with the same options shares it."""
    key = (os.getpid(), limit, part_size)
    with _made:
        budget = _budgets.get(key)
        if budget is None:
            budget = _budgets[key] = FlightBudget(limit, part_size)
        return budget
