#!/usr/bin/env python3
"""Packing a Parquet of embedded JPEGs: peak memory flat in the file's size, and speed next to pyarrow alone.

Two Parquet files of the same rows, as the HF hub ships image sets (``image`` a ``{bytes, path}`` struct of
~70 KB JPEGs, ``id`` and ``caption`` beside it, row groups of 100 rows, snappy), one of ~20 MB and one of
~2 GB. Every JPEG is distinct (64 noise images, each row's copy carrying its row number after the end
marker, still a valid JPEG), so neither Parquet's dictionary nor the page cache can fold rows together.

Per file, side by side, each a fresh subprocess under ``/usr/bin/time -v``, taking turns, best of the rounds:

a. ``pack``           ``packer.pack(parquet, out, PackOptions(max_size=256 MB))`` (one process)
b. ``pyarrow``        ``ParquetFile.iter_batches`` over every row group: the bytes decoded, nothing more
c. ``pyarrow+rows``   the same plus ``to_pylist()`` per batch: Python bytes objects, as any packer needs
d. ``pyarrow+write``  c, then every image's bytes written to one file, hashed (sha256) and fsync-ed: the
                      floor for any packer that writes and checksums what it reads (ours also writes tar
                      headers, offsets, keys and the JSON per row, and fsyncs each shard)
e. ``interpreter``    python importing packer and pyarrow, doing nothing: the floor under every figure

Memory is the process's own peak (``VmHWM`` just before it exits, and ``/usr/bin/time``'s maximum RSS).
MB/s is the Parquet file's size over the time inside the process (imports excluded). Each pack's output
is checked (samples counted from the index, the first and last JPEG compared with the Parquet's) and
deleted outside the timing.

    python3 benchmarks/pack/table_pack_bench.py             # ~20 MB and ~2 GB, best of 2 (~3 min on 2 cores)
    python3 benchmarks/pack/table_pack_bench.py --quick     # ~20 MB and ~200 MB, 1 round, not saved

Results: markdown on stdout, plus ``benchmarks/results/<stem>.{json,md}`` (default ``table-pack-<date>``).
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent  # benchmarks/pack/
ROOT = HERE.parents[1]
ROW_GROUP = 100  # what `datasets` writes for image columns

CHILD = r"""
import json, os, sys, time
mode, src, out = sys.argv[1:4]
import pyarrow.parquet as pq
import packer
from packer import PackOptions
started = time.perf_counter()
rows = 0
if mode == "pack":
    rows = packer.pack(src, out, PackOptions(max_size=256 * 10**6)).samples
elif mode in ("pyarrow", "pyarrow+rows"):
    parquet = pq.ParquetFile(src, buffer_size=1 << 20)
    for group in range(parquet.metadata.num_row_groups):
        for batch in parquet.iter_batches(batch_size=ROWS, row_groups=[group], use_threads=False):
            rows += len(batch.to_pylist()) if mode == "pyarrow+rows" else batch.num_rows
elif mode == "pyarrow+write":
    import hashlib
    os.makedirs(out, exist_ok=True)
    digest = hashlib.sha256()
    with open(os.path.join(out, "all.bin"), "wb") as sink:
        parquet = pq.ParquetFile(src, buffer_size=1 << 20)
        for group in range(parquet.metadata.num_row_groups):
            for batch in parquet.iter_batches(batch_size=ROWS, row_groups=[group], use_threads=False):
                for row in batch.to_pylist():
                    sink.write(row["image"]["bytes"])
                    digest.update(row["image"]["bytes"])
                    rows += 1
        sink.flush()
        os.fsync(sink.fileno())
seconds = time.perf_counter() - started
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"seconds": seconds, "rows": rows, "vmhwm_kib": hwm}))
"""


def _jpegs(count: int) -> list[bytes]:
    from PIL import Image

    rng = random.Random(7)
    found = []
    for _ in range(count):
        out = io.BytesIO()
        Image.frombytes("RGB", (256, 256), rng.randbytes(256 * 256 * 3)).save(out, "JPEG", quality=90)
        found.append(out.getvalue())
    return found


def make_parquet(path: Path, megabytes: int, pool: list[bytes]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    average = sum(map(len, pool)) / len(pool)
    rows = max(ROW_GROUP, int(megabytes * 10**6 / average))
    struct = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("id", pa.string()), ("image", struct), ("caption", pa.string())])
    with pq.ParquetWriter(path, schema, use_dictionary=["id", "caption"]) as writer:
        for start in range(0, rows, ROW_GROUP):
            numbers = range(start, min(rows, start + ROW_GROUP))
            images = [
                {"bytes": pool[n % len(pool)] + n.to_bytes(8, "big"), "path": f"{n}.jpg"} for n in numbers
            ]
            batch = {
                "id": [f"img{n:08d}" for n in numbers],
                "image": images,
                "caption": [f"a noisy picture, number {n}" for n in numbers],
            }
            writer.write_table(pa.table(batch, schema=schema), row_group_size=ROW_GROUP)
    return rows


def run(mode: str, src: Path, out: Path) -> dict:
    code = CHILD.replace("ROWS", "64")
    command = ["/usr/bin/time", "-v", sys.executable, "-c", code, mode, str(src), str(out)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode} on {src.name} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["time_maxrss_kib"] = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])
    return result


def check(out: Path, src: Path, rows: int) -> None:
    import tarfile

    import pyarrow.parquet as pq

    from shardstream.format import DatasetIndex

    samples = DatasetIndex.load(out / "shardstream-index.json").samples
    assert samples == rows, f"{src.name}: packed {samples} of {rows} rows"
    first = pq.ParquetFile(src).read_row_group(0).column("image")[0].as_py()["bytes"]
    with tarfile.open(sorted(out.glob("*.tar"))[0]) as tar:
        assert tar.extractfile("img00000000.jpg").read() == first  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--stem", default=f"table-pack-{datetime.date.today():%Y%m%d}")
    args = parser.parse_args()
    sizes = (20, 200) if args.quick else (20, 2000)
    rounds = 1 if args.quick else args.rounds
    work = Path(tempfile.mkdtemp(prefix="table-bench-", dir=os.environ.get("BENCH_TMP")))
    try:
        pool = _jpegs(64)
        files = {}
        for megabytes in sizes:
            path = work / f"images-{megabytes}MB.parquet"
            files[megabytes] = (path, make_parquet(path, megabytes, pool))
        results: dict[str, dict[str, dict]] = {}
        modes = ("pack", "pyarrow", "pyarrow+rows", "pyarrow+write", "interpreter")
        for _ in range(rounds):
            for megabytes, (path, rows) in files.items():
                for mode in modes:
                    out = work / "out"
                    got = run(mode, path, out)
                    if mode == "pack":
                        check(out, path, rows)
                    if out.exists():
                        shutil.rmtree(out)
                        subprocess.run(["sync"], check=False)
                    best = results.setdefault(str(megabytes), {}).get(mode)
                    if best is None or got["seconds"] < best["seconds"]:
                        results[str(megabytes)][mode] = got | {
                            "file_bytes": path.stat().st_size,
                            "rows": rows,
                        }
        report(results, args.stem, save=not args.quick)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(results: dict[str, dict[str, dict]], stem: str, *, save: bool) -> None:
    lines = [
        "| Parquet | rows | mode | seconds | MB/s | VmHWM MiB | time -v maxRSS MiB | above interpreter MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for modes in results.values():
        floor = modes["interpreter"]["vmhwm_kib"]
        for mode, got in modes.items():
            size = got["file_bytes"]
            rate = "" if mode == "interpreter" else f"{size / 1e6 / got['seconds']:.0f}"
            lines.append(
                f"| {size / 1e6:.0f} MB | {got['rows']} | {mode} | {got['seconds']:.2f} | {rate} | "
                f"{got['vmhwm_kib'] / 1024:.0f} | {got['time_maxrss_kib'] / 1024:.0f} | "
                f"{(got['vmhwm_kib'] - floor) / 1024:.0f} |"
            )
    small, big = (results[k]["pack"]["vmhwm_kib"] / 1024 for k in list(results)[:2])
    verdict = "within" if big <= small * 1.10 + 10 else "NOT within"
    lines.append("")
    names = list(results)
    lines.append(
        f"Pack peak: {small:.0f} MiB ({names[0]} MB file) vs {big:.0f} MiB ({names[1]} MB file): "
        f"{verdict} 10% + 10 MiB."
    )
    text = "\n".join(lines)
    print(text)
    if save:
        out = ROOT / "benchmarks" / "results"
        (out / f"{stem}.json").write_text(json.dumps(results, indent=1) + "\n")
        (out / f"{stem}.md").write_text(f"# {stem}\n\n{__doc__.split(chr(10))[1]}\n\n{text}\n")


if __name__ == "__main__":
    main()
