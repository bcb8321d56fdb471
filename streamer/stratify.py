"""Batch-stratified order: every batch of a worker holds the floor or ceiling of each source's share of it.

The worker's stream is cut into batches of ``batch`` samples (the DataLoader's, each from one worker).
Each source gets floor(share x batch) of every batch; the batch's remaining places go one each, earliest
deadline first (the source whose count falls below floor(share x position) soonest), where a source owed
as many extras as batches are left goes first, so every budget is met exactly by the worker's last batch.
Within a batch the places are interleaved as ``Interleave`` does. Trade-off: O(sources) work per batch
(vectorised) instead of O(log sources) per sample; in exchange every batch, and so every global batch,
is balanced, not only every prefix.
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
        self._start = start
        self.position = sum(self.counts)
        self._inside: tuple[Interleave, list[int]] | None = None
        if sum(self.counts) > int(start.sum()):  # saved inside a batch: that batch goes on
            self._inside = self._batch_order(start, np.asarray(self.counts) - start)

    def state(self) -> dict[str, Any]:
        return {"counts": list(self.counts), "batch_start": self._start.tolist()}

    def composition(self, start: np.ndarray) -> np.ndarray:
        """Samples of each source in the batch that begins when ``start`` of each have been read."""
        budgets, length = self.budgets, self.length
        first = int(start.sum())
        size = min(self.batch, length - first)
        base = budgets * size // length
        extras = size - int(base.sum())
        # Extras still owed to each source after this batch's base and the bases of the batches after it.
        full_after = max(0, (length - first - size) // self.batch)
        last = (length - first - size) - full_after * self.batch
        owed = (
            budgets - start - base - full_after * (budgets * self.batch // length) - budgets * last // length
        )
        batches_left = 1 + full_after + (1 if last else 0)
        # Earliest deadline first: the extra sample that floor(share x position) demands soonest, among
        # those ceil(share x batch end) allows; a source owed an extra in every batch left goes first.
        need = start + base + 1
        allowed = need * length < budgets * (first + size) + length
        deadline = np.where(budgets > 0, -(-need * length // np.maximum(budgets, 1)), np.iinfo(np.int64).max)
        forced = np.flatnonzero(owed >= batches_left)
        candidates = (owed > 0) & (owed < batches_left) & allowed
        order = np.lexsort((np.arange(len(budgets)), deadline))
        rest = [j for j in order if candidates[j]][: max(0, extras - len(forced))]
        q = base.copy()
        q[np.concatenate([forced, np.asarray(rest, dtype=np.int64)])] += 1
        return q

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
