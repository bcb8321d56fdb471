"""Random access latency: ShardMap's [i] and .get(key), locally and through nginx, against tarfile.

One sample read at a time, at random positions of ShardWriter shards indexed by ``shardstream index``
(the index benchmark's data, ``benchmarks/index/index_data.py``). Reported: p50, p90 and p99 per access
after a warm-up, page cache warm. The reference is what a user does without an index: ``tarfile.open``
the shard, ``getmember`` (a walk of the headers up to it), ``extractfile``. Over nginx the shards are
indexed from their URLs (``index --out``), so each [i] is one bounded Range request, each sidecar fetched
once.

    python3 benchmarks/index/shardmap_bench.py                  # 2,000 accesses of each kind
    python3 benchmarks/index/shardmap_bench.py --quick          # 300
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import REPO, RESULTS, project, warm_read
from harness.report import machine_facts, save_results, stamp, table

sys.path.insert(0, str(REPO))
SHARDSTREAM = str(Path(sys.executable).with_name("shardstream"))


def percentiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6  # noqa: E731
    return {
        "p50_us": round(pick(0.5), 1),
        "p90_us": round(pick(0.9), 1),
        "p99_us": round(pick(0.99), 1),
        "mean_us": round(statistics.fmean(ordered) * 1e6, 1),
    }


def timed(calls: list[Callable[[], Any]], warmup: int = 50) -> dict[str, float]:
    for call in calls[:warmup]:
        call()
    seconds = []
    for call in calls[warmup:]:
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return percentiles(seconds)


def index(source: str, out: Path) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run(
        [SHARDSTREAM, "index", source, "--out", str(out), "--workers", "2", "--json", "--quiet"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/tmp/shardstream-index-bench"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    accesses = 300 if args.quick else 2000
    from index_data import dataset_name, make_dataset, shard_folder  # the index benchmark's shards

    name = dataset_name(200_000, 20)
    make_dataset(args.data, name, 200_000, 20)
    shards = shard_folder(args.data, name)
    tars = sorted(shards.glob("*.tar"))
    warm_read(tars)
    ShardMap = project("ShardMap")
    work = args.data / "shardmap-bench"
    local_index = index(str(shards), work / "local")
    samples = ShardMap(work / "local", decode=False)
    rng = random.Random(0)
    positions = [rng.randrange(len(samples)) for _ in range(accesses + 50)]
    keys = [samples[i]["__key__"] for i in positions]
    results: dict[str, Any] = {"samples": len(samples), "shards": len(tars), "accesses": accesses}
    results["local [i]"] = timed([lambda i=i: samples[i] for i in positions])
    results["local .get(key)"] = timed([lambda k=k: samples.get(k) for k in keys])

    loaded = project("DatasetIndex").load(work / "local" / "shardstream-index.json")
    counts = [entry.samples for entry in loaded.shards]
    starts = [sum(counts[:s]) for s in range(len(counts))]
    names = list(tars)

    def with_tarfile(i: int) -> bytes:
        shard = max(s for s in range(len(starts)) if starts[s] <= i)
        with tarfile.open(names[shard]) as tar:
            member = tar.getmember(f"{keys_by_position[i]}.jpg")
            return tar.extractfile(member).read()  # type: ignore[union-attr]

    keys_by_position = dict(zip(positions, keys, strict=True))
    by_tarfile = [lambda i=i: with_tarfile(i) for i in positions[:250]]
    results["tarfile open + getmember (no index)"] = timed(by_tarfile, warmup=10)

    www = work / "www"
    shutil.rmtree(www, ignore_errors=True)
    (www / "d").mkdir(parents=True)
    for tar in tars:
        (www / "d" / tar.name).symlink_to(tar)
    with project("nginx")(www) as server:
        pattern = f"{server.url}/d/{tars[0].name.rsplit('-', 1)[0]}-{{000000..{len(tars) - 1:06d}}}.tar"
        started = time.perf_counter()
        remote_index = index(pattern, work / "remote")
        results["index over nginx seconds"] = round(time.perf_counter() - started, 3)
        remote = ShardMap(work / "remote", decode=False)
        results["nginx [i]"] = timed([lambda i=i: remote[i] for i in positions])
        results["nginx .get(key)"] = timed([lambda k=k: remote.get(k) for k in keys])
        results["nginx requests"] = len(server.requests())
    results["local index seconds"] = local_index["seconds"]
    results["remote index samples"] = remote_index["samples"]
    rows = [
        [name, v["p50_us"], v["p90_us"], v["p99_us"], v["mean_us"]]
        for name, v in results.items()
        if isinstance(v, dict)
    ]
    facts = machine_facts()
    lines = [
        f"# Random access benchmark (issue #12), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"Machine: {facts['nproc']} CPUs ({facts['usable_cpus']} usable), {facts['cpu']}, {facts['memory']} "
        f"RAM; Python {facts['python']}; shardstream {facts['shardstream_commit']}.",
        "",
        f"{results['samples']:,} ShardWriter samples in {results['shards']} shards; {accesses} random "
        "accesses per row after 50 warm-up ones (tarfile: 240 after 10), page cache warm, one process.",
        "",
        table(["access", "p50 us", "p90 us", "p99 us", "mean us"], rows),
        "",
        f"Indexing: local {results['local index seconds']} s; the same shards through nginx "
        f"{results['index over nginx seconds']} s (streamed, 2 workers). Requests nginx served in all: "
        f"{results['nginx requests']}.",
        "",
    ]
    markdown = "\n".join(lines)
    print(markdown)
    save_results(RESULTS, f"shardmap-{stamp(args.quick)}", {"machine": facts, **results}, markdown, print)


if __name__ == "__main__":
    main()
