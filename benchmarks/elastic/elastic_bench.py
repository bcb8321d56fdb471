#!/usr/bin/env python3
"""Elastic restore at scale: a 10^7-shard index checkpointed on 64 ranks x 8 workers, restored on 48 x 6.

Each figure comes from a fresh subprocess (seconds, peak traced memory, state sizes):

1. ``load``     what ``ShardDataset.load_state_dict(states)`` does with the gathered list: check every
                state and compute what the epoch has left (``restore.elastic_pending``), the old epoch's
                shard order included.
2. ``worker``   what each new worker adds before its first sample: unpickling the pending restore it
                is handed, its deal of the leftover and its reader's segments (the epoch's shard order
                again, as every epoch start computes it).
3. ``epoch``    for scale: what a worker's ordinary epoch start costs on the same index
                (``placement.counted_segments``), restore or not.

The old states are made the way a run leaves them: every worker a third of the way through its slice, its
shuffle buffer full (1,000 ids). Counts are random, 1-200 samples a shard (about 10^9 samples).
Target: restore (1 + 2) under 1 s.

    python3 benchmarks/elastic/elastic_bench.py            # 3 rounds
    python3 benchmarks/elastic/elastic_bench.py --quick    # 1 round

Results: markdown on stdout, plus ``benchmarks/results/elastic-<date>[-quick].{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import RESULTS, child_cmd, spawn
from harness.report import machine_facts, save_results, stamp, table

SHARDS = 10_000_000
OLD, NEW = (64, 8), (48, 6)
BUFFER = 1000


def _shards() -> Any:
    import numpy as np

    from shardstream.format import BracePattern
    from streamer.placement.shards import ShardList

    counts = np.random.default_rng(0).integers(1, 201, SHARDS, dtype=np.int64)
    return ShardList(BracePattern("train-{0000000..9999999}.tar"), counts, "bench")


def _old_states(shards: Any, identity: dict[str, Any]) -> list[dict[str, Any]]:
    """Every old rank's StatefulDataLoader state: each worker a third of the way in, its buffer full."""
    from streamer.elastic.deal import Stream, original_plan
    from streamer.placement.segments import shard_order

    world, workers = OLD
    total = int(shards.counts.sum())
    stream = Stream(shards.counts, shard_order(len(shards), 0, 0, True))
    states = []
    for rank in range(world):
        snapshots = {}
        for worker in range(workers):
            plan = original_plan(
                total, rank=rank, world=world, worker=worker, workers=workers, remainder="drop"
            )
            segments = len(stream.segments(plan)) if rank == worker == 0 else SHARDS // (world * workers)
            g = rank * workers + worker
            buffer = [[(g * 7919 + i) % SHARDS, i] for i in range(BUFFER)]
            reader = {"segment": segments // 3, "done": 1}
            node = {"source": reader, "buffer": buffer, "rng": [3, [0] * 625, None]}
            dataset_state = {
                "epoch": 0,
                "place": [rank, world, worker, workers],
                "node": node,
                "plan": None,
                **identity,
            }
            snapshots[f"worker_{worker}"] = {"worker_id": worker, "dataset_state": dataset_state}
        states.append(
            {
                "_snapshot": {"_snapshot_step": 1000, "_worker_snapshots": snapshots},
                "_steps_since_snapshot": 0,
                "_iterator_finished": False,
            }
        )
    return states


def child(kind: str) -> None:
    import tracemalloc

    from streamer.elastic.deal import Stream, deal
    from streamer.elastic.restore import dataset_digest, elastic_pending
    from streamer.placement.segments import counted_segments, shard_order

    shards = _shards()
    identity = {"dataset": dataset_digest(shards), "seed": 0, "shuffle": True, "remainder": "drop"}
    out: dict[str, Any] = {}
    if kind == "epoch":
        tracemalloc.start()
        started = time.perf_counter()
        segments = counted_segments(shards.counts, rank=47, world=48, worker=5, workers=6, seed=0, epoch=0)
        out = {"seconds": time.perf_counter() - started, "segments": len(segments)}
    else:
        states = _old_states(shards, identity)
        pending = elastic_pending(states, identity=identity, shards=shards)
        if kind == "load":
            out["gathered_bytes"] = len(pickle.dumps(states))
            out["per_rank_bytes"] = len(pickle.dumps(states[0]))
            out["pending_bytes"] = len(pickle.dumps(pending))  # what each new worker is handed
            tracemalloc.start()
            started = time.perf_counter()
            elastic_pending(states, identity=identity, shards=shards)
            out["seconds"] = time.perf_counter() - started
        else:
            sent = pickle.dumps(pending)  # each worker is handed the dataset, pending restore and all
            tracemalloc.start()
            started = time.perf_counter()
            world, workers = NEW
            left = pickle.loads(sent)["left"]
            plan = deal(
                left, rank=world - 1, world=world, worker=workers - 1, workers=workers, remainder="drop"
            )
            segments = Stream(shards.counts, shard_order(SHARDS, 0, 0, True)).segments(plan)
            out = {
                "seconds": time.perf_counter() - started,
                "segments": len(segments),
                "ids": len(plan.ids),
                "plan_bytes": len(pickle.dumps(plan.to_state())),
            }
    out["traced_peak"] = tracemalloc.get_traced_memory()[1]
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    repeats = 1 if args.quick else 3
    runs: dict[str, list[dict[str, Any]]] = {"load": [], "worker": [], "epoch": []}
    for round_ in range(repeats):
        for kind in runs:
            _, maxrss, stdout, _ = spawn(child_cmd(__file__, kind))
            runs[kind].append({**json.loads(stdout.strip().splitlines()[-1]), "maxrss_kb": maxrss})
            print(f"round {round_ + 1} {kind}: {runs[kind][-1]['seconds']:.3f} s", file=sys.stderr)
    best = {kind: min(rs, key=lambda r: r["seconds"]) for kind, rs in runs.items()}
    restore = best["load"]["seconds"] + best["worker"]["seconds"]
    result = {
        "machine": machine_facts(),
        "shards": SHARDS,
        "old": OLD,
        "new": NEW,
        "buffer": BUFFER,
        "runs": runs,
        "restore_seconds": restore,
    }
    mib = 1 << 20
    lines = [
        f"# Elastic restore ({result['machine']['date']}, {SHARDS:,} shards, {OLD[0]} x {OLD[1]} -> "
        f"{NEW[0]} x {NEW[1]}, buffer {BUFFER}, best of {repeats})",
        "",
        table(
            ["step", "seconds", "peak traced MiB"],
            [[k, f"{b['seconds']:.3f}", f"{b['traced_peak'] / mib:.1f}"] for k, b in best.items()],
        ),
        "",
        f"Restore (load + a new worker's start): **{restore:.3f} s** (target < 1 s)",
        "",
        f"Gathered state: {best['load']['gathered_bytes'] / mib:.2f} MiB pickled "
        f"({best['load']['per_rank_bytes'] / 1024:.0f} KiB a rank, of which buffered ids are most); "
        f"the pending leftover {best['load']['pending_bytes'] / mib:.2f} MiB; a new worker's plan "
        f"{best['worker']['plan_bytes'] / 1024:.1f} KiB ({best['worker']['ids']} ids).",
    ]
    markdown = "\n".join(lines) + "\n"
    print(markdown)
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    save_results(RESULTS, f"elastic-{stamp(args.quick)}", result, markdown, log)


if __name__ == "__main__":
    main()
