"""Per-shard column tails: each shard's TAIL_SIZE largest values in the index, so a planner knows a shard's
costs above a budget without reading its sidecar; the index grows by up to TAIL_SIZE numbers a shard."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import FormatError

# 8: a shard whose samples over the budget are fewer than 8 (overlong is rare: a few per thousand) is
# planned from the index alone, for ~50 bytes of JSON a shard (the sum already costs ~8); a longer tail
# only helps budgets below most samples' costs, where every shard needs its column anyway.
TAIL_SIZE = 8
FIX = "rebuild the index (shardstream index --cost / pack --cost / columns)"


def column_tail(values: Iterable[int]) -> list[int]:
    """The TAIL_SIZE largest of ``values``, largest first (all of them when fewer): a shard's tail."""
    return [int(v) for v in heapq.nlargest(TAIL_SIZE, (int(v) for v in values))]


def check_tails(
    tails: dict[str, Any], sums: dict[str, list[int]], counts: Sequence[int], source: str
) -> dict[str, list[list[int]]]:
    """``column_tails`` as read from an index, checked against its sums and sample counts: a tail per
    shard, non-negative integers, largest first, at most min(TAIL_SIZE, samples) of them, adding up to at
    most the shard's sum (exactly it when the tail holds every sample). FormatError naming the fix."""
    if not isinstance(tails, dict):
        raise FormatError(f"{source}: column_tails must be an object; {FIX}")
    checked: dict[str, list[list[int]]] = {}
    for name, rows in tails.items():
        where = f"{source}: column_tails[{name!r}]"
        if name not in sums:
            raise FormatError(f"{where} has no column_sums beside it; {FIX}")
        if not isinstance(rows, list) or len(rows) != len(counts):
            shown = len(rows) if isinstance(rows, list) else type(rows).__name__
            raise FormatError(f"{where} has {shown} tails for {len(counts)} shards; {FIX}")
        for shard, (tail, total, count) in enumerate(zip(rows, sums[name], counts, strict=True)):
            _check_tail(tail, int(total), int(count), f"{where}[{shard}]")
        checked[name] = [list(tail) for tail in rows]
    return checked


def _check_tail(tail: Any, total: int, count: int, where: str) -> None:
    if not isinstance(tail, list) or len(tail) > min(TAIL_SIZE, count):
        shown = len(tail) if isinstance(tail, list) else type(tail).__name__
        raise FormatError(
            f"{where}: {shown} values, at most min({TAIL_SIZE}, {count} samples) fit a tail; {FIX}"
        )
    bad = next((v for v in tail if isinstance(v, bool) or not isinstance(v, int) or v < 0), None)
    if bad is not None:
        raise FormatError(f"{where}: holds {bad!r}, not a non-negative integer; {FIX}")
    if any(a < b for a, b in itertools.pairwise(tail)):
        raise FormatError(f"{where}: {tail} is not largest first; {FIX}")
    held = sum(tail)
    if held > total or (len(tail) == count and held != total):
        raise FormatError(f"{where}: adds up to {held}, the shard's sum is {total}; {FIX}")


def tail_array(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """The tails as an (shards, TAIL_SIZE) int64 array, -1 past each tail's end (values are >= 0)."""
    out = np.full((len(rows), TAIL_SIZE), -1, dtype=np.int64)
    for shard, tail in enumerate(rows):
        out[shard, : len(tail)] = tail
    return out
