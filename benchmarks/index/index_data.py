#!/usr/bin/env python3
"""Index benchmark, data: webdataset ``ShardWriter`` shards for ``index_bench.py`` (and anyone by hand).

Each sample is three members, written by ``webdataset.ShardWriter`` (ustar headers, as webdataset 1.x
writes them): ``sample%09d.jpg`` (random bytes behind a JPEG start marker, 700-1,500 bytes by default),
``.cls`` (the label as text) and a ~100-byte ``.json``. On disk that is ~3.9 kB a sample, so the default
200,000 samples in 20 shards make ~782 MB, the size the issue's first measurement used. (A ~3 kB ``.jpg``
would make ~5.6 kB a sample with the three 512-byte headers and the two padded small members: 1.1 GB.)
Everything is seeded: the same parameters give byte-identical shards (a fixed mtime, too).

A dataset is a folder ``<root>/<name>/`` holding the data marker (``.bench-params.json``: the parameters,
the shard files kept and the sample counts) and ``shards/``, the tars alone, so any tool pointed at
``shards/`` sees nothing else; ``clean_shards`` deletes whatever a tool wrote there (``.nv-meta/``,
``*.offsets``, ``shardstream-index.json``, ...). A rerun with the same parameters reuses the data.

Variants: ``gaps`` deletes some shard files after writing (numbering with holes: 3, 4, 10, 17, 18 of 20);
``truncate`` cuts the middle shard in the middle of a member's data (an interrupted copy). The flatness
series (``make_series``) is 10, 100, 1,000 shards of the same ``per_shard`` samples; the smaller sets are
hard links to the first shards of the largest (one generation, no extra disk).

    python3 benchmarks/index/index_data.py                                  # 200,000 samples, 20 shards
    python3 benchmarks/index/index_data.py /tmp/ib --samples 20000 --shards 20 --gaps
    python3 benchmarks/index/index_data.py --series 10,100,1000 --per-shard 1000   # the flatness series
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_ROOT = Path("/tmp/shardstream-index-bench")
MARKER = ".bench-params.json"  # the same name as harness.report.MARKER
SHARDS = "shards"
PATTERN = "shard-%06d.tar"
MTIME = 1_000_000_000  # fixed, so shards are byte-identical between runs
JPG_BYTES = (700, 1500)
JPEG_START, JPEG_END = b"\xff\xd8\xff\xdb", b"\xff\xd9"
FORMAT = 1  # bump when the sample layout changes, so old data is not reused


def _quiet(_message: str) -> None:
    pass


def gap_indexes(shards: int) -> list[int]:
    """The shard numbers ``gaps`` deletes: a single hole and double holes, never the first or last."""
    return [i for i in range(1, shards - 1) if i % 7 == 3 or i % 14 == 4]


def sample(i: int, rng: random.Random, jpg_bytes: tuple[int, int]) -> dict[str, Any]:
    size = rng.randint(*jpg_bytes)
    jpg = JPEG_START + rng.randbytes(max(0, size - len(JPEG_START) - len(JPEG_END))) + JPEG_END
    label = i % 1000
    meta = {"id": i, "label": label, "width": 256, "height": 256, "source": "synthetic", "split": "train"}
    return {
        "__key__": f"sample{i:09d}",
        "jpg": jpg,
        "cls": str(label).encode(),
        "json": json.dumps(meta).encode(),
    }


def write_shards(dest: Path, samples: int, per_shard: int, seed: int, jpg_bytes: tuple[int, int]) -> int:
    """``samples`` samples into ``dest/shard-%06d.tar``, ``per_shard`` each; return the shard count."""
    import webdataset as wds

    dest.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    sink = wds.ShardWriter(
        str(dest / PATTERN), maxcount=per_shard, maxsize=1e15, verbose=0, mtime=MTIME, encoder=False
    )
    try:
        for i in range(samples):
            sink.write(sample(i, rng, jpg_bytes))
    finally:
        sink.close()
    return math.ceil(samples / per_shard)


def truncate_shard(path: Path) -> dict[str, Any]:
    """Cut ``path`` in the middle of the data of its middle member; return what was cut."""
    with tarfile.open(path) as tar:
        members = tar.getmembers()
    member = next(m for m in members[len(members) // 2 :] if m.size > 64)  # a .jpg or .json, not a .cls
    size = member.offset_data + member.size // 2
    full = path.stat().st_size
    os.truncate(path, size)
    # Samples wholly before the cut member; the cut one's earlier members are in the file.
    whole = {m.name.split(".", 1)[0] for m in members if m.offset_data + m.size <= member.offset}
    whole.discard(member.name.split(".", 1)[0])
    return {
        "shard": path.name,
        "bytes": full,
        "cut_at": size,
        "member": member.name,
        "whole_samples": len(whole),
    }


def make_dataset(
    root: Path,
    name: str,
    samples: int,
    shards: int,
    *,
    seed: int = 0,
    jpg_bytes: tuple[int, int] = JPG_BYTES,
    gaps: bool = False,
    truncate: bool = False,
    log: Callable[[str], None] = _quiet,
) -> dict[str, Any]:
    """Write (or reuse) the dataset ``root/name``; return its marker: params, files, counts, paths."""
    per_shard = math.ceil(samples / shards)
    params = {
        "format": FORMAT,
        "samples": samples,
        "per_shard": per_shard,
        "seed": seed,
        "jpg_bytes": list(jpg_bytes),
        "gaps": gaps,
        "truncate": truncate,
    }
    folder = root / name
    marker = folder / MARKER
    if marker.exists():
        got = json.loads(marker.read_text())
        if got.get("params") == params and all((folder / SHARDS / f).exists() for f in got["files"]):
            return got
    log(
        f"making {folder}: {samples:,} samples in {shards} shards{' (gaps)' if gaps else ''}"
        f"{' (truncated)' if truncate else ''} ..."
    )
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    made = write_shards(folder / SHARDS, samples, per_shard, seed, jpg_bytes)
    counts = {PATTERN % i: min(per_shard, samples - i * per_shard) for i in range(made)}
    info: dict[str, Any] = {"params": params, "shards_written": made}
    if gaps:
        removed = [PATTERN % i for i in gap_indexes(made)]
        for shard in removed:
            (folder / SHARDS / shard).unlink()
            del counts[shard]
        info["removed"] = removed
    complete = dict(counts)
    if truncate:
        cut = truncate_shard(folder / SHARDS / (PATTERN % (made // 2)))
        complete[cut["shard"]] = cut["whole_samples"]
        info["truncated"] = cut
    info.update(
        files=sorted(counts),
        samples_in_files=sum(counts.values()),
        complete_samples=sum(complete.values()),
        bytes=sum((folder / SHARDS / f).stat().st_size for f in counts),
        seconds=round(time.perf_counter() - started, 1),
    )
    marker.write_text(json.dumps(info, indent=1) + "\n")
    log(f"  {len(counts)} shards, {info['bytes'] / 1e6:.1f} MB in {info['seconds']}s")
    return info


def make_series(
    root: Path,
    counts: list[int],
    per_shard: int,
    *,
    seed: int = 0,
    jpg_bytes: tuple[int, int] = JPG_BYTES,
    log: Callable[[str], None] = _quiet,
) -> dict[int, dict[str, Any]]:
    """The flatness series: for each n in ``counts``, ``root/flat-<n>`` of n shards of ``per_shard``.

    The largest is written; the others hard-link its first shards (or copy them where links fail).
    """
    largest = max(counts)
    big = make_dataset(
        root,
        series_name(largest, per_shard),
        largest * per_shard,
        largest,
        seed=seed,
        jpg_bytes=jpg_bytes,
        log=log,
    )
    out = {largest: big}
    source = root / series_name(largest, per_shard) / SHARDS
    for n in sorted(set(counts) - {largest}):
        folder = root / series_name(n, per_shard)
        params = {"link_of": big["params"], "shards": n}
        marker = folder / MARKER
        files = [PATTERN % i for i in range(n)]
        if marker.exists():
            got = json.loads(marker.read_text())
            if got.get("params") == params and all((folder / SHARDS / f).exists() for f in files):
                out[n] = got
                continue
        shutil.rmtree(folder, ignore_errors=True)
        (folder / SHARDS).mkdir(parents=True)
        for f in files:
            try:
                os.link(source / f, folder / SHARDS / f)
            except OSError:
                shutil.copyfile(source / f, folder / SHARDS / f)
        info = {
            "params": params,
            "files": files,
            "samples_in_files": n * per_shard,
            "complete_samples": n * per_shard,
            "bytes": sum((folder / SHARDS / f).stat().st_size for f in files),
        }
        marker.write_text(json.dumps(info, indent=1) + "\n")
        out[n] = info
    return dict(sorted(out.items()))


def shard_folder(root: Path, name: str) -> Path:
    return root / name / SHARDS


def series_name(shards: int, per_shard: int) -> str:
    return f"flat-{shards}x{per_shard}"


def dataset_name(samples: int, shards: int, *, gaps: bool = False, truncate: bool = False) -> str:
    return f"wds-{samples}x{shards}" + ("-gaps" if gaps else "") + ("-truncated" if truncate else "")


def read_marker(folder: Path) -> dict[str, Any]:
    return json.loads((folder / MARKER).read_text())


def clean_shards(folder: Path, files: list[str]) -> list[str]:
    """Delete everything in ``folder`` but the tars ``files`` (what an indexer wrote); return the names."""
    keep = set(files)
    removed = []
    for entry in os.scandir(folder):
        if entry.name in keep:
            continue
        removed.append(entry.name)
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    return sorted(removed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("root", nargs="?", type=Path, default=DEFAULT_ROOT, help=f"default {DEFAULT_ROOT}")
    parser.add_argument("--samples", type=int, default=200_000, help="samples (default 200000)")
    parser.add_argument("--shards", type=int, default=20, help="shards (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--jpg-bytes",
        default=f"{JPG_BYTES[0]},{JPG_BYTES[1]}",
        help="LO,HI size of the .jpg member, uniform (default %(default)s)",
    )
    parser.add_argument("--gaps", action="store_true", help="delete some shard files (holes in numbering)")
    parser.add_argument("--truncate", action="store_true", help="cut the middle shard mid-member")
    parser.add_argument("--name", help="dataset folder name under ROOT (default: from the parameters)")
    parser.add_argument("--series", help="shard counts of the flatness series, comma-separated: 10,100,1000")
    parser.add_argument("--per-shard", type=int, default=1000, help="samples per shard in --series (1000)")
    args = parser.parse_args(argv)
    lo, hi = (int(x) for x in args.jpg_bytes.split(","))

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    if args.series:
        counts = [int(x) for x in args.series.split(",")]
        made = make_series(args.root, counts, args.per_shard, seed=args.seed, jpg_bytes=(lo, hi), log=log)
        for n, info in made.items():
            print(
                f"{shard_folder(args.root, series_name(n, args.per_shard))}: {len(info['files'])} shards, "
                f"{info['samples_in_files']:,} samples, {info['bytes'] / 1e6:.1f} MB"
            )
        return 0
    name = args.name or dataset_name(args.samples, args.shards, gaps=args.gaps, truncate=args.truncate)
    info = make_dataset(
        args.root,
        name,
        args.samples,
        args.shards,
        seed=args.seed,
        jpg_bytes=(lo, hi),
        gaps=args.gaps,
        truncate=args.truncate,
        log=log,
    )
    print(
        f"{shard_folder(args.root, name)}: {len(info['files'])} shards, {info['samples_in_files']:,} "
        f"samples ({info['complete_samples']:,} complete), {info['bytes'] / 1e6:.1f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
