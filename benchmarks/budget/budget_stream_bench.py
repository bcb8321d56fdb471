#!/usr/bin/env python3
"""Token budgets, read (issue 34, acceptance 3): stream throughput with ``batch_tokens`` against plain
batches of the same data, side by side in one run.

Data: ``--samples`` (100,000) records, each a ``.txt`` of ~``--size`` (2,000) bytes and a ``.json`` with a
log-normal ``num_tokens`` (median 600), packed with ``--cost num_tokens`` in shards of 1,000 under
``--workdir``. Each contender reads one epoch, ``decode=False``, ``buffer_size=1000``, through a DataLoader
with ``--workers`` (2) workers, in fresh processes alternated ``--repeats`` (5) times; the best epoch
counts (this machine is noisy):

* plain: ``batch_size=B`` for B the budgeted batches' mean samples rounded down and up, collated to a list;
* budget: ``batch_tokens=8192`` (each item already a list).

A DataLoader's hand-off costs about as much per batch as these small samples cost to read, so a plain B
rounded up from the mean (8.7 -> 9) makes 3% fewer batches than the budget and wins by that alone. The
ratio is therefore taken against plain batches of the budget's exact mean: the seconds per sample of the
two plain runs interpolated at that mean (linearly in batches, which is what changes); both raw ratios are
reported beside it.

``--bytes-per-token N`` (0: off) makes each ``.txt`` N bytes a token instead (text, whose bytes follow
its tokens: budgeted batches are then even in bytes, and plain batches of B uneven); the data goes to
its own folder under ``--workdir`` and the results to ``budget-stream-text-<date>``.

``--prefetch`` (2, the DataLoader's default) is each worker's ``prefetch_factor``, for both: the budget's
batches hold 1 to ~50 of these equal-sized samples, and a DataLoader hands batches out in order with
``workers x prefetch`` asked for, so a worker done with its small batches waits while the other makes a
large one; a deeper prefetch (8) lets it work ahead instead (results then named ``...-p8-<date>``).
The ratio is reported from the bests and as the median of each round's ratio (its three contenders ran
back to back), the steadier of the two here.
Beside the wall, each run's CPU seconds (its process and its joined workers, ``getrusage``) give the CPU a
sample, budget over plain at the same mean: what the budget's own work costs, without the waits of the
DataLoader's in-order hand-off (a worker done with its small batches idles while the other makes a
large one; the wall pays for those, the CPU does not).

    .venv/bin/python benchmarks/budget/budget_stream_bench.py          # ~1 minute here, data made once
    .venv/bin/python benchmarks/budget/budget_stream_bench.py --no-save

``--handoff`` adds two contenders that read nothing: each worker hands the DataLoader copies of one
~2 KB sample in batches of the budget's own sizes (1 to ~60 samples), against batches of the same count
and total that differ by at most one sample (8 or 9). Their ratio is what variable batch sizes cost the
DataLoader's hand-off by themselves (pickling, the pipe, the in-order wait), with no batching of ours.

Results: markdown on stdout and ``benchmarks/results/budget-stream-<date>.{md,json}``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # benchmarks/budget/<this> -> the repository
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared harness package

from harness import RESULTS, cpu_seconds  # noqa: E402
from harness.report import save_results  # noqa: E402

BUDGET = 8192


def make_data(root: Path, samples: int, size: int, per_token: int = 0) -> Path:
    import numpy as np

    from packer import PackOptions, pack

    root = root / f"n{samples}" / (f"text-{per_token}" if per_token else ".")
    shards = root / "shards"
    if (shards / "shardstream-index.json").exists():
        return shards
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    tokens = np.exp(rng.normal(np.log(600), 0.99, samples)).astype(int) + 1
    with open(root / "m.jsonl", "w") as handle:
        for i, n in enumerate(tokens):
            text = "x" * (per_token * int(n) if per_token else size)
            handle.write(json.dumps({"id": f"s{i:07d}", "txt": text, "num_tokens": int(n)}) + "\n")
    # overwrite: a pack cut short before its index (a killed run) is made again, not refused
    options = PackOptions(cost="num_tokens", max_count=1000, overwrite=True)
    pack(root / "m.jsonl", shards, options, progress=False)
    return shards


def batch_sizes(shards: Path) -> list[int]:
    """The budgeted batches' sizes over one epoch, in one process (what the hand-off contenders send)."""
    from streamer import ShardDataset

    return [len(b) for b in ShardDataset(shards, batch_tokens=BUDGET, decode=False, buffer_size=1000, seed=0)]


def as_list(samples):
    return samples


def one_epoch(shards: str, mode: str, workers: int, batch: int, prefetch: int = 2) -> dict:
    """Run in a fresh process: one epoch, its seconds and counts."""
    from torch.utils.data import DataLoader

    from streamer import ShardDataset

    common = {"decode": False, "buffer_size": 1000, "seed": 0}
    ahead = prefetch if workers else None  # a DataLoader refuses prefetch_factor without workers
    if mode == "budget":
        ds = ShardDataset(shards, batch_tokens=BUDGET, **common)
        loader = DataLoader(
            ds, batch_size=None, num_workers=workers, collate_fn=as_list, prefetch_factor=ahead
        )
    else:
        ds = ShardDataset(shards, **common)
        loader = DataLoader(
            ds, batch_size=batch, num_workers=workers, collate_fn=as_list, prefetch_factor=ahead
        )
    return timed_epoch(loader)


def handoff_epoch(sizes_file: str, workers: int, even: bool, prefetch: int = 2) -> dict:
    """Run in a fresh process: one epoch of batches of copies of one sample, of the budget's sizes
    (``even`` False) or of the same count and total with sizes differing by at most one; nothing read."""
    from torch.utils.data import DataLoader, IterableDataset, get_worker_info

    sizes = json.loads(Path(sizes_file).read_text())
    if even:
        count, total = len(sizes), sum(sizes)
        sizes = [total // count + (i < total % count) for i in range(count)]
        sizes = sizes[::2] + sizes[1::2]  # the larger and smaller spread over both workers
    sample = {"__key__": "s0000000", "__url__": sizes_file, "json": b"x" * 2_050, "__cost__": 600}

    class Batches(IterableDataset):
        def __iter__(self):
            info = get_worker_info()
            worker, every = (info.id, info.num_workers) if info is not None else (0, 1)
            for size in sizes[worker::every]:
                yield [dict(sample) for _ in range(size)]

    ahead = prefetch if workers else None
    loader = DataLoader(
        Batches(), batch_size=None, num_workers=workers, collate_fn=as_list, prefetch_factor=ahead
    )
    return timed_epoch(loader)


def timed_epoch(loader) -> dict:
    """One pass over ``loader``: its seconds, batches, samples and CPU (this process and its workers)."""
    started, cpu = time.perf_counter(), cpu_seconds()
    batches = samples = 0
    for items in loader:
        batches += 1
        samples += len(items)
    seconds = time.perf_counter() - started
    # An exhausted DataLoader iterator has joined its workers: their CPU is in RUSAGE_CHILDREN now.
    return {"seconds": seconds, "batches": batches, "samples": samples, "cpu": cpu_seconds() - cpu}


def rate(run: dict) -> float:
    """A run's samples per second."""
    return run["samples"] / run["seconds"]


def per_cpu(run: dict) -> float:
    """A run's samples per CPU second (main process and workers)."""
    return run["samples"] / run["cpu"]


def interpolated(at_low: float, at_high: float, low: int, high: int, mean: float) -> float:
    """Samples/s of plain batches of ``mean`` samples, from those of ``low`` and ``high``: seconds a sample
    are linear in batches a sample (1/B), so interpolate at 1/mean."""
    share = (1 / low - 1 / mean) / (1 / low - 1 / high)
    return 1 / (1 / at_low + share * (1 / at_high - 1 / at_low))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=2_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bytes-per-token", type=int, default=0, help="text of N bytes a token")
    parser.add_argument("--prefetch", type=int, default=2, help="each worker's prefetch_factor")
    parser.add_argument("--workdir", default="/tmp/shardstream-budget-bench")
    parser.add_argument("--handoff", action="store_true", help="add the hand-off contenders")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        shards, mode, batch = args.child
        if mode.startswith("handoff"):
            print(json.dumps(handoff_epoch(shards, args.workers, mode == "handoff-even", args.prefetch)))
        else:
            print(json.dumps(one_epoch(shards, mode, args.workers, int(batch), args.prefetch)))
        return
    shards = make_data(Path(args.workdir), args.samples, args.size, args.bytes_per_token)

    def run(mode: str, batch: int) -> dict:
        command = [
            sys.executable,
            __file__,
            "--workers",
            str(args.workers),
            "--prefetch",
            str(args.prefetch),
            "--child",
            str(shards),
            mode,
            str(batch),
        ]
        if mode.startswith("handoff"):
            command[command.index(str(shards))] = str(sizes_file)
        return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)

    probe = run("budget", 1)
    mean = probe["samples"] / probe["batches"]
    low, high = max(1, int(mean)), max(1, int(mean)) + 1
    sizes = {f"plain {low}": low, f"plain {high}": high, "budget": 1}
    if args.handoff:
        sizes_file = shards.parent / "budget-sizes.json"
        sizes_file.write_text(json.dumps(batch_sizes(shards)))
        sizes.update({"handoff-budget": 0, "handoff-even": 0})
    runs: dict[str, list[dict]] = {name: [] for name in sizes}
    for _ in range(args.repeats):
        for name, size in sizes.items():
            runs[name].append(run(name.split()[0], size))
    handoff = None
    if args.handoff:  # what the budget's sizes cost the hand-off alone, per round, median
        pairs = list(zip(runs["handoff-budget"], runs["handoff-even"], strict=True))
        ratios = sorted(rate(b) / rate(e) for b, e in pairs)
        cpus = sorted(per_cpu(e) / per_cpu(b) for b, e in pairs)
        handoff = {"rounds": ratios, "median": ratios[len(ratios) // 2], "cpu": cpus[len(cpus) // 2]}
    best = {name: max(rate(r) for r in rs) for name, rs in runs.items()}
    at_mean = interpolated(best[f"plain {low}"], best[f"plain {high}"], low, high, mean)
    # Each round's three ran back to back: the median of their ratios is steadier than the bests'.
    rounds = sorted(
        rate(runs["budget"][i])
        / interpolated(rate(runs[f"plain {low}"][i]), rate(runs[f"plain {high}"][i]), low, high, mean)
        for i in range(args.repeats)
    )
    paired = rounds[len(rounds) // 2]
    # CPU a sample, main process and workers together: steadier than the wall, and what the budget's own
    # work costs (the wall adds the in-order hand-off's waits).
    cpu_rounds = sorted(
        interpolated(per_cpu(runs[f"plain {low}"][i]), per_cpu(runs[f"plain {high}"][i]), low, high, mean)
        / per_cpu(runs["budget"][i])
        for i in range(args.repeats)
    )
    cpu_paired = cpu_rounds[len(cpu_rounds) // 2]
    lines = [
        f"# Token budgets, read ({datetime.date.today()})",
        "",
        f"{args.samples:,} samples of "
        + (f"{args.bytes_per_token} bytes a token" if args.bytes_per_token else f"~{args.size:,} bytes")
        + f", {args.workers} workers (prefetch "
        f"{args.prefetch}), best of {args.repeats}; "
        f"plain batches of {low} and {high} (the budgeted batches' mean is {mean:.2f}), "
        f"budget {BUDGET:,} tokens",
        "",
        "| contender | samples/s (best) | batches | samples |",
        "|---|---|---|---|",
    ]
    for name, rs in runs.items():
        lines.append(f"| {name} | {best[name]:,.0f} | {rs[0]['batches']:,} | {rs[0]['samples']:,} |")
    lines.append(f"| plain at {mean:.2f} (interpolated) | {at_mean:,.0f} | | |")
    lines += [
        "",
        f"budget / plain at the same mean: {best['budget'] / at_mean:.2f}x best, {paired:.2f}x the median "
        f"of the rounds' ratios ({', '.join(f'{r:.2f}' for r in rounds)}) "
        f"(/ plain {low}: {best['budget'] / best[f'plain {low}']:.2f}x, "
        f"/ plain {high}: {best['budget'] / best[f'plain {high}']:.2f}x)",
        f"CPU a sample (main process and workers), budget / plain at the same mean: {cpu_paired:.2f}x, the "
        f"median of the rounds' ({', '.join(f'{r:.2f}' for r in cpu_rounds)})",
    ]
    if handoff is not None:
        lines.append(
            f"Hand-off alone (nothing read; the budget's batch sizes / even sizes, same count and total): "
            f"{handoff['median']:.2f}x the median of the rounds' "
            f"({', '.join(f'{r:.2f}' for r in handoff['rounds'])}); "
            f"CPU a sample {handoff['cpu']:.2f}x"
        )
    report = "\n".join(lines) + "\n"
    print(report)
    if not args.no_save:
        kind = "budget-stream-text" if args.bytes_per_token else "budget-stream"
        kind += f"-p{args.prefetch}" if args.prefetch != 2 else ""
        record = {"args": vars(args), "runs": runs, "mean": mean, "plain_at_mean": at_mean, "best": best}
        record["paired"] = {"rounds": rounds, "median": paired}
        record["cpu_paired"] = {"rounds": cpu_rounds, "median": cpu_paired}
        record["handoff"] = handoff
        save_results(RESULTS, f"{kind}-{datetime.date.today()}", record, report, print)


if __name__ == "__main__":
    main()
