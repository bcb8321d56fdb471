#!/usr/bin/env python3
"""Issue 32 before/after: our ShardDataset alone in two checkouts, alternated run by run on the same data.

Each run is a fresh interpreter with ``PYTHONPATH=<checkout>`` (torch imported before the clock), which
builds one ``ShardDataset`` and reads ``--epochs`` epochs of it, touching every member's first byte; the
run's score is its best epoch (the first one, with construction, is kept apart). Every trial runs each
mode once per side in a rotated order, and runs BEFORE twice (B, B2) so B2/B measures the noise:

    .venv/bin/python benchmarks/stream/issue32_alt.py --before /tmp/wt-before --after /work/main --trials 5

The modes (``MODES``) cover the read paths the issue-32 checks touch: front to back with the sidecar's ends
(tiny samples; 12 KB JPEGs), deferred reads (pread of the sample plus the next header), zero_copy (the
mapped shard), each at the dataset's defaults otherwise. One JSON line per run goes to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TINY = "/tmp/ss-stream/tiny-50000/packed/shardstream-index.json"  # 50,000 x ~60 B JSON, 10 shards
J12 = "/tmp/ss2-j20k/jpeg-20000-256/packed/shardstream-index.json"  # 20,000 x ~12 KB JPEG + cls
J35 = "/tmp/rawpeers/data-2000-seed0/ours/data/shardstream-index.json"  # 2,000 x ~35 KB JPEG + cls
MODES: dict[str, tuple[str, dict[str, Any], int]] = {  # name -> (index, ShardDataset options, epochs)
    "tiny, default (front to back into the buffer)": (TINY, {"decode": False}, 8),
    "tiny, shuffle=False (front to back)": (TINY, {"decode": False, "shuffle": False}, 8),
    "tiny, json decoded (default)": (TINY, {}, 4),
    "jpeg 12 KB, default (front to back into the buffer)": (J12, {"decode": False}, 6),
    "jpeg 12 KB, defer_reads=True (pread + next header)": (J12, {"decode": False, "defer_reads": True}, 6),
    "jpeg 12 KB, defer_reads=True, zero_copy": (
        J12,
        {"decode": False, "defer_reads": True, "zero_copy": True},
        6,
    ),
    "jpeg 35 KB, default (deferred)": (J35, {"decode": False}, 20),
    "jpeg 35 KB, zero_copy (deferred, mapped)": (J35, {"decode": False, "zero_copy": True}, 20),
}


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One run: import, construct, read the epochs; per-epoch seconds and where the code came from."""
    import torch  # noqa: F401

    import shardstream.format.tarread as tarread
    import streamer
    from streamer import ShardDataset

    started = time.perf_counter()
    ds = ShardDataset(spec["index"], **spec["options"])
    built = time.perf_counter() - started
    epochs, counts = [], []
    for _ in range(spec["epochs"]):
        t0, n, nbytes = time.perf_counter(), 0, 0
        for sample in ds:
            n += 1
            for k, v in sample.items():
                if not k.startswith("__") and len(v):
                    nbytes += v[0] if isinstance(v, (bytes, bytearray, memoryview)) else 1
        epochs.append(time.perf_counter() - t0)
        counts.append(n)
    return {
        "built": built,
        "epochs": epochs,
        "samples": counts,
        "streamer": streamer.__file__,
        "tarread": tarread.__file__,
        "has_names_key": hasattr(tarread, "names_key"),
    }


def run_one(tree: str, mode: str) -> dict[str, Any]:
    index, options, epochs = MODES[mode]
    spec = {"index": index, "options": options, "epochs": epochs}
    env = {**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"}
    out = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if not got["streamer"].startswith(tree.rstrip("/") + "/"):
        raise SystemExit(f"{tree}: streamer imported from {got['streamer']}")
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", default="/tmp/wt-before")
    parser.add_argument("--after", default=str(Path(__file__).resolve().parents[2]))
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--only", action="append", help="a substring of the modes to run (repeatable)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/issue32-alt.jsonl"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    sides = {"B": args.before, "A": args.after, "B2": args.before}
    orders = (("B", "A", "B2"), ("A", "B2", "B"), ("B2", "B", "A"))
    modes = [m for m in MODES if not args.only or any(s in m for s in args.only)]
    best: dict[tuple[str, str], list[float]] = {}
    with args.out.open("a") as log:
        for trial in range(args.trials):
            for mode in modes:
                for side in orders[trial % 3]:
                    got = run_one(sides[side], mode)
                    got.update(side=side, mode=mode, trial=trial, load=os.getloadavg()[0])
                    log.write(json.dumps(got) + "\n")
                    log.flush()
                    rate = got["samples"][-1] / min(got["epochs"][1:] or got["epochs"])
                    best.setdefault((mode, side), []).append(rate)
                    print(f"{trial} {side:2} {rate:12,.0f}/s load {got['load']:.2f}  {mode}", flush=True)
    print("\nmode | before best | after best | after/before (best) | median A/B | B2/B (noise)")
    for mode in modes:
        b, a, b2 = (best[(mode, s)] for s in ("B", "A", "B2"))
        print(
            f"{mode} | {max(b):,.0f} | {max(a):,.0f} | {max(a) / max(b):.3f} | "
            f"{statistics.median(a) / statistics.median(b):.3f} | {max(b2) / max(b):.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
