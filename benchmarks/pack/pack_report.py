"""Packer benchmark, report: the result's rows made from the runs, and the markdown made from the result."""

from __future__ import annotations

from typing import Any

from harness import CLI_MODULE, Run, best
from harness.report import machine_lines, ratio_line, table, verdict, verdicts

MB = 1e6
METHOD = (
    "Times are the best of the repeats; Python contenders are timed from inside the process (imports and "
    "interpreter start-up excluded), GNU tar by its wall time; `wall` is the whole subprocess. MB/s is "
    "input bytes per second. Page cache warmed by one read of the inputs first; outputs deleted and "
    "`sync`-ed after every run."
)
SPEED_SECTIONS = (
    ("copy", "2. Packing a raw folder (copy, no media work)"),
    ("reencode", "3. Re-encoding at pack time (max side 128, JPEG q=90)"),
)
SPEED_COLUMNS = {  # header -> row key
    "contender": "contender",
    "seconds": "seconds",
    "runs": "seconds_runs",
    "wall": "wall",
    "MB/s": "mb_per_s",
    "samples/s": "samples_per_s",
    "peak RSS MiB": "peak_rss_mib",
    "output MB": "out_mb",
    "files out": "out_files",
}


# ---------------------------------------------------------------------------------------------------------
# The result's rows, from the runs.
# ---------------------------------------------------------------------------------------------------------
def rss_rows(runs: dict[str, list[Run]], sizes: tuple[int, int]) -> list[dict[str, Any]]:
    rows = []
    for got, n in zip(runs.values(), sizes, strict=True):
        b = best(got)
        rows.append(
            {
                "records": n,
                "seconds": round(b.seconds, 3),
                "wall": round(b.wall, 3),
                "records_per_s": round(n / b.seconds),
                "peak_rss_mib": round(max(r.maxrss_kb for r in got) / 1024, 1),
                "peak_rss_mib_runs": [round(r.maxrss_kb / 1024, 1) for r in got],
                "out_mb": round(b.out_bytes / MB, 1),
                "shards": b.extra["shards"],
                "samples": b.extra["samples"],
                "rss_from": b.extra["rss_from"],
            }
        )
    return rows


def speed_rows(runs: dict[str, list[Run]], input_bytes: int, samples: int) -> list[dict[str, Any]]:
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


# ---------------------------------------------------------------------------------------------------------
# Markdown.
# ---------------------------------------------------------------------------------------------------------
def _header(result: dict[str, Any]) -> list[str]:
    m = result["machine"]
    return [
        f"# Packer benchmark, {m['date']}{' (quick)' if result['quick'] else ''}",
        "",
        *machine_lines(m, f"{m['gnu_tar']}; shardstream {m['shardstream_commit']}"),
        f"Command: `{result['command']}`; total {result['total_seconds']:.0f}s.",
        "",
        METHOD,
    ]


def _rss_section(r: dict[str, Any]) -> list[str]:
    header = ["records", "seconds", "wall", "records/s", "peak RSS MiB (max of runs)", "runs", "output MB"]
    rows = [
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
    ]
    return [
        "",
        "## 1. Peak RSS: large vs small JSONL manifest (`--workers 1 --max-size 256MB`)",
        "",
        table([*header, "shards"], rows),
        "",
        f"Ratio {r['rss_ratio']}x, delta {r['rss_delta_mib']} MiB; `import {CLI_MODULE}` alone peaks "
        f"at {r['import_only_peak_rss_mib']} MiB. Target: {r['target']}: {verdict(r['target_met'])}.",
    ]


def _speed_section(title: str, r: dict[str, Any]) -> list[str]:
    i = r["input"]
    rows = [
        [f"{x[key]:,}" if key == "samples_per_s" else x[key] for key in SPEED_COLUMNS.values()]
        for x in r["rows"]
    ]
    return [
        "",
        f"## {title}",
        "",
        f"Input: {i['samples']:,} samples, {i['files']:,} files, {i['mb']} MB"
        + (f" ({i['members']})." if "members" in i else "."),
        "",
        table(list(SPEED_COLUMNS), rows),
        "",
        ratio_line("Ratios", r["ratios"]),
        "",
        *verdicts(r["targets"]),
    ]


def to_markdown(result: dict[str, Any]) -> str:
    out = _header(result)
    if "rss" in result:
        out += _rss_section(result["rss"])
    for key, title in SPEED_SECTIONS:
        if key in result:
            out += _speed_section(title, result[key])
    if result.get("profile"):
        out += ["", f"Profile: see `{result['profile']}`."]
    return "\n".join(out) + "\n"
