"""The object-store peers benchmark's report: one markdown table per run, every run of the day in one file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness.report import machine_lines, table


# ---------------------------------------------------------------------------------------------------------
def run_table(run: dict[str, Any]) -> list[str]:
    a = run["args"]
    rows = []
    for r in run["rows"]:
        if "error" in r:
            rows.append(
                [
                    r["label"],
                    "fails",
                    "",
                    "",
                    "",
                    "",
                    "",
                    r["error"][-160:].replace("\n", " ").replace("|", "/"),
                ]
            )
            continue
        cpu = f"{r['seconds']:.1f} / {r['cpu_s'] or 0:.1f} / {r['server_cpu_s']:.1f}"
        rtts = "" if r["rtts_after_index"] is None else f"{r['rtts_after_index']:.1f}"
        if r.get("rtts_after_metadata") is not None:
            rtts += f" / {r['rtts_after_metadata']:.1f}"
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["requests"].items()))
        rows.append(
            [
                r["label"],
                f"{r['mb_s']:.0f}",
                f"{r['peak_in_flight']} / {r['mean_in_flight']:.1f}",
                f"{r['ceiling_mb_s']:.0f}",
                f"{r['fraction']:.2f}",
                f"{r['fraction_at_mean']:.2f}",
                f"{r['first_s']:.2f}",
                rtts,
                cpu,
                kinds,
            ]
        )
    unshaped = ", ".join(f"{n}: {v:.0f}" for n, v in sorted((int(k), v) for k, v in run["unshaped"].items()))
    return [
        f"## Run {run['started']} (load average {run['load_before']} before, {run['load_after']} after)",
        "",
        f"Unshaped obstore MB/s by ranges in flight (the ceilings' second term): {unshaped}.",
        "",
        table(
            [
                "contender",
                "MB/s",
                "requests in flight peak / mean",
                f"ceiling MB/s (min(peak x {a['rate_mb_s']:g}, unshaped at peak))",
                "fraction of ceiling",
                "fraction of min(mean x cap, unshaped at mean)",
                "first sample s",
                f"RTTs ({a['ttfb_ms']:g} ms) after the index / the last metadata (no index: after start)",
                "wall / client main-process CPU / server CPU s",
                "requests (best round)",
            ],
            rows,
        ),
        "",
    ]


def report(result: dict[str, Any]) -> str:
    a = result["runs"][0]["args"]
    lines = [
        f"# Object-store peers, {result['machine']['date']}",
        "",
        *machine_lines(
            result["machine"], "the server in a child process, each contender a fresh interpreter"
        ),
        "",
        f"{a['shards']} shards x {a['size_mb']} MB of {a['sample_mb']} MB raw samples, shaped S3 server "
        f"({a['ttfb_ms']:g} ms to first byte, {a['rate_mb_s']:g} MB/s per connection); best of "
        f"{a['repeats']} rounds, contenders in turn; `1p` one process, `dl` DataLoader with 2 workers. See "
        "`benchmarks/objstore/peers_bench.py` for each contender's code and how the ceiling and round trips "
        "are counted. MB/s is sample payload over wall time from construction to the last sample.",
        "",
        f"Versions: {json.dumps(result['versions'])}",
        "",
    ]
    for run in result["runs"]:
        lines += run_table(run)
    lines += [f"Command: `{result['command']}`", ""]
    return "\n".join(lines)
