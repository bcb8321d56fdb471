"""A module lock a forked child gets anew: one rule for every per-process registry that a thread guards.

A lock held by a parent's thread at ``fork`` stays held in the child for good (the thread is not there to
release it): a DataLoader worker then waits for ever at its first use (seen in CI, on the statistics'
lock). ``ForkLock`` is a ``threading.Lock`` (or ``RLock``) that every forked child replaces with a fresh,
free one before anything else runs there. Trade-off: what the lock guarded may be half-changed in the
child (the parent's thread stopped mid-way); a registry that keys its entries by pid, or is cleared in
the child, is safe, and that is what these guard.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

_LOCKS: weakref.WeakSet[ForkLock] = weakref.WeakSet()


class ForkLock:
    """A lock renewed in every forked child; ``reentrant``: an ``RLock``. Used as a lock is: ``with``,
    ``acquire``, ``release``."""

    def __init__(self, *, reentrant: bool = False) -> None:
        self._make = threading.RLock if reentrant else threading.Lock
        self._lock = self._make()
        _LOCKS.add(self)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()

    def renew(self) -> None:
        """A fresh, free lock in place of this one (what a forked child does first)."""
        self._lock = self._make()


def _renew_all() -> None:
    for lock in list(_LOCKS):
        lock.renew()


os.register_at_fork(after_in_child=_renew_all)
