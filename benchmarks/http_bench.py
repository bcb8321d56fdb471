"""HTTP streaming throughput: ours through nginx vs ours from local disk vs webdataset's curl pipes.

Side by side in one run on the same 100 MB shards (loopback nginx, started here); contenders take turns
round by round and the best round counts, since this 2-core machine is noisy.

    python3 benchmarks/http_bench.py            # 4 shards x 100 MB, 3 rounds
    python3 benchmarks/http_bench.py --quick    # 3 shards x 20 MB, 1 round
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def make_shards(root: Path, shards: int, shard_mb: int, member_kb: int = 256, jpegs: bool = False) -> Path:
    from packer import PackOptions, pack

    raw = root / "raw"
    if jpegs:  # ~12 kB 256x256 JPEGs: the decode-bound case training actually runs
        from shardstream.demo.synth import make_jpegs

        make_jpegs(raw, shards * shard_mb * 1000 // 12)
    else:
        per_shard = shard_mb * 1024 // (member_kb + 1)
        for i in range(shards * per_shard):
            folder = raw / f"{i // 1000:04d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i:08d}.bin").write_bytes(os.urandom(member_kb * 1024))
            (folder / f"{i:08d}.cls").write_text(str(i % 10))
    summary = pack(raw, root / "www" / "d", PackOptions(max_size=shard_mb * 1024 * 1024))
    return Path(summary.index)


CURL = "curl into /dev/null (a C client, no parsing)"
TRANSPORT = "ours, HTTP bytes only (HttpStream.readinto, no parsing)"


def _verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def drop_page_cache() -> bool:
    """Make the next read come from the disk (root only): what "local disk" means for big datasets."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def run(name: str, make, total_bytes: int, cold: bool) -> dict[str, float]:
    if cold and not drop_page_cache():
        raise SystemExit("--cold needs root (writes /proc/sys/vm/drop_caches)")
    started = time.perf_counter()
    count = 0
    for _ in make():
        count += 1
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "samples": count, "MBps": total_bytes / seconds / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--decode", action="store_true",
                        help="JPEG shards decoded to uint8 tensors (image='torch', torchrgb8), not raw bytes")
    parser.add_argument("--cache", choices=["warm", "cold", "both"], default="both",
                        help="warm: shards in the page cache; cold: dropped before every run (root)")
    args = parser.parse_args()
    shards, shard_mb, rounds = (3, 20, 1) if args.quick else (4, 100, args.rounds)
    warnings.simplefilter("ignore")
    import webdataset as wds

    from streamer import ShardDataset
    from streamer.http import HttpOptions, HttpStream
    from tests.servers import nginx

    with tempfile.TemporaryDirectory(prefix="http-bench-") as tmp:
        index = make_shards(Path(tmp), shards, shard_mb, jpegs=args.decode)
        www = index.parent.parent
        total = sum(p.stat().st_size for p in index.parent.glob("*.tar"))
        pattern_name = json.loads(index.read_text())["pattern"]
        with nginx(www) as server:
            url = f"{server.url}/d/{index.name}"
            http = HttpOptions(read_timeout=30)
            ours = {"decode": False} if not args.decode else {"image": "torch"}
            if args.decode:
                from streamer.image import turbo_jpeg

                turbo_jpeg()  # imported before the clock, as ShardDataset does when it is built

            def theirs(pattern: str):
                dataset = wds.WebDataset(pattern, shardshuffle=False, empty_check=False)
                return dataset.decode("torchrgb8") if args.decode else dataset

            shard_urls = [f"{server.url}/d/{path.name}" for path in sorted(index.parent.glob("*.tar"))]

            def curl_only():
                # A C client: bytes over HTTP into /dev/null, no parsing, no Python in the loop.
                for shard_url in shard_urls:
                    subprocess.run(["curl", "-s", "-o", "/dev/null", shard_url], check=True)
                return iter(())

            def bytes_only():
                # The transport alone: our HTTP stream into one reused buffer, no tar parsing.
                buffer = memoryview(bytearray(1 << 20))
                for shard_url in shard_urls:
                    with HttpStream(shard_url, 0, http) as stream:
                        while stream.readinto(buffer):
                            pass
                return iter(())

            # Bytes-only baselines say what the link carries; beside decoding they only add minutes.
            baselines = {} if args.decode else {CURL: curl_only, TRANSPORT: bytes_only}
            contenders = {
                **baselines,
                "ours, local disk": lambda: ShardDataset(index, shuffle=False, **ours),
                "ours, HTTP (nginx), prefetch 2": lambda: ShardDataset(url, shuffle=False, http=http, **ours),
                "ours, HTTP (nginx), no prefetch": lambda: ShardDataset(
                    url, shuffle=False, http=http, prefetch=0, **ours
                ),
                "webdataset, local disk": lambda: theirs(str(index.parent / pattern_name)),
                "webdataset, HTTP (curl)": lambda: theirs(f"{server.url}/d/{pattern_name}"),
            }
            modes = ["warm", "cold"] if args.cache == "both" else [args.cache]
            best: dict[str, dict[str, float]] = {}
            for round_number in range(rounds):
                for mode in modes:
                    for contender, make in contenders.items():
                        name = f"{contender} [{mode}]"
                        if mode == "warm":
                            for path in index.parent.glob("*.tar"):
                                path.read_bytes()
                        result = run(name, make, total, cold=mode == "cold")
                        seconds, rate = result["seconds"], result["MBps"]
                        print(f"round {round_number + 1} {name}: {seconds:.2f}s {rate:.0f} MB/s", flush=True)
                        if name not in best or result["seconds"] < best[name]["seconds"]:
                            best[name] = result
    lines = [
        f"# HTTP streaming benchmark, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"Machine: {os.cpu_count()} CPUs, {platform.platform()}; Python {platform.python_version()}.",
        f"Data: {shards} shards x ~{shard_mb} MB ({total / 1e6:.0f} MB, "
        + ("256x256 JPEGs decoded to uint8 CHW tensors" if args.decode else "256 KiB members, no decode")
        + f"), no shuffle; nginx on 127.0.0.1; best of {rounds} rounds, contenders alternating. "
        "warm: shards in the page cache (local reads run at memory speed); cold: page cache dropped "
        "before every run, so local reads and nginx both read the disk.",
        "",
        "| contender | seconds | MB/s | time vs ours, local disk (same cache state) |",
        "|---|---|---|---|",
    ]
    verdicts = []
    for mode in modes:
        local = best[f"ours, local disk [{mode}]"]["seconds"]
        for name, result in best.items():
            if name.endswith(f"[{mode}]"):
                seconds, rate = result["seconds"], result["MBps"]
                lines.append(f"| {name} | {seconds:.2f} | {rate:.0f} | {seconds / local:.2f}x |")
        ours_default = best[f"ours, HTTP (nginx), prefetch 2 [{mode}]"]["seconds"]
        ours_inline = best[f"ours, HTTP (nginx), no prefetch [{mode}]"]["seconds"]
        theirs_http = best[f"webdataset, HTTP (curl) [{mode}]"]["seconds"]
        transport = best.get(f"{TRANSPORT} [{mode}]", {}).get("seconds")
        verdicts += [
            f"- {mode}: ours over HTTP within 20% of ours on local disk: {ours_default / local:.2f}x "
            f"with the default prefetch 2 (**{_verdict(ours_default <= 1.2 * local)}**), "
            f"{ours_inline / local:.2f}x without prefetch (**{_verdict(ours_inline <= 1.2 * local)}**)",
            f"- {mode}: ours over HTTP (default) vs webdataset over HTTP: "
            f"{theirs_http / ours_default:.2f}x as fast (**{_verdict(ours_default < theirs_http)}**)",
        ]
        if transport is not None:
            verdicts.append(
                f"- {mode}: the transport alone (bytes over loopback into a reused buffer, no parsing) "
                f"takes {transport / local:.2f}x the time of ours on local disk; reading the tar on top of "
                f"it takes {ours_inline / transport:.2f}x the transport's time without prefetch"
            )
    lines += ["", *verdicts]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.quick:
        name = "http-decode" if args.decode else "http"
        out = REPO / "benchmarks" / "results" / f"{name}-{datetime.now(timezone.utc):%Y-%m-%d}"
        out.with_suffix(".md").write_text(text)
        out.with_suffix(".json").write_text(json.dumps(best, indent=2))


if __name__ == "__main__":
    main()
