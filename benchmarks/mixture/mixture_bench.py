#!/usr/bin/env python3
"""Mixture benchmarks: what planning and interleaving cost, side by side with one ShardDataset in one run.

1. ``speed``  samples/s over the tiny set (1,000,000 JSON samples in 10 shards, raw bytes, in-process):
              one ``ShardDataset`` over all 10 shards vs a ``Mixture`` of three sources made of the same
              shards (3 + 3 + 4, each ``repeat: 1``, so both read every sample once). Fresh subprocess per
              run, timed from inside after imports, contenders in turn, best round counts. Target: the
              mixture within 5% of the single dataset.
2. ``plan``   planning an epoch of 10^8 samples over 1,000 sources for 64 ranks x 8 workers, plus one
              worker's interleave set up: seconds and peak traced memory in a fresh process.
              Targets: under 1 s and under 50 MB.
3. ``--instructions``  the same two contenders under valgrind (cachegrind, no cache simulation): machine
              instructions per sample, from a full run minus a run that stops after one sample. Unlike
              time, this count does not move with a busy neighbour, so it resolves a few percent where
              the clock cannot on a shared machine (it misses cache misses and the page cache, which time
              sees). Counts the first 200,000 samples; ~10 minutes in all; needs valgrind.

    python3 benchmarks/mixture/mixture_bench.py --quick      # 200,000 samples, 2 rounds
    python3 benchmarks/mixture/mixture_bench.py              # 1,000,000 samples, 5 rounds
    python3 benchmarks/mixture/mixture_bench.py --quick --instructions

Results: a markdown report on stdout, plus ``benchmarks/results/mixture-<date>[-quick].{json,md}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import REPO, RESULTS, Run, best, child_cmd, rounds, spawn, warm_read
from harness.report import machine_facts, table

BUFFER = 1000
INSTRUCTION_SAMPLES = 200_000  # read under valgrind (about 50x slower): enough for a per-sample figure
CACHEGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
GROUPS = ((0, 3), (3, 6), (6, 10))  # the tiny set's shards, as three sources


def child(kind: str, spec: dict[str, Any]) -> None:
    """One timed run, in this fresh interpreter; one JSON line out."""
    import resource
    import tracemalloc

    import torch  # noqa: F401  (imported before the clock, as in stream_bench)

    from streamer.datasets.shard import ShardDataset
    from streamer.mixture.mixture import Mixture
    from streamer.mixture.plan import Interleave, Share, plan_mixture

    if kind == "plan":
        shares = [
            Share(f"source-{j:04d}", 1 + (j * 7919) % 200_000, "weight", 1 + j % 9) for j in range(1000)
        ]
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        started = time.perf_counter()
        plan = plan_mixture(shares, world=64, workers=8, epoch_size=10**8)
        interleave = Interleave(plan.budgets(0))
        ranges = [plan.worker_range(j, 63, 7) for j in range(0, 1000, 100)]
        seconds = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        figures = {
            "seconds": seconds,
            "traced_peak": peak,
            "rss_growth_kb": grew,
            "rank_length": plan.rank_length,
            "worker_length": interleave.length,
            "ranges": len(ranges),
        }
        print(json.dumps(figures))
        return
    if kind == "one":
        dataset = ShardDataset(spec["index"], buffer_size=BUFFER, decode=False)
    else:
        sources = [{"path": path, "repeat": 1, "decode": False} for path in spec["sources"]]
        dataset = Mixture(sources, buffer_size=BUFFER)
    started, cpu = time.perf_counter(), time.process_time()
    stream = iter(dataset)
    count = sum(1 for _ in (itertools.islice(stream, spec["limit"]) if spec.get("limit") else stream))
    figures = {"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu, "samples": count}
    print(json.dumps(figures))


def split_sources(packed_root: Path, out: Path) -> list[str]:
    """Three index folders over disjoint shards of the tiny set (symlinks, no copies)."""
    sys.path.insert(0, str(REPO))
    from shardstream.format import INDEX_NAME, DatasetIndex, offsets_name

    index = DatasetIndex.load(packed_root / INDEX_NAME)
    prefix, number_tar = index.shards[0].name.rsplit("-", 1)
    digits = len(number_tar.split(".")[0])
    folders = []
    for number, (lo, hi) in enumerate(GROUPS):
        folder = out / f"part{number}"
        folder.mkdir(parents=True, exist_ok=True)
        for entry in index.shards[lo:hi]:
            for name in (entry.name, offsets_name(entry.name)):
                link = folder / name
                if not link.exists():
                    link.symlink_to(packed_root / name)
        pattern = f"{prefix}-{{{lo:0{digits}d}..{hi - 1:0{digits}d}}}.tar"
        DatasetIndex(pattern, index.shards[lo:hi]).save(folder / INDEX_NAME)
        folders.append(str(folder))
    return folders


def instructions(kind: str, spec: dict[str, Any], samples: int) -> tuple[int, int]:
    """(machine instructions per sample, samples): ``samples + 1`` read under cachegrind minus one."""
    counts = []
    for limit in (1, samples + 1):
        cmd = [*CACHEGRIND, *child_cmd(__file__, kind, "--spec", json.dumps({**spec, "limit": limit}))]
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(REPO)}
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        refs = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        if refs is None:
            raise RuntimeError(f"no instruction count from valgrind: {done.stderr[-500:]}")
        counts.append((int(refs.group(1).replace(",", "")), json.loads(done.stdout.strip().splitlines()[-1])))
    (short, _), (full, run) = counts
    return (full - short) // (run["samples"] - 1), run["samples"] - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child")
    parser.add_argument("--spec", default="{}")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--instructions", action="store_true", help="also count instructions per sample")
    parser.add_argument(
        "--work", type=Path, default=Path(os.environ.get("BENCH_WORK", "/tmp/shardstream-bench"))
    )
    args = parser.parse_args()
    if args.child:
        child(args.child, json.loads(args.spec))
        return
    from stream.stream_data import make_tiny  # the stream benchmark's tiny set (benchmarks/stream/)

    samples, repeats = (200_000, 2) if args.quick else (1_000_000, 5)
    repeats = args.repeats or repeats
    packed = make_tiny(args.work / f"tiny-{samples}", samples, lambda m: print(m, file=sys.stderr))
    sources = split_sources(packed.root, args.work / f"mixture-{samples}")
    warm_read(Path(p) for p in packed.shards)

    def contender(kind: str, spec: dict[str, Any]) -> Run:
        wall, maxrss, stdout, _ = spawn(child_cmd(__file__, kind, "--spec", json.dumps(spec)))
        got = json.loads(stdout.strip().splitlines()[-1])
        return Run(kind, got["seconds"], wall, maxrss, got["samples"], extra={"cpu": got["cpu"]})

    contenders = [
        ("one ShardDataset", lambda: contender("one", {"index": packed.index})),
        ("Mixture of 3", lambda: contender("mix", {"sources": sources})),
    ]
    runs = rounds(
        repeats,
        contenders,
        lambda m: print(m, file=sys.stderr),
        lambda r: f"{r.samples / r.seconds:,.0f} samples/s",
        expected=samples,
    )
    one, mix = best(runs["one ShardDataset"]), best(runs["Mixture of 3"])
    ratio = (mix.samples / mix.seconds) / (one.samples / one.seconds)
    # The rounds' own ratios (each pair ran back to back) and the medians show the noise the best hides.
    paired = [
        (m.samples / m.seconds) / (o.samples / o.seconds)
        for o, m in zip(runs["one ShardDataset"], runs["Mixture of 3"], strict=True)
    ]
    medians = {name: statistics.median(r.samples / r.seconds for r in rs) for name, rs in runs.items()}
    median_ratio = medians["Mixture of 3"] / medians["one ShardDataset"]
    # CPU seconds per sample, which a busy neighbour disturbs far less than the wall clock.
    cpu = {name: min(r.extra["cpu"] / r.samples for r in rs) for name, rs in runs.items()}
    cpu_ratio = cpu["one ShardDataset"] / cpu["Mixture of 3"]
    counted = {}
    if args.instructions:
        n = INSTRUCTION_SAMPLES
        counted = {
            "one ShardDataset": instructions("one", {"index": packed.index}, n),
            "Mixture of 3": instructions("mix", {"sources": sources}, n),
        }
    _, _, plan_out, _ = spawn(child_cmd(__file__, "plan"))
    plan = json.loads(plan_out.strip().splitlines()[-1])
    result = {
        "machine": machine_facts(),
        "samples": samples,
        "repeats": repeats,
        "speed": {name: [r.samples / r.seconds for r in rs] for name, rs in runs.items()},
        "ratio": ratio,
        "median_ratio": median_ratio,
        "paired_ratios": paired,
        "cpu_per_sample": cpu,
        "cpu_ratio": cpu_ratio,
        "plan": plan,
        "instructions_per_sample": {name: n for name, (n, _) in counted.items()},
    }
    rows = [
        [name, f"{best(rs).samples / best(rs).seconds:,.0f}", f"{best(rs).maxrss_kb / 1024:.0f}"]
        for name, rs in runs.items()
    ]
    lines = [
        f"# Mixture benchmark ({result['machine']['date']}, {samples:,} tiny samples, best of {repeats})",
        "",
        table(["contender", "samples/s", "peak RSS MiB"], rows),
        "",
        f"Mixture / one dataset: **{ratio:.3f}** best against best (target >= 0.95); medians "
        f"{median_ratio:.3f}; round by round {', '.join(f'{r:.2f}' for r in paired)}",
        "",
        f"CPU time per sample, best of each: one dataset {cpu['one ShardDataset'] * 1e6:.2f} us, mixture "
        f"{cpu['Mixture of 3'] * 1e6:.2f} us: the mixture at **{cpu_ratio:.3f}** of the speed",
        "",
        f"Planning 10^8 samples over 1,000 sources, 64 ranks x 8 workers: {plan['seconds'] * 1000:.1f} ms, "
        f"peak traced memory {plan['traced_peak'] / 2**20:.2f} MiB, RSS growth "
        f"{plan['rss_growth_kb'] / 1024:.1f} MiB (targets: < 1 s, < 50 MB)",
    ]
    text = "\n".join(lines)
    if counted:
        one_ir, mix_ir = counted["one ShardDataset"][0], counted["Mixture of 3"][0]
        text += (
            f"\n\nInstructions per sample (cachegrind, first {INSTRUCTION_SAMPLES:,} samples): one "
            f"dataset {one_ir:,}, mixture {mix_ir:,}: the mixture at **{one_ir / mix_ir:.3f}** of the "
            "speed by this count"
        )
    print(text)
    stamp = time.strftime("%Y-%m-%d") + ("-quick" if args.quick else "")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"mixture-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"mixture-{stamp}.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
