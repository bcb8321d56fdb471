#!/usr/bin/env python3
"""The object-store ceiling: what obstore reads from the shaped S3 server (tests/servers/shaped_s3.py) with
1, 4, 8, 16 ranges of 8 MiB in flight, shaped (30 ms to first byte, 100 MB/s per connection) and unshaped.

Issue 35 defines the ceiling at a concurrency ``c`` as the lower of ``c`` x the per-connection cap and what
the same server delivers unshaped at ``c``; later work (ShardDataset on ``s3://``) is measured as a
fraction of it. The server runs in a child process of its own (its event loop must not share a GIL with
the client), one server at a time; every setting reads all objects once per round, best round counts.

    python3 benchmarks/objstore/ceiling_bench.py                      # 8 x 128 MB, 3 rounds
    python3 benchmarks/objstore/ceiling_bench.py --quick              # 4 x 32 MB, 1 round
    python3 benchmarks/objstore/ceiling_bench.py --objects 8 --size-mb 256 --inflight 1 4 8 16 32

Results: a markdown report on stdout, plus ``benchmarks/results/objstore-ceiling-<date>[-quick].{json,md}``.
Data: ``--data`` (default /tmp/shardstream-objstore-ceiling), generated once and reused when the same.
"""

from __future__ import annotations

import argparse
import asyncio
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
from shaped_server import Server

MB = 1_000_000
PART = 8 * 1024 * 1024  # the range size the issue measures with


def make_data(root: Path, objects: int, size: int) -> list[str]:
    """``objects`` files of ``size`` random bytes (a 16 MiB random block, rotated per object: not compressible
    by anything on the way, and quick to write); reused when made with the same parameters."""
    params = {"objects": objects, "size": size}
    keys = [f"shard-{i:04d}.tar" for i in range(objects)]
    if marker_matches(root, params):
        return keys
    root.mkdir(parents=True, exist_ok=True)
    block = random.Random(35).randbytes(16 * 1024 * 1024)
    for i, key in enumerate(keys):
        rotated = block[i * 4097 % len(block) :] + block[: i * 4097 % len(block)]
        with open(root / key, "wb") as f:
            for start in range(0, size, len(rotated)):
                f.write(rotated[: min(len(rotated), size - start)])
    write_marker(root, params)
    return keys


async def read_all(store: Any, keys: list[str], size: int, inflight: int) -> dict[str, float]:
    """Every object as ``PART`` ranges, ``inflight`` at a time: seconds, MB/s, the first response's time."""
    import obstore

    parts = [(key, start, min(start + PART, size)) for key in keys for start in range(0, size, PART)]
    queue = iter(parts)
    first: list[float] = []
    began = time.perf_counter()

    async def worker() -> int:
        got = 0
        for key, start, end in queue:
            result = await obstore.get_async(store, key, options={"range": (start, end)})
            if not first:
                first.append(time.perf_counter() - began)
            data = await result.bytes_async()
            if len(data) != end - start:
                raise RuntimeError(f"{key} [{start}, {end}): got {len(data)} bytes")
            got += len(data)
        return got

    total = sum(await asyncio.gather(*(worker() for _ in range(inflight))))
    seconds = time.perf_counter() - began
    return {"seconds": seconds, "mb_s": total / MB / seconds, "first_byte_s": first[0], "bytes": total}


def measure(url: str, keys: list[str], size: int, inflight: list[int], repeats: int) -> dict[int, dict]:
    """Best of ``repeats`` rounds per concurrency (settings take turns within a round)."""
    from obstore.store import S3Store

    sys.path.insert(0, str(REPO))
    from tests.servers.s3 import ACCESS_KEY, BUCKET, SECRET_KEY

    store = S3Store(
        BUCKET,
        endpoint=url,
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        region="us-east-1",
        client_options={"allow_http": True, "pool_max_idle_per_host": "64", "timeout": "300s"},
    )
    best: dict[int, dict] = {}
    for _ in range(repeats):
        for n in inflight:
            got = asyncio.run(read_all(store, keys, size, n))
            if n not in best or got["mb_s"] > best[n]["mb_s"]:
                best[n] = got
    return best


def per_connection_fraction(args: argparse.Namespace) -> float:
    """What share of the cap one connection can reach when each range first waits ``ttfb``."""
    part_s = PART / (args.rate_mb_s * MB)
    return part_s / (part_s + args.ttfb_ms / 1000)


def ceiling_rows(args: argparse.Namespace, shaped: dict[int, dict], unshaped: dict[int, dict]) -> list[dict]:
    """Per concurrency: the figures, the issue's ceiling, and that ceiling with first-byte waits."""
    rows = []
    for n in args.inflight:
        s, u = shaped[n], unshaped[n]
        ceiling = min(n * args.rate_mb_s, u["mb_s"])
        with_ttfb = min(n * args.rate_mb_s * per_connection_fraction(args), u["mb_s"])
        rows.append(
            {
                "inflight": n,
                "shaped_mb_s": s["mb_s"],
                "shaped_first_byte_s": s["first_byte_s"],
                "unshaped_mb_s": u["mb_s"],
                "unshaped_first_byte_s": u["first_byte_s"],
                "ceiling_mb_s": ceiling,
                "fraction": s["mb_s"] / ceiling,
                "ceiling_with_ttfb_mb_s": with_ttfb,
                "fraction_with_ttfb": s["mb_s"] / with_ttfb,
            }
        )
        print(
            f"in flight {n}: shaped {s['mb_s']:.0f} MB/s, unshaped {u['mb_s']:.0f}, ceiling {ceiling:.0f}",
            file=sys.stderr,
        )
    return rows


def report(result: dict[str, Any]) -> str:
    a = result["args"]
    rows = []
    for row in result["rows"]:
        rows.append(
            [
                row["inflight"],
                f"{row['shaped_mb_s']:.0f}",
                f"{row['shaped_first_byte_s'] * 1000:.0f}",
                f"{row['unshaped_mb_s']:.0f}",
                f"{row['unshaped_first_byte_s'] * 1000:.1f}",
                f"{row['ceiling_mb_s']:.0f}",
                f"{row['fraction']:.2f}",
                f"{row['ceiling_with_ttfb_mb_s']:.0f}",
                f"{row['fraction_with_ttfb']:.2f}",
            ]
        )
    lines = [
        f"# Object-store ceiling, {result['machine']['date']}",
        "",
        *machine_lines(result["machine"], "the server in a child process, one at a time"),
        "",
        f"{a['objects']} objects x {a['size_mb']} MB from the shaped S3 server (tests/servers/shaped_s3.py) "
        f"read by obstore as {PART >> 20} MiB ranges (`get_async` with a range), N in flight; "
        f"best of {a['repeats']}. Shaped: {a['ttfb_ms']:g} ms to first byte, {a['rate_mb_s']:g} MB/s per "
        f"connection. Ceiling = min(N x {a['rate_mb_s']:g} MB/s, unshaped MB/s at N), as issue 35 defines "
        "it; `obstore/ceiling` is the shaped figure's fraction of it. Each range also waits for its first "
        f"byte, so one connection tops out at {a['rate_mb_s'] * result['per_connection_fraction']:.0f} MB/s "
        "with these settings; the last two columns use that as the per-connection cap.",
        "",
        table(
            [
                "in flight",
                "shaped MB/s",
                "shaped first byte ms",
                "unshaped MB/s",
                "unshaped first byte ms",
                "ceiling MB/s",
                "obstore/ceiling",
                "ceiling with first-byte waits",
                "obstore/that",
            ],
            rows,
        ),
        "",
        f"Command: `{result['command']}`",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=8)
    parser.add_argument("--size-mb", type=int, default=128, help="each object's size in MB (10^6 bytes)")
    parser.add_argument("--inflight", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--ttfb-ms", type=float, default=30.0)
    parser.add_argument("--rate-mb-s", type=float, default=100.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="4 x 32 MB, one round")
    parser.add_argument("--data", type=Path, default=Path("/tmp/shardstream-objstore-ceiling"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.objects, args.size_mb, args.repeats = 4, 32, 1
    for name in ("objects", "size_mb", "repeats", "ttfb_ms", "rate_mb_s"):
        if not getattr(args, name) > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    size = args.size_mb * MB
    keys = make_data(args.data, args.objects, size)
    print(f"data: {args.objects} x {args.size_mb} MB under {args.data}", file=sys.stderr)
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"  # no wait on a cloud metadata address

    with Server(args.data, 0.0, None) as srv:
        unshaped = measure(srv.url, keys, size, args.inflight, args.repeats)
    with Server(args.data, args.ttfb_ms / 1000, args.rate_mb_s * MB) as srv:
        shaped = measure(srv.url, keys, size, args.inflight, args.repeats)

    rows = ceiling_rows(args, shaped, unshaped)
    machine = {**machine_facts(), "versions": versions("obstore")}
    result = new_result(args.quick, " ".join(["python3", *sys.argv]), machine)
    result.update(
        args={k: v for k, v in vars(args).items() if k not in ("data", "results")},
        rows=rows,
        per_connection_fraction=per_connection_fraction(args),
    )
    markdown = report(result)
    print(markdown)
    save_results(
        args.results,
        f"objstore-ceiling-{stamp(args.quick)}",
        result,
        markdown,
        lambda m: print(m, file=sys.stderr),
    )


if __name__ == "__main__":
    main()
