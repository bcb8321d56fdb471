#!/usr/bin/env python3
"""Shuffle quality (issue 15): how far the buffer moves samples, and how soon the first one comes.

Data: ``--samples`` (20,000) samples of ~``--size`` (35,000) bytes in ``--shards`` (20) shards, written with
the packer's shard writer, sidecars and index, under ``--workdir``. Every configuration reads one epoch
of ``ShardDataset(index, decode=False, seed=0, buffer_size=B)``. The reading order (what enters the
buffer) is the same epoch read with ``buffer_size=1``: the shards in the epoch's order, each front to
back. For each configuration, over the epoch:

* displacement: mean |position out - position in|, over all samples and over the first B handed out
  (the early stream is where a buffer that starts before it is full is weakest);
* same-shard pairs: the share of consecutive samples from one shard (the floor, for a uniform shuffle
  over the whole epoch, is 1 / shards);
* first sample: ms from the dataset's construction to the first sample in hand (the least of
  ``--repeats`` fresh iterators; the page cache is warm);
* identical: whether the stream equals the front-to-back reader's sample for sample.

Configurations: ``defer_reads=False`` with ``initial`` B (the buffer filled with bytes before the first
sample: the behaviour before deferred reads), B/10 and B/100; ``defer_reads=True`` (the default: ids in
the buffer, each sample read as it leaves), with B and with 10B (ids cost no bytes in memory; the samples
between the hand-out and the newest id are a 10x wider window of the page cache).

    .venv/bin/python benchmarks/stream/shuffle_quality_bench.py              # ~1 minute here, data made once
    .venv/bin/python benchmarks/stream/shuffle_quality_bench.py --no-save

Results: markdown on stdout and ``benchmarks/results/shuffle-quality-<date>.{md,json}``.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # benchmarks/stream/<this> -> the repository
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"


def make_data(root: Path, samples: int, shards: int, size: int) -> Path:
    from packer.sample import Sample
    from packer.shardwriter import TarShardWriter, encode_sample
    from shardstream.format import INDEX_NAME, DatasetIndex, shard_name, shard_pattern

    index = root / INDEX_NAME
    if index.exists():
        return index
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    entries, number = [], 0
    per_shard = [samples // shards + (i < samples % shards) for i in range(shards)]
    for shard, count in enumerate(per_shard):
        writer = TarShardWriter(root / shard_name("q", shard), max_size=None, max_count=None)
        for _ in range(count):
            key = f"{number:08d}"
            body = rng.randbytes(max(1, int(rng.gauss(size, size / 4))))
            chunks = encode_sample(Sample(key, key, (("bin", body), ("cls", b"%d" % (number % 10)))))
            writer.add(key, chunks, sum(len(c) for c in chunks))
            number += 1
        entries.append(writer.close())
    DatasetIndex(shard_pattern("q", shards), entries).save(index)
    return index


def keys_of(index: Path, **options: Any) -> tuple[list[str], float]:
    from streamer import ShardDataset

    started = time.perf_counter()
    stream = iter(ShardDataset(index, decode=False, seed=0, **options))
    first = next(stream)
    first_ms = (time.perf_counter() - started) * 1e3
    return [first["__key__"], *(sample["__key__"] for sample in stream)], first_ms


def measure(order: list[str], out: list[str], buffer: int, shard_of: dict[str, int]) -> dict[str, Any]:
    position = {key: i for i, key in enumerate(order)}
    moved = [abs(i - position[key]) for i, key in enumerate(out)]
    same = sum(shard_of[a] == shard_of[b] for a, b in itertools.pairwise(out))
    return {
        "displacement": sum(moved) / len(moved),
        "displacement_first": sum(moved[:buffer]) / min(buffer, len(moved)),
        "same_shard_pairs": same / (len(out) - 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from shardstream.format import DatasetIndex

    data = args.workdir / f"data-{args.samples}-{args.shards}-{args.size}"
    index = make_data(data, args.samples, args.shards, args.size)
    shard_of, number = {}, 0
    for shard, entry in enumerate(DatasetIndex.load(index).shards):
        for _ in range(entry.samples):
            shard_of[f"{number:08d}"] = shard
            number += 1
    order, _ = keys_of(index, buffer_size=1)
    b = args.buffer
    configs = [
        ("bytes in the buffer, initial=B (before)", {"defer_reads": False, "initial": None}),
        ("bytes in the buffer, initial=B/10", {"defer_reads": False, "initial": max(1, b // 10)}),
        ("bytes in the buffer, initial=B/100", {"defer_reads": False, "initial": max(1, b // 100)}),
        ("ids in the buffer (deferred reads, default)", {"defer_reads": True}),
        ("ids in the buffer, buffer_size=10B", {"defer_reads": True, "buffer_size": 10 * b}),
    ]
    rows = []
    for name, options in configs:
        firsts, out = [], []
        options = {"buffer_size": b, **options}
        for _ in range(args.repeats):
            out, first_ms = keys_of(index, **options)
            firsts.append(first_ms)
        assert sorted(out) == sorted(order), f"{name}: not every sample exactly once"
        reference = keys_of(index, **{**options, "defer_reads": False})[0]
        rows.append(
            {
                "config": name,
                **options,
                **measure(order, out, b, shard_of),
                "first_ms": min(firsts),
                "identical": out == reference,
            }
        )
    return {
        "date": datetime.date.today().isoformat(),
        "samples": args.samples,
        "shards": args.shards,
        "size": args.size,
        "buffer": b,
        "uniform_same_shard": 1 / args.shards,
        "rows": rows,
        "load": os.getloadavg()[0],
    }


def to_markdown(result: dict[str, Any]) -> str:
    b = result["buffer"]
    lines = [
        f"# Shuffle quality, {result['date']}",
        "",
        f"{result['samples']:,} samples of ~{result['size']:,} bytes in {result['shards']} shards, "
        f"buffer_size B={b:,}, seed 0, one epoch; load average {result['load']:.2f}.",
        "",
        f"| configuration | mean displacement | over the first {b:,} | same-shard pairs | first sample | "
        "stream equals the front-to-back reader's |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['config']} | {row['displacement']:.0f} | {row['displacement_first']:.0f} | "
            f"{row['same_shard_pairs']:.4f} | {row['first_ms']:.1f} ms | "
            f"{'yes' if row['identical'] else 'no'} |"
        )
    lines += [
        "",
        f"Same-shard pairs for a uniform shuffle of the whole epoch: {result['uniform_same_shard']:.4f}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--size", type=int, default=35_000, help="mean sample size in bytes")
    parser.add_argument("--buffer", type=int, default=1000, help="buffer_size B")
    parser.add_argument("--repeats", type=int, default=3, help="fresh iterators per configuration")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/shufflequality"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    result = run(args)
    text = to_markdown(result)
    print(text)
    if not args.no_save:
        args.results.mkdir(parents=True, exist_ok=True)
        stem = args.results / f"shuffle-quality-{result['date']}"
        stem.with_suffix(".md").write_text(text)
        stem.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
