#!/usr/bin/env python3
"""Packer benchmarks, every contender measured side by side in one run so the ratios survive a noisy machine.

1. ``rss``      peak RSS (and speed) of packing a large JSONL manifest vs a small one of the same record
                shape.
2. ``copy``     packing a raw folder of JPEG samples: our packer (copy mode), webdataset's ShardWriter,
                Python's tarfile, GNU tar (plain, and followed by an fsync of its output).
3. ``reencode`` downscale + re-encode to JPEG at pack time: our packer (1 and 2 workers) vs a single-process
                webdataset pipeline doing the same Pillow work before ``ShardWriter.write``.

Every timed run is a fresh subprocess; contenders take turns round by round, each run's output is deleted
and ``sync``-ed before the next one starts, and the best of the repeats counts. Python contenders are timed
from inside (imports and interpreter start-up excluded; webdataset alone imports torch); the wall time of
the whole subprocess is recorded too.

    python3 benchmarks/pack/pack_bench.py --quick          # smoke run, about a minute
    python3 benchmarks/pack/pack_bench.py                  # the full run (about 8 minutes on 2 cores)
    python3 benchmarks/pack/pack_bench.py --only copy --repeats 2 --profile

Results: a markdown table on stdout, plus ``benchmarks/results/pack-<date>[-quick].{json,md}``.

This file holds the cases: what each contender runs, what is compared, the targets. The shared harness is
``harness/``; the child side is ``pack_children.py``, the inputs ``pack_data.py``, the result rows and
markdown ``pack_report.py``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import (
    CLI_MODULE,
    REPO,
    Contender,
    Run,
    best,
    check_disk,
    child_cmd,
    fresh_dir,
    last_json,
    rounds,
    settle,
    spawn,
    spawn_time_v,
    tree_size,
    warm_tree,
)
from harness.cli import add_common_flags, command_line, log, work_folder
from harness.report import machine_facts, new_result, save_results, save_text, stamp, versions
from pack_children import MAX_SIZE, run_child
from pack_data import make_manifests, make_raw_folder
from pack_report import MB, rss_rows, speed_rows, to_markdown

GNU_TAR = shutil.which("tar") or "/usr/bin/tar"
BENCHES = ("rss", "copy", "reencode")


# ---------------------------------------------------------------------------------------------------------
# Running contenders: each run's output is measured, deleted and synced before the next one (harness).
# ---------------------------------------------------------------------------------------------------------
def ours_cmd(src: Path, out: Path, workers: int, extra: tuple[str, ...] = ()) -> list[str]:
    options = ["--max-size", MAX_SIZE, "--workers", str(workers), "--quiet", "--json"]
    return [sys.executable, "-m", CLI_MODULE, "pack", str(src), str(out), *options, *extra]


def run_ours(
    name: str, src: Path, out: Path, workers: int, extra: tuple[str, ...] = (), *, timed: bool
) -> Run:
    """Our CLI; with ``timed`` it runs under ``/usr/bin/time -v`` and that peak RSS is the one reported."""
    fresh_dir(out)
    cmd = ours_cmd(src, out, workers, extra)
    if timed:
        wall, maxrss, stdout, _, use_time = spawn_time_v(cmd)
    else:
        (wall, maxrss, stdout, _), use_time = spawn(cmd), False
    summary = last_json(stdout)
    size, files = tree_size(out)
    settle(out)
    extra_facts = {k: summary[k] for k in ("samples", "shards", "skipped")}
    extra_facts["rss_from"] = "/usr/bin/time -v" if use_time else "wait4"
    return Run(
        name, float(summary["seconds"]), wall, maxrss, out_bytes=size, out_files=files, extra=extra_facts
    )


def run_python_child(name: str, kind: str, src: Path, out: Path, *, side: int | None = None) -> Run:
    fresh_dir(out)
    cmd = child_cmd(__file__, kind, "--src", str(src), "--out", str(out))
    if side is not None:
        cmd += ["--child-side", str(side)]
    wall, maxrss, stdout, _ = spawn(cmd)
    seconds = float(last_json(stdout)["seconds"])
    size, files = tree_size(out)
    settle(out)
    return Run(name, seconds, wall, maxrss, out_bytes=size, out_files=files)


def run_gnu_tar(name: str, src: Path, out: Path, *, fsync: bool) -> Run:
    fresh_dir(out)
    target = out / "gnu.tar"
    # `sync FILE` fsyncs just that file, as our packer fsyncs each shard before publishing it.
    script = f'"{GNU_TAR}" cf "{target}" -C "{src}" .' + (f' && sync "{target}"' if fsync else "")
    wall, maxrss, _, _ = spawn(["sh", "-c", script])
    size, files = tree_size(out)
    settle(out)
    return Run(name, wall, wall, maxrss, out_bytes=size, out_files=files)


def describe(run: Run) -> str:
    return (
        f"{run.seconds:.2f}s (wall {run.wall:.2f}s), "
        f"peak RSS {run.maxrss_kb / 1024:.1f} MiB, out {run.out_bytes / MB:.1f} MB"
    )


# ---------------------------------------------------------------------------------------------------------
# The three benchmarks.
# ---------------------------------------------------------------------------------------------------------
def bench_rss(work: Path, small: int, large: int, repeats: int) -> dict[str, Any]:
    manifests = make_manifests(work / "manifest", [small, large], log)
    warm_tree(work / "manifest")
    check_disk(work, large * 3000)
    out = work / "out"
    log(f"[rss] {small:,} vs {large:,} records, {repeats} round(s)")
    # The interpreter plus our CLI's imports, for scale.
    _, base_rss, _, _, _ = spawn_time_v([sys.executable, "-c", f"import {CLI_MODULE}"])
    contenders: list[Contender] = [
        (f"{n:,} records", lambda n=n: run_ours(f"{n:,} records", manifests[n], out, 1, timed=True))
        for n in (small, large)
    ]
    rows = rss_rows(rounds(repeats, contenders, log, describe), (small, large))
    rss_small, rss_large = rows[0]["peak_rss_mib"], rows[1]["peak_rss_mib"]
    limit = rss_small * 1.10 + 10 * 1e6 / 2**20
    return {
        "rows": rows,
        "import_only_peak_rss_mib": round(base_rss / 1024, 1),
        "rss_ratio": round(rss_large / rss_small, 3),
        "rss_delta_mib": round(rss_large - rss_small, 1),
        "target": f"peak RSS({large:,}) <= 1.10 x peak RSS({small:,}) + 10 MB = {limit:.1f} MiB",
        "target_met": rss_large <= limit,
    }


def bench_copy(work: Path, data: Path, samples: int, repeats: int) -> dict[str, Any]:
    input_bytes, files, warm_s = warm_tree(data)
    check_disk(work, 2 * input_bytes)
    log(
        f"[copy] {samples:,} samples, {files:,} files, {input_bytes / MB:.1f} MB "
        f"(warm-up read {warm_s:.1f}s), {repeats} round(s)"
    )
    out = work / "out"
    contenders: list[Contender] = [
        ("ours (copy, --workers 1)", lambda: run_ours("ours", data, out, 1, timed=False)),
        ("webdataset ShardWriter", lambda: run_python_child("shardwriter", "shardwriter", data, out)),
        ("Python tarfile", lambda: run_python_child("tarfile", "tarfile", data, out)),
        ("GNU tar cf", lambda: run_gnu_tar("gnu tar", data, out, fsync=False)),
        ("GNU tar cf + fsync", lambda: run_gnu_tar("gnu tar+fsync", data, out, fsync=True)),
    ]
    runs = rounds(repeats, contenders, log, describe)
    t = {name: best(got).seconds for name, got in runs.items()}
    ours = t["ours (copy, --workers 1)"]
    speed_vs_sw = t["webdataset ShardWriter"] / ours
    time_vs_tar = ours / t["GNU tar cf"]
    return {
        "input": {
            "samples": samples,
            "files": files,
            "mb": round(input_bytes / MB, 1),
            "members": "jpg + cls + json per sample",
        },
        "rows": speed_rows(runs, input_bytes, samples),
        "ratios": {
            "ours_speed_vs_shardwriter": round(speed_vs_sw, 2),
            "ours_speed_vs_tarfile": round(t["Python tarfile"] / ours, 2),
            "ours_time_vs_gnu_tar": round(time_vs_tar, 2),
            "ours_time_vs_gnu_tar_fsync": round(ours / t["GNU tar cf + fsync"], 2),
        },
        "targets": {
            "ours >= 2x ShardWriter speed": speed_vs_sw >= 2.0,
            "ours within ~2x of GNU tar time": time_vs_tar <= 2.0,
        },
    }


def bench_reencode(work: Path, data: Path, samples: int, repeats: int, side: int) -> dict[str, Any]:
    input_bytes, files, _ = warm_tree(data)
    check_disk(work, input_bytes)
    log(f"[reencode] {samples:,} samples to max side {side} JPEG q=90, {repeats} round(s)")
    out = work / "out"
    extra = ("--image-max-side", str(side), "--image-format", "jpeg", "--image-quality", "90")
    contenders: list[Contender] = [
        ("ours --workers 2", lambda: run_ours("ours w2", data, out, 2, extra, timed=False)),
        ("ours --workers 1", lambda: run_ours("ours w1", data, out, 1, extra, timed=False)),
        (
            "webdataset pipeline (1 process)",
            lambda: run_python_child("shardwriter re-encode", "shardwriter", data, out, side=side),
        ),
    ]
    runs = rounds(repeats, contenders, log, describe)
    t = {name: best(got).seconds for name, got in runs.items()}
    sw = t["webdataset pipeline (1 process)"]
    return {
        "input": {"samples": samples, "files": files, "mb": round(input_bytes / MB, 1)},
        "rows": speed_rows(runs, input_bytes, samples),
        "ratios": {
            "ours_w2_speed_vs_pipeline": round(sw / t["ours --workers 2"], 2),
            "ours_w1_speed_vs_pipeline": round(sw / t["ours --workers 1"], 2),
            "ours_w2_speed_vs_w1": round(t["ours --workers 1"] / t["ours --workers 2"], 2),
        },
        "targets": {"ours --workers 2 faster than the webdataset pipeline": t["ours --workers 2"] < sw},
    }


def profile_ours(work: Path, data: Path, side: int) -> str:
    """cProfile (sorted by cumtime) of our CLI, workers 1, on the first sub-folder of the raw data."""
    subset = sorted(p for p in data.iterdir() if p.is_dir())[0]
    out = work / "out"
    text = []
    for title, extra in (
        ("copy mode", ()),
        ("re-encode", ("--image-max-side", str(side), "--image-format", "jpeg")),
    ):
        fresh_dir(out)
        cmd = [sys.executable, "-m", "cProfile", "-s", "cumtime", *ours_cmd(subset, out, 1, extra)[1:]]
        log(f"[profile] {title} on {subset}")
        _, _, stdout, _ = spawn(cmd)
        settle(out)
        head = stdout[stdout.find("   Ordered by") :].splitlines()[:45] if "Ordered by" in stdout else []
        text.append(f"## {title}: {' '.join(cmd[3:])}\n\n" + "\n".join(head) + "\n")
    return "\n".join(text)


# ---------------------------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    tar = subprocess.run([GNU_TAR, "--version"], capture_output=True, text=True, check=False).stdout
    return {
        **machine_facts(),
        "versions": versions("webdataset", "pillow", "numpy", "torch"),
        "gnu_tar": tar.splitlines()[0] if tar else "?",
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_common_flags(
        parser,
        only=BENCHES,
        only_help="run only this benchmark (repeatable); default: all three",
        repeats="copy",
        slow="rss and reencode",
    )
    parser.add_argument("--samples", type=int, help="raw folder samples (default 20000; quick 1000)")
    parser.add_argument("--small", type=int, help="small manifest records (default 10000; quick 2000)")
    parser.add_argument("--large", type=int, help="large manifest records (default 1000000; quick 50000)")
    parser.add_argument("--side", type=int, default=256, help="raw JPEG side in pixels (default 256)")
    parser.add_argument("--target-side", type=int, default=128, help="re-encode max side (default 128)")
    parser.add_argument("--profile", action="store_true", help="also cProfile our packer on a subset")
    parser.add_argument("--src", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--child-side", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--quality", type=int, default=90, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def raw_samples(args: argparse.Namespace) -> int:
    return args.samples or (1000 if args.quick else 20_000)


def run_benches(args: argparse.Namespace, work: Path, raw: Path | None) -> dict[str, Any]:
    """Run the chosen benchmarks in their fixed order; return their result sections by name."""
    quick, which, samples = args.quick, args.only or list(BENCHES), raw_samples(args)
    repeats = args.repeats or (1 if quick else 3)
    slow = args.slow_repeats or (1 if quick else 2)
    out: dict[str, Any] = {}
    if "rss" in which:
        small = args.small or (2000 if quick else 10_000)
        large = args.large or (50_000 if quick else 1_000_000)
        out["rss"] = bench_rss(work, small, large, slow)
    if "copy" in which:
        assert raw is not None
        out["copy"] = bench_copy(work, raw, samples, repeats)
    if "reencode" in which:
        assert raw is not None
        out["reencode"] = bench_reencode(work, raw, samples, slow, args.target_side)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return run_child(args.child, args.src, args.out, args.child_side, args.quality)
    sys.path.insert(0, str(REPO))
    data = ("raw", "manifest")  # the generated inputs, kept with --workdir and --keep-data
    with work_folder(
        args.workdir, args.keep_data, "shardstream-bench-", ("out",), lambda n: n in data
    ) as work:
        started = time.perf_counter()
        result = new_result(args.quick, command_line("pack/pack_bench.py", argv), machine_info())
        log(f"workdir {work}; {result['machine']['nproc']} CPUs, {result['machine']['cpu']}")
        raw = None
        if {"copy", "reencode"} & set(args.only or BENCHES) or args.profile:
            raw = make_raw_folder(work / "raw", raw_samples(args), args.side, log)
        result.update(run_benches(args, work, raw))
        name = "pack-" + stamp(args.quick)  # unlike stream_bench's, a partial run (--only) is not marked
        if args.profile:
            assert raw is not None
            prof = profile_ours(work, raw, args.target_side)
            if args.no_save:
                print(prof)
            else:
                result["profile"] = save_text(args.results, f"{name}-profile.txt", prof)
        result["total_seconds"] = round(time.perf_counter() - started, 1)
        markdown = to_markdown(result)
        print(markdown)
        if not args.no_save:
            save_results(args.results, name, result, markdown, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
