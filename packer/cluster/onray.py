"""Parts as Ray core tasks: Ray places them on any node and runs a part again when its worker dies."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from shardstream.errors import PackError

from .part import PartResult, run_part
from .rayhead import AUTH_MODE, LocalHead

RETRIES = 3  # a part whose worker dies is run again (it continues from its journal), this many times


def _part_task(outdir: str, number: int) -> PartResult:
    return run_part(outdir, number)


def _import_ray(*, own_head: bool) -> Any:
    if own_head:
        # Token auth on both ends (Ray's default for a new local cluster, which `ray start` turns on and
        # a connecting driver does not): set before Ray reads its settings, at import.
        os.environ.setdefault(AUTH_MODE, "token")
    try:
        import ray
    except ImportError as exc:
        raise PackError("--engine ray needs Ray core: pip install 'shardstream[ray]'") from exc
    return ray


def _silent(text: str) -> None:
    """What the library says by default: nothing."""


def run_on_ray(
    outdir: str,
    numbers: Sequence[int],
    *,
    address: str | None,
    in_flight: int,
    on_done: Callable[[PartResult], None],
    note: Callable[[str], None] | None = None,
) -> None:
    """Run ``numbers``' parts as Ray tasks, at most ``in_flight`` at once; on a cluster at ``address``, or
    on a head started here for this pack alone (``in_flight`` CPUs). ``note``: told of the head's start,
    which takes seconds with nothing else to show."""
    ray = _import_ray(own_head=address is None)
    head = None
    connected_here = not ray.is_initialized()
    try:
        if connected_here:
            if address is None:
                note = note or _silent
                note(f"starting a Ray head for this pack ({in_flight} CPUs; a few seconds)")
                started = time.monotonic()
                head = LocalHead.start(in_flight)
                note(f"Ray head up at {head.address} in {time.monotonic() - started:.1f}s; packing parts")
            ray.init(address=address or head.address, logging_level=logging.ERROR)  # type: ignore[union-attr]
        task = ray.remote(num_cpus=1, max_retries=RETRIES)(_part_task)
        waiting = list(numbers)
        pending: dict[Any, int] = {}
        while waiting or pending:
            while waiting and len(pending) < in_flight:
                number = waiting.pop(0)
                pending[task.remote(str(outdir), number)] = number
            ready, _ = ray.wait(list(pending), num_returns=1)
            number = pending.pop(ready[0])
            try:
                on_done(ray.get(ready[0]))
            except ray.exceptions.RayError as exc:
                for ref in pending:
                    ray.cancel(ref, force=True)
                cause = getattr(exc, "cause", None) or exc
                raise PackError(f"part {number} failed on Ray: {cause}") from exc
    finally:
        if connected_here and ray.is_initialized():
            ray.shutdown()
        if head is not None:
            head.stop()
