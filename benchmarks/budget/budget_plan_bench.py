#!/usr/bin/env python3
"""Token budgets, planned (issue 34): how full the batches are, what is left over, and steps per rank.

Costs only (no shard is read): ``--samples`` (200,000) log-normal costs, median ~600 and p99 ~6,000
tokens (a LLaVA-like spread), in shards of ``--per-shard`` (1,000), budget ``--budget`` (8,192), on
``--world`` ranks x ``--workers`` workers. Samples over the budget are left out by every contender alike
(0.4% of them here; ours weighs them nothing when it deals the epoch, ``plan.weighed_sums``). Each
contender, over one epoch:

* ours, ``pack``: ``streamer.budget`` (equal-cost slices, one probed target, the paced batcher, window
  64): fill (batch tokens / budget), the share of samples left over, the steps of every rank and worker;
* ours, ``pad`` (window 1,024): padding (padded tokens not data / padded tokens), left over, steps;
* fixed-count batches of 4, 8 and 16 padded to their longest (each rank an equal share of samples):
  the padding they waste;
* an Energon-style greedy buffer per worker (first-fit decreasing over a buffer of 16 or 64, each rank
  packing its own equal share of samples, no target): its fill and its pack counts per rank, and what
  DDP would drop if every rank stopped at the fewest.

    .venv/bin/python benchmarks/budget/budget_plan_bench.py            # ~1 minute here
    .venv/bin/python benchmarks/budget/budget_plan_bench.py --no-save

Results: markdown on stdout and ``benchmarks/results/budget-plan-<date>.{md,json}``.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # benchmarks/budget/<this> -> the repository
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness package

from harness import RESULTS  # noqa: E402
from harness.report import save_results  # noqa: E402


def llava_costs(samples: int, seed: int = 0) -> np.ndarray:
    """Log-normal, median 600, p99 ~6,000 (sigma = ln(10) / 2.326)."""
    rng = np.random.default_rng(seed)
    return np.exp(rng.normal(np.log(600), np.log(10) / 2.326, samples)).astype(np.int64) + 1


def ours(costs: np.ndarray, args: argparse.Namespace, mode: str) -> dict[str, Any]:
    from streamer.budget.batcher import BatchCounts, paced_batches
    from streamer.budget.plan import BudgetOptions, slot_items, slot_plan, weighed_sums

    shards = [costs[i : i + args.per_shard] for i in range(0, len(costs), args.per_shard)]
    counts = np.array([len(s) for s in shards])
    options = BudgetOptions(budget=args.budget, mode=mode, window=64 if mode == "pack" else 1024)
    sums = weighed_sums(counts, shards.__getitem__, options)
    started = time.perf_counter()
    steps, real, padded, left, used = [], 0, 0, 0, 0
    moved, drift = [], []  # per worker: mean |position out - position in|, rank correlation of cost and time
    for rank in range(args.world):
        for worker in range(args.workers):
            place = {"rank": rank, "world": args.world, "worker": worker, "workers": args.workers}
            plan = slot_plan(
                counts, sums, shards.__getitem__, **place, seed=0, epoch=0, shuffle=True, options=options
            )
            tally = BatchCounts()
            items = list(slot_items(plan.segments, shards.__getitem__, options))
            came = {ident: n for n, (_, ident) in enumerate(items)}
            out: list[Any] = []
            batches = paced_batches(
                items,
                budget=args.budget,
                target=plan.target,
                cost=plan.cost,
                samples=plan.samples,
                window=options.window,
                mode=mode,
                counts=tally,
            )
            for batch in batches:
                batch_costs = [int(shards[s][i]) for s, i in batch]
                real += sum(batch_costs)
                padded += len(batch_costs) * max(batch_costs, default=0)
                used += len(batch)
                out += batch
            steps.append(tally.batches)
            moved.append(np.mean([abs(n - came[ident]) for n, ident in enumerate(out)]) if out else 0.0)
            out_costs = np.array([int(shards[s][i]) for s, i in out])
            if len(out_costs) > 2:
                ranks = np.argsort(np.argsort(out_costs))
                drift.append(float(np.corrcoef(np.arange(len(out_costs)), ranks)[0, 1]))
            left += tally.left_out
    admitted = int((costs <= args.budget).sum())
    batches = sum(steps)
    steps = [sum(steps[r * args.workers : (r + 1) * args.workers]) for r in range(args.world)]
    row = {
        "contender": f"ours, {mode}",
        "fill": real / (batches * args.budget),
        "left_over": left / admitted,
        "steps_min": min(steps),
        "steps_max": max(steps),
        "seconds": time.perf_counter() - started,
        "displacement": float(np.mean(moved)),
        "cost_time_correlation": float(np.mean(drift)) if drift else 0.0,
    }
    if mode == "pad":  # a packed batch is not padded: varlen attention reads it as its samples
        row["padding"] = 1 - real / padded if padded else 0.0
    return row


def fixed_count(costs: np.ndarray, args: argparse.Namespace, size: int) -> dict[str, Any]:
    kept = costs[costs <= args.budget]
    usable = len(kept) - len(kept) % size
    batches = kept[:usable].reshape(-1, size)
    real, padded = int(batches.sum()), int(batches.max(axis=1).sum() * size)
    return {"contender": f"fixed {size} a batch, padded", "padding": 1 - real / padded, "left_over": 0.0}


def greedy_buffer(costs: np.ndarray, args: argparse.Namespace, buffer: int) -> dict[str, Any]:
    """Energon's pattern: each worker packs its own share with first-fit decreasing over a buffer."""
    kept = costs[costs <= args.budget]
    slots = args.world * args.workers
    share = len(kept) // slots
    packs, real = [], 0
    for slot in range(slots):
        mine = kept[slot * share : (slot + 1) * share]
        count, pool = 0, []
        for cost in list(mine) + [None] * buffer:
            if cost is not None:
                pool.append(int(cost))
            if len(pool) >= buffer or (cost is None and pool):
                pool.sort(reverse=True)
                room, taken = args.budget, []
                for c in list(pool):
                    if c <= room:
                        taken.append(c)
                        room -= c
                for c in taken:
                    pool.remove(c)
                real += sum(taken)
                count += 1
        packs.append(count)
    per_rank = [sum(packs[r * args.workers : (r + 1) * args.workers]) for r in range(args.world)]
    dropped = sum(p - min(packs) for p in packs)
    return {
        "contender": f"greedy buffer {buffer} per worker (Energon-style)",
        "fill": real / (sum(packs) * args.budget),
        "steps_min": min(per_rank),
        "steps_max": max(per_rank),
        "dropped_if_equalised": dropped / sum(packs),
    }


def table(rows: list[dict[str, Any]]) -> str:
    def pct(row: dict[str, Any], key: str) -> str:
        return f"{100 * row[key]:.2f}%" if key in row else "-"

    lines = [
        "| contender | fill | padding | left over | steps per rank (min-max) | DDP drop to equalise |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        steps = f"{row['steps_min']}-{row['steps_max']}" if "steps_min" in row else "-"
        lines.append(
            f"| {row['contender']} | {pct(row, 'fill')} | {pct(row, 'padding')} | {pct(row, 'left_over')} "
            f"| {steps} | {pct(row, 'dropped_if_equalised')} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--per-shard", type=int, default=1_000)
    parser.add_argument("--budget", type=int, default=8_192)
    parser.add_argument("--world", type=int, default=8)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    costs = llava_costs(args.samples)
    over = float((costs > args.budget).mean())
    rows = [ours(costs, args, "pack"), ours(costs, args, "pad")]
    rows += [fixed_count(costs, args, size) for size in (4, 8, 16)]
    rows += [greedy_buffer(costs, args, size) for size in (16, 64)]
    head = (
        f"{args.samples:,} samples, median {int(np.median(costs))}, p99 {int(np.percentile(costs, 99))} "
        f"tokens; budget {args.budget:,}; {args.world} ranks x {args.workers} workers; "
        f"{100 * over:.2f}% of samples over the budget, left out by every contender"
    )
    order = "\n".join(
        f"- {row['contender']}: samples move {row['displacement']:.1f} places from the order the shuffle "
        f"buffer hands them out in (window {64 if 'pack' in row['contender'] else 1024}); rank correlation "
        f"of a sample's cost and its place in the epoch {row['cost_time_correlation']:+.3f} (0: no drift)"
        for row in rows[:2]
    )
    report = (
        f"# Token budgets, planned ({datetime.date.today()})\n\n{head}\n\n{table(rows)}\n\n"
        f"What batching does to the order (item 5: it must not sort the epoch by cost):\n\n{order}\n"
    )
    print(report)
    if not args.no_save:
        save_results(
            RESULTS, f"budget-plan-{datetime.date.today()}", {"args": vars(args), "rows": rows}, report, print
        )


if __name__ == "__main__":
    main()
