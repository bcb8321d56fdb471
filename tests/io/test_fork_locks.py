"""A forked child (a DataLoader worker) never inherits the per-process registries' locks held: a parent
thread holding one at the fork must not stop the child's first object-store stream or hedged request
(``shardstream/forklock.py``, the one rule for them and the statistics' lock)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from shardstream.forklock import ForkLock
from shardstream.io import flight, hedge
from tests.conftest import held_by_another_thread


@pytest.mark.parametrize(
    ("module", "first_use"),
    [
        (flight, lambda: flight.budget_for(1 << 20, 1 << 16)),
        (hedge, lambda: hedge.first_answer(lambda: 7, 5.0)),
    ],
    ids=["flight-budget", "hedge-pool"],
)
def test_a_child_forked_while_a_parent_thread_holds_the_registry_lock_gets_its_own(module, first_use):
    with held_by_another_thread(module._made):
        pid = os.fork()
        if pid == 0:  # the child: its first use must not wait on the parent's held lock
            done = threading.Event()
            threading.Thread(target=lambda: (first_use(), done.set()), daemon=True).start()
            os._exit(0 if done.wait(10) else 1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            finished, status = os.waitpid(pid, os.WNOHANG)
            if finished:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the child never finished")
    assert os.waitstatus_to_exitcode(status) == 0, "the child's first use waited on the parent's lock"


@pytest.mark.parametrize("reentrant", [False, True], ids=["lock", "rlock"])
def test_a_fork_lock_held_by_a_parent_thread_is_free_in_the_child_and_still_held_in_the_parent(reentrant):
    lock = ForkLock(reentrant=reentrant)
    with held_by_another_thread(lock):
        pid = os.fork()
        if pid == 0:  # the child: free at once, and a lock again (taken, then not free to another taker)
            ok = lock.acquire(timeout=5)
            again = lock.acquire(blocking=False)
            os._exit(0 if ok and again == reentrant else 1)
        assert not lock.acquire(blocking=False)  # the parent's own is still its thread's
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child found the parent's held lock"
    assert lock.acquire(blocking=False)
    lock.release()
