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

    python3 benchmarks/stream/stream_bench.py --quick          # smoke run, about two minutes
    python3 benchmarks/stream/stream_bench.py                  # the full run
    python3 benchmarks/stream/stream_bench.py --only decode --repeats 2 --profile

Results: a markdown report on stdout, plus ``benchmarks/results/stream-<date>[-quick].{json,md}``.

This file holds the cases: what each contender runs, what is compared, the targets. The shared harness is
``harness/``; the child side is ``stream_children.py``, the datasets ``stream_data.py``, the result rows
and markdown ``stream_report.py``, the profiles ``stream_profile.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import REPO, Contender, Run, best, child_cmd, load, rounds, spawn, warm_read
from harness.cli import add_common_flags, command_line, log, work_folder
from harness.report import machine_facts, new_result, save_results, save_text, stamp, versions
from harness.sources import check_sources, note_source_drift, snapshot_sources, source_fingerprint
from stream_children import LOADER_WORKERS, run_child
from stream_data import MANY_SHARDS, Packed, make_jpeg, make_many, make_tiny
from stream_profile import profile_ours
from stream_report import MB, MIB, flat_row, input_facts, memory_row, peak_mib, speed_rows, to_markdown

# Where children import the SOURCE_PACKAGES from: a copy taken when the run starts (snapshot_sources), so
# edits landing in the working tree mid-run cannot mix two versions into one set of ratios.
SRC = REPO
BENCHES = ("memory", "flat", "tiny", "raw", "decode")
DATA_FOR = {"tiny": ("memory", "flat", "tiny"), "jpeg": ("raw", "decode")}


# ---------------------------------------------------------------------------------------------------------
# Running children.
# ---------------------------------------------------------------------------------------------------------
def run_spec(name: str, kind: str, spec: dict[str, Any]) -> Run:
    wall, maxrss, stdout, _ = spawn(child_cmd(__file__, kind, "--spec", json.dumps(spec)), pythonpath=SRC)
    got = json.loads(stdout.strip().splitlines()[-1])
    check_sources(name, got.get("source_files", {}), SRC)
    return Run(name, float(got.get("seconds", wall)), wall, maxrss, int(got.get("samples", 0)), extra=got)


def describe(run: Run) -> str:
    rate = f"{run.samples:,} samples, {run.samples / run.seconds:,.0f}/s, " if run.samples else ""
    return (
        f"{run.seconds:.2f}s (wall {run.wall:.2f}s), {rate}"
        f"VmHWM {peak_mib(run):.0f} MiB (wait4 {run.maxrss_kb / 1024:.0f}), load {load()}"
    )


def _count(name: str, spec: dict[str, Any]) -> Contender:
    return name, lambda: run_spec(name, "count", spec)


# ---------------------------------------------------------------------------------------------------------
# 1. memory, 2. flat.
# ---------------------------------------------------------------------------------------------------------
def bench_memory(work: Path, tiny: Packed, repeats: int, with_wds: bool) -> dict[str, Any]:
    many = make_many(work / "many", tiny)
    log(f"[memory] one sample from {MANY_SHARDS:,}-shard vs 10-shard patterns, {repeats} round(s)")
    contenders: list[Contender] = []
    for shuffle in (False, True):
        for label, pattern in ((f"{MANY_SHARDS:,} shards", many["pattern"]), ("10 shards", tiny.pattern)):
            spec = {"pattern": pattern, "shuffle": shuffle}
            name = f"ours, {label}, shuffle={shuffle}"
            contenders.append((name, lambda n=name, s=spec: run_spec(n, "one", s)))
    runs = rounds(repeats, contenders, log, describe)
    if with_wds:
        # For scale only, one round: webdataset expands the brace pattern into a list of every URL.
        name = f"webdataset, {MANY_SHARDS:,} shards (for scale)"
        log(f"[memory] {name}")
        spec = {"pattern": many["pattern"], "wds": 1}
        runs.update(rounds(1, [(name, lambda: run_spec(name, "one", spec))], log, describe))
    peaks = {name: max(r.extra["vmhwm"] for r in got) for name, got in runs.items()}
    deltas = {}
    for shuffle in (False, True):
        big = peaks[f"ours, {MANY_SHARDS:,} shards, shuffle={shuffle}"]
        small = peaks[f"ours, 10 shards, shuffle={shuffle}"]
        deltas[f"shuffle={shuffle}"] = round((big - small) / MB, 1)
    return {
        "setup": {
            "pattern_10m": os.path.basename(many["pattern"]),
            "pattern_10": os.path.basename(tiny.pattern),
            "linked_shard_numbers": many["linked_shard_numbers"],
            "files_in_10m_folder": many["files"],
            "samples_per_shard": tiny.samples // len(tiny.shards),
            "note": "no index (a pattern): counts unknown, shards dealt whole; decode=True, buffer_size=1000",
        },
        "rows": [memory_row(name, got) for name, got in runs.items()],
        "peak_delta_mb": deltas,
        "targets": {
            f"peak RSS, {MANY_SHARDS:,} shards within 50 MB of 10 shards ({k})": v <= 50
            for k, v in deltas.items()
        },
    }


def bench_flat(tiny: Packed, every: int, repeats: int) -> dict[str, Any]:
    log(f"[flat] RSS every {every:,} samples over {tiny.samples:,} tiny samples, {repeats} round(s)")
    contenders: list[Contender] = []
    for decode in (False, True):
        spec = {"index": tiny.index, "decode": decode, "every": every}
        name = f"ours, decode={decode}"
        contenders.append((name, lambda n=name, s=spec: run_spec(n, "flat", s)))
    runs = rounds(repeats, contenders, log, describe, expected=tiny.samples)
    rows = []
    targets = {}
    for name, got in runs.items():
        row, spread = flat_row(name, got)
        rows.append(row)
        targets[f"RSS flat within 10% from {every:,} to {tiny.samples:,} samples ({name})"] = spread <= 0.10
    return {"rows": rows, "targets": targets}


# ---------------------------------------------------------------------------------------------------------
# 3. tiny, 4. raw, 5. decode: throughput.
# ---------------------------------------------------------------------------------------------------------
def _rates(runs: dict[str, list[Run]]) -> dict[str, float]:
    """Samples/s of each contender's best run."""
    return {name: best(got).samples / best(got).seconds for name, got in runs.items()}


def bench_tiny(tiny: Packed, repeats: int) -> dict[str, Any]:
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
    runs = rounds(repeats, contenders, log, describe, expected=tiny.samples)
    r = _rates(runs)
    ratios = {
        "raw": r["ours, raw"] / r["webdataset, raw"],
        "json_decoded": r["ours, json decoded"] / r["webdataset, json decoded (.decode())"],
        "raw_dataloader": r["ours, raw, DataLoader"] / r["webdataset, raw, DataLoader"],
        "json_decoded_dataloader": r["ours, json decoded, DataLoader"]
        / r["webdataset, json decoded, DataLoader"],
    }
    return {
        "input": input_facts(tiny, size, "one .json member (57-62 bytes) per sample"),
        "rows": speed_rows(runs, size),
        "ratios_vs_webdataset": {k: round(v, 2) for k, v in ratios.items()},
        "targets": {
            "ours >= 5x webdataset, raw (decode=False)": ratios["raw"] >= 5,
            "ours >= 5x webdataset, json decoded": ratios["json_decoded"] >= 5,
        },
    }


def bench_raw(jpeg: Packed, repeats: int) -> dict[str, Any]:
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
    runs = rounds(repeats, contenders, log, describe, expected=jpeg.samples)
    r = _rates(runs)
    ratios = {
        "raw": r["ours, raw"] / r["webdataset, raw"],
        "raw_dataloader": r["ours, raw, DataLoader"] / r["webdataset, raw, DataLoader"],
    }
    return {
        "input": input_facts(jpeg, size, "jpg + cls per sample"),
        "rows": speed_rows(runs, size),
        "ratios_vs_webdataset": {k: round(v, 2) for k, v in ratios.items()},
        "targets": {"ours >= 8x webdataset, JPEG bytes (decode=False)": ratios["raw"] >= 8},
    }


def _decode_contenders(jpeg: Packed, side: int) -> list[Contender]:
    ours = {"kind": "ours", "index": jpeg.index, "options": {"image": "torch"}}
    small = {"kind": "ours", "index": jpeg.index, "options": {"image": "torch", "image_size": side}}
    wds = {"kind": "wds", "pattern": jpeg.pattern, "decode": "torchrgb8"}
    dl = {"workers": LOADER_WORKERS}
    # Stacked batches: one shared-memory block per batch. With a list collate every tensor gets its own.
    stacked = {"workers": LOADER_WORKERS, "collate": "default"}
    half = f"image_size={side}"
    return [
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


def _decode_checks(jpeg: Packed) -> tuple[dict[str, Any], dict[str, Any]]:
    """Before timing: do ours and bare Pillow agree on the pixels; what does importing torchcodec cost."""
    agree = run_spec("agree", "agree", {"shards": jpeg.shards, "count": 500}).extra
    _, _, stdout, _ = spawn(child_cmd(__file__, "importcost", "--spec", "{}"), pythonpath=SRC)
    cost = json.loads(stdout.strip().splitlines()[-1])
    if "seconds" in cost:
        cost = {"seconds": round(cost["seconds"], 2), "rss_added_mib": round(cost["rss_added"] / MIB, 1)}
    log(f"  import torchcodec.decoders after torch: {cost}")
    log(
        f"  ours vs bare Pillow pixels: {agree['identical']}/{agree['images']} identical, max |diff| "
        f"{agree['max_abs_diff']}"
    )
    return agree, cost


def _decode_ratios(r: dict[str, float], side: int) -> dict[str, float]:
    ours, wds, half = 'ours, image="torch"', 'webdataset, .decode("torchrgb8")', f"image_size={side}"
    pillow = r["bare Pillow, bytes in memory"]
    return {
        "ours_vs_webdataset": r[ours] / r[wds],
        "ours_vs_bare_pillow": r[ours] / pillow,
        f"ours_{side}_vs_bare_pillow_full": r[f"{ours}, {half}"] / pillow,
        f"ours_{side}_vs_bare_pillow_draft": r[f"{ours}, {half}"]
        / r[f"bare Pillow, draft {side}, bytes in memory"],
        "ours_vs_webdataset_dataloader": r[f"{ours}, DataLoader"] / r[f"{wds}, DataLoader"],
        "ours_vs_webdataset_dataloader_list_collate": r[f"{ours}, DataLoader, list collate"]
        / r[f"{wds}, DataLoader, list collate"],
        "ours_dataloader_vs_in_process": r[f"{ours}, DataLoader"] / r[ours],
        f"ours_{side}_vs_webdataset_dataloader": r[f"{ours}, {half}, DataLoader"] / r[f"{wds}, DataLoader"],
    }


def bench_decode(jpeg: Packed, repeats: int, side: int) -> dict[str, Any]:
    size = warm_read(Path(p) for p in jpeg.shards)
    log(f"[decode] {jpeg.samples:,} JPEGs decoded to uint8 CHW tensors, {repeats} round(s)")
    contenders = _decode_contenders(jpeg, side)
    agree, cost = _decode_checks(jpeg)
    runs = rounds(repeats, contenders, log, describe, expected=jpeg.samples)
    ratios = _decode_ratios(_rates(runs), side)
    return {
        "input": input_facts(jpeg, size, "jpg + cls per sample; both readers also decode cls to int"),
        "pixels_ours_vs_bare_pillow": {k: agree[k] for k in ("images", "identical", "max_abs_diff")},
        "torchcodec_import_cost": cost,
        "rows": speed_rows(runs, size),
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


# ---------------------------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    import multiprocessing

    return {
        **machine_facts(),
        "mp_start_method": multiprocessing.get_start_method(),
        "source_fingerprint": source_fingerprint(SRC),
        "versions": versions("webdataset", "pillow", "numpy", "torch", "torchcodec"),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_common_flags(
        parser,
        only=(*BENCHES, "profile"),
        only_help="run only this benchmark (repeatable); default: all; 'profile' alone: just the profiles, "
        "saved to their own file",
        repeats="memory, raw and decode",
        slow="tiny and flat",
    )
    parser.add_argument("--tiny", type=int, help="tiny JSON samples (default 1000000; quick 50000)")
    parser.add_argument("--jpegs", type=int, help="JPEG samples (default 20000; quick 1000)")
    parser.add_argument("--side", type=int, default=256, help="JPEG side in pixels (default 256)")
    parser.add_argument("--image-size", type=int, default=128, help="reduced decode size (default 128)")
    parser.add_argument("--no-wds-memory", action="store_true", help="skip webdataset on the 10M pattern")
    parser.add_argument("--profile", action="store_true", help="also cProfile our contenders")
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def make_data(args: argparse.Namespace, work: Path, which: list[str]) -> tuple[Packed | None, Packed | None]:
    """The tiny and the JPEG dataset, each made (or reused) only when one of ``which`` reads it."""
    tiny = jpeg = None
    if set(DATA_FOR["tiny"]) & set(which):
        tiny_n = args.tiny or (50_000 if args.quick else 1_000_000)
        tiny = make_tiny(work / f"tiny-{tiny_n}", tiny_n, log)
    if set(DATA_FOR["jpeg"]) & set(which):
        jpeg_n = args.jpegs or (1000 if args.quick else 20_000)
        jpeg = make_jpeg(work / f"jpeg-{jpeg_n}-{args.side}", jpeg_n, args.side, log)
    return tiny, jpeg


def run_benches(
    args: argparse.Namespace, work: Path, tiny: Packed | None, jpeg: Packed | None, benches: list[str]
) -> dict[str, Any]:
    """Run ``benches`` in their fixed order; return their result sections by name."""
    repeats = args.repeats or (1 if args.quick else 3)
    slow = args.slow_repeats or (1 if args.quick else 2)
    out: dict[str, Any] = {}
    if "memory" in benches:
        assert tiny is not None
        out["memory"] = bench_memory(work, tiny, repeats, not (args.quick or args.no_wds_memory))
    if "flat" in benches:
        assert tiny is not None
        out["flat"] = bench_flat(tiny, max(1, tiny.samples // 10), slow)
    if "tiny" in benches:
        assert tiny is not None
        out["tiny"] = bench_tiny(tiny, slow)
    if "raw" in benches:
        assert jpeg is not None
        out["raw"] = bench_raw(jpeg, repeats)
    if "decode" in benches:
        assert jpeg is not None
        out["decode"] = bench_decode(jpeg, repeats, args.image_size)
    return out


def main(argv: list[str] | None = None) -> int:
    global SRC
    args = parse_args(argv)
    if args.child:
        return run_child(args.child, args.spec)
    which = args.only or list(BENCHES)
    profile_only = which == ["profile"]
    if profile_only:
        args.profile = True
        which = list(BENCHES)  # profile every case; run no benchmark
    data = ("tiny-", "jpeg-")  # the generated datasets, kept with --workdir and --keep-data
    with work_folder(
        args.workdir,
        args.keep_data,
        "shardstream-stream-bench-",
        ("many", "src"),
        lambda n: n.startswith(data),
    ) as work:
        SRC = snapshot_sources(work / "src")
        sys.path.insert(0, str(SRC))
        started = time.perf_counter()
        result = new_result(args.quick, command_line("stream/stream_bench.py", argv), machine_info())
        log(f"workdir {work}; {result['machine']['nproc']} CPUs, {result['machine']['cpu']}")
        tiny, jpeg = make_data(args, work, which)
        result.update(run_benches(args, work, tiny, jpeg, [] if profile_only else which))
        # A partial run (--only) gets its own file rather than overwriting the day's full one.
        name = "stream-" + stamp(args.quick, args.only)
        if args.profile:
            prof = profile_ours(
                tiny if "tiny" in which else None,
                jpeg if set(DATA_FOR["jpeg"]) & set(which) else None,
                args.image_size,
                run_spec,
                source_fingerprint(SRC),
            )
            if args.no_save:
                print(prof)
            else:
                result["profile"] = save_text(args.results, f"{name}-profile.txt", prof)
        result["total_seconds"] = round(time.perf_counter() - started, 1)
        note_source_drift(result, SRC, log)
        if profile_only:
            log(f"profiles only: {result.get('profile', 'printed above')}")
            return 0
        markdown = to_markdown(result)
        print(markdown)
        if not args.no_save:
            save_results(args.results, name, result, markdown, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
