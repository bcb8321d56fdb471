#!/usr/bin/env python3
"""Index benchmark (issue #12): indexing existing webdataset tars, every contender side by side in one run.

Contenders, each a fresh subprocess on a clean copy of the shards (everything but the tars deleted and
``sync``-ed before and after every run, outside the timing; the tars' sizes and mtimes checked unchanged):

* ``energon prepare`` (megatron-energon, in its own venv, ``ENERGON_PY``), ``--num-workers W``, run
  non-interactively (``ENERGON_ARGS``). The child imports the click group ``/work/venvs/energon/bin/energon``
  runs (``megatron.energon.cli.main``), starts the clock, then calls it with ``prepare ...``: ``seconds``
  excludes its imports (torch and friends, ~2 s); ``wall`` is the whole subprocess, what a user waits.
* ours: ``python3 -m shardstream_cli index SOURCE --workers W --json`` (the command the entry point
  ``shardstream`` runs), from a copy of the sources taken at the start; ``seconds`` from its ``--json``
  when it reports one, else the wall time. Skipped, with a message, when ``shardstream index --help`` fails.
* Python ``tarfile``: one process, ``tarfile.open(path)`` and iterate the members of every shard, samples
  counted by key: what people write by hand.

Benchmarks:

1. ``speed``  200,000 samples in 20 ``ShardWriter`` shards (~782 MB, ``index_data.py``), best of 3.
              Target: ours >= 10x faster than ``energon prepare`` with the same workers.
2. ``flat``   peak RSS of ours on 10, 100, 1,000 shards of the same 1,000 samples (3.9 MB) each.
              Target: peak RSS(1,000) <= 1.10 x peak RSS(10) + 10 MB. ``--flat-baselines`` adds energon
              and tarfile (one round each).
3. ``robust`` 20,000 samples in 20 shards: clean, with holes in the numbering, with a tar cut mid-member,
              and a second run over an already indexed folder; each contender once, through the real CLI
              (``/work/venvs/energon/bin/energon``), outcome recorded (exit code, samples, last error line).

Peak RSS: ``/usr/bin/time -f %M`` (``wait4``'s ``ru_maxrss`` of the command: the largest single process
of its tree, as ``getrusage(RUSAGE_CHILDREN)`` says; see ``spawn_sampled`` for why not this process's own
``wait4``), and the sum of RSS over the process tree (workers included) sampled from /proc every 20 ms: an
upper bound, since forked workers' shared pages count once per process.

    python3 benchmarks/index/index_bench.py --quick            # smoke run: 20,000 samples, 10 and 100 shards
    python3 benchmarks/index/index_bench.py                    # full run (data: ~5 GB, made once and kept)
    python3 benchmarks/index/index_bench.py --only speed --workers 2

Data goes to ``--workdir`` (default /tmp/shardstream-index-bench) and is kept for reruns (``--drop-data``
removes it). Results: a markdown report on stdout, plus ``benchmarks/results/index-<date>[-quick].{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness package

from harness import CLI_MODULE, REPO, TIME_BIN, Contender, Run, best, last_json, rounds, warm_read
from harness.cli import add_common_flags, command_line, log, work_folder
from harness.report import (
    machine_facts,
    machine_lines,
    new_result,
    ratio_line,
    save_results,
    stamp,
    table,
    verdicts,
    versions,
)
from harness.sources import check_sources, note_source_drift, snapshot_sources, source_fingerprint
from index_data import DEFAULT_ROOT, clean_shards, dataset_name, read_marker, series_name, shard_folder

ENERGON_VENV = Path("/work/venvs/energon")
ENERGON_PY = ENERGON_VENV / "bin" / "python"
ENERGON_BIN = ENERGON_VENV / "bin" / "energon"
# No prompts: a 1,0,0 split (all train), no dataset.yaml (it would ask for a sample type), no progress bar.
ENERGON_ARGS = ("--non-interactive", "--split-ratio", "1,0,0", "--skip-dataset-yaml", "--no-progress")
BENCHES = ("speed", "flat", "robust")
ENERGON, OURS, TARFILE = "energon prepare", "shardstream index", "Python tarfile"
MIB = 2**20
MB = 1e6
POLL_S = 0.02
INDEX_DATA = Path(__file__).resolve().with_name("index_data.py")
SRC: Path = REPO  # where ours imports the SOURCE_PACKAGES from: the copy taken when the run starts


# ---------------------------------------------------------------------------------------------------------
# Child side: run in a fresh interpreter (energon's in its own venv), one JSON line out.
# ---------------------------------------------------------------------------------------------------------
def vm_hwm_kb() -> int:
    """This process's own peak RSS so far (VmHWM), in kB."""
    match = re.search(r"VmHWM:\s+(\d+)", Path("/proc/self/status").read_text())
    return int(match.group(1)) if match else 0


def energon_argv(src: str, workers: int) -> list[str]:
    return ["prepare", src, "--num-workers", str(workers), *ENERGON_ARGS]


def child_energon(src: str, workers: int) -> dict[str, Any]:
    """``energon prepare`` through its own click group, clock started after the imports."""
    from megatron.energon.cli.main import main as energon_main

    import_hwm = vm_hwm_kb()
    started = time.perf_counter()
    error = None
    try:
        energon_main.main(energon_argv(src, workers), prog_name="energon", standalone_mode=False)
    except SystemExit as exc:  # energon calls sys.exit(1) on duplicate keys
        error = f"SystemExit({exc.code})" if exc.code else None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    info = Path(src, ".nv-meta", ".info.json")
    samples = sum(json.loads(info.read_text())["shard_counts"].values()) if info.exists() else None
    return {
        "seconds": seconds,
        "samples": samples,
        "error": error,
        "hwm_kb": vm_hwm_kb(),
        "import_hwm_kb": import_hwm,
    }


def child_tarfile(src: str) -> dict[str, Any]:
    """Every shard opened with ``tarfile.open`` and its members iterated; samples = runs of one key."""
    import tarfile

    started = time.perf_counter()
    samples = members = 0
    errors = []
    for name in sorted(os.listdir(src)):
        if not name.endswith(".tar"):
            continue
        last = None
        try:
            with tarfile.open(os.path.join(src, name)) as tar:
                for member in tar:
                    if not member.isreg():
                        continue
                    members += 1
                    base = member.name.rsplit("/", 1)[-1]
                    key = member.name[: len(member.name) - len(base)] + base.split(".", 1)[0]
                    if key != last:
                        samples += 1
                        last = key
        except (tarfile.TarError, OSError) as exc:
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - started
    error = "; ".join(errors) or None
    return {"seconds": seconds, "samples": samples, "members": members, "error": error, "hwm_kb": vm_hwm_kb()}


def run_child(kind: str, src: str, workers: int) -> int:
    got = child_energon(src, workers) if kind == "energon" else child_tarfile(src)
    print(json.dumps(got))
    return 1 if got["error"] else 0


# ---------------------------------------------------------------------------------------------------------
# Parent side: spawning with the process tree's RSS sampled, the datasets, one run of a contender.
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Spawned:
    rc: int
    wall: float
    maxrss_kb: int  # GNU time's %M (else wait4's): the largest single process of the tree
    tree_kb: int  # the sum of VmRSS over the process tree, the highest sample
    stdout: str
    stderr: str


def _tree_rss_kb(pid: int) -> int:
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            match = re.search(r"VmRSS:\s+(\d+)", status)
            total += int(match.group(1)) if match else 0
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def spawn_sampled(cmd: list[str]) -> Spawned:
    """Run ``cmd`` (PYTHONPATH: the sources' copy first) under ``/usr/bin/time``; never raises on failure.

    Peak RSS comes from GNU time's ``%M`` when it is installed: Linux carries a process's ``maxrss`` across
    ``execve``, and Popen's (v)fork starts the child from this process's memory, so ``wait4`` here would never
    report less than this process's own peak; GNU time is a ~2 MB process, so its child's figure is its own.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYTHONHASHSEED", "0")
    use_time = os.access(TIME_BIN, os.X_OK)
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r", suffix=".time") as rss,
    ):
        full = [TIME_BIN, "-o", rss.name, "-f", "%M", *cmd] if use_time else cmd
        started = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err, cwd=SRC, env=env)  # `-m`/`-c` put cwd first
        peak, done = [0], threading.Event()

        def sample() -> None:
            while not done.wait(POLL_S):
                peak[0] = max(peak[0], _tree_rss_kb(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        lines = rss.read().split()
        # GNU time writes "Command exited with non-zero status N" before %M when the child fails.
        maxrss = int(lines[-1]) if use_time and lines and lines[-1].isdigit() else int(usage.ru_maxrss)
    return Spawned(proc.returncode, wall, maxrss, peak[0], stdout, stderr)


@dataclass
class Dataset:
    """A folder of shards: the tars (``files``) and what they hold."""

    label: str
    folder: Path
    files: list[str]
    samples: int  # samples in the files (a truncated tar's cut sample included)
    complete: int  # samples wholly present
    bytes: int
    info: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, label: str, folder: Path, info: dict[str, Any]) -> Dataset:
        files = info["files"]
        stats = {f: _stat(folder / f) for f in files}
        return cls(
            label,
            folder,
            files,
            info["samples_in_files"],
            info["complete_samples"],
            info["bytes"],
            info,
            stats,
        )

    def clean(self) -> list[str]:
        """Delete what an indexer wrote; stop if a tar changed."""
        removed = clean_shards(self.folder, self.files)
        for f, stat in self.stats.items():
            if _stat(self.folder / f) != stat:
                raise RuntimeError(f"{self.folder / f} changed (size, mtime) during the benchmark")
        return removed

    def written(self) -> tuple[int, int]:
        """(bytes, files) an indexer wrote next to the tars."""
        total = count = 0
        keep = set(self.files)
        for dirpath, _dirs, names in os.walk(self.folder):
            for name in names:
                if dirpath == str(self.folder) and name in keep:
                    continue
                total += os.path.getsize(os.path.join(dirpath, name))
                count += 1
        return total, count


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def energon_cmd(data: Dataset, workers: int) -> list[str]:
    return [
        str(ENERGON_PY),
        str(Path(__file__).resolve()),
        "--child",
        "energon",
        "--src",
        str(data.folder),
        "--workers",
        str(workers),
    ]


def ours_cmd(src: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", CLI_MODULE, "index", str(src), "--workers", str(workers), "--json"]


def tarfile_cmd(data: Dataset) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", "tarfile", "--src", str(data.folder)]


def child_summary(stdout: str) -> dict[str, Any]:
    """The last line of a child's stdout that is a JSON object (energon prints JSON samples before it)."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                break
    return {}


def ours_summary(stdout: str) -> dict[str, Any]:
    try:
        return last_json(stdout)
    except json.JSONDecodeError:
        return child_summary(stdout)


def _last_error_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def measure(name: str, kind: str, data: Dataset, workers: int) -> Run:
    """One timed run of contender ``kind`` on a clean ``data``; raise on failure or a wrong sample count."""
    data.clean()
    os.sync()
    cmd = {
        "energon": lambda: energon_cmd(data, workers),
        "ours": lambda: ours_cmd(data.folder, workers),
        "tarfile": lambda: tarfile_cmd(data),
    }[kind]()
    sp = spawn_sampled(cmd)
    summary = ours_summary(sp.stdout) if kind == "ours" else child_summary(sp.stdout)
    out_bytes, out_files = data.written()
    data.clean()
    os.sync()
    if sp.rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {sp.rc}:\n{sp.stderr[-3000:]}\n{summary}")
    samples = summary.get("samples")
    if samples is not None and samples != data.samples:
        raise RuntimeError(f"{name}: {samples} samples, expected {data.samples}")
    seconds = float(summary["seconds"]) if "seconds" in summary else sp.wall
    extra = {
        "tree_peak_kb": sp.tree_kb,
        "samples_reported": samples is not None,
        "seconds_from": "inside" if "seconds" in summary else "wall",
    }
    for key in ("hwm_kb", "import_hwm_kb", "members"):
        if key in summary:
            extra[key] = summary[key]
    return Run(
        name,
        seconds,
        sp.wall,
        sp.maxrss_kb,
        samples=samples or 0,
        out_bytes=out_bytes,
        out_files=out_files,
        extra=extra,
    )


def describe(run: Run) -> str:
    return (
        f"{run.seconds:.2f}s (wall {run.wall:.2f}s), peak RSS {run.maxrss_kb / 1024:.0f} MiB "
        f"(tree {run.extra['tree_peak_kb'] / 1024:.0f} MiB), wrote {run.out_bytes / MB:.1f} MB "
        f"in {run.out_files} files"
    )


def ours_available() -> tuple[bool, str]:
    """Whether ``shardstream index`` exists (its ``--help`` exits 0), and why not."""
    sp = spawn_sampled([sys.executable, "-m", CLI_MODULE, "index", "--help"])
    if sp.rc == 0:
        return True, ""
    why = "No such command 'index'" if "No such command" in sp.stderr else _last_error_line(sp.stderr)
    return False, f"`shardstream index --help` exited {sp.rc} ({why}): ours skipped"


# ---------------------------------------------------------------------------------------------------------
# The result's rows.
# ---------------------------------------------------------------------------------------------------------
def speed_rows(runs: dict[str, list[Run]], data: Dataset) -> list[dict[str, Any]]:
    rows = []
    for name, got in runs.items():
        b = best(got)
        rows.append(
            {
                "contender": name,
                "seconds": round(b.seconds, 3),
                "seconds_runs": [round(r.seconds, 3) for r in got],
                "wall": round(b.wall, 3),
                "wall_best": round(min(r.wall for r in got), 3),
                "samples_per_s": round(data.samples / b.seconds),
                "mb_per_s": round(data.bytes / MB / b.seconds, 1),
                "peak_rss_mib": round(max(r.maxrss_kb for r in got) / 1024, 1),
                "tree_peak_mib": round(max(r.extra["tree_peak_kb"] for r in got) / 1024, 1),
                "hwm_mib": round(max(r.extra.get("hwm_kb", 0) for r in got) / 1024, 1) or None,
                "index_mb": round(b.out_bytes / MB, 2),
                "index_files": b.out_files,
                "seconds_from": b.extra["seconds_from"],
                "load_1min_runs": [r.extra["load_1min"] for r in got],
            }
        )
    return rows


def dataset_facts(data: Dataset) -> dict[str, Any]:
    return {
        "folder": str(data.folder),
        "shards": len(data.files),
        "samples": data.samples,
        "complete_samples": data.complete,
        "mb": round(data.bytes / MB, 1),
        "members": "jpg (random bytes) + cls + json per sample, webdataset ShardWriter",
    }


# ---------------------------------------------------------------------------------------------------------
# The three benchmarks.
# ---------------------------------------------------------------------------------------------------------
def contenders_for(data: Dataset, workers: int, ours: bool, baselines: bool = True) -> list[Contender]:
    out: list[Contender] = []
    if baselines:
        out.append(
            (f"{ENERGON} (--num-workers {workers})", lambda: measure(ENERGON, "energon", data, workers))
        )
    if ours:
        out.append((f"{OURS} (--workers {workers})", lambda: measure(OURS, "ours", data, workers)))
    if baselines:
        out.append((f"{TARFILE} (1 process)", lambda: measure(TARFILE, "tarfile", data, workers)))
    return out


def bench_speed(data: Dataset, workers: int, repeats: int, ours: bool) -> dict[str, Any]:
    _, warm_s = timed(lambda: warm_read(data.folder / f for f in data.files))
    log(
        f"[speed] {data.samples:,} samples in {len(data.files)} shards, {data.bytes / MB:.0f} MB "
        f"(warm-up read {warm_s:.1f}s), workers {workers}, {repeats} round(s)"
    )
    runs = rounds(repeats, contenders_for(data, workers, ours), log, describe)
    rows = speed_rows(runs, data)
    by = {row["contender"].split(" (")[0]: row for row in rows}
    result: dict[str, Any] = {"input": dataset_facts(data), "workers": workers, "rows": rows}
    if OURS in by:
        e, o = by[ENERGON], by[OURS]
        ratio, wall_ratio = e["seconds"] / o["seconds"], e["wall_best"] / o["wall_best"]
        result["ratios"] = {
            "energon_over_ours_seconds": round(ratio, 2),
            "energon_over_ours_wall": round(wall_ratio, 2),
            "tarfile_over_ours_seconds": round(by[TARFILE]["seconds"] / o["seconds"], 2),
        }
        target = f"ours >= 10x faster than energon prepare, same workers ({workers})"
        result["targets"] = {f"{target}, wall": wall_ratio >= 10, f"{target}, imports excluded": ratio >= 10}
    result["ratios_baselines"] = {
        "energon_over_tarfile_seconds": round(by[ENERGON]["seconds"] / by[TARFILE]["seconds"], 2)
    }
    return result


def bench_flat(
    series: dict[int, Dataset], workers: int, repeats: int, ours: bool, baselines: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {"workers": workers, "per_shard": None, "series": []}
    for n, data in series.items():
        out["per_shard"] = data.samples // n
        warm_read(data.folder / f for f in data.files)
        log(f"[flat] {n} shards, {data.samples:,} samples, {data.bytes / MB:.0f} MB, {repeats} round(s)")
        contenders = contenders_for(data, workers, ours, baselines=False)
        runs = rounds(repeats, contenders, log, describe) if contenders else {}
        if baselines:
            runs.update(rounds(1, contenders_for(data, workers, False), log, describe))
        out["series"].append(
            {
                "shards": n,
                "samples": data.samples,
                "mb": round(data.bytes / MB, 1),
                "rows": speed_rows(runs, data),
            }
        )
    if ours and out["series"]:
        first, last = (
            next(r for r in s["rows"] if r["contender"].startswith(OURS))
            for s in (out["series"][0], out["series"][-1])
        )
        lo, hi = out["series"][0]["shards"], out["series"][-1]["shards"]
        limit = first["peak_rss_mib"] * 1.10 + 10 * MB / MIB
        out["rss_ratio"] = round(last["peak_rss_mib"] / first["peak_rss_mib"], 3)
        out["tree_rss_ratio"] = round(last["tree_peak_mib"] / first["tree_peak_mib"], 3)
        out["target"] = (
            f"ours' peak RSS({hi} shards) <= 1.10 x peak RSS({lo} shards) + 10 MB = {limit:.1f} MiB"
        )
        out["targets"] = {out["target"]: last["peak_rss_mib"] <= limit}
    return out


def robust_once(kind: str, data: Dataset, workers: int) -> dict[str, Any]:
    """One run through the real CLI (energon's own binary); what happened, not how fast."""
    if kind == "energon":
        cmd = [str(ENERGON_BIN), *energon_argv(str(data.folder), workers)]
    elif kind == "ours":
        cmd = ours_cmd(data.folder, workers)
    else:
        cmd = tarfile_cmd(data)
    sp = spawn_sampled(cmd)
    samples, notes = None, []
    if kind == "energon":
        info = data.folder / ".nv-meta" / ".info.json"
        samples = sum(json.loads(info.read_text())["shard_counts"].values()) if info.exists() else None
        notes = [line.strip() for line in sp.stderr.splitlines() if "failed to load" in line]
    else:
        summary = ours_summary(sp.stdout) if kind == "ours" else child_summary(sp.stdout)
        samples = summary.get("samples")
        for key in ("skipped", "problems", "error"):
            if summary.get(key):
                notes.append(f"{key}: {json.dumps(summary[key])[:300]}")
    out_bytes, out_files = data.written()
    return {
        "rc": sp.rc,
        "seconds": round(sp.wall, 2),
        "samples": samples,
        "wrote_files": out_files,
        "wrote_mb": round(out_bytes / MB, 2),
        "error": _last_error_line(sp.stderr) if sp.rc else None,
        "notes": notes[:3],
    }


def bench_robust(variants: dict[str, Dataset], workers: int, ours: bool) -> dict[str, Any]:
    kinds = [("energon", ENERGON), *([("ours", OURS)] if ours else []), ("tarfile", TARFILE)]
    rows = []
    for label, data in variants.items():
        for kind, name in kinds:
            data.clean()
            if label == "rerun":
                if kind == "tarfile":
                    continue
                robust_once(kind, data, workers)  # the first run; the second is the one recorded
            got = robust_once(kind, data, workers)
            data.clean()
            expect = f"{data.samples:,}" + (
                f" ({data.complete:,} complete)" if data.complete != data.samples else ""
            )
            rows.append(
                {"variant": label, "contender": name, "shards": len(data.files), "expected": expect, **got}
            )
            log(f"  [robust] {label} {name}: rc {got['rc']}, samples {got['samples']}, {got['error'] or ''}")
    return {
        "workers": workers,
        "rows": rows,
        "variants": {k: v.info.get("removed") or v.info.get("truncated") for k, v in variants.items()},
    }


def timed(fn: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    got = fn()
    return got, time.perf_counter() - started


# ---------------------------------------------------------------------------------------------------------
# Report.
# ---------------------------------------------------------------------------------------------------------
SPEED_COLUMNS = {
    "contender": "contender",
    "seconds": "seconds",
    "runs": "seconds_runs",
    "wall": "wall_best",
    "samples/s": "samples_per_s",
    "MB/s": "mb_per_s",
    "peak RSS MiB": "peak_rss_mib",
    "tree peak MiB": "tree_peak_mib",
    "index MB": "index_mb",
    "files written": "index_files",
}
METHOD = (
    "Each run is a fresh subprocess on the same shards with everything but the tars deleted and `sync`-ed "
    "before it; contenders take turns round by round and the best round counts. `seconds`: energon and "
    "tarfile timed from inside after their imports (energon's ~2 s of torch and friends excluded), ours from "
    "its `--json` (or its wall time when it reports none); `wall`: the whole subprocess, best round. "
    "`peak RSS`: `/usr/bin/time -f %M` (ru_maxrss: the largest single process), max over rounds "
    "(energon's includes importing torch); `tree peak`: the sum of RSS over the process tree (workers "
    "included) sampled every 20 ms, an upper bound (a forked worker's shared pages count again). "
    "Page cache warm."
)


def speed_table(rows: list[dict[str, Any]]) -> str:
    body = [[f"{x[k]:,}" if k == "samples_per_s" else x[k] for k in SPEED_COLUMNS.values()] for x in rows]
    return table(list(SPEED_COLUMNS), body)


def to_markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    out = [
        f"# Index benchmark (issue #12), {m['date']}{' (quick)' if result['quick'] else ''}",
        "",
        *machine_lines(m, f"shardstream {m['shardstream_commit']}, sources {m['source_fingerprint']}"),
        f"energon: {m['energon']}.  ",
        f"Command: `{result['command']}`; total {result['total_seconds']:.0f}s.",
        "",
        "Contenders:",
        "",
        *[f"- {k}: `{v}`" for k, v in result["commands"].items()],
    ]
    imports = ", ".join(
        f"{k} {v['peak_rss_mib']} MiB / {v['wall']} s" for k, v in result["import_only"].items()
    )
    out += ["", f"Imports alone (peak RSS / wall, for scale): {imports}."]
    if result.get("ours_skipped"):
        out += ["", f"**{result['ours_skipped']}.**"]
    out += ["", METHOD]
    if "speed" in result:
        r = result["speed"]
        i = r["input"]
        out += [
            "",
            f"## 1. Indexing {i['samples']:,} samples in {i['shards']} shards ({i['mb']} MB)",
            "",
            speed_table(r["rows"]),
            "",
        ]
        if "ratios" in r:
            out += [ratio_line("Ratios", r["ratios"]), "", *verdicts(r["targets"])]
        out += ["", ratio_line("Baselines", r["ratios_baselines"])]
    if "flat" in result:
        r = result["flat"]
        out += [
            "",
            f"## 2. Memory vs shard count ({r['per_shard']:,} samples a shard, workers {r['workers']})",
        ]
        for s in r["series"]:
            out += [
                "",
                f"{s['shards']:,} shards, {s['samples']:,} samples, {s['mb']} MB:",
                "",
                speed_table(s["rows"]),
            ]
        if "targets" in r:
            out += [
                "",
                f"RSS ratio {r['rss_ratio']}x (tree {r['tree_rss_ratio']}x).",
                "",
                *verdicts(r["targets"]),
            ]
    if "robust" in result:
        r = result["robust"]
        header = [
            "variant",
            "contender",
            "shards",
            "expected samples",
            "exit",
            "samples",
            "wall s",
            "files written",
            "error (exit != 0) / notes",
        ]
        rows = [
            [
                x["variant"],
                x["contender"],
                x["shards"],
                x["expected"],
                x["rc"],
                x["samples"],
                x["seconds"],
                x["wrote_files"],
                "; ".join(filter(None, [x["error"], *x["notes"]])).replace("|", "/"),
            ]
            for x in r["rows"]
        ]
        out += [
            "",
            "## 3. Robustness (one run each, through each real CLI)",
            "",
            f"Variants: {json.dumps(r['variants'])}; `rerun` = a second run over an indexed folder.",
            "",
            table(header, rows),
        ]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------------------------
def energon_versions() -> str:
    if not ENERGON_PY.exists():
        return f"not installed ({ENERGON_PY} missing)"
    code = (
        "import importlib.metadata as m, sys; print(', '.join(f'{n} {m.version(n)}' for n in "
        "('megatron-energon', 'torch', 'webdataset')) + f', Python {sys.version.split()[0]}')"
    )
    got = subprocess.run([str(ENERGON_PY), "-c", code], capture_output=True, text=True, check=False)
    return got.stdout.strip() or got.stderr.strip()[-200:]


def import_baselines() -> dict[str, float]:
    """Peak RSS (MiB, wait4) and wall of each contender's imports alone, for scale."""
    out = {}
    for name, cmd in (
        (ENERGON, [str(ENERGON_PY), "-c", "import megatron.energon.cli.main"]),
        (OURS, [sys.executable, "-c", f"import {CLI_MODULE}"]),
        (TARFILE, [sys.executable, "-c", "import tarfile"]),
    ):
        sp = spawn_sampled(cmd)
        out[name] = {"peak_rss_mib": round(sp.maxrss_kb / 1024, 1), "wall": round(sp.wall, 2), "rc": sp.rc}
    return out


def make_data(work: Path, name: str, samples: int, shards: int, **flags: bool) -> dict[str, Any]:
    """Run ``index_data.py`` in a child (it imports webdataset, so torch: this one stays small)."""
    cmd = [
        sys.executable,
        str(INDEX_DATA),
        str(work),
        "--samples",
        str(samples),
        "--shards",
        str(shards),
        "--name",
        name,
        *(f"--{k}" for k, on in flags.items() if on),
    ]
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    return read_marker(work / name)


def make_data_series(work: Path, series: list[int], per_shard: int) -> dict[int, dict[str, Any]]:
    cmd = [
        sys.executable,
        str(INDEX_DATA),
        str(work),
        "--series",
        ",".join(map(str, series)),
        "--per-shard",
        str(per_shard),
    ]
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    return {n: read_marker(work / series_name(n, per_shard)) for n in sorted(series)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_common_flags(
        parser,
        only=BENCHES,
        only_help="run only this benchmark (repeatable); default: all",
        repeats="speed",
        slow="flat",
    )
    parser.set_defaults(workdir=DEFAULT_ROOT, keep_data=True)
    parser.add_argument("--drop-data", dest="keep_data", action="store_false", help="delete the data after")
    parser.add_argument("--workers", type=int, default=2, help="W for energon and ours (default 2)")
    parser.add_argument("--samples", type=int, help="speed samples (default 200000; quick 20000)")
    parser.add_argument("--shards", type=int, help="speed shards (default 20; quick 4)")
    parser.add_argument("--series", help="flat shard counts (default 10,100,1000; quick 10,100)")
    parser.add_argument("--per-shard", type=int, help="flat samples a shard (default 1000; quick 100)")
    parser.add_argument("--flat-baselines", action="store_true", help="energon and tarfile in flat too")
    parser.add_argument("--robust-samples", type=int, default=20_000, help="robust samples (default 20000)")
    parser.add_argument("--no-ours", action="store_true", help="baselines only: leave ours out")
    parser.add_argument("--src", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    global SRC
    args = parse_args(argv)
    if args.child:
        return run_child(args.child, args.src, args.workers)
    quick, which = args.quick, args.only or list(BENCHES)
    repeats = args.repeats or (1 if quick else 3)
    slow = args.slow_repeats or (1 if quick else 2)
    samples, shards = args.samples or (20_000 if quick else 200_000), args.shards or (4 if quick else 20)
    series = [int(x) for x in (args.series or ("10,100" if quick else "10,100,1000")).split(",")]
    per_shard = args.per_shard or (100 if quick else 1000)
    if not ENERGON_PY.exists():
        raise SystemExit(
            f"{ENERGON_PY} missing: python3.11 -m venv {ENERGON_VENV} && "
            f"{ENERGON_VENV}/bin/pip install megatron-energon"
        )
    with work_folder(
        args.workdir,
        args.keep_data,
        "shardstream-index-bench-",
        ("src",),
        lambda n: n.startswith(("wds-", "flat-")),
    ) as work:
        started = time.perf_counter()
        SRC = snapshot_sources(work / "src")
        facts = {
            **machine_facts(),
            "versions": versions("webdataset", "numpy", "torch"),
            "source_fingerprint": source_fingerprint(SRC),
            "energon": energon_versions(),
        }
        result = new_result(quick, command_line("index/index_bench.py", argv), facts)
        check = spawn_sampled(
            [
                sys.executable,
                "-c",
                "import json, shardstream; print(json.dumps({'shardstream': shardstream.__file__}))",
            ]
        )
        check_sources("import check", child_summary(check.stdout), SRC)
        ours, why = (False, "ours left out (--no-ours)") if args.no_ours else ours_available()
        if not ours:
            log(f"NOTE: {why}")
            result["ours_skipped"] = why
        w = args.workers
        result["commands"] = {
            ENERGON: f"{ENERGON_BIN} {' '.join(energon_argv('SOURCE', w))}",
            OURS: " ".join(["python3", *ours_cmd(Path("SOURCE"), w)[1:]]),
            TARFILE: "python3 benchmarks/index/index_bench.py --child tarfile --src SOURCE",
        }
        result["import_only"] = import_baselines()
        log(f"workdir {work}; {facts['nproc']} CPUs; energon: {facts['energon']}")
        if "speed" in which:
            name = dataset_name(samples, shards)
            info = make_data(work, name, samples, shards)
            data = Dataset.of(name, shard_folder(work, name), info)
            result["speed"] = bench_speed(data, w, repeats, ours)
        if "flat" in which and (ours or args.flat_baselines):
            made = make_data_series(work, series, per_shard)
            sets = {
                n: Dataset.of(f"flat-{n}", shard_folder(work, series_name(n, per_shard)), i)
                for n, i in made.items()
            }
            result["flat"] = bench_flat(sets, w, slow, ours, args.flat_baselines)
        elif "flat" in which:
            log("[flat] skipped: ours is missing and --flat-baselines is not set")
        if "robust" in which:
            n = args.robust_samples
            variants = {}
            for label, kw in (
                ("clean", {}),
                ("gaps", {"gaps": True}),
                ("truncated", {"truncate": True}),
                ("rerun", {}),
            ):
                name = dataset_name(n, 20, **kw)
                info = make_data(work, name, n, 20, **kw)
                variants[label] = Dataset.of(name, shard_folder(work, name), info)
            result["robust"] = bench_robust(variants, w, ours)
        note_source_drift(result, SRC, log)
        result["bench_parent_hwm_mib"] = round(vm_hwm_kb() / 1024, 1)
        result["total_seconds"] = round(time.perf_counter() - started, 1)
        markdown = to_markdown(result)
        print(markdown)
        if not args.no_save:
            only = args.only if args.only and set(args.only) != set(BENCHES) else None
            save_results(args.results, "index-" + stamp(quick, only), result, markdown, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
