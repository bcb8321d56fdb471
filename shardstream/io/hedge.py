"""Hedged requests: a call whose answer has not come after a threshold is made again; the first answer wins.

Trade-off: a hedge is one more request to the store (and a thread that waits out the loser, whose answer
is dropped unread), paid only past the threshold, for cutting the tail of time to first byte: one slow
request no longer holds up every byte after it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from ..forklock import ForkLock

# Threads that make the calls: a loser keeps one until its request ends (request_timeout at most), so
# there are more than any stream's parts in flight. One pool per process: a forked child makes its own.
_WORKERS = 64
_pools: dict[int, ThreadPoolExecutor] = {}
_made = ForkLock()  # a forked child gets its own (forklock.py)


def _pool() -> ThreadPoolExecutor:
    with _made:
        pool = _pools.get(os.getpid())
        if pool is None:
            pool = _pools[os.getpid()] = ThreadPoolExecutor(_WORKERS, thread_name_prefix="shardstream-hedge")
        return pool


def first_answer(
    call: Callable[[], Any], after: float | None, hedged: Callable[[], None] | None = None
) -> Any:
    """``call()``; when it has not returned within ``after`` seconds, ``call()`` once more beside it (and
    ``hedged()``, when given, called to count it): the first to return wins; the loser's answer is
    dropped when it comes. A failure loses to a success; when both fail, the first failure is raised.
    ``after`` None: ``call()`` alone."""
    if after is None:
        return call()
    first = _pool().submit(call)
    if wait((first,), timeout=after).done:
        return first.result()
    second = _pool().submit(call)
    if hedged is not None:
        hedged()
    racing: set[Future[Any]] = {first, second}
    failed: BaseException | None = None
    while racing:
        done, racing = wait(racing, return_when=FIRST_COMPLETED)
        for future in sorted(done, key=lambda f: f is second):  # on a tie, the first request's answer
            error = future.exception()
            if error is None:
                return future.result()
            failed = failed or error
    raise failed  # type: ignore[misc]
