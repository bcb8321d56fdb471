"""Ordered parallel map with bounded in-flight work: processes do the reading, results keep input order."""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from typing import Any, TypeVar

from shardstream.processes import exit_with_parent

T = TypeVar("T")
R = TypeVar("R")


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def ordered_map(
    fn: Callable[..., list[R]],
    items: Iterable[T],
    *,
    workers: int,
    chunk: int = 16,
    in_flight_per_worker: int = 4,
    args: tuple[Any, ...] = (),
) -> Iterator[R]:
    """Yield ``fn(chunk, *args)`` results flattened, in input order.

    ``fn`` takes a list so that tiny samples do not pay one IPC round trip each; at most
    ``workers * in_flight_per_worker`` chunks are outstanding, so memory stays bounded.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, not {workers}")
    if workers == 1:
        for batch in _chunks(items, chunk):
            yield from fn(batch, *args)
        return
    # forkserver: the parent may hold threads (tqdm's monitor), which fork would copy half-way.
    context = multiprocessing.get_context("forkserver")
    limit = workers * in_flight_per_worker
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=exit_with_parent, initargs=(os.getpid(),)
    ) as pool:
        pending: deque[Future[list[R]]] = deque()
        try:
            for batch in _chunks(items, chunk):
                pending.append(pool.submit(fn, batch, *args))
                if len(pending) >= limit:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
