#!/usr/bin/env python3
"""Statistics overhead (issue 36, acceptance 3): reading with the loader's statistics on (the default) vs
``monitor=False``, side by side in one run.

Data, made once under ``--workdir``: ``--tiny`` (1,000,000) samples of a few bytes (``KEY.txt`` +
``KEY.cls``, 100 shards), and ``--jpegs`` (10,000) 256x256 JPEGs (quality 90) with a label, 10 shards.
Each run is a fresh process reading one epoch: the tiny samples raw (``decode=False``: what the
statistics cost against the cheapest sample there is), the JPEGs decoded to uint8 tensors
(``image="torch"``); each in one process (``num_workers=0``) and through a DataLoader with 2 workers
(lists as batches, 256 tiny samples or 32 images a batch). On and off alternate, ``--repeats`` (5)
times; the ratio is on / off in seconds, of the best of each (this machine is noisy) and the median of
the rounds' pairs (each on run right after its off run); and of the CPU seconds each run's processes
used (``getrusage`` of the children: the child and its DataLoader workers), medians.

    .venv/bin/python benchmarks/stream/stats_bench.py            # ~5 minutes here, data made once
    .venv/bin/python benchmarks/stream/stats_bench.py --no-save

Results: markdown on stdout and ``benchmarks/results/stats-overhead-<date>.{md,json}``.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # benchmarks/stream/<this> -> the repository
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness package

from harness import RESULTS, cpu_seconds  # noqa: E402
from harness.report import save_results  # noqa: E402


def write_shards(root: Path, samples, per_shard: int) -> Path:
    """``samples``: (key, [(ext, bytes)]) in order, written as shards of ``per_shard`` with an index."""
    from packer.sample import Sample
    from packer.shardwriter import TarShardWriter, encode_sample
    from shardstream.format import INDEX_NAME, DatasetIndex, shard_name, shard_pattern

    root.mkdir(parents=True, exist_ok=True)
    entries, writer, number, count = [], None, 0, 0
    for key, members in samples:
        if writer is None:
            writer = TarShardWriter(root / shard_name("s", number), max_size=None, max_count=None)
        chunks = encode_sample(Sample(key, key, tuple(members)))
        writer.add(key, chunks, sum(len(c) for c in chunks))
        count += 1
        if count == per_shard:
            entries.append(writer.close())
            writer, number, count = None, number + 1, 0
    if writer is not None:
        entries.append(writer.close())
    DatasetIndex(shard_pattern("s", len(entries)), entries).save(root / INDEX_NAME)
    return root / INDEX_NAME


def make_data(workdir: Path, tiny: int, jpegs: int) -> dict[str, Path]:
    import numpy as np
    from PIL import Image

    out = {"tiny": workdir / f"tiny-{tiny}" / "shardstream-index.json"}
    out["jpeg"] = workdir / f"jpeg-{jpegs}" / "shardstream-index.json"
    if not out["tiny"].exists():
        samples = ((f"t{i:08d}", [("txt", b"%d" % i), ("cls", b"%d" % (i % 10))]) for i in range(tiny))
        write_shards(out["tiny"].parent, samples, max(1, tiny // 100))
    if not out["jpeg"].exists():
        rng = np.random.default_rng(0)

        def images():
            for i in range(jpegs):
                pixels = rng.integers(0, 255, (256, 256, 3), dtype=np.uint8)
                buffer = io.BytesIO()
                Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
                yield f"j{i:06d}", [("jpg", buffer.getvalue()), ("cls", b"%d" % (i % 10))]

        write_shards(out["jpeg"].parent, images(), max(1, jpegs // 10))
    return out


def as_list(samples):
    return samples


def one_epoch(index: str, kind: str, monitor: bool, workers: int) -> dict:
    """Run in a fresh process: one epoch, its seconds and sample count."""
    from torch.utils.data import DataLoader

    from streamer import ShardDataset

    if kind == "tiny":
        ds = ShardDataset(index, decode=False, monitor=monitor)
        batch = 256
    else:
        ds = ShardDataset(index, image="torch", monitor=monitor)
        batch = 32
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    if workers:
        loader = DataLoader(ds, batch_size=batch, num_workers=workers, collate_fn=as_list)
        samples = sum(len(b) for b in loader)
        del loader  # its workers joined: their CPU is in RUSAGE_CHILDREN
    else:
        samples = sum(1 for _ in ds)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "samples": samples, "cpu": cpu_seconds() - cpu_before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", type=int, default=1_000_000)
    parser.add_argument("--jpegs", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workdir", default="/tmp/shardstream-stats-bench")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--from-json", help="report a saved run again (its JSON), running nothing")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        index, kind, monitor, workers = args.child
        print(json.dumps(one_epoch(index, kind, monitor == "on", int(workers))))
        return
    data = {} if args.from_json else make_data(Path(args.workdir), args.tiny, args.jpegs)

    def run(kind: str, monitor: str, workers: int) -> dict:
        command = [sys.executable, __file__, "--child", str(data[kind]), kind, monitor, str(workers)]
        return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)

    cases = [(kind, workers) for kind in ("tiny", "jpeg") for workers in (0, 2)]
    runs: dict[str, list[dict]] = {}
    if args.from_json:  # the report again from a saved run's JSON
        runs = json.loads(Path(args.from_json).read_text())["runs"]
    else:
        for _ in range(args.repeats):
            for kind, workers in cases:
                for monitor in ("off", "on"):
                    runs.setdefault(f"{kind} {workers} {monitor}", []).append(run(kind, monitor, workers))
    best = {name: min(r["seconds"] for r in rs) for name, rs in runs.items()}
    repeats = len(next(iter(runs.values())))
    lines = [
        f"# Statistics overhead ({datetime.date.today()})",
        "",
        f"{args.tiny:,} tiny samples raw, {args.jpegs:,} 256x256 JPEGs decoded to tensors; "
        f"one epoch a fresh process, on and off alternated, {repeats} rounds. Best: the best of each; "
        "paired: the median of each round's on / off (the two ran back to back)",
        "",
        "| data | workers | off (s, best) | on (s, best) | on / off, best | on / off, paired median "
        "| CPU on / off, median |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, workers in cases:
        off, on = best[f"{kind} {workers} off"], best[f"{kind} {workers} on"]
        pairs = [
            b["seconds"] / a["seconds"]
            for a, b in zip(runs[f"{kind} {workers} off"], runs[f"{kind} {workers} on"], strict=True)
        ]
        cpu = [
            statistics.median(r.get("cpu", float("nan")) for r in runs[f"{kind} {workers} {m}"])
            for m in ("on", "off")
        ]
        lines.append(
            f"| {kind} | {workers} | {off:.3f} | {on:.3f} | {on / off:.3f} | {statistics.median(pairs):.3f} "
            f"| {cpu[0] / cpu[1]:.3f} |"
        )
    report = "\n".join(lines) + "\n"
    print(report)
    if not args.no_save:
        save_results(
            RESULTS,
            f"stats-overhead-{datetime.date.today()}",
            {"args": vars(args), "runs": runs, "best": best},
            report,
            print,
        )


if __name__ == "__main__":
    main()
