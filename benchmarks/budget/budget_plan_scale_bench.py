#!/usr/bin/env python3
"""Token budgets at scale (issue 34, acceptance 3): the plan's memory and time from 10^6 to 10^8 samples.

Costs are generated per shard from a seed (log-normal, median 600; 1,000 samples a shard), so nothing
but the planner holds memory. In a fresh process per size: the dataset-wide weighed sums (every cost
column read once, as ``ShardDataset(batch_tokens=...)`` does when made), then one worker's plan (rank 0,
worker 0 of 64 ranks x 8 workers: its equal-cost slice, the probe, the target) and a walk over its
samples in order (what its batcher is fed). Peak RSS from ``getrusage`` in the child, over the
interpreter's own. The weighed sums twice: from every column (an index without cost tails), and from the
index's sums and tails (``format/tails.py``), reading only the shards whose tails fall short: the
sidecars each reads (at construction a sidecar is a file, or an HTTP/S3 request) and its seconds.

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
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness package

from harness import RESULTS  # noqa: E402
from harness.report import save_results  # noqa: E402

PER_SHARD = 1_000


def child(samples: int) -> dict:
    import numpy as np

    from shardstream.format.tails import TAIL_SIZE
    from streamer.budget.plan import BudgetOptions, slot_items, slot_plan, weighed_sums

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    shards = samples // PER_SHARD
    counts = np.full(shards, PER_SHARD, dtype=np.int64)

    def column(shard: int) -> np.ndarray:
        rng = np.random.default_rng(shard)
        return np.exp(rng.normal(np.log(600), 0.99, PER_SHARD)).astype(np.int64) + 1

    options = BudgetOptions(budget=8192)
    # What the index holds (untimed): each shard's sum and its largest costs, as the packer writes them.
    raw = np.zeros(shards, dtype=np.int64)
    tails = np.zeros((shards, TAIL_SIZE), dtype=np.int64)
    for shard in range(shards):
        costs = column(shard)
        raw[shard], tails[shard] = costs.sum(), -np.sort(-costs)[:TAIL_SIZE]
    reads = [0]

    def counted(shard: int) -> np.ndarray:
        reads[0] += 1
        return column(shard)

    started = time.perf_counter()
    sums = weighed_sums(counts, counted, options)
    summed, read_all = time.perf_counter() - started, reads[0]
    reads[0] = 0
    started = time.perf_counter()
    from_tails = weighed_sums(counts, counted, options, sums=raw, tails=tails)
    tailed, read_tails = time.perf_counter() - started, reads[0]
    assert from_tails.tolist() == sums.tolist()
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
        "sidecars_read": read_all,
        "tails_sums_s": tailed,
        "tails_sidecars_read": read_tails,
        "shards": shards,
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
        "| samples | shards | weighed sums, no tails: sidecars read | seconds | with tails: sidecars read | "
        "seconds |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r['samples']:,} | {r['shards']:,} | {r['sidecars_read']:,} | {r['sums_s']:.2f} s | "
            f"{r['tails_sidecars_read']:,} | {r['tails_sums_s']:.3f} s |"
            for r in rows
        ),
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
        save_results(RESULTS, f"budget-plan-scale-{datetime.date.today()}", {"rows": rows}, report, print)


if __name__ == "__main__":
    main()
