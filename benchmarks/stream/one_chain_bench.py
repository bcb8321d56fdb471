#!/usr/bin/env python3
"""Issue 31's acceptance items 4 and 5, baseline and current code side by side in one run.

Two checkouts (``--baseline``: the code before the issue, commit 0bf9bfe, default /work/wt-base;
``--current``: default this script's repository) each run in fresh subprocesses with
``PYTHONPATH=<checkout>`` (children in ``one_chain_children.py``; both layouts export
``from streamer import ShardDataset, Mixture``). Make the baseline with ``git worktree add --detach
/work/wt-base 0bf9bfe`` and copy the built ``_tarscan``, ``_order`` and ``_interleave`` ``.so`` files into
its ``shardstream/format/`` and ``streamer/`` (the old flat layout; same C sources). Contenders take
turns round by round, the order alternating between rounds, so a noisy neighbour hits all alike.

1. ``memory``  2,000 512x512 JPEGs (~76 KB, 3 shards of <=64 MB), ``image="torch"``, ``buffer_size=1000``,
               shuffle, seed 0: ``ShardDataset(index)`` vs ``Mixture([{path, weight 1}])``. Per run: peak
               RSS (ru_maxrss) over the one after imports and construction, ms to the first sample,
               samples/s over 1,200. Acceptance 4: Mixture's peak growth <= ShardDataset's + 10% + the raw
               bytes of 1,000 samples + 10 MB, first sample <= 2x + 50 ms (medians over rounds).
2. ``speed``   12,000 tiny raw samples (12 shards), ``decode=False``, buffer 1/100/1000, shuffle: samples/s
               of one full epoch (the first in its process; later warm epochs are kept too), best round.
3. ``small``   Mixture of tiny (7 samples, w 0.2) + mid (1,000, 0.3) + big (50,000, 0.5) for one epoch vs
               the same without tiny; tiny alone as a one-source Mixture (``epoch_size`` 20,000). Opens of
               tiny's shard are counted by wrapping ``open``/``io.open``/``os.open`` in the child.

    python3 benchmarks/stream/one_chain_bench.py                    # 3 rounds, ~2.5 minutes (+1 to make data)
    python3 benchmarks/stream/one_chain_bench.py --rounds 1 --only speed --data /tmp/one-chain-data

Results: markdown on stdout, ``benchmarks/results/one-chain-<date>.{md,json}`` (every raw number).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent  # benchmarks/stream/
REPO = HERE.parents[1]
CHILDREN = HERE / "one_chain_children.py"
PYTHON = "/work/main/.venv/bin/python"
VERSIONS = ("baseline", "current")
CONTENDERS = {"shard": "ShardDataset", "mixture": "Mixture", "front": "ShardDataset(defer_reads=False)"}
BUFFERS = (1, 100, 1000)
MEMORY_SAMPLES, TINY_EPOCH = 1200, 20_000


def child(checkout: Path, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One fresh interpreter with ``checkout`` on PYTHONPATH; its JSON line, or the error it died of."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"}
    done = subprocess.run(
        [PYTHON, str(CHILDREN), kind, json.dumps(spec)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"rc {done.returncode}"
        return {"error": last, "stderr_tail": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def git(checkout: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True).stdout.strip()


def machine(checkouts: dict[str, Path]) -> dict[str, Any]:
    probe = "import sys, torch; print(sys.version.split()[0], torch.__version__)"
    py, torch_version = subprocess.run([PYTHON, "-c", probe], capture_output=True, text=True).stdout.split()
    commits = {
        v: {
            "path": str(p),
            "commit": git(p, "rev-parse", "HEAD"),
            "subject": git(p, "log", "-1", "--format=%s"),
            "dirty_files": len(git(p, "status", "--porcelain").splitlines()),
        }
        for v, p in checkouts.items()
    }
    return {
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": py,
        "torch": torch_version,
        "commits": commits,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def warm(data: Path) -> None:
    """Read every data file once, so every run finds the page cache equally warm."""
    for path in data.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                while handle.read(1 << 20):
                    pass


def in_rounds(jobs: list[tuple[Any, ...]], rounds: int, run: Any, log: Any) -> list[dict[str, Any]]:
    """Every job once a round; each round a different order (reversed every other round, rotated by one)."""
    out = []
    for r in range(rounds):
        order = jobs[r % len(jobs) :] + jobs[: r % len(jobs)]
        for job in order[::-1] if r % 2 else order:
            result = run(*job)
            out.append({"round": r, "job": list(job), **result})
            said = result["error"] if "error" in result else f"{result.get('per_s', 0):,.0f}/s"
            log(f"  round {r} {job}: {said}")
    return out


def runs_of(results: list[dict[str, Any]], *job: Any) -> list[dict[str, Any]]:
    return [r for r in results if tuple(r["job"]) == job and "error" not in r]


def error_of(results: list[dict[str, Any]], *job: Any) -> str | None:
    return next((r["error"] for r in results if tuple(r["job"]) == job and "error" in r), None)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def memory_section(res: list[dict[str, Any]], buffer_mb: float) -> tuple[list[str], dict[str, Any]]:
    rows, summary = [], {}
    for version in VERSIONS:
        got = {}
        for key, name in CONTENDERS.items():
            runs = runs_of(res, version, key)
            if not runs:
                rows.append([version, name, f"failed: {error_of(res, version, key)}", "", "", "", ""])
                continue
            med = {k: statistics.median(r[k] for r in runs) for k in ("over_mb", "first_ms", "baseline_mb")}
            med["best_per_s"] = max(r["per_s"] for r in runs)
            got[key] = med
            rows.append(
                [
                    version,
                    name,
                    f"{med['over_mb']:.1f}",
                    f"{min(r['over_mb'] for r in runs):.1f}-{max(r['over_mb'] for r in runs):.1f}",
                    f"{med['first_ms']:.1f}",
                    f"{med['baseline_mb']:.0f}",
                    f"{med['best_per_s']:,.0f}",
                ]
            )
        if {"shard", "mixture"} <= got.keys():
            sd, mix = got["shard"], got["mixture"]
            rss_limit, first_limit = sd["over_mb"] * 1.1 + buffer_mb + 10, 2 * sd["first_ms"] + 50
            got["acceptance_4"] = {
                "rss_limit_mb": rss_limit,
                "rss_ok": mix["over_mb"] <= rss_limit,
                "first_limit_ms": first_limit,
                "first_ok": mix["first_ms"] <= first_limit,
            }
        summary[version] = got
    lines = [
        table(
            [
                "version",
                "contender",
                "peak RSS over baseline MB (median)",
                "range",
                "first sample ms",
                "baseline RSS MB",
                "samples/s (best)",
            ],
            rows,
        ),
        "",
    ]
    for version in VERSIONS:
        check = summary[version].get("acceptance_4")
        if check:
            ok = lambda b: "PASS" if b else "FAIL"  # noqa: E731
            mix = summary[version]["mixture"]
            lines.append(
                f"- {version}: Mixture RSS {mix['over_mb']:.1f} MB vs limit "
                f"{check['rss_limit_mb']:.1f} MB {ok(check['rss_ok'])}; first sample "
                f"{mix['first_ms']:.1f} ms vs limit {check['first_limit_ms']:.1f} ms "
                f"{ok(check['first_ok'])}"
            )
    return lines, summary


def speed_section(res: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    best: dict[str, Any] = {}
    for job in {tuple(r["job"]) for r in res}:
        runs = runs_of(res, *job)
        best["/".join(map(str, job))] = (
            {"per_s": max(r["per_s"] for r in runs), "warm_per_s": max(r["warm_per_s"] for r in runs)}
            if runs
            else {"error": error_of(res, *job)}
        )
    rows = []
    for buffer in BUFFERS:
        for field in ("per_s", "warm_per_s"):
            get = lambda v, c, b=buffer, f=field: best[f"{v}/{c}/{b}"].get(f)  # noqa: E731
            ref = max(filter(None, (get("baseline", c) for c in ("shard", "mixture"))), default=None)
            for version in VERSIONS:
                sd, mix, front = get(version, "shard"), get(version, "mixture"), get(version, "front")
                fmt = lambda x: f"{x:,.0f}" if x else "failed"  # noqa: E731
                ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"  # noqa: E731
                rows.append(
                    [
                        buffer,
                        "first" if field == "per_s" else "warm",
                        version,
                        fmt(sd),
                        fmt(mix),
                        fmt(front),
                        ratio(mix, sd),
                        ratio(mix, front),
                        ratio(sd, ref),
                        ratio(mix, ref),
                        ratio(front, ref),
                    ]
                )
    head = [
        *("buffer", "epoch", "version", "ShardDataset /s", "Mixture /s", "SD front-to-back /s", "Mixture/SD"),
        *("Mixture/front", "SD / base best", "Mixture / base best", "front / base best"),
    ]
    note = (
        "`first`: the process's first epoch (the measure asked for, best of rounds); `warm`: best later "
        "epoch in the same process. `base best`: the faster of the baseline's two."
    )
    return [table(head, rows), "", note], best


def small_section(res: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    rows, summary = [], {}
    for version in VERSIONS:
        got = {}
        for name in ("three", "two", "tiny"):
            runs = runs_of(res, version, name)
            got[name] = (
                {
                    "per_s": max(r["per_s"] for r in runs),
                    "samples": runs[0]["samples"],
                    "per_source": runs[0]["per_source"],
                    "tiny_shard_opens": sorted({r["opens"].get("shard", 0) for r in runs}),
                }
                if runs
                else {"error": error_of(res, version, name)}
            )
        summary[version] = got
        cell = lambda g: f"{g['per_s']:,.0f}" if "per_s" in g else f"failed: {g['error']}"  # noqa: E731
        opens = lambda g: "/".join(map(str, g.get("tiny_shard_opens", []))) or "-"  # noqa: E731
        three, two, tiny = got["three"], got["two"], got["tiny"]
        ratio = f"{three['per_s'] / two['per_s']:.2f}" if "per_s" in three and "per_s" in two else "-"
        rows.append(
            [
                version,
                cell(three),
                f"{three.get('samples', 0):,}",
                opens(three),
                cell(two),
                f"{two.get('samples', 0):,}",
                ratio,
                cell(tiny),
                opens(tiny),
            ]
        )
    head = [
        "version",
        "tiny+mid+big /s",
        "samples",
        "tiny shard opens",
        "mid+big /s",
        "samples",
        "three/two",
        f"tiny alone /s (epoch_size {TINY_EPOCH:,})",
        "tiny shard opens",
    ]
    return [table(head, rows)], summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, default=Path("/work/wt-base"))
    parser.add_argument("--current", type=Path, default=REPO)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "one-chain-data")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="memory,speed,small")
    parser.add_argument("--name", default="one-chain-2026-12-04", help="result stem in benchmarks/results")
    args = parser.parse_args()
    checkouts = {"baseline": args.baseline.resolve(), "current": args.current.resolve()}
    parts, log = args.only.split(","), lambda m: print(m, file=sys.stderr, flush=True)
    started = time.perf_counter()
    facts = machine(checkouts)
    log(f"data in {args.data} (packed by the current checkout) ...")
    made = child(checkouts["current"], "make", {"data": str(args.data)})
    if "error" in made:
        raise SystemExit(f"making the data failed: {made['stderr_tail']}")
    warm(args.data)
    d = args.data
    report: dict[str, Any] = {"machine": facts, "data": made, "rounds": args.rounds, "raw": {}, "summary": {}}
    md = [
        f"# One chain: baseline vs current, {facts['date']}",
        "",
        f"Machine: {facts['nproc']} cores, {facts['platform']}, Python {facts['python']}, "
        f"torch {facts['torch']}.",
        f"{args.rounds} rounds, contenders alternating; every run a fresh subprocess.",
        "",
    ]
    for version, info in facts["commits"].items():
        md.append(
            f"- {version}: `{info['commit'][:10]}` {info['subject'][:90]} ({info['path']}, "
            f"{info['dirty_files']} uncommitted files)"
        )
    if "memory" in parts:
        buffer_mb = made["jpeg"]["buffer_raw_bytes_mean"] / 2**20
        spec = {
            "index": str(d / "jpeg" / "shardstream-index.json"),
            "dir": str(d / "jpeg"),
            "buffer": 1000,
            "samples": MEMORY_SAMPLES,
        }
        log("memory ...")
        jobs = [(v, c) for v in VERSIONS for c in CONTENDERS]
        res = in_rounds(
            jobs, args.rounds, lambda v, c: child(checkouts[v], "memory", {**spec, "contender": c}), log
        )
        lines, report["summary"]["memory"] = memory_section(res, buffer_mb)
        report["raw"]["memory"] = res
        jpeg = made["jpeg"]
        md += [
            "",
            f"## 1. Memory: {jpeg['samples']:,} JPEGs 512x512 ({jpeg['mean_sample_bytes'] / 1e3:.0f}"
            f" KB each), image=torch, buffer 1000, {MEMORY_SAMPLES:,} read",
            "",
            f"Raw bytes a 1000-sample buffer holds: {buffer_mb:.1f} MiB (mean sample x 1000; the 1000 "
            f"largest: {jpeg['buffer_raw_bytes_max'] / 2**20:.1f} MiB). The baseline's ShardDataset "
            "deferred reads (its buffer held offsets; each sample read as handed out) and its Mixture "
            "windows held raw bytes; the current code defers samples of 16 KiB or more in both.",
            "",
            *lines,
        ]
    if "speed" in parts:
        spec = {"index": str(d / "speed" / "shardstream-index.json"), "dir": str(d / "speed"), "epochs": 3}
        log("speed ...")
        jobs = [(v, c, b) for b in BUFFERS for v in VERSIONS for c in CONTENDERS]
        run = lambda v, c, b: child(checkouts[v], "speed", {**spec, "contender": c, "buffer": b})  # noqa: E731
        res = in_rounds(jobs, args.rounds, run, log)
        lines, report["summary"]["speed"] = speed_section(res)
        report["raw"]["speed"] = res
        title = f"## 2. Speed: {made['speed']['samples']:,} tiny raw samples, decode=False, shuffle"
        md += ["", title, "", *lines]
    if "small" in parts:
        src = {n: {"path": str(d / n), "weight": w} for n, w in (("tiny", 0.2), ("mid", 0.3), ("big", 0.5))}
        configs = {
            "three": ([src["tiny"], src["mid"], src["big"]], {}),
            "two": ([src["mid"], src["big"]], {}),
            "tiny": ([{**src["tiny"], "weight": 1.0}], {"epoch_size": TINY_EPOCH}),
        }
        watch = made["tiny"]["first_shard"]

        def run_small(version: str, name: str) -> dict[str, Any]:
            sources, options = configs[name]
            return child(
                checkouts[version],
                "small",
                {"sources": sources, "options": options, "watch": watch, "buffer": 1000},
            )

        log("small source ...")
        res = in_rounds([(v, n) for v in VERSIONS for n in configs], args.rounds, run_small, log)
        lines, report["summary"]["small"] = small_section(res)
        report["raw"]["small"] = res
        md += [
            "",
            "## 3. A small source: tiny (7 samples, 1 shard) w 0.2 + mid (1,000) w 0.3 + big (50,000) "
            "w 0.5, one epoch, decode=False, buffer 1000",
            "",
            *lines,
            "",
            "Opens: calls of open/io.open/os.open on tiny's shard during construction and the epoch, "
            "counted in the child (its offsets sidecar is counted apart, in the JSON).",
        ]
    report["seconds"] = time.perf_counter() - started
    md += ["", f"Whole run: {report['seconds']:.0f} s."]
    results = REPO / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / f"{args.name}.md").write_text("\n".join(md) + "\n")
    (results / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
    print("\n".join(md))
    log(f"wrote {results / args.name}.md and .json")


if __name__ == "__main__":
    main()
