"""What the benchmark scripts share: fresh-subprocess runs, machine facts, markdown tables, data markers.

Scripts run as ``python3 benchmarks/<name>.py``, so this folder is on ``sys.path`` and ``import common``
finds this module.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DIRTY = " (packer/streamer have uncommitted changes)"


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


def version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_facts() -> dict[str, Any]:
    """Date, CPUs, memory, OS, Python and the shardstream commit (marked when packer/streamer are dirty)."""
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "?"
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))  # type: ignore[union-attr]
        memory = f"{kb / 2**20:.1f} GiB"
    except (OSError, AttributeError):
        pass
    git = ["git", "-C", str(REPO)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", "shardstream", "packer", "streamer"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu": cpu,
        "memory": memory,
        "os": platform.platform(),
        "python": platform.python_version(),
        "shardstream_commit": commit.strip() + (DIRTY if dirty else ""),
    }


def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def marker_matches(root: Path, params: dict[str, Any]) -> bool:
    """Whether ``root`` holds data made with exactly ``params`` (so a rerun can reuse it)."""
    marker = root / ".bench-params.json"
    return marker.exists() and json.loads(marker.read_text()) == params


def write_marker(root: Path, params: dict[str, Any]) -> None:
    (root / ".bench-params.json").write_text(json.dumps(params))
