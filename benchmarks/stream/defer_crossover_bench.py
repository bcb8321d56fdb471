"""Where deferred reads pay: samples/s of a shuffled epoch, each sample read by one pread as it leaves the
buffer (``defer_reads=True``) against each shard read front to back (``False``), by sample size; and the
default (``None``: by each shard's mean sample size, ``streamer/chain/deferred.py`` ``SMALL_SAMPLE``)
for ``ShardDataset`` and a one-source ``Mixture``.

    python benchmarks/stream/defer_crossover_bench.py [--rounds 2] [--data /tmp/defer-crossover] [--no-save]

Each data set: samples of two members (``.bin`` of N random bytes, ``.cls``), 1,000 a shard, ~150 MB or
12,000 samples, packed by our packer. Each run is a fresh subprocess reading three epochs, ``decode=False``;
the best epoch counts (the first warms the page cache), contenders alternate round by round, the best round
counts. Output: a markdown table and ``benchmarks/results/defer-crossover-<date>.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]  # benchmarks/stream/<this> -> the repository
MEMBER_BYTES = (10, 4_000, 8_000, 16_000, 64_000)
BUFFERS = (100, 1000)
CONTENDERS = {  # name -> (dataset, defer_reads)
    "SD ids": ("shard", True),
    "SD bytes": ("shard", False),
    "SD default": ("shard", None),
    "Mixture default": ("mixture", None),
}


def make(root: Path) -> dict[str, dict[str, Any]]:
    """Each member size's data set, packed once; the mean tar bytes of a sample of each."""
    sys.path.insert(0, str(REPO))
    from packer import PackOptions, pack

    facts = {}
    for size in MEMBER_BYTES:
        out = root / f"m{size}"
        if not (out / "shardstream-index.json").exists():
            samples = max(2000, min(12_000, 150_000_000 // (2 * size + 2048)))
            raw = root / f"raw{size}"
            shutil.rmtree(raw, ignore_errors=True)
            raw.mkdir(parents=True)
            for i in range(samples):
                (raw / f"k{i:06d}.bin").write_bytes(os.urandom(size))
                (raw / f"k{i:06d}.cls").write_bytes(b"%d" % (i % 10))
            shutil.rmtree(out, ignore_errors=True)
            pack(raw, out, PackOptions(prefix="x", max_size=None, max_count=1000))
            shutil.rmtree(raw)
        totals = json.loads((out / "shardstream-index.json").read_text())["totals"]
        facts[str(size)] = {"path": str(out), "sample_bytes": totals["bytes"] / totals["samples"]}
    return facts


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Three epochs of one contender on one data set: the best samples/s."""
    sys.path.insert(0, str(REPO))
    from streamer import Mixture, ShardDataset

    kind, defer, buffer = spec["kind"], spec["defer"], spec["buffer"]
    if kind == "shard":
        ds: Any = ShardDataset(spec["path"], decode=False, buffer_size=buffer, defer_reads=defer)
    else:
        source = {"path": spec["path"], "weight": 1, "decode": False}
        ds = Mixture([source], buffer_size=buffer, defer_reads=defer)
    best, count = 0.0, 0
    for epoch in range(3):
        ds.set_epoch(epoch)
        start = time.perf_counter()
        count = sum(1 for _ in ds)
        best = max(best, count / (time.perf_counter() - start))
    return {"per_s": best, "samples": count}


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    if done.returncode:
        raise RuntimeError(f"{spec}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data", type=Path, default=Path("/tmp/defer-crossover"))
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    began = time.time()
    facts = make(args.data)
    best: dict[tuple[str, int, str], float] = {}
    for round_number in range(args.rounds):
        for size in MEMBER_BYTES:
            for buffer in BUFFERS:
                for name, (kind, defer) in CONTENDERS.items():
                    spec = {"kind": kind, "defer": defer, "buffer": buffer, "path": facts[str(size)]["path"]}
                    got = run_child(spec)["per_s"]
                    key = (str(size), buffer, name)
                    best[key] = max(best.get(key, 0.0), got)
                    progress = f"round {round_number + 1} member {size} buffer {buffer} {name}: {got:,.0f}/s"
                    print(progress, file=sys.stderr)
    lines = [
        f"# Deferred reads by sample size, {time.strftime('%Y-%m-%d %H:%M')}",
        "",
        f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}. "
        f"{args.rounds} rounds, contenders alternating; every run a fresh subprocess, best of 3 epochs.",
        "",
        "| member bytes | sample tar bytes | buffer | SD ids /s | SD bytes /s | ids/bytes | SD default /s "
        "| default/best | Mixture default /s | Mixture/SD default |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size in MEMBER_BYTES:
        for buffer in BUFFERS:
            ids, raw, auto, mix = (best[(str(size), buffer, name)] for name in CONTENDERS)
            sample = facts[str(size)]["sample_bytes"]
            cells = [
                f"{size:,}",
                f"{sample:,.0f}",
                str(buffer),
                f"{ids:,.0f}",
                f"{raw:,.0f}",
                f"{ids / raw:.2f}",
            ]
            cells += [f"{auto:,.0f}", f"{auto / max(ids, raw):.2f}", f"{mix:,.0f}", f"{mix / auto:.2f}"]
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Whole run: {time.time() - began:.0f} s."]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_save:
        out = REPO / "benchmarks" / "results" / f"defer-crossover-{time.strftime('%Y-%m-%d')}.md"
        out.write_text(text)
        print(f"saved {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
