"""The benchmarks' shared reporting: machine facts, markdown tables and verdicts, result files, data markers.

A result is a JSON-able dict (``new_result``: quick, command, machine, then each benchmark's section) and a
markdown report made from it; ``save_results`` writes both as ``results/<name>-<stamp>.{json,md}``, where
the stamp is the date, ``-quick`` for a smoke run and ``-<names>`` for a partial one (``stamp``).
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import REPO, SOURCE_PACKAGES

DIRTY = f" ({'/'.join(SOURCE_PACKAGES)} have uncommitted changes)"
MARKER = ".bench-params.json"


# ---------------------------------------------------------------------------------------------------------
# Machine facts.
# ---------------------------------------------------------------------------------------------------------
def version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions(*names: str) -> dict[str, str]:
    return {name: version(name) for name in names}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def memory_total() -> str:
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))  # type: ignore[union-attr]
    except (OSError, AttributeError):
        return "?"
    return f"{kb / 2**20:.1f} GiB"


def git_commit() -> str:
    """The repository's short commit, marked when the SOURCE_PACKAGES have uncommitted changes."""
    git = ["git", "-C", str(REPO)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", *SOURCE_PACKAGES], capture_output=True, text=True
    ).stdout.strip()
    return commit.strip() + (DIRTY if dirty else "")


def machine_facts() -> dict[str, Any]:
    """Date, CPUs, memory, OS, Python and the shardstream commit."""
    return {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu": cpu_model(),
        "memory": memory_total(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "shardstream_commit": git_commit(),
    }


def machine_lines(m: dict[str, Any], after_versions: str) -> list[str]:
    """The report's two machine lines; ``after_versions`` goes after the library versions."""
    return [
        f"Machine: {m['nproc']} CPUs ({m['usable_cpus']} usable), {m['cpu']}, {m['memory']} RAM; "
        f"{m['os']}.  ",
        f"Python {m['python']}; "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items())
        + f"; {after_versions}.  ",
    ]


# ---------------------------------------------------------------------------------------------------------
# Markdown.
# ---------------------------------------------------------------------------------------------------------
def table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def verdicts(targets: dict[str, bool]) -> list[str]:
    """One markdown bullet per target: its name and whether it was met."""
    return [f"- {name}: {verdict(ok)}" for name, ok in targets.items()]


def ratio_line(label: str, ratios: dict[str, Any]) -> str:
    return f"{label}: " + ", ".join(f"{k} = {v}" for k, v in ratios.items()) + "."


# ---------------------------------------------------------------------------------------------------------
# Results.
# ---------------------------------------------------------------------------------------------------------
def new_result(quick: bool, command: str, machine: dict[str, Any]) -> dict[str, Any]:
    return {"quick": quick, "command": command, "machine": machine}


def stamp(quick: bool, only: list[str] | None = None, day: dt.date | None = None) -> str:
    """``<date>[-quick][-<only>...]``: a partial run gets its own files rather than overwriting the day's."""
    text = (day or dt.date.today()).isoformat() + ("-quick" if quick else "")
    return text + ("-" + "-".join(only) if only else "")


def save_text(results: Path, name: str, text: str) -> str:
    """Write ``results/name``; return its path relative to the repository, for the report."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / name
    path.write_text(text)
    return os.path.relpath(path, REPO)


def save_results(results: Path, stem: str, result: Any, markdown: str, log: Callable[[str], None]) -> None:
    """Write ``results/<stem>.json`` and ``results/<stem>.md``."""
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (results / f"{stem}.md").write_text(markdown)
    log(f"saved {results / f'{stem}.md'} and .json")


# ---------------------------------------------------------------------------------------------------------
# Data markers: generated data is reused when it was made with the same parameters.
# ---------------------------------------------------------------------------------------------------------
def marker_matches(root: Path, params: dict[str, Any]) -> bool:
    """Whether ``root`` holds data made with exactly ``params`` (so a rerun can reuse it)."""
    marker = root / MARKER
    return marker.exists() and json.loads(marker.read_text()) == params


def write_marker(root: Path, params: dict[str, Any]) -> None:
    (root / MARKER).write_text(json.dumps(params))
