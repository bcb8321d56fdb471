"""A forked child (a DataLoader worker) never inherits the per-process registries' locks held: a parent
thread holding one at the fork must not stop the child's first object-store stream or hedged request."""

from __future__ import annotations

import os
import threading
import time

import pytest

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
