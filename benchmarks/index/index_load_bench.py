#!/usr/bin/env python3
"""Loading a 10^6-shard index: version 1 (a JSON row per shard) against version 2 (binary columns file).

Both indexes describe the same made-up shards (no tar files: loading reads only the index): the pattern
``train-{000000..999999}.tar``, 1-2,000 samples and 10-300 MB a shard, a random sha256 each, as the packer
writes them. Every figure comes from a fresh subprocess, best of 3 for time; contenders take turns:

1. ``load``     ``DatasetIndex.load(path)`` (``shardstream info``, ``verify``, the indexer, the packer)
2. ``list``     ``streamer.placement.shards.ShardList.from_source(path)`` (every reader's first step)
3. ``dataset``  ``streamer.ShardDataset(path)``, the whole constructor, then ``len(ds)``

Peak RSS is the child's ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` when it is done, minus that of a
baseline child that only makes the same imports (``import-format``: shardstream.format; ``import-streamer``:
streamer, its dataset and decode modules, torch with them); the largest of the rounds is reported. The
indexes are made by a child too, so that this process stays small (Linux carries the RSS a parent had
when it forked into a child's ru_maxrss). Target (issue 13): version 2 under 0.5 s and 100 MB.

    python3 benchmarks/index/index_load_bench.py            # 10^6 shards, 3 rounds (~3 min)
    python3 benchmarks/index/index_load_bench.py --quick    # 10^5 shards, 1 round, not saved unless --stem

Results: markdown on stdout, plus ``benchmarks/results/<stem>.{json,md}`` (default ``index-load-<date>``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import RESULTS, child_cmd, spawn
from harness.report import machine_facts, save_results, stamp, table

BASELINES = {"load": "import-format", "list": "import-streamer", "dataset": "import-streamer"}
WHAT = {"load": "DatasetIndex.load", "list": "ShardList.from_source", "dataset": "ShardDataset(path)"}
TARGET_SECONDS, TARGET_MB = 0.5, 100


def make(work: Path, shards: int) -> dict[str, Any]:
    """Both indexes of ``shards`` shards in ``work/v1`` and ``work/v2``; their sizes and save times."""
    import numpy as np

    from shardstream.format import INDEX_NAME, DatasetIndex, ShardEntry, shard_name, shard_pattern
    from shardstream.format.constants import COLUMNS_NAME

    rng = np.random.default_rng(0)
    counts = rng.integers(1, 2001, shards).tolist()
    sizes = rng.integers(10**7, 3 * 10**8, shards).tolist()
    digests = rng.bytes(32 * shards).hex()
    entries = [
        ShardEntry(shard_name("train", i), counts[i], sizes[i], digests[64 * i : 64 * i + 64])
        for i in range(shards)
    ]
    index = DatasetIndex(
        shard_pattern("train", shards),
        entries,
        {"jpg": sum(counts), "json": sum(counts)},
        {"max_size": 300_000_000},
    )
    out: dict[str, Any] = {}
    for version, columns in (("v1", False), ("v2", True)):
        (work / version).mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        index.save(work / version / INDEX_NAME, columns=columns)
        out[f"{version}_save_seconds"] = round(time.perf_counter() - started, 3)
        out[f"{version}_json_bytes"] = (work / version / INDEX_NAME).stat().st_size
    out["v2_columns_bytes"] = (work / "v2" / COLUMNS_NAME).stat().st_size
    return out


def child(kind: str, path: str) -> None:
    import resource

    if kind in ("load", "import-format"):
        from shardstream.format import DatasetIndex
    else:
        import streamer.datasets.shard
        import streamer.decode.sample  # noqa: F401  (ShardDataset imports it on construction)
        from streamer import ShardDataset
        from streamer.placement.shards import ShardList
    out: dict[str, Any] = {"seconds": 0.0}
    started = time.perf_counter()
    if kind == "load":
        index = DatasetIndex.load(path)
        out.update(shards=len(index.shards), samples=index.samples)
    elif kind == "list":
        shards = ShardList.from_source(path)
        out.update(shards=len(shards), samples=shards.total)
    elif kind == "dataset":
        dataset = ShardDataset(path)
        out.update(shards=len(dataset.shards), samples=len(dataset))
    if not kind.startswith("import"):
        out["seconds"] = time.perf_counter() - started
    out["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    status = Path("/proc/self/status").read_text()
    out["vmhwm_kb"] = int(status.split("VmHWM:")[1].split()[0])
    print(json.dumps(out))


def run(kind: str, path: str | Path = "-") -> dict[str, Any]:
    _, _, stdout, _ = spawn(child_cmd(__file__, kind, str(path)))
    return json.loads(stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PATH"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--shards", type=int)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--stem", help="results file name without extension (default index-load-<date>)")
    parser.add_argument("--make", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.make:
        print(json.dumps(make(Path(args.make), args.shards)))
        return
    shards = args.shards or (100_000 if args.quick else 1_000_000)
    repeats = args.repeats or (1 if args.quick else 3)
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="index-load-") as tmp:
        work = Path(tmp)
        log(f"making two indexes of {shards:,} shards in {work}")
        _, _, stdout, _ = spawn(
            [sys.executable, str(Path(__file__).resolve()), "--make", tmp, "--shards", str(shards)]
        )
        made = json.loads(stdout.strip().splitlines()[-1])
        runs: dict[str, list[dict[str, Any]]] = {}
        for round_ in range(repeats):
            base = {name: run(name) for name in sorted(set(BASELINES.values()))}
            for name, figures in base.items():
                runs.setdefault(name, []).append(figures)
            for kind in WHAT:
                for version in ("v1", "v2"):
                    figures = run(kind, work / version / "shardstream-index.json")
                    figures["above_kb"] = figures["maxrss_kb"] - base[BASELINES[kind]]["maxrss_kb"]
                    runs.setdefault(f"{kind} {version}", []).append(figures)
                    log(
                        f"round {round_ + 1} {kind} {version}: {figures['seconds']:.3f} s, "
                        f"+{figures['above_kb'] / 1024:.1f} MiB"
                    )
    result = report(shards, repeats, made, runs)
    stem = args.stem or (f"index-load-{stamp(args.quick)}" if not args.quick else None)
    if stem:
        save_results(RESULTS, stem, result["json"], result["markdown"], log)


def report(
    shards: int, repeats: int, made: dict[str, Any], runs: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    mib = 1024
    rows, best = [], {}
    for kind, what in WHAT.items():
        for version in ("v1", "v2"):
            rounds = runs[f"{kind} {version}"]
            fastest = min(rounds, key=lambda r: r["seconds"])
            peak = max(r["above_kb"] for r in rounds)
            best[f"{kind} {version}"] = {"seconds": fastest["seconds"], "above_mib": peak / mib}
            seconds, above = f"{fastest['seconds']:.3f}", f"{peak / mib:.1f}"
            rows.append([what, version, seconds, above, f"{fastest['shards']:,}", f"{fastest['samples']:,}"])
    for kind in WHAT:
        one, two = best[f"{kind} v1"], best[f"{kind} v2"]
        faster = f"{one['seconds'] / two['seconds']:.0f}x"
        smaller = f"{one['above_mib'] / max(two['above_mib'], 0.1):.0f}x"
        rows.append([f"{WHAT[kind]}: v1 / v2", "", faster, smaller, "", ""])
    met = all(
        b["seconds"] < TARGET_SECONDS and b["above_mib"] < TARGET_MB
        for k, b in best.items()
        if k.endswith("v2")
    )
    base = {name: max(r["maxrss_kb"] for r in runs[name]) / mib for name in sorted(set(BASELINES.values()))}
    facts = machine_facts()
    lines = [
        f"# Index load at {shards:,} shards (issue 13), {facts['date']}, best of {repeats}",
        "",
        f"Machine: {facts['nproc']} CPUs ({facts['usable_cpus']} usable), {facts['cpu']}, {facts['memory']} "
        f"RAM; Python {facts['python']}; shardstream {facts['shardstream_commit']}.",
        "",
        f"Pattern-named shards, each with its sha256. Version 1: `shardstream-index.json` "
        f"{made['v1_json_bytes'] / 1e6:.1f} MB (saved in {made['v1_save_seconds']:.2f} s). Version 2: "
        f"the JSON {made['v2_json_bytes']:,} bytes + `shardstream-index.columns` "
        f"{made['v2_columns_bytes'] / 1e6:.1f} MB (saved in {made['v2_save_seconds']:.2f} s).",
        "",
        table(["what", "index", "seconds", "peak RSS above imports, MiB", "shards", "samples"], rows),
        "",
        f"Seconds: inside the child, after its imports; best of {repeats}. RSS: the child's ru_maxrss minus "
        f"that of a child making only the same imports (shardstream.format {base['import-format']:.0f} MiB; "
        f"streamer with torch {base['import-streamer']:.0f} MiB); the largest of {repeats} rounds.",
        "",
        f"Target (version 2 under {TARGET_SECONDS} s and {TARGET_MB} MB above the imports, every reader): "
        f"{'**met**' if met else '**missed**'}.",
        "",
    ]
    markdown = "\n".join(lines)
    print(markdown)
    return {
        "markdown": markdown,
        "json": {
            "machine": facts,
            "shards": shards,
            "repeats": repeats,
            "made": made,
            "runs": runs,
            "best": best,
            "target_met": met,
        },
    }


if __name__ == "__main__":
    main()
