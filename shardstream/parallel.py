"""Ordered parallel map with bounded in-flight work: processes do the reading, results keep input order.

Pool workers leave with their parent (a watchdog thread polls it), so a kill -9 strands nothing.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (killed, not yet reaped by its own parent) counts as dead, since a
    caller waiting on our shared output pipes would never reap it while we hold them open."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): the signal test is all there is
    return state not in (b"Z", b"X")


def exit_with_parent(parent: int) -> None:
    """Pool initializer: leave when ``parent`` dies, even by kill -9, instead of lingering forever."""

    def watch() -> None:
        while alive(parent):
            time.sleep(1.0)  # a watchdog's poll, not an error handler's retry
        os._exit(1)

    threading.Thread(target=watch, name="shardstream-parent-watch", daemon=True).start()


def process_pool(workers: int) -> ProcessPoolExecutor:
    """The pool ``ordered_map`` uses: forkserver workers (the parent may hold threads, e.g. tqdm's monitor,
    which fork would copy half-way) that leave when the parent dies. Pass one to several ``ordered_map``
    calls to pay the workers' start-up (imports) once."""
    context = multiprocessing.get_context("forkserver")
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=exit_with_parent, initargs=(os.getpid(),)
    )


def ordered_map(
    fn: Callable[..., list[R]],
    items: Iterable[T],
    *,
    workers: int,
    chunk: int = 16,
    in_flight_per_worker: int = 4,
    args: tuple[Any, ...] = (),
    pool: ProcessPoolExecutor | None = None,
    inline: Callable[[list[T]], bool] | None = None,
) -> Iterator[R]:
    """Yield ``fn(chunk, *args)`` results flattened, in input order.

    ``fn`` takes a list so that tiny samples do not pay one IPC round trip each; at most
    ``workers * in_flight_per_worker`` chunks are outstanding, so memory stays bounded. ``pool`` (from
    ``process_pool(workers)``) is used and left open; without one, a pool lives for this call. A chunk
    ``inline`` accepts runs here instead: one whose work is less than shipping it to a process and back.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, not {workers}")
    if workers == 1:
        for batch in _chunks(items, chunk):
            yield from fn(batch, *args)
        return
    if pool is None:
        with process_pool(workers) as own:
            more = {"chunk": chunk, "in_flight_per_worker": in_flight_per_worker, "args": args}
            yield from ordered_map(fn, items, workers=workers, pool=own, inline=inline, **more)  # type: ignore[arg-type]
        return
    limit = workers * in_flight_per_worker
    pending: deque[Future[list[R]]] = deque()
    try:
        for batch in _chunks(items, chunk):
            if inline is not None and inline(batch):
                if not pending:
                    yield from fn(batch, *args)
                    continue
                done: Future[list[R]] = Future()
                done.set_result(fn(batch, *args))
                pending.append(done)
            else:
                pending.append(pool.submit(fn, batch, *args))
            if len(pending) >= limit:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
