#!/usr/bin/env python3
"""A Mixture's elastic restore at scale: 10 sources of 10^5 shards each, 64 ranks x 8 workers -> 48 x 6.

Each figure comes from a fresh subprocess (seconds, peak traced memory, state sizes):

1. ``load``    ``Mixture.load_state_dict(states)`` with the gathered list: every state checked, each
               source's unread part found (runs and the rest of each worker's window).
2. ``worker``  what each new worker adds before its first sample: unpickling the pending restore it is
               handed (the mixture pickled to it) and its deal of every source.

The old states are made the way a run leaves them: every worker a third of the way through each source's
budget, windows part-read (buffer 1,000 shared by the sources). The indexes list shards that are never
opened: planning needs only their counts (1-200 samples a shard). Target: as for one dataset, under 1 s.

    python3 benchmarks/elastic/mixture_elastic_bench.py            # 3 rounds
    python3 benchmarks/elastic/mixture_elastic_bench.py --quick    # 1 round

Results: markdown on stdout, plus ``benchmarks/results/mixture-elastic-<date>[-quick].{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import RESULTS, child_cmd, spawn
from harness.report import machine_facts, save_results, stamp, table

SOURCES, SHARDS = 10, 100_000
OLD, NEW = (64, 8), (48, 6)
BUFFER = 1000


def _indexes(root: Path) -> list[Path]:
    import numpy as np

    from shardstream.format import INDEX_NAME, DatasetIndex, ShardEntry, shard_name, shard_pattern

    folders = []
    rng = np.random.default_rng(0)
    for j in range(SOURCES):
        folder = root / f"source-{j}"
        folder.mkdir()
        counts = rng.integers(1, 201, SHARDS).tolist()
        digest = f"{j:032x}{{:032x}}"  # never checked: the shards are never opened
        entries = [
            ShardEntry(shard_name("s", i), n, 1000 * n, digest.format(i)) for i, n in enumerate(counts)
        ]
        DatasetIndex(shard_pattern("s", SHARDS), entries).save(folder / INDEX_NAME)
        folders.append(folder)
    return folders


def _mixture(folders: list[Path], world: int) -> Any:
    from streamer.mixture.mixture import Mixture

    sources = [{"path": str(f), "weight": j + 1, "decode": False} for j, f in enumerate(folders)]
    return Mixture(sources, buffer_size=BUFFER, rank=0, world_size=world)


def _old_states(mixture: Any) -> list[dict[str, Any]]:
    world, workers = OLD
    plan = mixture.plan(world, workers)
    sources = mixture._sources_at(0, workers)
    states = []
    for rank in range(world):
        snapshots = {}
        for worker in range(workers):
            counts = [b // 3 for b in plan.budgets(worker)]
            state = {
                "epoch": 0,
                "place": [rank, world, worker, workers],
                "node": {"counts": counts},
                "left": plan.worker_length(worker) - sum(counts),
                "sources": sources,
                **mixture.identity(),
            }
            snapshots[f"worker_{worker}"] = {"worker_id": worker, "dataset_state": state}
        states.append(
            {
                "_snapshot": {"_snapshot_step": 100, "_worker_snapshots": snapshots},
                "_steps_since_snapshot": 0,
                "_iterator_finished": False,
            }
        )
    return states


def child(kind: str, root: str) -> None:
    import tracemalloc

    from streamer.mixture.resume import resume_point

    folders = sorted(Path(root).glob("source-*"))
    old = _mixture(folders, OLD[0])
    states = _old_states(old)
    out: dict[str, Any] = {}
    new = _mixture(folders, NEW[0])
    if kind == "load":
        out["per_rank_bytes"] = len(pickle.dumps(states[0]))
        out["gathered_bytes"] = len(pickle.dumps(states))
        started = time.perf_counter()
        new.load_state_dict(states)
        out["seconds"] = time.perf_counter() - started
        out["pending_bytes"] = len(pickle.dumps(new._pending))
        out["spans"] = sum(len(p.spans) for p in new._pending["elastic"].values())
        tracemalloc.start()  # a second, traced run for the peak: tracing slows Python code ~3x
        new.load_state_dict(states)
    else:
        new.load_state_dict(states)
        sent = pickle.dumps(new)  # each worker is handed the mixture, pending restore and all
        world, workers = NEW

        def start() -> Any:
            mixture = pickle.loads(sent)
            place = (world - 1, world, workers - 1, workers)
            return resume_point(mixture.shape, mixture._pending, place, mixture.epoch)[2]

        started = time.perf_counter()
        budgets, plans, _ = start()
        out["seconds"] = time.perf_counter() - started
        state = {"budgets": budgets, "spans": [[list(s) for s in p.spans] for p in plans]}
        out["plan_bytes"] = len(pickle.dumps(state))
        tracemalloc.start()  # a second, traced run for the peak
        start()
    out["traced_peak"] = tracemalloc.get_traced_memory()[1]
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child")
    parser.add_argument("--root")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.root)
        return
    repeats = 1 if args.quick else 3
    runs: dict[str, list[dict[str, Any]]] = {"load": [], "worker": []}
    with tempfile.TemporaryDirectory() as root:
        _indexes(Path(root))
        for round_ in range(repeats):
            for kind in runs:
                _, maxrss, stdout, _ = spawn(child_cmd(__file__, kind, "--root", root))
                runs[kind].append({**json.loads(stdout.strip().splitlines()[-1]), "maxrss_kb": maxrss})
                print(f"round {round_ + 1} {kind}: {runs[kind][-1]['seconds']:.3f} s", file=sys.stderr)
    best = {kind: min(rs, key=lambda r: r["seconds"]) for kind, rs in runs.items()}
    restore = best["load"]["seconds"] + best["worker"]["seconds"]
    result = {
        "machine": machine_facts(),
        "sources": SOURCES,
        "shards_per_source": SHARDS,
        "old": OLD,
        "new": NEW,
        "buffer": BUFFER,
        "runs": runs,
        "restore_seconds": restore,
    }
    mib = 1 << 20
    load, worker = best["load"], best["worker"]
    lines = [
        f"# Mixture elastic restore ({result['machine']['date']}, {SOURCES} sources x {SHARDS:,} shards, "
        f"{OLD[0]} x {OLD[1]} -> {NEW[0]} x {NEW[1]}, buffer {BUFFER}, best of {repeats})",
        "",
        table(
            ["step", "seconds", "peak traced MiB"],
            [[k, f"{b['seconds']:.3f}", f"{b['traced_peak'] / mib:.1f}"] for k, b in best.items()],
        ),
        "",
        f"Restore (load + a new worker's start): **{restore:.3f} s**",
        "",
        f"Gathered state: {load['gathered_bytes'] / mib:.2f} MiB pickled "
        f"({load['per_rank_bytes'] / 1024:.1f} KiB a rank); the pending restore "
        f"{load['pending_bytes'] / mib:.2f} MiB ({load['spans']:,} spans over the sources); a new "
        f"worker's plan {worker['plan_bytes'] / 1024:.1f} KiB.",
    ]
    markdown = "\n".join(lines) + "\n"
    print(markdown)
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    save_results(RESULTS, f"mixture-elastic-{stamp(args.quick)}", result, markdown, log)


if __name__ == "__main__":
    main()
