#!/usr/bin/env python3
"""Deferred reads from s3://, coalesced: 100,000 small samples (1-4 KB) in 4 shards on the shaped S3 server
(tests/servers/shaped_s3.py: 30 ms to first byte, 100 MB/s per connection), read in shuffled order.

Rows, each a full epoch through ``ShardDataset(..., decode=False)`` in one process, buffer 1,000:
``defer_reads=True`` (the buffer holds ids; ``streamer/chain/coalesce.py`` reads a leaving sample with its
buffered and coming neighbours in one ranged GET, the next spans read ahead) at spans of 1, 4, 8 and 32 MiB
with 8 spans ahead, and at 4 MiB with none ahead; and ``defer_reads=False`` (front to back, parallel 8 MiB
parts) for reference. "One GET per sample" is what deferred reads cost
without coalescing: a sample at a time by its sidecar offsets, in the same shuffled order, timed on the
first ``--single`` samples (a full epoch of it would take ~1 hour) and stated per sample. Requests are
counted at the server. The server runs in a child process (its event loop must not share a GIL with the
client); span and read-ahead are set by replacing ``CoalescedReads``'s defaults (the dataset has no knob
for them).

    python3 benchmarks/objstore/deferred_bench.py            # 100,000 samples, best of 2
    python3 benchmarks/objstore/deferred_bench.py --quick    # 20,000 samples, one round

Results: ``benchmarks/results/objstore-deferred-<date>[-quick].{json,md}``.
Data: ``--data`` (default /tmp/shardstream-objstore-deferred), generated once and reused when the same.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import REPO, RESULTS
from harness.report import (
    machine_facts,
    machine_lines,
    marker_matches,
    new_result,
    save_results,
    stamp,
    table,
    versions,
    write_marker,
)
from shaped_server import Server, shard_gets

MB = 1_000_000
SHARDS = 4
BUFFER = 1000
SPANS_MIB = (1, 4, 8, 32)


def make_data(root: Path, samples: int) -> int:
    """``samples`` samples of 1-4 KB random bytes (one ``bin`` member each) in ``SHARDS`` shards, with
    offsets sidecars and an index; returns the tar bytes. Reused when made with the same parameters."""
    sys.path.insert(0, str(REPO))
    from packer.sample import Sample
    from packer.shardwriter import TarShardWriter, encode_sample
    from shardstream.format import INDEX_NAME, DatasetIndex, shard_name, shard_pattern

    params = {"samples": samples, "shards": SHARDS}
    if not marker_matches(root, params):
        root.mkdir(parents=True, exist_ok=True)
        rng = random.Random(35)
        block = rng.randbytes(1 << 20)
        entries = []
        for number in range(SHARDS):
            writer = TarShardWriter(root / shard_name("train", number), max_size=None, max_count=None)
            for i in range(samples // SHARDS):
                key = f"s{number}-{i:06d}"
                at, size = rng.randrange(len(block) - 4096), rng.randrange(1024, 4097)
                chunks = encode_sample(Sample(key, key, (("bin", block[at : at + size]),)))
                writer.add(key, chunks, sum(len(c) for c in chunks))
            entries.append(writer.close())
        DatasetIndex(shard_pattern("train", SHARDS), entries).save(root / INDEX_NAME)
        write_marker(root, params)
    return sum(p.stat().st_size for p in root.glob("train-*.tar"))


def epoch(source: str, span: int | None, ahead: int | None, defer: bool) -> tuple[int, int, float]:
    """One shuffled epoch: samples, their member bytes, seconds. ``span``, ``ahead``: CoalescedReads's."""
    from streamer import ShardDataset
    from streamer.chain import coalesce

    defaults = coalesce.CoalescedReads.__init__.__kwdefaults__
    saved = dict(defaults)
    if span is not None:
        defaults["span"] = span
    if ahead is not None:
        defaults["ahead"] = ahead
    try:
        began = time.perf_counter()
        count = size = 0
        for sample in ShardDataset(source, decode=False, seed=1, buffer_size=BUFFER, defer_reads=defer):
            count += 1
            size += len(sample["bin"])
        return count, size, time.perf_counter() - began
    finally:
        defaults.update(saved)


def one_get_per_sample(source: str, limit: int) -> tuple[int, float]:
    """The first ``limit`` samples of the deferred epoch's order, each read alone by its sidecar offsets
    (one ranged GET each, as deferred reads without coalescing would): samples, seconds."""
    from shardstream.io.openers import OpenOptions
    from streamer import ShardDataset
    from streamer.chain.opener import ShardOpener

    ds = ShardDataset(source, decode=False, seed=1, buffer_size=BUFFER, defer_reads=False)
    order = []
    for sample in ds:
        order.append(sample["__key__"])
        if len(order) == limit:
            break
    opener = ShardOpener(ds.shards, OpenOptions())
    ids = [(int(k[1]), int(k.split("-")[1])) for k in order]  # keys are s<shard>-<index>
    began = time.perf_counter()
    for shard, index in ids:
        opener.read_one(shard, index)
    return len(ids), time.perf_counter() - began


def run(args: argparse.Namespace, srv: Server) -> dict[str, Any]:
    source = f"s3://{srv.bucket}/{args.data.name}/shardstream-index.json"
    rows = []
    cases = [(f"deferred, span {m} MiB", m << 20, None, True) for m in SPANS_MIB]
    cases += [("deferred, span 4 MiB, none ahead", 4 << 20, 0, True), ("front to back", None, None, False)]
    best: dict[str, dict[str, Any]] = {}
    for _ in range(args.repeats):
        for name, span, ahead, defer in cases:
            srv.reset()
            count, size, seconds = epoch(source, span, ahead, defer)
            gets = shard_gets(srv.spans())
            row = {"case": name, "samples": count, "member_bytes": size, "seconds": seconds, "gets": gets}
            print(f"{name}: {count} samples in {seconds:.2f} s, {gets} GETs", file=sys.stderr)
            if name not in best or seconds < best[name]["seconds"]:
                best[name] = row
    rows = list(best.values())
    srv.reset()
    single, seconds = one_get_per_sample(source, args.single)
    gets = shard_gets(srv.spans())
    rows.append(
        {
            "case": "one GET per sample",
            "samples": single,
            "member_bytes": None,
            "seconds": seconds,
            "gets": gets,
        }
    )
    for row in rows:
        row["samples_per_s"] = row["samples"] / row["seconds"]
        row["gets_per_sample"] = row["gets"] / row["samples"]
    return {"rows": rows}


def report(result: dict[str, Any]) -> str:
    a, rows = result["args"], result["rows"]
    single = next(r for r in rows if r["case"] == "one GET per sample")
    body = []
    for r in rows:
        mb_s = f"{r['member_bytes'] / MB / r['seconds']:.1f}" if r["member_bytes"] else "-"
        body.append(
            [
                r["case"],
                r["samples"],
                f"{r['seconds']:.2f}",
                f"{r['samples_per_s']:,.0f}",
                mb_s,
                r["gets"],
                f"{r['gets_per_sample']:.4f}",
                f"{r['samples_per_s'] / single['samples_per_s']:.0f}x",
            ]
        )
    shaping = f"{a['ttfb_ms']:g} ms to first byte, {a['rate_mb_s']:g} MB/s per connection"
    intro = (
        f"{a['samples']:,} samples of 1-4 KB random bytes in {SHARDS} shards "
        f"({result['tar_bytes'] / MB:.0f} MB of tar) on the shaped S3 server ({shaping}), "
        f"`ShardDataset(decode=False, buffer_size={BUFFER})`, one process, shuffled; best of "
        f"{a['repeats']}. GETs are the shard GETs counted at the server (index and sidecars not counted). "
        f'"One GET per sample" reads the first {a["single"]:,} samples of the same order one ranged GET '
        "each (deferred reads without coalescing); `vs one GET` is samples/s against it."
    )
    lines = [
        f"# Deferred reads from s3://, coalesced, {result['machine']['date']}",
        "",
        *machine_lines(result["machine"], "the server in a child process"),
        "",
        intro,
        "",
        table(["case", "samples", "s", "samples/s", "MB/s", "GETs", "GETs/sample", "vs one GET"], body),
        "",
        f"Command: `{result['command']}`",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--single", type=int, default=300, help="samples timed one GET each")
    parser.add_argument("--ttfb-ms", type=float, default=30.0)
    parser.add_argument("--rate-mb-s", type=float, default=100.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="20,000 samples, one round")
    parser.add_argument("--data", type=Path, default=Path("/tmp/shardstream-objstore-deferred/d"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.samples, args.repeats, args.single = 20_000, 1, 100
    for name in ("samples", "single", "repeats", "ttfb_ms", "rate_mb_s"):
        if not getattr(args, name) > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    tar_bytes = make_data(args.data, args.samples)
    # The server's bucket is the data folder's parent: the index is at s3://bucket/<data folder's name>/
    with Server(args.data.parent, args.ttfb_ms / 1000, args.rate_mb_s * MB) as srv:
        sys.path.insert(0, str(REPO))
        from tests.servers.s3 import s3_environment

        os.environ.update(s3_environment(srv.url))  # dummy credentials, no cloud metadata address
        measured = run(args, srv)
    machine = {**machine_facts(), "versions": versions("obstore")}
    result = new_result(args.quick, " ".join(["python3", *sys.argv]), machine)
    result.update(
        args={k: v for k, v in vars(args).items() if k not in ("data", "results")},
        tar_bytes=tar_bytes,
        **measured,
    )
    markdown = report(result)
    print(markdown)
    save_results(
        args.results,
        f"objstore-deferred-{stamp(args.quick)}",
        result,
        markdown,
        lambda m: print(m, file=sys.stderr),
    )


if __name__ == "__main__":
    main()
