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

    python3 benchmarks/pack_bench.py --quick          # smoke run, about a minute
    python3 benchmarks/pack_bench.py                  # the full run (about 8 minutes on 2 cores)
    python3 benchmarks/pack_bench.py --only copy --repeats 2 --profile

Results: a markdown table on stdout, plus ``benchmarks/results/pack-<date>[-quick].{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import machine_facts, marker_matches, spawn, table, verdict, version, write_marker

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
MAX_SIZE = "256MB"
MAX_SIZE_BYTES = 256 * 10**6
MB = 1e6
GNU_TAR = shutil.which("tar") or "/usr/bin/tar"
TIME_BIN = "/usr/bin/time"
POOL_FILES = 100
MIN_FREE_BYTES = 8 * 10**9


# ---------------------------------------------------------------------------------------------------------
# Child side: one contender in a fresh interpreter, timed after its imports; prints one JSON line.
# ---------------------------------------------------------------------------------------------------------
def iter_samples(root: str) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """(key, [(ext, path)]) in sorted order, files grouped by the name before the first dot, like ours."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel = os.path.relpath(dirpath, root)
        groups: dict[str, list[tuple[str, str]]] = {}
        for name in sorted(filenames):
            key, _, ext = name.partition(".")
            groups.setdefault(key, []).append((ext, os.path.join(dirpath, name)))
        for key, members in groups.items():
            yield (key if rel == "." else f"{rel}/{key}"), members


def reencode_jpeg(data: bytes, side: int, quality: int) -> bytes:
    """The baseline pipeline's image work: open, exif_transpose, LANCZOS thumbnail, JPEG at ``quality``."""
    from PIL import Image, ImageOps

    with Image.open(io.BytesIO(data)) as opened:
        image = ImageOps.exif_transpose(opened)
        image.thumbnail((side, side), Image.Resampling.LANCZOS)
        if image.mode not in ("RGB", "L"):
            image = image.convert("RGB")
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=quality)
    return buffer.getvalue()


def child_shardwriter(src: str, out: str, side: int | None, quality: int) -> float:
    import webdataset as wds

    if side is not None:
        from PIL import Image, ImageOps  # noqa: F401 - import before the clock starts, as wds is

    started = time.perf_counter()
    sink = wds.ShardWriter(
        os.path.join(out, "wds-%06d.tar"), maxsize=MAX_SIZE_BYTES, maxcount=10**9, verbose=0
    )
    try:
        for key, members in iter_samples(src):
            sample: dict[str, Any] = {"__key__": key}
            for ext, path in members:
                with open(path, "rb") as handle:
                    data = handle.read()
                if side is not None and ext == "jpg":
                    data = reencode_jpeg(data, side, quality)
                sample[ext] = data
            sink.write(sample)
    finally:
        sink.close()
    return time.perf_counter() - started


def child_tarfile(src: str, out: str) -> float:
    import tarfile

    started = time.perf_counter()
    with tarfile.open(os.path.join(out, "tarfile.tar"), "w") as tar:
        for key, members in iter_samples(src):
            for ext, path in members:
                tar.add(path, arcname=f"{key}.{ext}", recursive=False)
    return time.perf_counter() - started


def run_child(args: argparse.Namespace) -> int:
    if args.child == "shardwriter":
        seconds = child_shardwriter(args.src, args.out, args.child_side, args.quality)
    elif args.child == "tarfile":
        seconds = child_tarfile(args.src, args.out)
    else:
        raise SystemExit(f"unknown child {args.child!r}")
    print(json.dumps({"seconds": seconds}))
    return 0


# ---------------------------------------------------------------------------------------------------------
# Parent side: spawning, measuring, cleaning up.
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Run:
    name: str
    seconds: float  # the work: from inside the process for Python contenders, wall time for GNU tar
    wall: float  # the whole subprocess, interpreter start-up and imports included
    maxrss_kb: int
    out_bytes: int
    out_files: int
    extra: dict[str, Any] = field(default_factory=dict)


def tree_size(path: Path) -> tuple[int, int]:
    total = files = 0
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            total += os.path.getsize(os.path.join(dirpath, name))
            files += 1
    return total, files


def fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def settle(out: Path) -> None:
    """Delete a run's output and flush dirty pages so the next run does not pay for this one's writeback."""
    shutil.rmtree(out, ignore_errors=True)
    os.sync()


def check_disk(work: Path, need: int) -> None:
    free = shutil.disk_usage(work).free
    if free < need + MIN_FREE_BYTES:
        raise SystemExit(f"{work}: {free / 1e9:.1f} GB free, want {(need + MIN_FREE_BYTES) / 1e9:.1f} GB")


def last_json(text: str) -> dict[str, Any]:
    """The JSON document a command printed last (our CLI prints an indented one)."""
    start = text.find("{")
    return json.loads(text[start:]) if start >= 0 else {}


def ours_cmd(src: Path, out: Path, workers: int, extra: tuple[str, ...] = ()) -> list[str]:
    return [
        sys.executable, "-m", "shardstream.cli", "pack", str(src), str(out),
        "--max-size", MAX_SIZE, "--workers", str(workers), "--quiet", "--json", *extra,
    ]  # fmt: skip


def run_ours(
    name: str, src: Path, out: Path, workers: int, extra: tuple[str, ...] = (), *, timed: bool
) -> Run:
    """Our CLI; with ``timed`` it runs under ``/usr/bin/time -v`` and that peak RSS is the one reported."""
    fresh_dir(out)
    cmd = ours_cmd(src, out, workers, extra)
    use_time = timed and os.access(TIME_BIN, os.X_OK)
    wall, maxrss, stdout, stderr = spawn([TIME_BIN, "-v", *cmd] if use_time else cmd)
    if use_time:
        match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
        if match:
            maxrss = int(match.group(1))
    summary = last_json(stdout)
    size, files = tree_size(out)
    settle(out)
    return Run(
        name,
        float(summary["seconds"]),
        wall,
        maxrss,
        size,
        files,
        {
            "samples": summary["samples"],
            "shards": summary["shards"],
            "skipped": summary["skipped"],
            "rss_from": "/usr/bin/time -v" if use_time else "wait4",
        },
    )


def run_python_child(name: str, kind: str, src: Path, out: Path, *, side: int | None = None) -> Run:
    fresh_dir(out)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        kind,
        "--src",
        str(src),
        "--out",
        str(out),
    ]
    if side is not None:
        cmd += ["--child-side", str(side)]
    wall, maxrss, stdout, _ = spawn(cmd)
    seconds = float(last_json(stdout)["seconds"])
    size, files = tree_size(out)
    settle(out)
    return Run(name, seconds, wall, maxrss, size, files)


def run_gnu_tar(name: str, src: Path, out: Path, *, fsync: bool) -> Run:
    fresh_dir(out)
    target = out / "gnu.tar"
    # `sync FILE` fsyncs just that file, as our packer fsyncs each shard before publishing it.
    script = f'"{GNU_TAR}" cf "{target}" -C "{src}" .' + (f' && sync "{target}"' if fsync else "")
    wall, maxrss, _, _ = spawn(["sh", "-c", script])
    size, files = tree_size(out)
    settle(out)
    return Run(name, wall, wall, maxrss, size, files)


def warm_read(root: Path) -> tuple[int, int, float]:
    """Read every file once so all contenders find the same (hot) page cache."""
    started = time.perf_counter()
    total = files = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as handle:
                while chunk := handle.read(1 << 20):
                    total += len(chunk)
            files += 1
    return total, files, time.perf_counter() - started


def rounds(repeats: int, contenders: list[tuple[str, Any]], log: Any) -> dict[str, list[Run]]:
    """Run every contender once per round, in turn; returns all runs by name."""
    runs: dict[str, list[Run]] = {name: [] for name, _ in contenders}
    for r in range(repeats):
        for name, fn in contenders:
            run = fn()
            runs[name].append(run)
            log(
                f"  round {r + 1}/{repeats} {name}: {run.seconds:.2f}s (wall {run.wall:.2f}s), "
                f"peak RSS {run.maxrss_kb / 1024:.1f} MiB, out {run.out_bytes / MB:.1f} MB"
            )
    return runs


def best(runs: list[Run]) -> Run:
    return min(runs, key=lambda run: run.seconds)


# ---------------------------------------------------------------------------------------------------------
# Data.
# ---------------------------------------------------------------------------------------------------------
def make_raw_folder(root: Path, samples: int, side: int, log: Any) -> Path:
    """``samples`` JPEGs from ``make_jpegs`` (shardstream.demo), each with a .cls and a small .json."""
    from shardstream.demo.synth import make_jpegs

    params = {"samples": samples, "side": side, "members": ["jpg", "cls", "json"], "seed": 0}
    data = root / "data"
    if marker_matches(root, params):
        return data
    log(f"making the raw folder: {samples} samples of {side}x{side} JPEG + .cls + .json ...")
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    make_jpegs(data, samples, size=(side, side), seed=0)
    for jpg in sorted(data.glob("*/*.jpg")):
        cls = jpg.with_suffix(".cls").read_text().strip()
        meta = {
            "key": f"{jpg.parent.name}/{jpg.stem}",
            "label": int(cls),
            "width": side,
            "height": side,
            "source": "synthetic",
            "split": "train",
        }
        jpg.with_suffix(".json").write_text(json.dumps(meta) + "\n")
    write_marker(root, params)
    log(f"  made in {time.perf_counter() - started:.1f}s")
    return data


_WORDS = (
    ("calm", "bright", "dim", "noisy", "soft", "bold"),
    ("red", "green", "blue", "amber", "teal"),
    ("gradient", "sky", "field", "wall", "sunset", "sea", "fog"),
)


def make_manifests(root: Path, sizes: list[int], log: Any) -> dict[int, Path]:
    """JSONL manifests of identical record shape pointing at a pool of ~100 tiny real JPEGs."""
    from shardstream.demo.synth import make_jpegs

    params = {"sizes": sizes, "pool": POOL_FILES, "shape": "id+image+caption"}
    paths = {n: root / f"manifest-{n}.jsonl" for n in sizes}
    if marker_matches(root, params):
        return paths
    log(f"making manifests of {', '.join(f'{n:,}' for n in sizes)} records over {POOL_FILES} tiny JPEGs ...")
    shutil.rmtree(root, ignore_errors=True)
    make_jpegs(root / "pool", POOL_FILES, size=(32, 32), seed=1)
    pool = sorted(p.relative_to(root).as_posix() for p in (root / "pool").glob("*/*.jpg"))
    for n, path in paths.items():
        with open(path, "w", encoding="utf-8") as handle:
            for i in range(n):
                words = [w[(i // (k + 1)) % len(w)] for k, w in enumerate(_WORDS)]
                caption = f"A {words[0]} {words[1]} {words[2]}, picture {i}."
                record = {"id": f"r{i:09d}", "image": pool[i % len(pool)], "caption": caption}
                handle.write(json.dumps(record) + "\n")
    write_marker(root, params)
    return paths


# ---------------------------------------------------------------------------------------------------------
# The three benchmarks.
# ---------------------------------------------------------------------------------------------------------
def bench_rss(work: Path, small: int, large: int, repeats: int, log: Any) -> dict[str, Any]:
    manifests = make_manifests(work / "manifest", [small, large], log)
    warm_read(work / "manifest")
    check_disk(work, large * 3000)
    out = work / "out"
    log(f"[rss] {small:,} vs {large:,} records, {repeats} round(s)")
    base = [sys.executable, "-c", "import shardstream.cli"]  # the interpreter plus our CLI's imports
    _, base_rss, _, base_err = spawn([TIME_BIN, "-v", *base] if os.access(TIME_BIN, os.X_OK) else base)
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", base_err)
    base_rss = int(match.group(1)) if match else base_rss
    contenders = [
        (f"{n:,} records", lambda n=n: run_ours(f"{n:,} records", manifests[n], out, 1, timed=True))
        for n in (small, large)
    ]
    runs = rounds(repeats, contenders, log)
    rows = []
    for (name, _), n in zip(contenders, (small, large), strict=True):
        b = best(runs[name])
        rows.append(
            {
                "records": n,
                "seconds": round(b.seconds, 3),
                "wall": round(b.wall, 3),
                "records_per_s": round(n / b.seconds),
                "peak_rss_mib": round(max(r.maxrss_kb for r in runs[name]) / 1024, 1),
                "peak_rss_mib_runs": [round(r.maxrss_kb / 1024, 1) for r in runs[name]],
                "out_mb": round(b.out_bytes / MB, 1),
                "shards": b.extra["shards"],
                "samples": b.extra["samples"],
                "rss_from": b.extra["rss_from"],
            }
        )
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


def _speed_rows(runs: dict[str, list[Run]], input_bytes: int, samples: int) -> list[dict[str, Any]]:
    rows = []
    for name, got in runs.items():
        b = best(got)
        rows.append(
            {
                "contender": name,
                "seconds": round(b.seconds, 3),
                "seconds_runs": [round(r.seconds, 3) for r in got],
                "wall": round(b.wall, 3),
                "mb_per_s": round(input_bytes / MB / b.seconds, 1),
                "samples_per_s": round(samples / b.seconds),
                "peak_rss_mib": round(b.maxrss_kb / 1024, 1),
                "out_mb": round(b.out_bytes / MB, 1),
                "out_files": b.out_files,
            }
        )
    return rows


def bench_copy(work: Path, data: Path, samples: int, repeats: int, log: Any) -> dict[str, Any]:
    input_bytes, files, warm_s = warm_read(data)
    check_disk(work, 2 * input_bytes)
    log(
        f"[copy] {samples:,} samples, {files:,} files, {input_bytes / MB:.1f} MB "
        f"(warm-up read {warm_s:.1f}s), {repeats} round(s)"
    )
    out = work / "out"
    contenders: list[tuple[str, Any]] = [
        ("ours (copy, --workers 1)", lambda: run_ours("ours", data, out, 1, timed=False)),
        ("webdataset ShardWriter", lambda: run_python_child("shardwriter", "shardwriter", data, out)),
        ("Python tarfile", lambda: run_python_child("tarfile", "tarfile", data, out)),
        ("GNU tar cf", lambda: run_gnu_tar("gnu tar", data, out, fsync=False)),
        ("GNU tar cf + fsync", lambda: run_gnu_tar("gnu tar+fsync", data, out, fsync=True)),
    ]
    runs = rounds(repeats, contenders, log)
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
        "rows": _speed_rows(runs, input_bytes, samples),
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


def bench_reencode(work: Path, data: Path, samples: int, repeats: int, side: int, log: Any) -> dict[str, Any]:
    input_bytes, files, _ = warm_read(data)
    check_disk(work, input_bytes)
    log(f"[reencode] {samples:,} samples to max side {side} JPEG q=90, {repeats} round(s)")
    out = work / "out"
    extra = ("--image-max-side", str(side), "--image-format", "jpeg", "--image-quality", "90")
    contenders: list[tuple[str, Any]] = [
        ("ours --workers 2", lambda: run_ours("ours w2", data, out, 2, extra, timed=False)),
        ("ours --workers 1", lambda: run_ours("ours w1", data, out, 1, extra, timed=False)),
        (
            "webdataset pipeline (1 process)",
            lambda: run_python_child("shardwriter re-encode", "shardwriter", data, out, side=side),
        ),
    ]
    runs = rounds(repeats, contenders, log)
    t = {name: best(got).seconds for name, got in runs.items()}
    sw = t["webdataset pipeline (1 process)"]
    return {
        "input": {"samples": samples, "files": files, "mb": round(input_bytes / MB, 1)},
        "rows": _speed_rows(runs, input_bytes, samples),
        "ratios": {
            "ours_w2_speed_vs_pipeline": round(sw / t["ours --workers 2"], 2),
            "ours_w1_speed_vs_pipeline": round(sw / t["ours --workers 1"], 2),
            "ours_w2_speed_vs_w1": round(t["ours --workers 1"] / t["ours --workers 2"], 2),
        },
        "targets": {"ours --workers 2 faster than the webdataset pipeline": t["ours --workers 2"] < sw},
    }


def profile_ours(work: Path, data: Path, side: int, log: Any) -> str:
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
# Report.
# ---------------------------------------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    tar = subprocess.run([GNU_TAR, "--version"], capture_output=True, text=True, check=False).stdout
    return {
        **machine_facts(),
        "versions": {n: version(n) for n in ("webdataset", "pillow", "numpy", "torch")},
        "gnu_tar": tar.splitlines()[0] if tar else "?",
    }


def to_markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    out = [
        f"# Packer benchmark, {m['date']}{' (quick)' if result['quick'] else ''}",
        "",
        f"Machine: {m['nproc']} CPUs ({m['usable_cpus']} usable), {m['cpu']}, {m['memory']} RAM; "
        f"{m['os']}.  ",
        f"Python {m['python']}; "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items())
        + f"; {m['gnu_tar']}; shardstream {m['shardstream_commit']}.  ",
        f"Command: `{result['command']}`; total {result['total_seconds']:.0f}s.",
        "",
        "Times are the best of the repeats; Python contenders are timed from inside the process (imports and "
        "interpreter start-up excluded), GNU tar by its wall time; `wall` is the whole subprocess. MB/s is "
        "input bytes per second. Page cache warmed by one read of the inputs first; outputs deleted and "
        "`sync`-ed after every run.",
    ]
    if "rss" in result:
        r = result["rss"]
        out += [
            "",
            "## 1. Peak RSS: large vs small JSONL manifest (`--workers 1 --max-size 256MB`)",
            "",
            table(
                [
                    "records",
                    "seconds",
                    "wall",
                    "records/s",
                    "peak RSS MiB (max of runs)",
                    "runs",
                    "output MB",
                    "shards",
                ],
                [
                    [
                        f"{x['records']:,}",
                        x["seconds"],
                        x["wall"],
                        f"{x['records_per_s']:,}",
                        x["peak_rss_mib"],
                        x["peak_rss_mib_runs"],
                        x["out_mb"],
                        x["shards"],
                    ]
                    for x in r["rows"]
                ],
            ),
            "",
            f"Ratio {r['rss_ratio']}x, delta {r['rss_delta_mib']} MiB; `import shardstream.cli` alone peaks "
            f"at {r['import_only_peak_rss_mib']} MiB. Target: {r['target']}: {verdict(r['target_met'])}.",
        ]
    for key, title in (
        ("copy", "2. Packing a raw folder (copy, no media work)"),
        ("reencode", "3. Re-encoding at pack time (max side 128, JPEG q=90)"),
    ):
        if key not in result:
            continue
        r = result[key]
        i = r["input"]
        out += [
            "",
            f"## {title}",
            "",
            f"Input: {i['samples']:,} samples, {i['files']:,} files, {i['mb']} MB"
            + (f" ({i['members']})." if "members" in i else "."),
            "",
            table(
                [
                    "contender",
                    "seconds",
                    "runs",
                    "wall",
                    "MB/s",
                    "samples/s",
                    "peak RSS MiB",
                    "output MB",
                    "files out",
                ],
                [
                    [
                        x["contender"],
                        x["seconds"],
                        x["seconds_runs"],
                        x["wall"],
                        x["mb_per_s"],
                        f"{x['samples_per_s']:,}",
                        x["peak_rss_mib"],
                        x["out_mb"],
                        x["out_files"],
                    ]
                    for x in r["rows"]
                ],
            ),
            "",
            "Ratios: " + ", ".join(f"{k} = {v}" for k, v in r["ratios"].items()) + ".",
            "",
        ]
        out += [f"- {name}: {verdict(ok)}" for name, ok in r["targets"].items()]
    if result.get("profile"):
        out += ["", f"Profile: see `{result['profile']}`."]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small inputs, one round: a smoke run")
    parser.add_argument(
        "--only",
        choices=("rss", "copy", "reencode"),
        action="append",
        help="run only this benchmark (repeatable); default: all three",
    )
    parser.add_argument("--workdir", type=Path, help="where inputs and outputs go (default: a temp folder)")
    parser.add_argument("--keep-data", action="store_true", help="keep the generated inputs in --workdir")
    parser.add_argument("--samples", type=int, help="raw folder samples (default 20000; quick 1000)")
    parser.add_argument("--small", type=int, help="small manifest records (default 10000; quick 2000)")
    parser.add_argument("--large", type=int, help="large manifest records (default 1000000; quick 50000)")
    parser.add_argument("--repeats", type=int, help="rounds for copy (default 3; quick 1)")
    parser.add_argument("--slow-repeats", type=int, help="rounds for rss and reencode (default 2; quick 1)")
    parser.add_argument("--side", type=int, default=256, help="raw JPEG side in pixels (default 256)")
    parser.add_argument("--target-side", type=int, default=128, help="re-encode max side (default 128)")
    parser.add_argument("--profile", action="store_true", help="also cProfile our packer on a subset")
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--no-save", action="store_true", help="print the table only")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--src", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--child-side", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--quality", type=int, default=90, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args)

    quick = args.quick
    samples = args.samples or (1000 if quick else 20_000)
    small = args.small or (2000 if quick else 10_000)
    large = args.large or (50_000 if quick else 1_000_000)
    repeats = args.repeats or (1 if quick else 3)
    slow = args.slow_repeats or (1 if quick else 2)
    which = args.only or ["rss", "copy", "reencode"]

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    sys.path.insert(0, str(REPO))
    temp = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="shardstream-bench-")) if temp else args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result: dict[str, Any] = {
        "quick": quick,
        "command": " ".join(
            ["python3", "benchmarks/pack_bench.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "machine": machine_info(),
    }
    log(f"workdir {work}; {result['machine']['nproc']} CPUs, {result['machine']['cpu']}")
    try:
        raw = None
        if "copy" in which or "reencode" in which or args.profile:
            raw = make_raw_folder(work / "raw", samples, args.side, log)
        if "rss" in which:
            result["rss"] = bench_rss(work, small, large, slow, log)
        if "copy" in which:
            assert raw is not None
            result["copy"] = bench_copy(work, raw, samples, repeats, log)
        if "reencode" in which:
            assert raw is not None
            result["reencode"] = bench_reencode(work, raw, samples, slow, args.target_side, log)
        stamp = dt.date.today().isoformat() + ("-quick" if quick else "")
        if args.profile:
            assert raw is not None
            prof = profile_ours(work, raw, args.target_side, log)
            if not args.no_save:
                args.results.mkdir(parents=True, exist_ok=True)
                path = args.results / f"pack-{stamp}-profile.txt"
                path.write_text(prof)
                result["profile"] = os.path.relpath(path, REPO)
            else:
                print(prof)
        result["total_seconds"] = round(time.perf_counter() - started, 1)
        markdown = to_markdown(result)
        print(markdown)
        if not args.no_save:
            args.results.mkdir(parents=True, exist_ok=True)
            (args.results / f"pack-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
            (args.results / f"pack-{stamp}.md").write_text(markdown)
            log(f"saved {args.results / f'pack-{stamp}.md'} and .json")
    finally:
        shutil.rmtree(work / "out", ignore_errors=True)
        if temp or not args.keep_data:
            for name in ("raw", "manifest"):
                shutil.rmtree(work / name, ignore_errors=True)
            if temp:
                shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
