"""Batch-stratified order: every batch of a worker holds the floor or ceiling of each source's share of it.

The worker's stream is cut into batches of ``batch`` samples (the DataLoader's, each from one worker; the
last may be short). Source j's share of a full batch is b_j x batch / length = f_j + its fraction; it gets
f_j of every full batch, and the fractions, which add up to a whole number F, become F extra places a
batch. Which sources take them is a Pfair schedule (Baruah et al. 1996): source j's extras are a task of
weight e_j / T over the T full batches, scheduled on F processors by PD² (Anderson and Srinivasan), which
is optimal for such tasks, so every batch hands out exactly F extras, no source takes two, and each
source's extras stay within one of e_j x t / T after every batch t. The short last batch takes its own
floors plus one extra for the sources with the largest remainders. Within a batch the places are
interleaved as ``Interleave`` does. Trade-off: O(sources) work per batch (vectorised) instead of
O(log sources) per sample; in exchange every batch, and so every global batch, is balanced, not only
every prefix, every budget is met exactly, and a source's running count stays within 2 of its share.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .mixplan import Interleave


class Stratified:
    """Sources in batch-stratified order over ``budgets``; state: counts now and at the batch's start."""

    def __init__(
        self, budgets: Sequence[int], batch: int, counts: Sequence[int] | None = None,
        batch_start: Sequence[int] | None = None,
    ) -> None:  # fmt: skip
        if batch < 1:
            raise ValueError(f"stratify (the batch size) must be >= 1, not {batch}")
        self.budgets = np.asarray(budgets, dtype=np.int64)
        self.length = int(self.budgets.sum())
        self.batch = batch
        k = len(self.budgets)
        self.counts = list(counts) if counts is not None else [0] * k
        start = np.asarray(batch_start if batch_start is not None else self.counts, dtype=np.int64)
        if len(self.counts) != k or len(start) != k or (start > np.asarray(self.counts)).any():
            raise ValueError(f"counts {self.counts} and batch start {start.tolist()} do not fit {k} sources")
        self._plan = _ExtraPlan(self.budgets, batch)
        self._start = start
        self.position = sum(self.counts)
        self._inside: tuple[Interleave, list[int]] | None = None
        if sum(self.counts) > int(start.sum()):  # saved inside a batch: that batch goes on
            self._inside = self._batch_order(start, np.asarray(self.counts) - start)

    def state(self) -> dict[str, Any]:
        return {"counts": list(self.counts), "batch_start": self._start.tolist()}

    def composition(self, start: np.ndarray) -> np.ndarray:
        """Samples of each source in the batch that begins when ``start`` of each have been read."""
        return self._plan.composition(start)

    def _batch_order(self, start: np.ndarray, done: np.ndarray | None = None) -> tuple[Interleave, list[int]]:
        q = self.composition(start)
        present = np.flatnonzero(q)  # a batch holds at most `batch` sources: interleave only those
        inside = Interleave(q[present].tolist(), None if done is None else done[present].tolist())
        return inside, present.tolist()

    def fill(self, n: int) -> list[int]:
        """The next sources, at most ``n`` and never past the current batch's end (empty at the end)."""
        if self._inside is None or self._inside[0].position >= self._inside[0].length:
            if self.position >= self.length:
                return []
            self._start = np.asarray(self.counts, dtype=np.int64)
            self._inside = self._batch_order(self._start)
        inside, present = self._inside
        out = [present[j] for j in inside.fill(n)]
        counts = self.counts
        for j in out:
            counts[j] += 1
        self.position += len(out)
        return out

    def __iter__(self) -> Iterator[int]:
        while chunk := self.fill(1):
            yield chunk[0]


class _ExtraPlan:
    """The fixed part of every batch and the Pfair tasks that share out the extra places (see above)."""

    def __init__(self, budgets: np.ndarray, batch: int) -> None:
        length = int(budgets.sum())
        self.batch, self.length = batch, length
        self.full, last = divmod(length, batch)  # T full batches, then a short one of `last` samples
        self.base = budgets * batch // max(length, 1)
        self.extras = batch - int(self.base.sum())  # F: extra places in every full batch
        self.last_base = budgets * last // max(length, 1)
        self.last = np.zeros_like(budgets)  # the short batch's extras: the largest remainders
        if last:
            remainders = budgets * last % length
            ranked = np.lexsort((np.arange(len(budgets)), -remainders))
            self.last[ranked[: last - int(self.last_base.sum())]] = 1
        # e_j: extras source j takes over the full batches; 0 <= e_j <= T, and they add up to T x F.
        self.tasks = budgets - self.full * self.base - self.last_base - self.last

    def composition(self, start: np.ndarray) -> np.ndarray:
        t = int(start.sum()) // self.batch
        if t >= self.full:
            return self.last_base + self.last
        q = self.base.copy()
        q[self._pd2(start - t * self.base, t)] += 1
        return q

    def _pd2(self, given: np.ndarray, t: int) -> np.ndarray:
        """The F sources that take an extra in full batch t, ``given`` extras so far: PD² priorities."""
        e, slots = self.tasks, self.full
        k = given + 1  # each source's next subtask (1-based); it may run in slots [release, deadline)
        weight = np.maximum(e, 1)
        release = (k - 1) * slots // weight
        deadline = _ceil(k * slots, weight)
        ready = np.flatnonzero((k <= e) & (release <= t))
        d, w = deadline[ready], e[ready]
        successor = (k[ready] * slots % w != 0).astype(np.int64)  # its window overlaps the next one's
        # Heavy tasks (weight >= 1/2, below 1) tie-break on the group deadline, ceil(ceil(d (1 - wt)) /
        # (1 - wt)) with wt = e / T: the later one goes first.
        spare = slots - w
        group = _ceil(_ceil(d * spare, slots) * slots, np.maximum(spare, 1))
        group = np.where((2 * w >= slots) & (w < slots), group, 0)
        order = ready[np.lexsort((ready, -group, -successor, d))]
        if len(order) < self.extras:  # PD² is optimal here (total weight F): this would be a bug of ours
            raise RuntimeError(
                f"stratified order: {self.extras} extra places in batch {t} but {len(order)} sources ready "
                f"(tasks {e.tolist()}, {slots} batches); please report this"
            )
        return order[: self.extras]


def _ceil(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    return -(-a // b)
