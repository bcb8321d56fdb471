#!/usr/bin/env python3
"""Token budgets at scale (issue 34, acceptance 3): the plan's memory and time from 10^6 to 10^8 samples.

Costs are generated per shard from a seed (log-normal, median 600; 1,000 samples a shard), so nothing
but the planner holds memory. In a fresh process per size: the dataset-wide weighed sums (every cost
column read once, as ``ShardDataset(batch_tokens=...)`` does when made), then one worker's plan (rank 0,
worker 0 of 64 ranks x 8 workers: its equal-cost slice, the probe, the target) and a walk over its
samples in order (what its batcher is fed). Peak RSS from ``getrusage`` in the child, over the
interpreter's own.

    .venv/bin/python benchmarks/budget/budget_plan_scale_bench.py           # ~2 minutes here
    .venv/bin/python benchmarks/budget/budget_plan_scale_bench.py --no-save

Results: markdown on stdout and ``benchmarks/results/budget-plan-scale-<date>.{md,json}``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # benchmarks/budget/<this> -> the repository
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"
PER_SHARD = 1_000


def child(samples: int) -> dict:
    import numpy as np

    from streamer.budget.plan import BudgetOptions, slot_items, slot_plan, weighed_sums

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    shards = samples // PER_SHARD
    counts = np.full(shards, PER_SHARD, dtype=np.int64)

    def column(shard: int) -> np.ndarray:
        rng = np.random.default_rng(shard)
        return np.exp(rng.normal(np.log(600), 0.99, PER_SHARD)).astype(np.int64) + 1

    options = BudgetOptions(budget=8192)
    started = time.perf_counter()
    sums = weighed_sums(counts, column, options)
    summed = time.perf_counter() - started
    started = time.perf_counter()
    plan = slot_plan(
        counts,
        sums,
        column,
        rank=0,
        world=64,
        worker=0,
        workers=8,
        seed=0,
        epoch=0,
        shuffle=True,
        options=options,
    )
    planned = time.perf_counter() - started
    started = time.perf_counter()
    walked = sum(1 for _ in slot_items(plan.segments, column, options))
    walking = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "samples": samples,
        "sums_s": summed,
        "plan_s": planned,
        "walk_s": walking,
        "slot_samples": walked,
        "target": plan.target,
        "peak_rss_mb": peak / 1024,
        "rss_over_start_mb": (peak - base) / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**6, 10**7, 10**8])
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    rows = []
    for size in args.sizes:
        command = [sys.executable, __file__, "--child", str(size)]
        rows.append(json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout))
    lines = [
        f"# Token budgets: the plan at scale ({datetime.date.today()})",
        "",
        "64 ranks x 8 workers, budget 8,192, 1,000 samples a shard; one worker's plan",
        "",
        "| samples | weighed sums (all columns) | one worker's plan | walk of its samples | its samples | "
        "peak RSS | over the start |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['samples']:,} | {r['sums_s']:.2f} s | {r['plan_s']:.3f} s | {r['walk_s']:.2f} s | "
            f"{r['slot_samples']:,} | {r['peak_rss_mb']:.0f} MB | {r['rss_over_start_mb']:.0f} MB |"
        )
    report = "\n".join(lines) + "\n"
    print(report)
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        stem = RESULTS / f"budget-plan-scale-{datetime.date.today()}"
        stem.with_suffix(".md").write_text(report)
        stem.with_suffix(".json").write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
