"""Batch-stratified order: every batch of a worker holds the floor or ceiling of each source's share of it.

The worker's stream is cut into batches of ``batch`` samples (the DataLoader's, each from one worker; the
last may be short). Source j's share of a full batch is b_j x batch / length = f_j + its fraction; it gets
f_j of every full batch, and the fractions, which add up to a whole number F, become F extra places a
batch. Which sources take them is a Pfair schedule (Baruah et al. 1996): source j's extras are a task of
weight e_j / T over the T full batches, scheduled on F processors by PD² (Anderson and Srinivasan), which
is optimal for such tasks, so every batch hands out exactly F extras, no source takes two, and each
source's extras stay within one of e_j x t / T after every batch t. The short last batch takes its own
floors plus one extra for the sources with the largest remainders. Within a batch the places are
interleaved as ``Interleave`` does. Trade-off: a heap operation per extra place and an interleave set up
per batch, where the plain order needs O(log sources) per sample; in exchange every batch, and so every
global batch, is balanced, not only every prefix, every budget is met exactly, and a source's running
count stays within 2 of its share.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from typing import Any

from .plan import Interleave

Key = int  # a subtask's PD² priority, smaller first: deadline, successor bit, group deadline, then j


class Stratified:
    """Sources in batch-stratified order over ``budgets``; state: counts now and at the batch's start."""

    def __init__(
        self,
        budgets: Sequence[int],
        batch: int,
        counts: Sequence[int] | None = None,
        batch_start: Sequence[int] | None = None,
    ) -> None:
        if batch < 1:
            raise ValueError(f"stratify (the batch size) must be >= 1, not {batch}")
        self.budgets = [int(b) for b in budgets]
        self.length = sum(self.budgets)
        k = len(self.budgets)
        self.counts = list(counts) if counts is not None else [0] * k
        start = list(batch_start) if batch_start is not None else list(self.counts)
        if len(self.counts) != k or len(start) != k or any(map(int.__gt__, start, self.counts)):
            raise ValueError(f"counts {self.counts} and batch start {start} do not fit {k} sources")
        self._plan = _ExtraPlan(self.budgets, batch)
        self._start = start
        self.position = sum(self.counts)
        self._inside: tuple[Interleave, list[int]] | None = None
        if self.position > sum(start):  # saved inside a batch: that batch goes on
            self._inside = self._batch_order(start, [c - s for c, s in zip(self.counts, start, strict=True)])

    def state(self) -> dict[str, Any]:
        return {"counts": list(self.counts), "batch_start": list(self._start)}

    def composition(self, start: Sequence[int]) -> list[int]:
        """Samples of each source in the batch that begins when ``start`` of each have been read."""
        return self._plan.composition(start)

    def _batch_order(self, start: list[int], done: list[int] | None = None) -> tuple[Interleave, list[int]]:
        q = self.composition(start)
        present = [j for j, n in enumerate(q) if n]  # a batch holds at most `batch` sources: only those
        inside = Interleave([q[j] for j in present], None if done is None else [done[j] for j in present])
        return inside, present

    def fill(self, n: int) -> list[int]:
        """The next sources, at most ``n`` and never past the current batch's end (empty at the end)."""
        if self._inside is None or self._inside[0].position >= self._inside[0].length:
            if self.position >= self.length:
                return []
            self._start = list(self.counts)
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
    """The fixed part of every batch, and the Pfair tasks that share out the extra places (see above).

    The schedule is kept in two heaps, as ``Interleave`` keeps its own: each source's next subtask, ready
    (by PD² priority) or waiting for its release. They follow the batches in order and are rebuilt from
    the counts when asked for any other batch (a restore), so the counts stay the whole state.
    """

    def __init__(self, budgets: list[int], batch: int) -> None:
        length = sum(budgets)
        self.batch = batch
        self.full, last = divmod(length, batch)  # T full batches, then a short one of `last` samples
        whole = max(length, 1)
        self.base = [b * batch // whole for b in budgets]
        self.extras = batch - sum(self.base)  # F: extra places in every full batch
        self.last_batch = [b * last // whole for b in budgets]  # the short batch: floors, and one extra
        if last:  # for each of the largest remainders
            ranked = sorted(range(len(budgets)), key=lambda j: (-(budgets[j] * last % length), j))
            for j in ranked[: last - sum(self.last_batch)]:
                self.last_batch[j] += 1
        # e_j: extras source j takes over the full batches; 0 <= e_j <= T, and they add up to T x F.
        self.tasks = [
            b - self.full * a - c for b, a, c in zip(budgets, self.base, self.last_batch, strict=True)
        ]
        self._given: list[int] = []
        self._ready: list[Key] = []
        self._waiting: list[tuple[int, Key]] = []
        self._next = -1  # the full batch the heaps stand before

    def composition(self, start: Sequence[int]) -> list[int]:
        t = sum(start) // self.batch
        if t >= self.full:
            return list(self.last_batch)
        if t != self._next:
            self._rebuild([s - t * a for s, a in zip(start, self.base, strict=True)], t)
        q = list(self.base)
        for j in self._take(t):
            q[j] += 1
        self._next = t + 1
        return q

    def _subtask(self, j: int, k: int) -> tuple[int, Key]:
        """(release, priority) of source j's k-th extra (1-based): it may go to full batches [release, d).

        The priority is one int, (deadline, 1 - successor bit, G - 1 - group deadline, j) in mixed radix
        (group deadlines are at most 2T + 1 < G), so the heaps compare ints, not tuples."""
        e, slots = self.tasks[j], self.full
        deadline = _ceil(k * slots, e)
        group = 0
        if slots <= 2 * e < 2 * slots:  # heavy (weight in [1/2, 1)): the group deadline breaks ties
            spare = slots - e
            group = _ceil(_ceil(deadline * spare, slots) * slots, spare)
        radix = 2 * slots + 2
        key = ((2 * deadline + (k * slots % e == 0)) * radix + radix - 1 - group) * len(self.tasks) + j
        return (k - 1) * slots // e, key

    def _rebuild(self, given: list[int], t: int) -> None:
        self._given, self._ready, self._waiting = list(given), [], []
        for j, (done, e) in enumerate(zip(given, self.tasks, strict=True)):
            if done < e:
                release, key = self._subtask(j, done + 1)
                if release <= t:
                    self._ready.append(key)
                else:
                    self._waiting.append((release, key))
        heapq.heapify(self._ready)
        heapq.heapify(self._waiting)

    def _take(self, t: int) -> list[int]:
        """The F sources that take an extra in full batch t: the highest PD² priorities among those ready."""
        ready, waiting, given, tasks = self._ready, self._waiting, self._given, self.tasks
        push, pop = heapq.heappush, heapq.heappop
        while waiting and waiting[0][0] <= t:
            push(ready, pop(waiting)[1])
        if len(ready) < self.extras:  # PD² is optimal here (total weight F): this would be a bug of ours
            raise RuntimeError(
                f"stratified order: {self.extras} extra places in batch {t} but {len(ready)} sources ready "
                f"(tasks {tasks}, {self.full} batches); please report this"
            )
        sources = len(tasks)
        taken = [pop(ready) % sources for _ in range(self.extras)]
        for j in taken:  # each one's next extra: not before the next batch, so one a batch at most
            done = given[j] = given[j] + 1
            if done < tasks[j]:
                release, key = self._subtask(j, done + 1)
                push(waiting, (release if release > t else t + 1, key))
        return taken


def _ceil(a: int, b: int) -> int:
    return -(-a // b)
