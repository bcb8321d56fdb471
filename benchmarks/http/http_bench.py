"""HTTP streaming throughput: ours through nginx vs ours from local disk vs webdataset's curl pipes.

Side by side in one run on the same 100 MB shards (loopback nginx, started here); contenders take turns
round by round and the best round counts, since this 2-core machine is noisy. Unlike the other benchmarks,
every contender runs in this process (the shards are big enough that start-up does not matter), timed
around building the dataset and iterating it to the end.

    python3 benchmarks/http/http_bench.py            # 4 shards x 100 MB, 3 rounds
    python3 benchmarks/http/http_bench.py --quick    # 3 shards x 20 MB, 1 round

This file holds the cases and the report; the rounds, the page-cache warming, the machine facts and the
result files come from the shared harness (``harness``, ``harness.report``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import REPO, RESULTS, Contender, Run, best, project, rounds, warm_read
from harness.report import machine_facts, save_results, stamp, table, verdict

sys.path.insert(0, str(REPO))

CURL = "curl into /dev/null (a C client, no parsing)"
TRANSPORT = "ours, HTTP bytes only (HttpStream.readinto, no parsing)"


def make_shards(root: Path, shards: int, shard_mb: int, member_kb: int = 256, jpegs: bool = False) -> Path:
    raw = root / "raw"
    if jpegs:  # ~12 kB 256x256 JPEGs: the decode-bound case training actually runs
        project("make_jpegs")(raw, shards * shard_mb * 1000 // 12)
    else:
        per_shard = shard_mb * 1024 // (member_kb + 1)
        for i in range(shards * per_shard):
            folder = raw / f"{i // 1000:04d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i:08d}.bin").write_bytes(os.urandom(member_kb * 1024))
            (folder / f"{i:08d}.cls").write_text(str(i % 10))
    options = project("PackOptions")(max_size=shard_mb * 1024 * 1024)
    summary = project("pack")(raw, root / "www" / "d", options)
    return Path(summary.index)


def drop_page_cache() -> bool:
    """Make the next read come from the disk (root only): what "local disk" means for big datasets."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def timed(name: str, make: Callable[[], Iterable[Any]], total_bytes: int, cold: bool) -> Run:
    """Build the dataset and read it to the end, on the clock; the rate is MB of shards per second."""
    if cold and not drop_page_cache():
        raise SystemExit("--cold needs root (writes /proc/sys/vm/drop_caches)")
    started = time.perf_counter()
    count = 0
    for _ in make():
        count += 1
    seconds = time.perf_counter() - started
    return Run(name, seconds, seconds, samples=count, extra={"MBps": total_bytes / seconds / 1e6})


def readers(index: Path, base: str, decode: bool) -> dict[str, Callable[[], Iterable[Any]]]:
    """What each contender builds and reads, by name: ours and webdataset, local and over HTTP."""
    import webdataset as wds

    shard_dataset, http_stream = project("ShardDataset"), project("HttpStream")
    http = project("HttpOptions")(read_timeout=30)
    url, pattern_name = f"{base}/d/{index.name}", json.loads(index.read_text())["pattern"]
    ours: dict[str, Any] = {"decode": False} if not decode else {"image": "torch"}
    if decode:
        project("turbo_jpeg")()  # imported before the clock, as ShardDataset does when it is built
    shard_urls = [f"{base}/d/{path.name}" for path in sorted(index.parent.glob("*.tar"))]

    def theirs(pattern: str) -> Any:
        dataset = wds.WebDataset(pattern, shardshuffle=False, empty_check=False)
        return dataset.decode("torchrgb8") if decode else dataset

    def curl_only() -> Iterable[Any]:
        # A C client: bytes over HTTP into /dev/null, no parsing, no Python in the loop.
        for shard_url in shard_urls:
            subprocess.run(["curl", "-s", "-o", "/dev/null", shard_url], check=True)
        return iter(())

    def bytes_only() -> Iterable[Any]:
        # The transport alone: our HTTP stream into one reused buffer, no tar parsing.
        buffer = memoryview(bytearray(1 << 20))
        for shard_url in shard_urls:
            with http_stream(shard_url, 0, http) as stream:
                while stream.readinto(buffer):
                    pass
        return iter(())

    # Bytes-only baselines say what the link carries; beside decoding they only add minutes.
    baselines = {} if decode else {CURL: curl_only, TRANSPORT: bytes_only}
    return {
        **baselines,
        "ours, local disk": lambda: shard_dataset(index, shuffle=False, **ours),
        "ours, HTTP (nginx), prefetch 2": lambda: shard_dataset(url, shuffle=False, http=http, **ours),
        "ours, HTTP (nginx), no prefetch": lambda: shard_dataset(
            url, shuffle=False, http=http, prefetch=0, **ours
        ),
        "webdataset, local disk": lambda: theirs(str(index.parent / pattern_name)),
        "webdataset, HTTP (curl)": lambda: theirs(f"{base}/d/{pattern_name}"),
    }


def contenders(index: Path, base: str, decode: bool, modes: list[str], total: int) -> list[Contender]:
    """Every reader in every cache state; a warm run reads the shards once first, a cold one drops them."""
    shards = list(index.parent.glob("*.tar"))
    made = readers(index, base, decode)

    def one(name: str, make: Callable[[], Iterable[Any]], mode: str) -> Run:
        if mode == "warm":
            warm_read(shards)
        return timed(name, make, total, cold=mode == "cold")

    return [
        (f"{reader} [{mode}]", lambda n=f"{reader} [{mode}]", m=make, c=mode: one(n, m, c))
        for mode in modes
        for reader, make in made.items()
    ]


def verdict_lines(best_runs: dict[str, Run], mode: str) -> list[str]:
    """The targets for one cache state, and where the time goes when the transport alone was measured."""
    local = best_runs[f"ours, local disk [{mode}]"].seconds
    ours_default = best_runs[f"ours, HTTP (nginx), prefetch 2 [{mode}]"].seconds
    ours_inline = best_runs[f"ours, HTTP (nginx), no prefetch [{mode}]"].seconds
    theirs_http = best_runs[f"webdataset, HTTP (curl) [{mode}]"].seconds
    lines = [
        f"- {mode}: ours over HTTP within 20% of ours on local disk: {ours_default / local:.2f}x "
        f"with the default prefetch 2 ({verdict(ours_default <= 1.2 * local)}), "
        f"{ours_inline / local:.2f}x without prefetch ({verdict(ours_inline <= 1.2 * local)})",
        f"- {mode}: ours over HTTP (default) vs webdataset over HTTP: "
        f"{theirs_http / ours_default:.2f}x as fast ({verdict(ours_default < theirs_http)})",
    ]
    if (transport := best_runs.get(f"{TRANSPORT} [{mode}]")) is not None:
        lines.append(
            f"- {mode}: the transport alone (bytes over loopback into a reused buffer, no parsing) "
            f"takes {transport.seconds / local:.2f}x the time of ours on local disk; reading the tar on top "
            f"of it takes {ours_inline / transport.seconds:.2f}x the transport's time without prefetch"
        )
    return lines


def report(best_runs: dict[str, Run], modes: list[str], setup: dict[str, Any]) -> str:
    m = machine_facts()
    rows = []
    for mode in modes:
        local = best_runs[f"ours, local disk [{mode}]"].seconds
        rows += [
            [name, f"{run.seconds:.2f}", f"{run.extra['MBps']:.0f}", f"{run.seconds / local:.2f}x"]
            for name, run in best_runs.items()
            if name.endswith(f"[{mode}]")
        ]
    what = "256x256 JPEGs decoded to uint8 CHW tensors" if setup["decode"] else "256 KiB members, no decode"
    lines = [
        f"# HTTP streaming benchmark, {m['date']}",
        "",
        f"Machine: {m['nproc']} CPUs, {m['os']}; Python {m['python']}.",
        f"Data: {setup['shards']} shards x ~{setup['shard_mb']} MB ({setup['total'] / 1e6:.0f} MB, {what}), "
        f"no shuffle; nginx on 127.0.0.1; best of {setup['rounds']} rounds, contenders alternating. "
        "warm: shards in the page cache (local reads run at memory speed); cold: page cache dropped "
        "before every run, so local reads and nginx both read the disk.",
        "",
        table(["contender", "seconds", "MB/s", "time vs ours, local disk (same cache state)"], rows),
        "",
        *[line for mode in modes for line in verdict_lines(best_runs, mode)],
    ]
    return "\n".join(lines) + "\n"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 shards x 20 MB, 1 round, results not saved")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--decode",
        action="store_true",
        help="JPEG shards decoded to uint8 tensors (image='torch', torchrgb8), not raw bytes",
    )
    parser.add_argument(
        "--cache",
        choices=["warm", "cold", "both"],
        default="both",
        help="warm: shards in the page cache; cold: dropped before every run (root)",
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    shards, shard_mb, repeats = (3, 20, 1) if args.quick else (4, 100, args.rounds)
    modes = ["warm", "cold"] if args.cache == "both" else [args.cache]
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="http-bench-") as tmp:
        index = make_shards(Path(tmp), shards, shard_mb, jpegs=args.decode)
        total = sum(p.stat().st_size for p in index.parent.glob("*.tar"))
        with project("nginx")(index.parent.parent) as server:
            runs = rounds(
                repeats,
                contenders(index, server.url, args.decode, modes, total),
                lambda message: print(message, flush=True),
                lambda run: f"{run.seconds:.2f}s {run.extra['MBps']:.0f} MB/s",
            )
    best_runs = {name: best(got) for name, got in runs.items()}
    setup = {"shards": shards, "shard_mb": shard_mb, "total": total, "rounds": repeats, "decode": args.decode}
    text = report(best_runs, modes, setup)
    print(text)
    if not args.quick:
        data = {
            name: {"seconds": r.seconds, "samples": r.samples, "MBps": r.extra["MBps"]}
            for name, r in best_runs.items()
        }
        day = dt.datetime.now(dt.timezone.utc).date()
        name = ("http-decode-" if args.decode else "http-") + stamp(False, day=day)
        save_results(RESULTS, name, data, text, lambda message: print(message, file=sys.stderr))


if __name__ == "__main__":
    main()
