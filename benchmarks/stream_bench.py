#!/usr/bin/env python3
"""Streamer benchmarks: memory and throughput of ``ShardDataset``, side by side with webdataset in one run.

1. ``memory``  peak RSS of ``ShardDataset`` on a 10,000,000-shard brace pattern (only the shards it reads
               exist on disk) vs a 10-shard pattern, both taking one sample.
2. ``flat``    RSS sampled every 100,000 samples through a 1,000,000-sample epoch of tiny samples
               (decode=False and decode=True).
3. ``tiny``    samples/s on 1,000,000 tiny JSON samples: ours vs ``webdataset.WebDataset`` with the same
               1000-sample shuffle buffer, raw bytes and JSON-decoded, in-process and through a DataLoader.
4. ``raw``     samples/s on ~20,000 256x256 JPEG samples read as bytes: ours vs webdataset.
5. ``decode``  the same JPEGs decoded to uint8 CHW torch tensors: ours (full size and ``image_size=128``)
               vs webdataset's ``torchrgb8`` decoder vs bare Pillow over bytes already in memory.

Every timed run is a fresh subprocess, timed from inside after its imports (torch, webdataset, Pillow);
contenders take turns round by round and the best round counts. The shards' page cache is warmed first.

    python3 benchmarks/stream_bench.py --quick          # smoke run, about two minutes
    python3 benchmarks/stream_bench.py                  # the full run
    python3 benchmarks/stream_bench.py --only decode --repeats 2 --profile

Results: a markdown report on stdout, plus ``benchmarks/results/stream-<date>[-quick].{json,md}``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import machine_facts, marker_matches, spawn, table, verdict, version, write_marker

REPO = Path(__file__).resolve().parent.parent
# Where children import shardstream/, packer/ and streamer/ from: a copy taken when the run starts
# (snapshot_sources), so edits landing mid-run cannot mix two versions into one set of ratios.
SRC = REPO
RESULTS = REPO / "benchmarks" / "results"
MB = 10**6
MIB = 2**20
BUFFER = 1000  # shuffle buffer, ours and webdataset's alike
BATCH = 32  # DataLoader batch size (a list collate: nothing is stacked)
LOADER_WORKERS = 2
MANY_SHARDS = 10_000_000
MANY_DIGITS = 7  # train-{0000000..9999999}.tar
LINKED_POSITIONS = 3  # shard positions of the 10M pattern made real (the reader needs only the first)


# ---------------------------------------------------------------------------------------------------------
# Child side: one contender in a fresh interpreter; prints one JSON line.
# ---------------------------------------------------------------------------------------------------------
def rss_now() -> int:
    """Resident set size of this process now, in bytes (from /proc/self/statm)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def rss_peak() -> int:
    """Peak RSS of this process so far (VmHWM), in bytes."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def list_collate(batch: list[Any]) -> list[Any]:
    """DataLoader collate that keeps the batch a list: no stacking cost for either contender."""
    return batch


def _imports() -> None:
    """Everything a contender needs, imported before the clock starts."""
    import io  # noqa: F401
    import warnings

    import numpy  # noqa: F401
    import torch
    import torch.utils.data  # noqa: F401
    import webdataset  # noqa: F401
    from PIL import Image  # noqa: F401

    import streamer.dataset
    import streamer.decode  # noqa: F401

    # The streamer decodes plain JPEGs to tensors with torchcodec when it is installed.
    with contextlib.suppress(ImportError, OSError, RuntimeError):
        import torchcodec.decoders  # noqa: F401

    # webdataset warns about shardshuffle=False; torch about read-only arrays in the bare-Pillow loop.
    warnings.simplefilter("ignore")


def make_source(spec: dict[str, Any]) -> Iterable[Any]:
    kind = spec["kind"]
    if kind == "ours":
        from streamer import ShardDataset

        options = dict(spec.get("options", {}))
        return ShardDataset(spec["index"], buffer_size=BUFFER, **options)
    if kind == "wds":
        import webdataset as wds

        ds = wds.WebDataset(spec["pattern"], shardshuffle=False, empty_check=False).shuffle(BUFFER)
        decode = spec.get("decode")
        if decode == "default":
            ds = ds.decode()
        elif decode:
            ds = ds.decode(decode)
        return ds
    raise SystemExit(f"unknown contender kind {kind!r}")


def count_samples(spec: dict[str, Any]) -> int:
    source = make_source(spec)
    workers = spec.get("workers", 0)
    if not workers:
        n = 0
        for _ in source:
            n += 1
        return n
    from torch.utils.data import DataLoader, default_collate

    stack = spec.get("collate") == "default"
    collate = default_collate if stack else list_collate
    loader = DataLoader(source, batch_size=BATCH, collate_fn=collate, num_workers=workers)  # type: ignore[arg-type]
    n = 0
    for batch in loader:
        n += len(batch["__key__"]) if stack else len(batch)
    return n


def jpeg_bytes(shards: list[str]) -> list[bytes]:
    from shardstream.format.tarread import iter_samples

    out = []
    for path in shards:
        with open(path, "rb") as handle:
            out += [sample["jpg"] for sample in iter_samples(handle, url=path) if "jpg" in sample]
    return out


def bare_pillow(spec: dict[str, Any]) -> tuple[float, int]:
    """The ceiling: Pillow decoding to a uint8 CHW tensor, over JPEG bytes already in memory."""
    import io

    import numpy as np
    import torch
    from PIL import Image

    data = jpeg_bytes(spec["shards"])
    draft = spec.get("draft")
    started = time.perf_counter()
    n = 0
    if draft is None:
        for b in data:
            torch.from_numpy(np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))).permute(2, 0, 1)
            n += 1
    else:
        for b in data:
            image = Image.open(io.BytesIO(b))
            image.draft("RGB", (draft, draft))
            torch.from_numpy(np.asarray(image.convert("RGB"))).permute(2, 0, 1)
            n += 1
    return time.perf_counter() - started, n


def child_import_cost() -> dict[str, Any]:
    """Seconds and RSS that importing torchcodec's decoders adds to a process that has torch already."""
    import torch  # noqa: F401

    before, started = rss_now(), time.perf_counter()
    try:
        import torchcodec.decoders  # noqa: F401
    except (ImportError, OSError, RuntimeError) as exc:
        return {"error": str(exc)}
    return {"seconds": time.perf_counter() - started, "rss_added": rss_now() - before}


def child_agree(spec: dict[str, Any]) -> dict[str, Any]:
    """Do ours and bare Pillow give the same pixels? (Ours may decode with another library.)"""
    import io

    import numpy as np
    import torch
    from PIL import Image

    from streamer import SampleDecoder

    decoder = SampleDecoder(image="torch")
    data = jpeg_bytes(spec["shards"][:1])[: spec["count"]]
    same = 0
    worst = 0
    for b in data:
        ours = decoder({"__key__": "k", "jpg": b})["jpg"]
        pillow = torch.from_numpy(np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))).permute(2, 0, 1)
        if ours.shape == pillow.shape and ours.dtype == pillow.dtype:
            diff = int((ours.int() - pillow.int()).abs().max())
            same += diff == 0
            worst = max(worst, diff)
        else:
            worst = 256
    return {"images": len(data), "identical": same, "max_abs_diff": worst}


def child_one_sample(spec: dict[str, Any]) -> dict[str, Any]:
    """Construct a ShardDataset on a pattern, take one sample; RSS at each step. Imports only its reader."""
    source = spec["pattern"]
    if spec.get("wds"):
        import webdataset as wds

        after_import = rss_now()
        ds: Any = wds.WebDataset(source, shardshuffle=False, empty_check=False).shuffle(BUFFER)
    else:
        import streamer.decode  # noqa: F401 - ShardDataset imports it on construction
        from streamer import ShardDataset

        after_import = rss_now()
        ds = ShardDataset(source, shuffle=spec["shuffle"], buffer_size=BUFFER)
    after_construct = rss_now()
    sample = next(iter(ds))
    return {
        "rss_after_import": after_import,
        "rss_after_construct": after_construct,
        "rss_after_first": rss_now(),
        "vmhwm": rss_peak(),
        "first_url": sample["__url__"],
        "first_key": sample["__key__"],
    }


def child_flat(spec: dict[str, Any]) -> dict[str, Any]:
    """RSS every ``every`` samples through one epoch of ShardDataset on the index."""
    from streamer import ShardDataset

    every = spec["every"]
    ds = ShardDataset(spec["index"], buffer_size=BUFFER, decode=spec["decode"])
    checkpoints = []
    started = time.perf_counter()
    n = 0
    first = None
    for _ in ds:
        n += 1
        if first is None:
            first = rss_now()
        if n % every == 0:
            checkpoints.append([n, rss_now()])
    return {
        "seconds": time.perf_counter() - started,
        "samples": n,
        "rss_first_sample": first,
        "checkpoints": checkpoints,
        "vmhwm": rss_peak(),
    }


def run_child(args: argparse.Namespace) -> int:
    spec = json.loads(args.spec)
    if args.child == "importcost":
        print(json.dumps(child_import_cost()))
        return 0
    if args.child != "one":
        _imports()
    if args.child == "count":
        profiler = None
        if spec.get("profile"):
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        started = time.perf_counter()
        n = count_samples(spec)
        result: dict[str, Any] = {"seconds": time.perf_counter() - started, "samples": n}
        if profiler is not None:
            import io
            import pstats

            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).strip_dirs().sort_stats("tottime").print_stats(
                int(spec["profile"])
            )
            result["profile"] = text.getvalue()
    elif args.child == "pillow":
        seconds, n = bare_pillow(spec)
        result = {"seconds": seconds, "samples": n}
    elif args.child == "agree":
        result = child_agree(spec)
    elif args.child == "one":
        result = child_one_sample(spec)
    elif args.child == "flat":
        result = child_flat(spec)
    else:
        raise SystemExit(f"unknown child {args.child!r}")
    streamer_module = sys.modules.get("streamer")
    result["streamer_file"] = getattr(streamer_module, "__file__", None)
    # The peak before interpreter shutdown: wait4/`time` report ~130 MB more for any process that imported
    # torch, faulted in by libtorch's exit-time destructors, which says nothing about the work measured.
    result["vmhwm"] = rss_peak()
    print(json.dumps(result))
    return 0


# ---------------------------------------------------------------------------------------------------------
# Parent side: spawning and measuring.
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Run:
    name: str
    seconds: float  # from inside the child, imports excluded
    wall: float  # the whole subprocess
    maxrss_kb: int  # wait4's ru_maxrss, taken at exit (torch's shutdown inflates it, see run_child)
    samples: int
    extra: dict[str, Any] = field(default_factory=dict)


def child_cmd(kind: str, spec: dict[str, Any]) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--spec", json.dumps(spec)]


def run_spec(name: str, kind: str, spec: dict[str, Any]) -> Run:
    wall, maxrss, stdout, _ = spawn(child_cmd(kind, spec), pythonpath=SRC)
    got = json.loads(stdout.strip().splitlines()[-1])
    where = got.get("streamer_file")
    if where is not None and not Path(where).resolve().is_relative_to(SRC.resolve()):
        raise RuntimeError(f"{name}: the child imported streamer from {where}, not from {SRC}")
    return Run(name, float(got.get("seconds", wall)), wall, maxrss, int(got.get("samples", 0)), got)


def peak_mib(run: Run) -> float:
    """The child's own VmHWM (main process only: DataLoader workers are not in it)."""
    return run.extra["vmhwm"] / MIB


def rounds(
    repeats: int, contenders: list[tuple[str, Callable[[], Run]]], log: Any, expected: int | None = None
) -> dict[str, list[Run]]:
    """Run every contender once per round, in turn; returns all runs by name."""
    runs: dict[str, list[Run]] = {name: [] for name, _ in contenders}
    for r in range(repeats):
        for name, fn in contenders:
            run = fn()
            run.extra["load_1min"] = round(os.getloadavg()[0], 2)
            runs[name].append(run)
            rate = f"{run.samples:,} samples, {run.samples / run.seconds:,.0f}/s, " if run.samples else ""
            log(
                f"  round {r + 1}/{repeats} {name}: {run.seconds:.2f}s (wall {run.wall:.2f}s), {rate}"
                f"VmHWM {peak_mib(run):.0f} MiB (wait4 {run.maxrss_kb / 1024:.0f}), load {load()}"
            )
            if expected is not None and run.samples != expected:
                raise RuntimeError(f"{name} yielded {run.samples} samples, expected {expected}")
    return runs


def load() -> str:
    """The 1-minute load average: how busy the shared machine was around a run."""
    return f"{os.getloadavg()[0]:.1f}"


def best(runs: list[Run]) -> Run:
    return min(runs, key=lambda run: run.seconds)


def warm_read(paths: Iterable[Path]) -> int:
    """Read every shard once so all contenders find the same (hot) page cache."""
    total = 0
    for path in paths:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                total += len(chunk)
    return total


# ---------------------------------------------------------------------------------------------------------
# Data, made with the packer.
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Packed:
    root: Path
    index: str
    pattern: str  # absolute brace pattern, for webdataset
    shards: list[str]
    samples: int
    bytes: int


def _packed(out: Path) -> Packed:
    from shardstream.format import INDEX_NAME, DatasetIndex

    index = DatasetIndex.load(out / INDEX_NAME)
    shards = [str(out / entry.name) for entry in index.shards]
    return Packed(out, str(out / INDEX_NAME), str(out / index.pattern), shards, index.samples, index.bytes)


def make_tiny(root: Path, samples: int, log: Any) -> Packed:
    """``samples`` JSON-only records (57-62 bytes each) packed from a JSONL manifest into 10 shards."""
    from packer import PackOptions, pack

    params = {"samples": samples, "shards": 10, "kind": "tiny-json", "v": 1}
    out = root / "packed"
    if marker_matches(root, params):
        return _packed(out)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    log(f"making the tiny dataset: {samples:,} JSON records, packed into 10 shards ...")
    started = time.perf_counter()
    manifest = root / "tiny.jsonl"
    with open(manifest, "w", encoding="utf-8") as handle:
        for i in range(samples):
            record = {"id": f"t{i:09d}", "text": f"tiny sample {i}", "label": i % 10}
            handle.write(json.dumps(record) + "\n")
    pack(manifest, out, PackOptions(max_size=None, max_count=-(-samples // 10)))
    manifest.unlink()
    write_marker(root, params)
    log(f"  done in {time.perf_counter() - started:.0f}s")
    return _packed(out)


def make_jpeg(root: Path, samples: int, side: int, log: Any) -> Packed:
    """``samples`` synthetic JPEGs (``make_jpegs``) with a .cls each, packed into 10 shards."""
    from packer import PackOptions, pack
    from shardstream.demo.synth import make_jpegs

    params = {"samples": samples, "side": side, "shards": 10, "kind": "jpeg", "seed": 0, "v": 1}
    out = root / "packed"
    if marker_matches(root, params):
        return _packed(out)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    log(f"making the JPEG dataset: {samples:,} {side}x{side} JPEGs + .cls, packed into 10 shards ...")
    started = time.perf_counter()
    make_jpegs(root / "raw", samples, size=(side, side), seed=0)
    pack(root / "raw", out, PackOptions(max_size=None, max_count=-(-samples // 10)))
    shutil.rmtree(root / "raw")
    write_marker(root, params)
    log(f"  done in {time.perf_counter() - started:.0f}s")
    return _packed(out)


def make_many(root: Path, tiny: Packed) -> dict[str, Any]:
    """A folder for the pattern ``train-{0000000..9999999}.tar`` where only the shards at the first few
    positions of the epoch exist, both unshuffled (0, 1, 2) and shuffled with seed 0, epoch 0 (where the
    Feistel permutation puts positions 0, 1, 2): symlinks to the tiny dataset's shards."""
    from streamer import Permutation

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    permutation = Permutation(MANY_SHARDS, 0, 0)
    linked: dict[str, list[int]] = {"shuffle=False": [], "shuffle=True": []}
    for position in range(LINKED_POSITIONS):
        for label, number in (("shuffle=False", position), ("shuffle=True", permutation(position))):
            linked[label].append(number)
            link = root / f"train-{number:0{MANY_DIGITS}d}.tar"
            if not link.exists():
                link.symlink_to(tiny.shards[position % len(tiny.shards)])
    last = MANY_SHARDS - 1
    pattern = str(root / f"train-{{{0:0{MANY_DIGITS}d}..{last:0{MANY_DIGITS}d}}}.tar")
    return {"pattern": pattern, "linked_shard_numbers": linked, "files": len(list(root.iterdir()))}


# ---------------------------------------------------------------------------------------------------------
# The benchmarks.
# ---------------------------------------------------------------------------------------------------------
def bench_memory(work: Path, tiny: Packed, repeats: int, with_wds: bool, log: Any) -> dict[str, Any]:
    many = make_many(work / "many", tiny)
    ten = tiny.pattern
    log(f"[memory] one sample from {MANY_SHARDS:,}-shard vs 10-shard patterns, {repeats} round(s)")
    contenders: list[tuple[str, Callable[[], Run]]] = []
    for shuffle in (False, True):
        for label, pattern in ((f"{MANY_SHARDS:,} shards", many["pattern"]), ("10 shards", ten)):
            spec = {"pattern": pattern, "shuffle": shuffle}
            name = f"ours, {label}, shuffle={shuffle}"
            contenders.append((name, lambda n=name, s=spec: run_spec(n, "one", s)))
    runs = rounds(repeats, contenders, log)
    if with_wds:
        # For scale only, one round: webdataset expands the brace pattern into a list of every URL.
        name = f"webdataset, {MANY_SHARDS:,} shards (for scale)"
        log(f"[memory] {name}")
        runs.update(
            rounds(1, [(name, lambda: run_spec(name, "one", {"pattern": many["pattern"], "wds": 1}))], log)
        )
    rows = []
    peaks: dict[str, float] = {}
    for name, got in runs.items():
        peak = max(r.extra["vmhwm"] for r in got)
        peaks[name] = peak
        last = got[-1].extra
        rows.append(
            {
                "contender": name,
                "peak_rss_mib": round(peak / MIB, 1),
                "peak_rss_mib_runs": [round(peak_mib(r), 1) for r in got],
                "wait4_maxrss_mib": round(max(r.maxrss_kb for r in got) / 1024, 1),
                "rss_after_import_mib": round(last["rss_after_import"] / MIB, 1),
                "rss_after_construct_mib": round(last["rss_after_construct"] / MIB, 1),
                "rss_after_first_mib": round(last["rss_after_first"] / MIB, 1),
                "seconds_wall": round(min(r.wall for r in got), 2),
                "first_url": os.path.basename(last["first_url"]),
            }
        )
    deltas = {}
    for shuffle in (False, True):
        big = peaks[f"ours, {MANY_SHARDS:,} shards, shuffle={shuffle}"]
        small = peaks[f"ours, 10 shards, shuffle={shuffle}"]
        deltas[f"shuffle={shuffle}"] = round((big - small) / MB, 1)
    return {
        "setup": {
            "pattern_10m": os.path.basename(many["pattern"]),
            "pattern_10": os.path.basename(ten),
            "linked_shard_numbers": many["linked_shard_numbers"],
            "files_in_10m_folder": many["files"],
            "samples_per_shard": tiny.samples // len(tiny.shards),
            "note": "no index (a pattern): counts unknown, shards dealt whole; decode=True, buffer_size=1000",
        },
        "rows": rows,
        "peak_delta_mb": deltas,
        "targets": {
            f"peak RSS, {MANY_SHARDS:,} shards within 50 MB of 10 shards ({k})": v <= 50
            for k, v in deltas.items()
        },
    }


def bench_flat(tiny: Packed, every: int, repeats: int, log: Any) -> dict[str, Any]:
    log(f"[flat] RSS every {every:,} samples over {tiny.samples:,} tiny samples, {repeats} round(s)")
    contenders: list[tuple[str, Callable[[], Run]]] = []
    for decode in (False, True):
        spec = {"index": tiny.index, "decode": decode, "every": every}
        name = f"ours, decode={decode}"
        contenders.append((name, lambda n=name, s=spec: run_spec(n, "flat", s)))
    runs = rounds(repeats, contenders, log, expected=tiny.samples)
    rows = []
    targets = {}
    for name, got in runs.items():
        spreads = []
        for run in got:
            values = [rss for _, rss in run.extra["checkpoints"]]
            spreads.append(max(values) / min(values) - 1)
        worst = max(range(len(got)), key=lambda i: spreads[i])
        run = got[worst]
        values = [rss for _, rss in run.extra["checkpoints"]]
        rows.append(
            {
                "contender": name,
                "rss_first_sample_mib": round(run.extra["rss_first_sample"] / MIB, 1),
                "checkpoints_mib": [[n, round(rss / MIB, 1)] for n, rss in run.extra["checkpoints"]],
                "min_mib": round(min(values) / MIB, 1),
                "max_mib": round(max(values) / MIB, 1),
                "spread_pct": round(100 * spreads[worst], 1),
                "spread_pct_runs": [round(100 * s, 1) for s in spreads],
                "vmhwm_mib": round(run.extra["vmhwm"] / MIB, 1),
                "samples_per_s": round(run.samples / run.seconds),
            }
        )
        targets[f"RSS flat within 10% from {every:,} to {tiny.samples:,} samples ({name})"] = (
            spreads[worst] <= 0.10
        )
    return {"rows": rows, "targets": targets}


def _count(name: str, spec: dict[str, Any]) -> tuple[str, Callable[[], Run]]:
    return name, lambda: run_spec(name, "count", spec)


def _speed_rows(runs: dict[str, list[Run]], data_bytes: int) -> list[dict[str, Any]]:
    rows = []
    for name, got in runs.items():
        b = best(got)
        rows.append(
            {
                "contender": name,
                "seconds": round(b.seconds, 3),
                "seconds_runs": [round(r.seconds, 3) for r in got],
                "samples": b.samples,
                "samples_per_s": round(b.samples / b.seconds),
                "mb_per_s": round(data_bytes / MB / b.seconds, 1),
                "wall": round(b.wall, 2),
                "peak_rss_mib": round(max(peak_mib(r) for r in got), 1),
                "load_1min_runs": [r.extra["load_1min"] for r in got],
            }
        )
    return rows


def _rate(runs: dict[str, list[Run]], name: str) -> float:
    b = best(runs[name])
    return b.samples / b.seconds


def bench_tiny(tiny: Packed, repeats: int, log: Any) -> dict[str, Any]:
    size = warm_read(Path(p) for p in tiny.shards)
    log(f"[tiny] {tiny.samples:,} tiny JSON samples, {size / MB:.0f} MB of shards, {repeats} round(s)")
    ours = {"kind": "ours", "index": tiny.index}
    wds = {"kind": "wds", "pattern": tiny.pattern}
    dl = {"workers": LOADER_WORKERS}
    contenders = [
        _count("ours, raw", {**ours, "options": {"decode": False}}),
        _count("webdataset, raw", wds),
        _count("ours, json decoded", {**ours, "options": {"decode": True}}),
        _count("webdataset, json decoded (.decode())", {**wds, "decode": "default"}),
        _count("ours, raw, DataLoader", {**ours, "options": {"decode": False}, **dl}),
        _count("webdataset, raw, DataLoader", {**wds, **dl}),
        _count("ours, json decoded, DataLoader", {**ours, "options": {"decode": True}, **dl}),
        _count("webdataset, json decoded, DataLoader", {**wds, "decode": "default", **dl}),
    ]
    runs = rounds(repeats, contenders, log, expected=tiny.samples)
    r = {name: _rate(runs, name) for name in runs}
    ratios = {
        "raw": r["ours, raw"] / r["webdataset, raw"],
        "json_decoded": r["ours, json decoded"] / r["webdataset, json decoded (.decode())"],
        "raw_dataloader": r["ours, raw, DataLoader"] / r["webdataset, raw, DataLoader"],
        "json_decoded_dataloader": r["ours, json decoded, DataLoader"]
        / r["webdataset, json decoded, DataLoader"],
    }
    return {
        "input": _input(tiny, size, "one .json member (57-62 bytes) per sample"),
        "rows": _speed_rows(runs, size),
        "ratios_vs_webdataset": {k: round(v, 2) for k, v in ratios.items()},
        "targets": {
            "ours >= 5x webdataset, raw (decode=False)": ratios["raw"] >= 5,
            "ours >= 5x webdataset, json decoded": ratios["json_decoded"] >= 5,
        },
    }


def _input(data: Packed, size: int, members: str) -> dict[str, Any]:
    return {
        "samples": data.samples,
        "shards": len(data.shards),
        "mb": round(size / MB, 1),
        "members": members,
        "pattern": os.path.basename(data.pattern),
    }


def bench_raw(jpeg: Packed, repeats: int, log: Any) -> dict[str, Any]:
    size = warm_read(Path(p) for p in jpeg.shards)
    log(f"[raw] {jpeg.samples:,} JPEG samples as bytes, {size / MB:.0f} MB of shards, {repeats} round(s)")
    ours = {"kind": "ours", "index": jpeg.index, "options": {"decode": False}}
    wds = {"kind": "wds", "pattern": jpeg.pattern}
    dl = {"workers": LOADER_WORKERS}
    contenders = [
        _count("ours, raw", ours),
        _count("webdataset, raw", wds),
        _count("ours, raw, DataLoader", {**ours, **dl}),
        _count("webdataset, raw, DataLoader", {**wds, **dl}),
    ]
    runs = rounds(repeats, contenders, log, expected=jpeg.samples)
    r = {name: _rate(runs, name) for name in runs}
    ratios = {
        "raw": r["ours, raw"] / r["webdataset, raw"],
        "raw_dataloader": r["ours, raw, DataLoader"] / r["webdataset, raw, DataLoader"],
    }
    return {
        "input": _input(jpeg, size, "jpg + cls per sample"),
        "rows": _speed_rows(runs, size),
        "ratios_vs_webdataset": {k: round(v, 2) for k, v in ratios.items()},
        "targets": {"ours >= 8x webdataset, JPEG bytes (decode=False)": ratios["raw"] >= 8},
    }


def bench_decode(jpeg: Packed, repeats: int, side: int, log: Any) -> dict[str, Any]:
    size = warm_read(Path(p) for p in jpeg.shards)
    log(f"[decode] {jpeg.samples:,} JPEGs decoded to uint8 CHW tensors, {repeats} round(s)")
    ours = {"kind": "ours", "index": jpeg.index, "options": {"image": "torch"}}
    small = {"kind": "ours", "index": jpeg.index, "options": {"image": "torch", "image_size": side}}
    wds = {"kind": "wds", "pattern": jpeg.pattern, "decode": "torchrgb8"}
    dl = {"workers": LOADER_WORKERS}
    # Stacked batches: one shared-memory block per batch. With a list collate every tensor gets its own.
    stacked = {"workers": LOADER_WORKERS, "collate": "default"}
    half = f"image_size={side}"
    contenders = [
        _count('ours, image="torch"', ours),
        _count('webdataset, .decode("torchrgb8")', wds),
        ("bare Pillow, bytes in memory", lambda: run_spec("bare Pillow", "pillow", {"shards": jpeg.shards})),
        _count(f'ours, image="torch", {half}', small),
        (
            f"bare Pillow, draft {side}, bytes in memory",
            lambda: run_spec("bare Pillow draft", "pillow", {"shards": jpeg.shards, "draft": side}),
        ),
        _count('ours, image="torch", DataLoader', {**ours, **stacked}),
        _count('webdataset, .decode("torchrgb8"), DataLoader', {**wds, **stacked}),
        _count(f'ours, image="torch", {half}, DataLoader', {**small, **stacked}),
        _count('ours, image="torch", DataLoader, list collate', {**ours, **dl}),
        _count('webdataset, .decode("torchrgb8"), DataLoader, list collate', {**wds, **dl}),
    ]
    agree = run_spec("agree", "agree", {"shards": jpeg.shards, "count": 500}).extra
    cost = json.loads(spawn(child_cmd("importcost", {}), pythonpath=SRC)[2].strip().splitlines()[-1])
    if "seconds" in cost:
        cost = {"seconds": round(cost["seconds"], 2), "rss_added_mib": round(cost["rss_added"] / MIB, 1)}
    log(f"  import torchcodec.decoders after torch: {cost}")
    log(
        f"  ours vs bare Pillow pixels: {agree['identical']}/{agree['images']} identical, max |diff| "
        f"{agree['max_abs_diff']}"
    )
    runs = rounds(repeats, contenders, log, expected=jpeg.samples)
    r = {name: _rate(runs, name) for name in runs}
    pillow = r["bare Pillow, bytes in memory"]
    ratios = {
        "ours_vs_webdataset": r['ours, image="torch"'] / r['webdataset, .decode("torchrgb8")'],
        "ours_vs_bare_pillow": r['ours, image="torch"'] / pillow,
        f"ours_{side}_vs_bare_pillow_full": r[f'ours, image="torch", {half}'] / pillow,
        f"ours_{side}_vs_bare_pillow_draft": r[f'ours, image="torch", {half}']
        / r[f"bare Pillow, draft {side}, bytes in memory"],
        "ours_vs_webdataset_dataloader": r['ours, image="torch", DataLoader']
        / r['webdataset, .decode("torchrgb8"), DataLoader'],
        "ours_vs_webdataset_dataloader_list_collate": r['ours, image="torch", DataLoader, list collate']
        / r['webdataset, .decode("torchrgb8"), DataLoader, list collate'],
        "ours_dataloader_vs_in_process": r['ours, image="torch", DataLoader'] / r['ours, image="torch"'],
        f"ours_{side}_vs_webdataset_dataloader": r[f'ours, image="torch", {half}, DataLoader']
        / r['webdataset, .decode("torchrgb8"), DataLoader'],
    }
    return {
        "input": _input(jpeg, size, "jpg + cls per sample; both readers also decode cls to int"),
        "pixels_ours_vs_bare_pillow": {k: agree[k] for k in ("images", "identical", "max_abs_diff")},
        "torchcodec_import_cost": cost,
        "rows": _speed_rows(runs, size),
        "ratios": {k: round(v, 2) for k, v in ratios.items()},
        "targets": {
            "ours >= 1.5x webdataset (decoded to uint8 tensors)": ratios["ours_vs_webdataset"] >= 1.5,
            "ours >= 0.9x bare Pillow": ratios["ours_vs_bare_pillow"] >= 0.9,
            f"ours with image_size={side} faster than full-size bare Pillow": ratios[
                f"ours_{side}_vs_bare_pillow_full"
            ]
            > 1.0,
        },
    }


def profile_ours(tiny: Packed | None, jpeg: Packed | None, side: int, log: Any) -> str:
    """cProfile of our in-process contenders (and webdataset's raw reader), sorted by tottime.

    The profiler runs inside the child around the counting loop only, as ``python -m cProfile -s tottime``
    would but without the ~3 s of imports, which drown a 0.2 s loop. Times are inflated by the profiler.
    """
    cases = []
    if tiny is not None:
        cases.append(("tiny, raw", {"kind": "ours", "index": tiny.index, "options": {"decode": False}}))
        cases.append(
            ("tiny, json decoded", {"kind": "ours", "index": tiny.index, "options": {"decode": True}})
        )
    if jpeg is not None:
        cases.append(("JPEG, raw", {"kind": "ours", "index": jpeg.index, "options": {"decode": False}}))
        cases.append(
            ('JPEG, image="torch"', {"kind": "ours", "index": jpeg.index, "options": {"image": "torch"}})
        )
        cases.append(
            (
                f'JPEG, image="torch", image_size={side}',
                {"kind": "ours", "index": jpeg.index, "options": {"image": "torch", "image_size": side}},
            )
        )
        cases.append(("webdataset, JPEG, raw", {"kind": "wds", "pattern": jpeg.pattern}))
    if tiny is not None:
        cases.append(("webdataset, tiny, raw", {"kind": "wds", "pattern": tiny.pattern}))
    text = [
        f"# Profiles, {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}, packer+streamer source sha256 "
        f"{source_fingerprint(SRC)}\n\ncProfile around the counting loop only (imports excluded), in "
        "process, sorted by tottime; the profiler inflates every Python call, so compare rows, not totals.\n"
    ]
    for title, spec in cases:
        log(f"[profile] {title}")
        run = run_spec(title, "count", {**spec, "profile": 30})
        stats = run.extra["profile"]
        body = stats[stats.find("   Ordered by") :] if "Ordered by" in stats else stats
        text.append(
            f"## {title}\n\n{run.samples:,} samples in {run.seconds:.2f} s under the profiler "
            f"(streamer from {run.extra.get('streamer_file')})\n\n{body.rstrip()}\n"
        )
    return "\n".join(text)


# ---------------------------------------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    import multiprocessing

    return {
        **machine_facts(),
        "mp_start_method": multiprocessing.get_start_method(),
        "source_fingerprint": source_fingerprint(SRC),
        "versions": {n: version(n) for n in ("webdataset", "pillow", "numpy", "torch", "torchcodec")},
    }


def source_fingerprint(root: Path = REPO) -> str:
    """sha256 (first 12 hex digits) of the shardstream/, packer/ and streamer/ sources: the code measured."""
    import hashlib

    digest = hashlib.sha256()
    sources = [*root.glob("shardstream/**/*.py"), *root.glob("shardstream/**/*.c")]
    sources += [*root.glob("packer/**/*.py"), *root.glob("streamer/**/*.py")]
    for path in sorted(sources):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def snapshot_sources(dest: Path) -> Path:
    """Copy shardstream/, packer/ and streamer/ as they are now; every child imports them from here."""
    shutil.rmtree(dest, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("shardstream", "packer", "streamer"):
        shutil.copytree(REPO / package, dest / package, ignore=ignore)
    return dest


def _speed_section(title: str, r: dict[str, Any]) -> list[str]:
    i = r["input"]
    ratios = r.get("ratios_vs_webdataset") or r.get("ratios") or {}
    label = "Ours vs webdataset (samples/s ratio)" if "ratios_vs_webdataset" in r else "Ratios (samples/s)"
    return [
        "",
        f"## {title}",
        "",
        f"Input: {i['samples']:,} samples in {i['shards']} shards (`{i['pattern']}`), {i['mb']} MB; "
        f"{i['members']}.",
        "",
        table(
            ["contender", "samples/s", "seconds", "runs", "MB/s", "wall", "VmHWM MiB"],
            [
                [
                    x["contender"],
                    f"{x['samples_per_s']:,}",
                    x["seconds"],
                    x["seconds_runs"],
                    x["mb_per_s"],
                    x["wall"],
                    x["peak_rss_mib"],
                ]
                for x in r["rows"]
            ],
        ),
        "",
        f"{label}: " + ", ".join(f"{k} = {v}" for k, v in ratios.items()) + ".",
        *(
            [
                "",
                f'Pixels, ours (`image="torch"`) vs bare Pillow, first {px["images"]} JPEGs of shard 0: '
                f"{px['identical']} identical, max |difference| {px['max_abs_diff']}.",
            ]
            if (px := r.get("pixels_ours_vs_bare_pillow"))
            else []
        ),
        *(
            [
                "",
                "Importing `torchcodec.decoders` (ours decodes plain JPEGs to tensors with it; imported "
                f"before the clock, like torch) takes {c['seconds']} s and adds {c['rss_added_mib']} MiB of "
                "RSS to a process that has torch already.",
            ]
            if (c := r.get("torchcodec_import_cost")) and "seconds" in c
            else []
        ),
        "",
        *[f"- {name}: {verdict(ok)}" for name, ok in r["targets"].items()],
    ]


def to_markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    out = [
        f"# Streamer benchmark, {m['date']}{' (quick)' if result['quick'] else ''}",
        "",
        f"Machine: {m['nproc']} CPUs ({m['usable_cpus']} usable), {m['cpu']}, {m['memory']} RAM; "
        f"{m['os']}.  ",
        f"Python {m['python']}; "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items())
        + f"; multiprocessing start method {m['mp_start_method']}; shardstream {m['shardstream_commit']}, "
        f"packer+streamer measured from a copy taken at the start, source sha256 {m['source_fingerprint']}"
        + (
            ""
            if result.get("source_fingerprint_at_end", m["source_fingerprint"]) == m["source_fingerprint"]
            else f" at the start, {result['source_fingerprint_at_end']} at the end (**changed mid-run**)"
        )
        + (
            ""
            if result.get("working_tree_fingerprint_at_end", m["source_fingerprint"])
            == m["source_fingerprint"]
            else f" (the working tree had moved on to {result['working_tree_fingerprint_at_end']} by the end)"
        )
        + ".  ",
        f"Command: `{result['command']}`; total {result['total_seconds']:.0f}s.",
        "",
        f"Every run is a fresh subprocess, timed from inside after its imports (torch, webdataset, Pillow, "
        f"the streamer, torchcodec), dataset construction included; contenders take turns round by round "
        f"and the best round counts. Shuffle buffer {BUFFER} for both readers (ours: `ShardDataset(index, "
        f"buffer_size={BUFFER})`, which fills the buffer before the first sample; webdataset: "
        f"`WebDataset(pattern, shardshuffle=False, empty_check=False).shuffle({BUFFER})`, which starts after "
        f"100). DataLoader rows: `DataLoader(ds, batch_size={BATCH}, collate_fn=..., "
        f"num_workers={LOADER_WORKERS})`, worker start-up included, each worker with its own buffer; the "
        "collate keeps the batch a list, except for decoded images, which torch's `default_collate` stacks "
        "(one shared-memory block per batch; the `list collate` rows show the cost of one per tensor). The "
        "shards' page cache is warmed by one read before each benchmark. `VmHWM` is the child's peak RSS "
        "read just before it exits (main process only; the imports alone, torch and torchcodec, take ~700 "
        "MiB). The machine is shared and noisy: compare the ratios measured side by side in this run, not "
        "absolute figures across runs.",
    ]
    if "memory" in result:
        r = result["memory"]
        s = r["setup"]
        out += [
            "",
            "## 1. Peak RSS: one sample from a 10,000,000-shard pattern vs a 10-shard pattern",
            "",
            f"`ShardDataset(pattern, shuffle=..., buffer_size={BUFFER})` then `next(iter(ds))`. Patterns "
            f"`{s['pattern_10m']}` and `{s['pattern_10']}` (no index, so no counts: shards are dealt whole, "
            "in order with shuffle=False, through the keyed Feistel permutation with shuffle=True). In the "
            f"10M folder only the shards at the epoch's first {LINKED_POSITIONS} positions exist "
            f"(symlinks to the tiny dataset's shards, {s['samples_per_shard']:,} samples each): numbers "
            f"{s['linked_shard_numbers']['shuffle=False']} for shuffle=False and "
            f"{s['linked_shard_numbers']['shuffle=True']} for shuffle=True (seed 0, epoch 0). Peak RSS is "
            "the child's VmHWM read just before it exits, the max over rounds (`wait4`'s ru_maxrss, which "
            "adds what libtorch's exit-time destructors fault in, is in the JSON). Each child imports only "
            "its reader (ours: `streamer.dataset` and `streamer.decode`, which import torch).",
            "",
            table(
                [
                    "contender",
                    "peak RSS MiB",
                    "runs",
                    "after import",
                    "after construct",
                    "after 1st sample",
                    "wall s",
                    "first sample from",
                ],
                [
                    [
                        x["contender"],
                        x["peak_rss_mib"],
                        x["peak_rss_mib_runs"],
                        x["rss_after_import_mib"],
                        x["rss_after_construct_mib"],
                        x["rss_after_first_mib"],
                        x["seconds_wall"],
                        x["first_url"],
                    ]
                    for x in r["rows"]
                ],
            ),
            "",
            "Peak RSS, 10M minus 10 shards: "
            + ", ".join(f"{k}: {v} MB" for k, v in r["peak_delta_mb"].items())
            + ".",
            "",
            *[f"- {name}: {verdict(ok)}" for name, ok in r["targets"].items()],
        ]
    if "flat" in result:
        r = result["flat"]
        out += [
            "",
            "## 2. RSS through a long epoch of tiny samples",
            "",
            f"`ShardDataset(index, buffer_size={BUFFER}, decode=...)` (shuffle=True) over the tiny dataset; "
            "RSS from `/proc/self/statm` at every checkpoint (the run with the widest spread is shown). "
            "Spread = max / min - 1 over the checkpoints.",
            "",
            table(
                [
                    "contender",
                    "RSS at 1st sample",
                    "checkpoints (samples: MiB)",
                    "spread",
                    "runs",
                    "samples/s",
                ],
                [
                    [
                        x["contender"],
                        x["rss_first_sample_mib"],
                        ", ".join(f"{n // 1000}k: {v}" for n, v in x["checkpoints_mib"]),
                        f"{x['spread_pct']}%",
                        [f"{s}%" for s in x["spread_pct_runs"]],
                        f"{x['samples_per_s']:,}",
                    ]
                    for x in r["rows"]
                ],
            ),
            "",
            *[f"- {name}: {verdict(ok)}" for name, ok in r["targets"].items()],
        ]
    for key, title in (
        ("tiny", "3. Throughput: tiny JSON samples"),
        ("raw", "4. Throughput: JPEG samples as bytes"),
        ("decode", "5. Throughput: JPEGs decoded to uint8 CHW tensors"),
    ):
        if key in result:
            out += _speed_section(title, result[key])
    if result.get("profile"):
        out += ["", f"Profiles (cProfile by tottime, reading loop only): see `{result['profile']}`."]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------------
BENCHES = ("memory", "flat", "tiny", "raw", "decode")
DATA_FOR = {"tiny": ("memory", "flat", "tiny"), "jpeg": ("raw", "decode")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small inputs, one round: a smoke run")
    parser.add_argument(
        "--only",
        choices=(*BENCHES, "profile"),
        action="append",
        help="run only this benchmark (repeatable); default: all; 'profile' alone: just the profiles, saved "
        "to their own file",
    )
    parser.add_argument("--workdir", type=Path, help="where the datasets go (default: a temp folder)")
    parser.add_argument("--keep-data", action="store_true", help="keep the generated datasets in --workdir")
    parser.add_argument("--tiny", type=int, help="tiny JSON samples (default 1000000; quick 50000)")
    parser.add_argument("--jpegs", type=int, help="JPEG samples (default 20000; quick 1000)")
    parser.add_argument("--side", type=int, default=256, help="JPEG side in pixels (default 256)")
    parser.add_argument("--image-size", type=int, default=128, help="reduced decode size (default 128)")
    parser.add_argument("--repeats", type=int, help="rounds for memory, raw and decode (default 3; quick 1)")
    parser.add_argument("--slow-repeats", type=int, help="rounds for tiny and flat (default 2; quick 1)")
    parser.add_argument("--no-wds-memory", action="store_true", help="skip webdataset on the 10M pattern")
    parser.add_argument("--profile", action="store_true", help="also cProfile our contenders")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--no-save", action="store_true", help="print the report only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args)

    quick = args.quick
    tiny_n = args.tiny or (50_000 if quick else 1_000_000)
    jpeg_n = args.jpegs or (1000 if quick else 20_000)
    repeats = args.repeats or (1 if quick else 3)
    slow = args.slow_repeats or (1 if quick else 2)
    which = args.only or list(BENCHES)
    profile_only = which == ["profile"]
    if profile_only:
        args.profile = True
        which = list(BENCHES)  # profile every case; run no benchmark
    benches = [] if profile_only else which

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    global SRC
    temp = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="shardstream-stream-bench-")) if temp else args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    SRC = snapshot_sources(work / "src")
    sys.path.insert(0, str(SRC))
    started = time.perf_counter()
    result: dict[str, Any] = {
        "quick": quick,
        "command": " ".join(
            ["python3", "benchmarks/stream_bench.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "machine": machine_info(),
    }
    log(f"workdir {work}; {result['machine']['nproc']} CPUs, {result['machine']['cpu']}")
    try:
        tiny = jpeg = None
        if set(DATA_FOR["tiny"]) & set(which):
            tiny = make_tiny(work / f"tiny-{tiny_n}", tiny_n, log)
        if set(DATA_FOR["jpeg"]) & set(which):
            jpeg = make_jpeg(work / f"jpeg-{jpeg_n}-{args.side}", jpeg_n, args.side, log)
        if "memory" in benches:
            assert tiny is not None
            result["memory"] = bench_memory(work, tiny, repeats, not (quick or args.no_wds_memory), log)
        if "flat" in benches:
            assert tiny is not None
            result["flat"] = bench_flat(tiny, max(1, tiny_n // 10), slow, log)
        if "tiny" in benches:
            assert tiny is not None
            result["tiny"] = bench_tiny(tiny, slow, log)
        if "raw" in benches:
            assert jpeg is not None
            result["raw"] = bench_raw(jpeg, repeats, log)
        if "decode" in benches:
            assert jpeg is not None
            result["decode"] = bench_decode(jpeg, repeats, args.image_size, log)
        # A partial run (--only) gets its own file rather than overwriting the day's full one.
        stamp = dt.date.today().isoformat() + ("-quick" if quick else "")
        if args.only:
            stamp += "-" + "-".join(args.only)
        if args.profile:
            prof = profile_ours(
                tiny if "tiny" in which else None,
                jpeg if set(DATA_FOR["jpeg"]) & set(which) else None,
                args.image_size,
                log,
            )
            if args.no_save:
                print(prof)
            else:
                args.results.mkdir(parents=True, exist_ok=True)
                path = args.results / f"stream-{stamp}-profile.txt"
                path.write_text(prof)
                result["profile"] = os.path.relpath(path, REPO)
        result["total_seconds"] = round(time.perf_counter() - started, 1)
        result["source_fingerprint_at_end"] = source_fingerprint(SRC)
        result["working_tree_fingerprint_at_end"] = source_fingerprint(REPO)
        if result["source_fingerprint_at_end"] != result["machine"]["source_fingerprint"]:
            log("WARNING: the source snapshot changed during the run; the figures mix two versions")
        if result["working_tree_fingerprint_at_end"] != result["machine"]["source_fingerprint"]:
            log(
                "note: packer/ or streamer/ changed in the working tree during the run; the copy taken at "
                "the start was measured throughout"
            )
        if profile_only:
            log(f"profiles only: {result.get('profile', 'printed above')}")
            return 0
        markdown = to_markdown(result)
        print(markdown)
        if not args.no_save:
            args.results.mkdir(parents=True, exist_ok=True)
            (args.results / f"stream-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
            (args.results / f"stream-{stamp}.md").write_text(markdown)
            log(f"saved {args.results / f'stream-{stamp}.md'} and .json")
    finally:
        shutil.rmtree(work / "many", ignore_errors=True)
        shutil.rmtree(work / "src", ignore_errors=True)
        if temp or not args.keep_data:
            for name in os.listdir(work):
                if name.startswith(("tiny-", "jpeg-")):
                    shutil.rmtree(work / name, ignore_errors=True)
            if temp:
                shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
