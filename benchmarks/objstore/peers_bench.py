#!/usr/bin/env python3
"""Object-store peers (issue 35, acceptance 2): raw samples from the shaped S3 server, side by side, one run.

Data: ``--shards`` (8) WebDataset tar shards of ``--size-mb`` (128) MB, packed by our packer from samples of
``--sample-mb`` (1) MB of raw bytes (member ``bin``; ``peers_data.py``), plus the same samples written by
``litdata.optimize`` in chunks of the same size, all under ``--data`` (reused while the same), served as
one bucket by ``tests/servers/shaped_s3.py`` in a child process of its own (30 ms to first byte, 100 MB/s
per connection). Contenders, each in a fresh interpreter of its own venv (``peers_children.py``), in one
process (``1p``) and through ``DataLoader(batch_size=None, num_workers=2)`` (``dl``, fork):

* ``ours``     ``streamer.ShardDataset("s3://BUCKET/ours/shardstream-index.json", decode=False,
               shuffle=False)``, ``$SHARDSTREAM_S3_CLIENT`` unset: the native obstore reader;
* ``s3fs``     the same with ``SHARDSTREAM_S3_CLIENT=s3fs``: the fsspec path, as before issue 35;
* ``wds``      ``webdataset.WebDataset(["pipe:aws s3 cp --endpoint-url URL s3://BUCKET/ours/X.tar -"])``;
* ``litdata``  ``litdata.StreamingDataset("s3://BUCKET/litdata", storage_options={endpoint_url, keys})``
               (``/work/venvs/litdata``), a fresh cache folder each run;
* ``s3tc``     ``s3torchconnector.S3IterableDataset.from_objects`` over the tar shards, each read as a
               ``tarfile`` stream (``/work/venvs/s3tc``: ``pip install s3torchconnector``);
* ``obstore``  the bytes alone: ``ceiling_bench.measure`` (8 MiB ranges, 8 and 16 in flight), no tar.

Each run is timed inside the child after its imports, construction included; contenders take turns round
by round, best of ``--repeats`` (3). The server records every request's start and end: for each run the
peak of requests in flight and their time-weighted mean, the requests by kind, and when the first request
for sample bytes (a shard or chunk, not an index) ended. The ceiling of a run is issue 35's: the lower of
peak-in-flight x the per-connection cap and what obstore reads from the same server unshaped at that
concurrency (measured at the start of the run, interpolated). "First sample" is from the start of the
dataset's construction; "RTTs after index" is the time from the end of the last index request (the
dataset's index file; before 2026-12-07 any metadata request, sidecars included, ``rtts_after_metadata``)
before the first sample to the first sample, in units of the first-byte wait (30 ms).

    .venv/bin/python benchmarks/objstore/peers_bench.py --quick --no-save     # 2 x 32 MB, 1 round
    .venv/bin/python benchmarks/objstore/peers_bench.py                       # the full run (~10 min)

Results: ``benchmarks/results/objstore-peers-<date>.{md,json}``; a second full run the same day with the same
settings is added beside the first (both tables kept), ``--fresh`` starts the day's file over.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling modules

from harness import REPO, RESULTS
from harness.report import machine_facts, marker_matches, stamp, write_marker
from harness.sources import snapshot_sources, source_fingerprint
from peers_data import sample_bytes
from peers_report import report
from shaped_server import Server, request_facts

HERE = Path(__file__).resolve().parent
MB = 1_000_000
CHILD = HERE / "peers_children.py"
OURS_PY = sys.executable
VENVS = {"litdata": Path("/work/venvs/litdata"), "s3tc": Path("/work/venvs/s3tc")}
AWS = "/root/.pyenv/shims/aws"
INFLIGHT = [1, 2, 4, 8, 12, 16, 24, 32]  # unshaped obstore measured at these, for the ceilings


# ---------------------------------------------------------------------------------------------------------
# Data.
# ---------------------------------------------------------------------------------------------------------
def make_data(args: argparse.Namespace) -> dict[str, Any]:
    """Our shards under ``data/ours``, LitData's chunks under ``data/litdata``; reused when the same."""
    root: Path = args.data
    per_shard = args.size_mb // args.sample_mb
    samples = per_shard * args.shards
    params = {"shards": args.shards, "size_mb": args.size_mb, "sample_mb": args.sample_mb, "generator": 1}
    if not marker_matches(root, params):
        import shutil

        from packer import PackOptions, pack

        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        size = args.sample_mb * MB
        records = ({"bin": sample_bytes(i, size)} for i in range(samples))
        log(f"packing {samples} samples of {args.sample_mb} MB into {args.shards} shards ...")
        pack(records, root / "ours", PackOptions(max_size=None, max_count=per_shard), progress=False)
        if not VENVS["litdata"].exists():  # no LitData here: its contenders say so when they run
            log(f"no {VENVS['litdata']}: the LitData chunks are not written")
            write_marker(root, params)
            return _data(root, samples)
        log("litdata.optimize ...")
        spec = {
            "out": str(root / "litdata"),
            "samples": samples,
            "sample_size": size,
            "chunk_bytes": (args.size_mb + 1) * MB,  # a little slack: 1 chunk per shard
            "bench_dir": str(HERE),
        }
        got = child("litdata", "write-litdata", spec, {}, timeout=1800)
        if "error" in got:
            raise SystemExit(f"litdata.optimize failed: {got['error']}")
        write_marker(root, params)
    return _data(root, samples)


def _data(root: Path, samples: int) -> dict[str, Any]:
    tars = sorted(p.name for p in (root / "ours").iterdir() if p.name.endswith(".tar"))
    sizes = {(root / "ours" / t).stat().st_size for t in tars}
    return {"tars": tars, "samples": samples, "tar_size": min(sizes)}


# ---------------------------------------------------------------------------------------------------------
# Children.
# ---------------------------------------------------------------------------------------------------------
def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def python_of(lib: str) -> str:
    return str(VENVS[lib] / "bin" / "python") if lib in VENVS else OURS_PY


def child(lib: str, kind: str, spec: dict[str, Any], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Run ``peers_children.py KIND SPEC`` with ``lib``'s interpreter; its JSON line, or an error."""
    full = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SHARDSTREAM_S3_CLIENT")}
    full.update(env, PYTHONHASHSEED="0", LITDATA_DISABLE_VERSION_CHECK="1")
    cmd = [python_of(lib), str(CHILD), kind, json.dumps(spec)]
    if not Path(cmd[0]).exists():  # a peer's venv this machine lacks: a row that says so, not a crash
        return {"error": f"no {cmd[0]}: make {lib}'s venv (see this script's docstring)"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=full, cwd=REPO, start_new_session=True)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            code = None
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if code != 0:
        what = f"killed after {timeout:.0f} s" if code is None else f"exit {code}"
        errors = re.findall(r"^(?:\w+\.)*\w*(?:Error|Exception)\b.*$", stderr, re.MULTILINE)
        reason = re.findall(r"source: (\w+)", stderr)  # obstore's Rust error chain, innermost last
        short = (errors[-1][:200] if errors else "") + (f" (source: {reason[-1]})" if reason else "")
        return {"error": f"{what}: {short}", "detail": stderr.strip()[-3000:]}
    return json.loads(stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------------------
# Contenders and rounds.
# ---------------------------------------------------------------------------------------------------------
def contenders(srv: Server, data: dict[str, Any], args: argparse.Namespace, src: Path) -> dict[str, Any]:
    """label -> (venv, kind, extra environment, spec)."""
    index = f"s3://{srv.bucket}/ours/shardstream-index.json"
    keys = [f"ours/{t}" for t in data["tars"]]
    pipes = [f"pipe:{AWS} s3 cp --quiet --endpoint-url {srv.url} s3://{srv.bucket}/{k} -" for k in keys]
    uris = [f"s3://{srv.bucket}/{k}" for k in keys]
    work = str(args.data.parent / "shardstream-objstore-peers-litdata-cache")
    ours = {"PYTHONPATH": str(src)}
    table = {}
    for loader, tag in ((False, "1p"), (True, "dl")):
        table[f"ours {tag}"] = ("ours", "ours", ours, {"url": index, "loader": loader})
        s3fs = {**ours, "SHARDSTREAM_S3_CLIENT": "s3fs"}
        table[f"s3fs {tag}"] = ("ours", "ours", s3fs, {"url": index, "loader": loader})
        table[f"wds pipe:aws {tag}"] = ("ours", "wds", {}, {"urls": pipes, "loader": loader})
        litdata = {"url": f"s3://{srv.bucket}/litdata", "loader": loader, "cache_dir": work}
        if not loader:  # as shipped: fails on an http:// endpoint (see peers_children.read_litdata)
            table[f"litdata {tag}"] = ("litdata", "litdata", {}, litdata)
        table[f"litdata boto3 {tag}"] = ("litdata", "litdata", {}, {**litdata, "no_obstore": True})
        table[f"s3tc {tag}"] = ("s3tc", "s3tc", {}, {"uris": uris, "loader": loader})
    for n in (8, 16):
        spec = {"keys": keys, "size": data["tar_size"], "inflight": n, "bench_dir": str(HERE)}
        table[f"obstore x{n} bytes"] = ("ours", "obstore", {}, spec)
    return {k: v for k, v in table.items() if not args.only or any(o in k for o in args.only)}


def run_rounds(srv: Server, data: dict[str, Any], args: argparse.Namespace, src: Path) -> dict[str, list]:
    """Every contender once per round, in turn; a contender that failed twice is not run again."""
    sys.path.insert(0, str(REPO))
    from tests.servers.s3 import s3_environment

    env = s3_environment(srv.url)
    table = contenders(srv, data, args, src)
    runs: dict[str, list] = {label: [] for label in table}
    for round_no in range(args.repeats):
        for label, (lib, kind, extra, spec) in table.items():
            if sum("error" in t for t in runs[label]) >= 2:  # twice: not a passing fault
                continue
            srv.reset()
            cpu = srv.cpu_seconds()
            with tempfile.TemporaryDirectory() as node:  # --cold: a node that has read nothing yet
                cache = {"SHARDSTREAM_CACHE": node} if args.cold else {}
                got = child(lib, kind, spec, {**env, **extra, **cache}, args.timeout)
            if "error" not in got:
                got["server_cpu_s"] = srv.cpu_seconds() - cpu  # child start-up included: the server idles
                got["server"] = request_facts(
                    srv.spans(), got["t_start"], got.get("t_first"), args.ttfb_ms / 1000
                )
                check(label, kind, got, data, args)
            runs[label].append(got)
            say = got.get("error", "")[-200:] or f"{got['mb_s']:.0f} MB/s, first {got['first_s']:.2f} s"
            log(f"round {round_no + 1} {label}: {say}")
    return runs


def check(label: str, kind: str, got: dict[str, Any], data: dict[str, Any], args: argparse.Namespace) -> None:
    """A run that missed or repeated samples is marked wrong (its figures are not comparable)."""
    if kind == "obstore":
        return
    want = data["samples"]
    if got["samples"] != want or got["bytes"] != want * args.sample_mb * MB:
        got["wrong"] = f"{got['samples']} samples, {got['bytes']} bytes; want {want} x {args.sample_mb} MB"
        log(f"{label}: WRONG {got['wrong']}")


def unshaped_at(unshaped: dict[int, float], n: float) -> float:
    """Unshaped MB/s at ``n`` in flight, interpolated between the concurrencies measured."""
    points = sorted(unshaped.items())
    if n <= points[0][0]:
        return points[0][1]
    for (a, fa), (b, fb) in itertools.pairwise(points):
        if n <= b:
            return fa + (fb - fa) * (n - a) / (b - a)
    return points[-1][1]


def summarize(runs: dict[str, list], unshaped: dict[int, float], args: argparse.Namespace) -> list[dict]:
    """Per contender: the best round, its ceiling and fraction, the least first-sample time and RTTs."""
    rows = []
    for label, tries in runs.items():
        ok = [t for t in tries if "error" not in t and "wrong" not in t]
        if not ok:
            rows.append({"label": label, "error": (tries[-1].get("error") or tries[-1].get("wrong", ""))})
            continue
        top = max(ok, key=lambda t: t["mb_s"])
        peak, mean = top["server"]["peak_in_flight"], top["server"]["mean_in_flight"]
        ceiling = min(peak * args.rate_mb_s, unshaped_at(unshaped, peak))
        at_mean = min(mean * args.rate_mb_s, unshaped_at(unshaped, mean))
        rtts = [t["server"]["rtts_after_index"] for t in ok if t["server"]["rtts_after_index"] is not None]
        after_meta = [t["server"].get("rtts_after_metadata") for t in ok]
        after_meta = [r for r in after_meta if r is not None]
        failed = [t["error"] for t in tries if "error" in t]
        note = f" ({len(failed)} of {len(tries)} rounds failed: {failed[0][:40]})" if failed else ""
        rows.append(
            {
                "label": label + note,
                "mb_s": top["mb_s"],
                "all_mb_s": [t["mb_s"] for t in ok],
                "peak_in_flight": peak,
                "mean_in_flight": mean,
                "ceiling_mb_s": ceiling,
                "fraction": top["mb_s"] / ceiling,
                "ceiling_at_mean_mb_s": at_mean,
                "fraction_at_mean": top["mb_s"] / at_mean,
                "seconds": top["seconds"],
                "cpu_s": top.get("cpu_s"),
                "server_cpu_s": top.get("server_cpu_s"),
                "first_s": min(t["first_s"] for t in ok),
                "rtts_after_index": min(rtts) if rtts else None,
                "rtts_after_metadata": min(after_meta) if after_meta else None,
                "requests": top["server"]["kinds"],
            }
        )
    return rows


def lib_versions() -> dict[str, Any]:
    names = {
        "ours": ["obstore", "s3fs", "webdataset", "torch"],
        "litdata": ["litdata", "boto3", "torch"],
        "s3tc": ["s3torchconnector", "s3torchconnectorclient", "torch"],
    }
    out = {lib: child(lib, "versions", {"names": n}, {}, 120) for lib, n in names.items()}
    try:
        aws = subprocess.run([AWS, "--version"], capture_output=True, text=True)
        out["aws"] = (aws.stdout or aws.stderr).strip()
    except OSError as exc:
        out["aws"] = f"none: {exc}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--size-mb", type=int, default=128, help="each shard's payload in MB (10^6 bytes)")
    parser.add_argument("--sample-mb", type=int, default=1)
    parser.add_argument("--ttfb-ms", type=float, default=30.0)
    parser.add_argument("--rate-mb-s", type=float, default=100.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds a child may take")
    parser.add_argument("--only", nargs="+", help="contenders whose label contains any of these")
    parser.add_argument("--quick", action="store_true", help="2 x 32 MB, one round, not saved")
    parser.add_argument("--cold", action="store_true", help="each run on an empty node cache (first read)")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--fresh", action="store_true", help="start the day's results file over")
    parser.add_argument("--data", type=Path, default=Path("/tmp/shardstream-objstore-peers"))
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.shards, args.size_mb, args.repeats, args.no_save = 2, 32, 1, True
        args.data = args.data.with_name(args.data.name + "-quick")
    for name in ("shards", "size_mb", "sample_mb", "repeats", "ttfb_ms", "rate_mb_s"):
        if not getattr(args, name) > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    data = make_data(args)
    src = snapshot_sources(args.data.parent / "shardstream-objstore-peers-src")
    started, load_before = time.strftime("%H:%M UTC", time.gmtime()), os.getloadavg()[0]
    from ceiling_bench import measure

    keys = [f"ours/{t}" for t in data["tars"]]
    with Server(args.data, 0.0, None) as srv:
        got = measure(srv.url, keys, data["tar_size"], INFLIGHT, args.repeats)
        unshaped = {n: v["mb_s"] for n, v in got.items()}
    log("unshaped: " + ", ".join(f"{n}: {v:.0f}" for n, v in unshaped.items()))
    with Server(args.data, args.ttfb_ms / 1000, args.rate_mb_s * MB) as srv:
        runs = run_rounds(srv, data, args, src)
    run = {
        "started": started,
        "load_before": f"{load_before:.1f}",
        "load_after": f"{os.getloadavg()[0]:.1f}",
        "args": {k: v for k, v in vars(args).items() if k not in ("data", "results", "fresh")},
        "unshaped": unshaped,
        "rows": summarize(runs, unshaped, args),
        "runs": runs,
    }
    save(args, run)


def save(args: argparse.Namespace, run: dict[str, Any]) -> None:
    """Add the run to the day's results (kept beside earlier runs with the same settings) and print it."""
    stem = f"objstore-peers-{'cold-' if args.cold else ''}{stamp(False, args.only)}"
    path = args.results / f"{stem}.json"
    result: dict[str, Any] = {"runs": []}
    if path.exists() and not args.fresh and not args.no_save:
        result = json.loads(path.read_text())
        if result["runs"] and result["runs"][0]["args"] != run["args"]:
            raise SystemExit(f"{path} holds runs with other settings: pass --fresh to start it over")
    libs = lib_versions()
    machine = {**machine_facts(), "source_fingerprint": source_fingerprint(), "versions": libs["ours"]}
    result.update(command=" ".join(["python3", *sys.argv]), machine=machine, versions=libs)
    result["runs"].append(run)
    markdown = report(result)
    print(markdown)
    if not args.no_save:
        args.results.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2) + "\n")
        path.with_suffix(".md").write_text(markdown)
        log(f"saved {path.with_suffix('.md')} and .json")


if __name__ == "__main__":
    main()
