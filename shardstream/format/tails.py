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
        if not tails_hold(rows, sums[name], counts):  # the loop only to name the first bad tail
            for shard, (tail, total, count) in enumerate(zip(rows, sums[name], counts, strict=True)):
                check_tail(tail, int(total), int(count), f"{where}[{shard}]")
        checked[name] = rows
    return checked


def tails_hold(rows: list[Any], sums: Sequence[int], counts: Sequence[int]) -> bool:
    """Whether every tail passes ``check_tail``, in numpy: a Python check per shard took 0.4 s to load
    an index of 10^5 shards (20x its load without tails)."""
    if set(map(type, rows)) - {list}:
        return False
    flat = list(itertools.chain.from_iterable(rows))
    if set(map(type, flat)) - {int}:  # bools are not ints here: type(True) is bool
        return False
    try:
        values = np.array(flat, dtype=np.int64)
        totals, samples = np.asarray(sums, dtype=np.int64), np.asarray(counts, dtype=np.int64)
    except (OverflowError, ValueError, TypeError):
        return False
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    if len(totals) != len(rows) or len(samples) != len(rows):
        return False
    if (values < 0).any() or (lengths > np.minimum(TAIL_SIZE, samples)).any():
        return False
    ends = np.cumsum(lengths)
    inside = np.ones(len(values), dtype=bool)  # pairs (i, i + 1) within one tail
    inside[ends[ends > 0] - 1] = False
    if (values[1:][inside[:-1]] > values[:-1][inside[:-1]]).any():
        return False
    held = np.zeros(len(rows), dtype=np.int64)
    filled = lengths > 0  # reduceat sums from each start to the next: empty tails left out of it
    if filled.any():
        held[filled] = np.add.reduceat(values, (ends - lengths)[filled])
    whole = lengths == samples
    return bool(not (held > totals).any() and not (held[whole] != totals[whole]).any())


def check_tail(tail: Any, total: int, count: int, where: str) -> None:
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
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    flat = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    starts = np.cumsum(lengths) - lengths  # each value's place in its tail: its index less its tail's start
    out[np.repeat(np.arange(len(rows)), lengths), np.arange(len(flat)) - np.repeat(starts, lengths)] = flat
    return out
