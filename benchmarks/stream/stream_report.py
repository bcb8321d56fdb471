"""Streamer benchmark, report: the result's rows made from the runs, and the markdown made from the result."""

from __future__ import annotations

import os
from typing import Any

from harness import DATASET_MODULE, DECODE_MODULE, SOURCE_PACKAGES, Run, best
from harness.report import machine_lines, ratio_line, table, verdicts
from stream_children import BATCH, BUFFER, LOADER_WORKERS
from stream_data import LINKED_POSITIONS, Packed

MB = 10**6
MIB = 2**20

SOURCES = "+".join(SOURCE_PACKAGES)
METHOD = (
    "Every run is a fresh subprocess, timed from inside after its imports (torch, webdataset, Pillow, "
    "the streamer, torchcodec), dataset construction included; contenders take turns round by round "
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
    "absolute figures across runs."
)
SPEED_SECTIONS = (
    ("tiny", "3. Throughput: tiny JSON samples"),
    ("raw", "4. Throughput: JPEG samples as bytes"),
    ("decode", "5. Throughput: JPEGs decoded to uint8 CHW tensors"),
)


# ---------------------------------------------------------------------------------------------------------
# The result's rows, from the runs.
# ---------------------------------------------------------------------------------------------------------
def peak_mib(run: Run) -> float:
    """The child's own VmHWM (main process only: DataLoader workers are not in it)."""
    return run.extra["vmhwm"] / MIB


def memory_row(name: str, got: list[Run]) -> dict[str, Any]:
    last = got[-1].extra
    return {
        "contender": name,
        "peak_rss_mib": round(max(r.extra["vmhwm"] for r in got) / MIB, 1),
        "peak_rss_mib_runs": [round(peak_mib(r), 1) for r in got],
        "wait4_maxrss_mib": round(max(r.maxrss_kb for r in got) / 1024, 1),
        "rss_after_import_mib": round(last["rss_after_import"] / MIB, 1),
        "rss_after_construct_mib": round(last["rss_after_construct"] / MIB, 1),
        "rss_after_first_mib": round(last["rss_after_first"] / MIB, 1),
        "seconds_wall": round(min(r.wall for r in got), 2),
        "first_url": os.path.basename(last["first_url"]),
    }


def flat_row(name: str, got: list[Run]) -> tuple[dict[str, Any], float]:
    """The row of the run with the widest RSS spread over its checkpoints, and that spread."""
    spreads = []
    for run in got:
        values = [rss for _, rss in run.extra["checkpoints"]]
        spreads.append(max(values) / min(values) - 1)
    worst = max(range(len(got)), key=lambda i: spreads[i])
    run = got[worst]
    values = [rss for _, rss in run.extra["checkpoints"]]
    row = {
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
    return row, spreads[worst]


def speed_rows(runs: dict[str, list[Run]], data_bytes: int) -> list[dict[str, Any]]:
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


def input_facts(data: Packed, size: int, members: str) -> dict[str, Any]:
    return {
        "samples": data.samples,
        "shards": len(data.shards),
        "mb": round(size / MB, 1),
        "members": members,
        "pattern": os.path.basename(data.pattern),
    }


# ---------------------------------------------------------------------------------------------------------
# Markdown.
# ---------------------------------------------------------------------------------------------------------
def _sources(result: dict[str, Any]) -> str:
    """Which copy of the sources was measured, and whether it (or the working tree) moved on."""
    start = result["machine"]["source_fingerprint"]
    at_end = result.get("source_fingerprint_at_end", start)
    tree = result.get("working_tree_fingerprint_at_end", start)
    return (
        f"{SOURCES} measured from a copy taken at the start, source sha256 {start}"
        + ("" if at_end == start else f" at the start, {at_end} at the end (**changed mid-run**)")
        + ("" if tree == start else f" (the working tree had moved on to {tree} by the end)")
    )


def _header(result: dict[str, Any]) -> list[str]:
    m = result["machine"]
    after = (
        f"multiprocessing start method {m['mp_start_method']}; shardstream {m['shardstream_commit']}, "
        + _sources(result)
    )
    return [
        f"# Streamer benchmark, {m['date']}{' (quick)' if result['quick'] else ''}",
        "",
        *machine_lines(m, after),
        f"Command: `{result['command']}`; total {result['total_seconds']:.0f}s.",
        "",
        METHOD,
    ]


def _memory_section(r: dict[str, Any]) -> list[str]:
    s = r["setup"]
    header = ["contender", "peak RSS MiB", "runs", "after import", "after construct", "after 1st sample"]
    keys = [
        "contender",
        "peak_rss_mib",
        "peak_rss_mib_runs",
        "rss_after_import_mib",
        "rss_after_construct_mib",
    ]
    keys += ["rss_after_first_mib", "seconds_wall", "first_url"]
    return [
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
        f"its reader (ours: `{DATASET_MODULE}` and `{DECODE_MODULE}`, which import torch).",
        "",
        table([*header, "wall s", "first sample from"], [[x[k] for k in keys] for x in r["rows"]]),
        "",
        "Peak RSS, 10M minus 10 shards: "
        + ", ".join(f"{k}: {v} MB" for k, v in r["peak_delta_mb"].items())
        + ".",
        "",
        *verdicts(r["targets"]),
    ]


def _flat_section(r: dict[str, Any]) -> list[str]:
    header = ["contender", "RSS at 1st sample", "checkpoints (samples: MiB)", "spread", "runs", "samples/s"]
    rows = [
        [
            x["contender"],
            x["rss_first_sample_mib"],
            ", ".join(f"{n // 1000}k: {v}" for n, v in x["checkpoints_mib"]),
            f"{x['spread_pct']}%",
            [f"{s}%" for s in x["spread_pct_runs"]],
            f"{x['samples_per_s']:,}",
        ]
        for x in r["rows"]
    ]
    return [
        "",
        "## 2. RSS through a long epoch of tiny samples",
        "",
        f"`ShardDataset(index, buffer_size={BUFFER}, decode=...)` (shuffle=True) over the tiny dataset; "
        "RSS from `/proc/self/statm` at every checkpoint (the run with the widest spread is shown). "
        "Spread = max / min - 1 over the checkpoints.",
        "",
        table(header, rows),
        "",
        *verdicts(r["targets"]),
    ]


def _decode_notes(r: dict[str, Any]) -> list[str]:
    """The decode benchmark's pixel check and torchcodec import cost, when present."""
    out = []
    if px := r.get("pixels_ours_vs_bare_pillow"):
        out += [
            "",
            f'Pixels, ours (`image="torch"`) vs bare Pillow, first {px["images"]} JPEGs of shard 0: '
            f"{px['identical']} identical, max |difference| {px['max_abs_diff']}.",
        ]
    if (c := r.get("torchcodec_import_cost")) and "seconds" in c:
        out += [
            "",
            "Importing `torchcodec.decoders` (ours decodes plain JPEGs to tensors with it; imported "
            f"before the clock, like torch) takes {c['seconds']} s and adds {c['rss_added_mib']} MiB of "
            "RSS to a process that has torch already.",
        ]
    return out


def _speed_section(title: str, r: dict[str, Any]) -> list[str]:
    i = r["input"]
    ratios = r.get("ratios_vs_webdataset") or r.get("ratios") or {}
    label = "Ours vs webdataset (samples/s ratio)" if "ratios_vs_webdataset" in r else "Ratios (samples/s)"
    header = ["contender", "samples/s", "seconds", "runs", "MB/s", "wall", "VmHWM MiB"]
    rows = [
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
    ]
    return [
        "",
        f"## {title}",
        "",
        f"Input: {i['samples']:,} samples in {i['shards']} shards (`{i['pattern']}`), {i['mb']} MB; "
        f"{i['members']}.",
        "",
        table(header, rows),
        "",
        ratio_line(label, ratios),
        *_decode_notes(r),
        "",
        *verdicts(r["targets"]),
    ]


def to_markdown(result: dict[str, Any]) -> str:
    out = _header(result)
    if "memory" in result:
        out += _memory_section(result["memory"])
    if "flat" in result:
        out += _flat_section(result["flat"])
    for key, title in SPEED_SECTIONS:
        if key in result:
            out += _speed_section(title, result[key])
    if result.get("profile"):
        out += ["", f"Profiles (cProfile by tottime, reading loop only): see `{result['profile']}`."]
    return "\n".join(out) + "\n"
