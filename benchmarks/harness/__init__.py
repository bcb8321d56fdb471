"""The benchmarks' shared harness: where the project's code is, fresh-subprocess runs, rounds, outputs.

Every benchmark measures the same way: each timed run is a fresh subprocess (``spawn``: wall time, peak RSS
from ``wait4``, stdout, stderr; ``spawn_time_v``: peak RSS from ``/usr/bin/time -v``), contenders take
turns round by round (``rounds``: A B C, A B C, ...) and the best round counts (``best``). Inputs are read
once before timing so every contender finds the page cache equally warm (``warm_read``, ``warm_tree``).

The rest of the harness, this package's modules: ``harness.sources`` (the copy of the sources children
import), ``harness.cli`` (common flags, work folder, logging), ``harness.report`` (machine facts, markdown,
result files, markers).

Scripts run as ``python3 benchmarks/<subject>/<name>.py``; each puts ``benchmarks/`` on ``sys.path`` first
thing, so ``import harness`` finds this package. It imports nothing heavy (nor its modules): timed children
import it before their clocks start.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]  # benchmarks/harness/__init__.py -> the repository
RESULTS = REPO / "benchmarks" / "results"
TIME_BIN = "/usr/bin/time"  # GNU time: `time -v` reports a child's peak RSS
MIN_FREE_BYTES = 8 * 10**9  # what check_disk leaves free beyond a benchmark's own needs

# ---------------------------------------------------------------------------------------------------------
# Every project module the benchmarks import or run, in one place: a module that moves changes one line.
# ---------------------------------------------------------------------------------------------------------
SOURCE_PACKAGES = ("shardstream", "packer", "streamer")  # snapshotted for children, fingerprinted, checked
CLI_MODULE = "shardstream_cli"  # run as `python3 -m CLI_MODULE pack ...`
IMPORTED_FROM = {  # every project name the benchmarks use -> the module it is imported from
    "make_jpegs": "shardstream_cli.demo.synth",
    "iter_samples": "shardstream.format.tarread",
    "INDEX_NAME": "shardstream.format",
    "DatasetIndex": "shardstream.format",
    "pack": "packer",
    "PackOptions": "packer",
    "ShardDataset": "streamer",
    "ShardMap": "streamer",
    "SampleDecoder": "streamer.decode.sample",
    "Permutation": "streamer.placement.permute",
    "HttpOptions": "shardstream.io.http",
    "HttpStream": "shardstream.io.http",
    "turbo_jpeg": "streamer.decode.image",
    "nginx": "tests.servers",
}
DATASET_MODULE = "streamer.datasets.shard"  # a stream child imports these two before its clock starts
DECODE_MODULE = "streamer.decode.sample"  # (it imports torch; ShardDataset imports it on construction)


def project(name: str) -> Any:
    """The project's ``name`` (a key of IMPORTED_FROM), imported from wherever it lives now."""
    return getattr(importlib.import_module(IMPORTED_FROM[name]), name)


# ---------------------------------------------------------------------------------------------------------
# Runs and rounds.
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Run:
    """One timed run of one contender."""

    name: str
    seconds: float  # the work: from inside the child after its imports (or the wall time, for GNU tar)
    wall: float  # the whole subprocess, interpreter start-up and imports included
    maxrss_kb: int = 0  # wait4's ru_maxrss (or /usr/bin/time -v's), taken at exit
    samples: int = 0
    out_bytes: int = 0
    out_files: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


Contender = tuple[str, Callable[[], Run]]


def spawn(cmd: list[str], *, pythonpath: Path = REPO) -> tuple[float, int, str, str]:
    """Run ``cmd`` in the repository with ``pythonpath`` first on PYTHONPATH.

    Return (wall seconds, peak RSS in kB from wait4, stdout, stderr); raise RuntimeError on failure.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("PYTHONHASHSEED", "0")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=REPO, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {code}:\n{stderr[-3000:]}")
    return wall, int(usage.ru_maxrss), stdout, stderr


def spawn_time_v(cmd: list[str]) -> tuple[float, int, str, str, bool]:
    """``spawn`` under ``/usr/bin/time -v`` when it is installed, whose peak RSS then replaces wait4's.

    Return (wall, peak RSS kB, stdout, stderr, whether /usr/bin/time measured it).
    """
    use_time = os.access(TIME_BIN, os.X_OK)
    wall, maxrss, stdout, stderr = spawn([TIME_BIN, "-v", *cmd] if use_time else cmd)
    match = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr) if use_time else None
    return wall, int(match.group(1)) if match else maxrss, stdout, stderr, use_time


def child_cmd(script: str, kind: str, *args: str) -> list[str]:
    """The command that reruns ``script`` (a benchmark's entry point) as the child ``kind``."""
    return [sys.executable, str(Path(script).resolve()), "--child", kind, *args]


def rounds(
    repeats: int,
    contenders: list[Contender],
    log: Callable[[str], None],
    describe: Callable[[Run], str],
    expected: int | None = None,
) -> dict[str, list[Run]]:
    """Run every contender once per round, in turn (A B C, A B C, ...); return all runs by name.

    After each run its 1-minute load average goes into ``extra["load_1min"]`` and ``describe(run)`` into
    the log; with ``expected``, a run that yields another sample count stops the benchmark.
    """
    runs: dict[str, list[Run]] = {name: [] for name, _ in contenders}
    for r in range(repeats):
        for name, fn in contenders:
            run = fn()
            run.extra["load_1min"] = round(os.getloadavg()[0], 2)
            runs[name].append(run)
            log(f"  round {r + 1}/{repeats} {name}: {describe(run)}")
            if expected is not None and run.samples != expected:
                raise RuntimeError(f"{name} yielded {run.samples} samples, expected {expected}")
    return runs


def best(runs: list[Run]) -> Run:
    """The fastest run (the first of equals)."""
    return min(runs, key=lambda run: run.seconds)


def cpu_seconds() -> float:
    """User + system seconds of this process and its ended children (DataLoader workers once joined):
    what a run costs in work, less moved by this machine's scheduling than its wall time."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def load() -> str:
    """The 1-minute load average: how busy the shared machine was around a run."""
    return f"{os.getloadavg()[0]:.1f}"


def warm_read(paths: Iterable[Path]) -> int:
    """Read every file once so all contenders find the same (hot) page cache; return the bytes read."""
    total = 0
    for path in paths:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                total += len(chunk)
    return total


def warm_tree(root: Path) -> tuple[int, int, float]:
    """``warm_read`` every file under ``root``; return (bytes, files, seconds)."""
    started = time.perf_counter()
    paths = [Path(dirpath, name) for dirpath, _dirs, names in os.walk(root) for name in names]
    return warm_read(paths), len(paths), time.perf_counter() - started


def tree_size(path: Path) -> tuple[int, int]:
    """(bytes, files) under ``path``: what a run wrote."""
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
    """Stop unless ``work`` has ``need`` bytes free and MIN_FREE_BYTES to spare."""
    free = shutil.disk_usage(work).free
    if free < need + MIN_FREE_BYTES:
        raise SystemExit(f"{work}: {free / 1e9:.1f} GB free, want {(need + MIN_FREE_BYTES) / 1e9:.1f} GB")


def last_json(text: str) -> dict[str, Any]:
    """The JSON document a command printed last (our CLI prints an indented one)."""
    start = text.find("{")
    return json.loads(text[start:]) if start >= 0 else {}
