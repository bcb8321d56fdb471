#!/usr/bin/env python3
"""Subsets (issue 37, acceptance 3): opening a subset of a 10^8-sample dataset, and reading a subset
against the whole dataset per sample, side by side in one run.

Open: an index of ``--shards`` (100,000) shards of ``--per-shard`` (1,000) samples (only the index: opening
reads no shard) and a subset leaving out 1% of every shard's samples at random (10^6 samples; every shard
partly kept, the masks' largest case: 12.5 MB of bits). Each of ``ShardDataset(index)`` and
``ShardDataset(subset)`` is made in a fresh process, ``--repeats`` (5) times alternated: seconds to make
it (and take ``len``) and the process's peak RSS (``getrusage``), against the interpreter with shardstream
imported and nothing opened.

Read: ``--samples`` (100,000) samples of ~2,000 bytes packed locally in shards of 1,000; one epoch through
a DataLoader with 2 workers in batches of 64 (a list), ``decode=False``, ``buffer_size=1000``, of the
whole dataset, a random half of it (``where="cost % 2 == 0"`` over a random cost) and a half in runs
(each shard's first 500), each in a fresh process, alternated ``--repeats`` times. Reported: samples/s,
and each subset's per-sample rate over the whole dataset's, the median of the rounds' ratios (each round
ran the three back to back), from the start and steady (from the first batch on: the workers' start is
a larger share of a shorter epoch).

    .venv/bin/python benchmarks/subset/subset_bench.py          # a few minutes here, data made once
    .venv/bin/python benchmarks/subset/subset_bench.py --no-save

Results: markdown on stdout and ``benchmarks/results/subset-<date>.{md,json}``.
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

ROOT = Path(__file__).resolve().parents[2]  # benchmarks/subset/<this> -> the repository
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness package

from harness import RESULTS  # noqa: E402
from harness.report import save_results  # noqa: E402


def make_open_data(root: Path, shards: int, per_shard: int) -> tuple[Path, Path]:
    """An index of ``shards`` x ``per_shard`` samples (no shard on disk) and a subset leaving 1% out."""
    import numpy as np

    from shardstream.format import DatasetIndex, ShardEntry, shard_name, shard_pattern
    from shardstream.format.subsetindex import write_subset

    folder = root / f"open-{shards}x{per_shard}"
    index, subset = folder / "d" / "shardstream-index.json", folder / "sub"
    if (subset / "shardstream-subset.json").exists():
        return index, subset
    index.parent.mkdir(parents=True, exist_ok=True)
    entries = [ShardEntry(shard_name("train", i), per_shard, per_shard * 2048, "") for i in range(shards)]
    DatasetIndex(shard_pattern("train", shards), entries).save(index)
    rng = np.random.default_rng(0)
    out = max(1, per_shard // 100)

    def masks():
        for _ in range(shards):
            mask = np.ones(per_shard, dtype=bool)
            mask[rng.choice(per_shard, out, replace=False)] = False
            yield mask

    counts = np.full(shards, per_shard, dtype=np.int64)
    write_subset(subset, dataset=str(index), index_bytes=index.read_bytes(), counts=counts, masks=masks())
    return index, subset


def make_read_data(root: Path, samples: int) -> tuple[Path, Path, Path]:
    """The packed dataset, a random half of it and a half in runs (each shard's first 500)."""
    import numpy as np

    from packer import PackOptions, pack
    from shardstream.format.subsetindex import write_subset
    from shardstream.subset import SubsetOptions, make_subset
    from streamer.placement.shards import ShardList

    folder = root / f"read-{samples}"
    data, random_half, runs_half = folder / "d", folder / "random", folder / "runs"
    if (runs_half / "shardstream-subset.json").exists():
        return data, random_half, runs_half
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    with open(folder / "m.jsonl", "w") as handle:
        for i in range(samples):
            record = {"id": f"s{i:08d}", "txt": "x" * 2000, "num_tokens": int(rng.integers(1, 1000))}
            handle.write(json.dumps(record) + "\n")
    options = PackOptions(cost="num_tokens", max_count=1000, overwrite=True)
    pack(folder / "m.jsonl", data, options, progress=False)
    make_subset(data, random_half, SubsetOptions(where="cost % 2 == 0"))
    index = data / "shardstream-index.json"
    counts = np.asarray(ShardList.from_source(data).counts, dtype=np.int64)
    masks = (np.arange(count) < count // 2 for count in counts)
    write_subset(runs_half, dataset=str(index), index_bytes=index.read_bytes(), counts=counts, masks=masks)
    return data, random_half, runs_half


def child_open(source: str) -> dict:
    started = time.perf_counter()
    from streamer import ShardDataset

    imported = time.perf_counter()
    length = len(ShardDataset(source, decode=False)) if source != "-" else 0
    done = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"seconds": done - imported, "import": imported - started, "samples": length, "peak": peak}


def as_list(samples: list) -> list:
    return samples


def child_read(source: str) -> dict:
    from torch.utils.data import DataLoader

    from streamer import ShardDataset

    ds = ShardDataset(source, decode=False, buffer_size=1000, seed=0)
    loader = DataLoader(ds, batch_size=64, num_workers=2, collate_fn=as_list)
    started = after_first = time.perf_counter()
    samples = first = 0
    for batch in loader:
        if not samples:  # the workers are up and reading: the steady rate is timed from here
            first, after_first = len(batch), time.perf_counter()
        samples += len(batch)
    ended = time.perf_counter()
    return {
        "seconds": ended - started,
        "samples": samples,
        "steady_seconds": ended - after_first,
        "steady_samples": samples - first,
    }


def run_child(kind: str, source: str) -> dict:
    command = [sys.executable, __file__, "--child", kind, source]
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=100_000)
    parser.add_argument("--per-shard", type=int, default=1_000)
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workdir", default="/tmp/shardstream-subset-bench")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, source = args.child
        print(json.dumps(child_open(source) if kind == "open" else child_read(source)))
        return
    work = Path(args.workdir)
    index, subset = make_open_data(work, args.shards, args.per_shard)
    data, random_half, runs_half = make_read_data(work, args.samples)
    opened: dict[str, list[dict]] = {"nothing": [], "index": [], "subset": []}
    read: dict[str, list[dict]] = {"whole": [], "random half": [], "half in runs": []}
    for _ in range(args.repeats):
        for name, source in (("nothing", "-"), ("index", str(index)), ("subset", str(subset))):
            opened[name].append(run_child("open", source))
        for name, source in (("whole", data), ("random half", random_half), ("half in runs", runs_half)):
            read[name].append(run_child("read", str(source)))
    report = render(args, opened, read)
    print(report)
    if not args.no_save:
        save_results(
            RESULTS,
            f"subset-{datetime.date.today()}",
            {"args": vars(args), "open": opened, "read": read},
            report,
            print,
        )


def render(args: argparse.Namespace, opened: dict, read: dict) -> str:
    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    lines = [
        f"# Subsets ({datetime.date.today()})",
        "",
        f"Open: {args.shards:,} shards x {args.per_shard:,} samples, a subset leaving 1% of every shard out; "
        f"fresh processes, {args.repeats} rounds alternated, medians",
        "",
        "| opened | seconds to make it | peak RSS (MB) | samples |",
        "|---|---|---|---|",
    ]
    for name, runs in opened.items():
        seconds = median([r["seconds"] for r in runs])
        peak = median([r["peak"] for r in runs]) / 1e6
        lines.append(f"| {name} | {seconds:.3f} | {peak:,.0f} | {runs[0]['samples']:,} |")
    lines += [
        "",
        f"Read: {args.samples:,} samples of ~2,000 bytes, 2 DataLoader workers, batches of 64, one epoch",
        "",
        "| read | samples | samples/s | per sample / whole's | steady samples/s | steady / whole's |",
        "|---|---|---|---|---|---|",
    ]
    whole = read["whole"]
    for name, runs in read.items():
        cells = [f"{runs[0]['samples']:,}"]
        for samples, seconds in (("samples", "seconds"), ("steady_samples", "steady_seconds")):
            rates = [r[samples] / r[seconds] for r in runs]
            ratios = [rate / (w[samples] / w[seconds]) for rate, w in zip(rates, whole, strict=True)]
            shown = ", ".join(f"{x:.2f}" for x in sorted(ratios))
            cells += [f"{median(rates):,.0f}", f"{median(ratios):.2f} ({shown})"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Medians of {args.repeats} rounds; a ratio's rounds in brackets. Steady: timed from the first",
        "batch, so the workers' start (the same for every contender, a larger share of a shorter epoch)",
        "is left out.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
