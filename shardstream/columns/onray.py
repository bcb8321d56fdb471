"""Shards' columns as Ray core tasks (``--engine ray``): any node computes a shard, the driver journals;
each task writes its shard's .cols itself, so the nodes must share the dataset's folder."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from .shard import ShardTask, column_shard

RETRIES = 3  # a task whose worker dies is run again: it writes the same bytes


def _task(task: ShardTask) -> dict[str, Any]:
    return column_shard(task)


def map_on_ray(
    tasks: list[ShardTask],
    in_flight: int,
    *,
    address: str | None,
    start_head: Callable[[int], Any] | None,
) -> Iterator[dict[str, Any]]:
    """Each task's record, as tasks finish, at most ``in_flight`` at once: on the Ray this process is
    already connected to, else on the cluster at ``address``, else on a head from ``start_head``."""
    try:
        import ray
    except ImportError as exc:
        raise ValueError("engine 'ray' needs Ray core: pip install 'shardstream[ray]'") from exc
    head, connected_here = None, not ray.is_initialized()
    try:
        if connected_here:
            if address is None:
                if start_head is None:
                    raise ValueError("engine 'ray': give the cluster's address, or a start_head")
                head = start_head(in_flight)
            ray.init(address=address or head.address, logging_level=logging.ERROR)
        remote = ray.remote(num_cpus=1, max_retries=RETRIES)(_task)
        waiting, pending = list(tasks), {}
        while waiting or pending:
            while waiting and len(pending) < in_flight:
                task = waiting.pop(0)
                pending[remote.remote(task)] = task
            ready, _ = ray.wait(list(pending), num_returns=1)
            task = pending.pop(ready[0])
            try:
                yield ray.get(ready[0])
            except ray.exceptions.RayTaskError as exc:
                for ref in pending:
                    ray.cancel(ref, force=True)
                cause = getattr(exc, "cause", None) or exc
                raise ValueError(f"shard {task.path} failed on Ray: {cause}") from exc
    finally:
        if connected_here and ray.is_initialized():
            ray.shutdown()
        if head is not None:
            head.stop()
