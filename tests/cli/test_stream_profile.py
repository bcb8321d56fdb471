"""`shardstream stream --profile` (issue 36, item 3): where the loader's time went per process, the trainer's
exposed wait, a verdict in plain words, a live line on stderr while it runs, all at 80 columns; --json the
whole ``watch(loader).stats()``."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shardstream_cli import app
from shardstream_cli.profile import breakdown
from tests.conftest import write_dataset

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
STAGES = ("open", "io", "decode", "other", "idle")
VERDICTS = (
    "not-the-bottleneck",
    "buffer-filling",
    "slow-worker",
    "hand-off-bound",
    "decode-bound",
    "io-bound",
    "loader-bound",
    "balanced",
    "no-data",
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> str:
    return str(write_dataset(tmp_path_factory.mktemp("profile"), [200, 200, 200]).parent)


def _profile(*args: str) -> str:
    result = runner.invoke(app, ["stream", *args, "--profile"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.stdout


def _rows(output: str, first: str) -> list[str]:
    """The lines of the table whose header starts with ``first`` (up to the next blank line)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start + 1 : end]


def test_profile_names_each_stage_the_trainer_wait_and_a_verdict(dataset):
    output = _profile(dataset)
    header = next(line for line in output.splitlines() if line.startswith("process"))
    assert header.split()[1:] == [*STAGES, "wall"], output
    assert [row.split()[0] for row in _rows(output, "process")] == ["main"], output
    assert "decode by kind: text" in output, output
    assert "600 samples" in output
    assert "exposed data wait" in output and "p50" in output and "p99" in output, output
    said = next(line for line in output.splitlines() if line.startswith("verdict:"))
    assert said.split()[1].rstrip(":") in VERDICTS, output


def test_profile_json_is_the_watch_stats_alone_on_stdout(dataset):
    stats = json.loads(_profile(dataset, "--json"))
    assert {"workers", "total", "trainer", "verdict"} <= set(stats), stats.keys()
    assert stats["trainer"]["steps"] == 600 and stats["total"]["counts"]["samples"] == 600
    assert stats["verdict"]["code"] in VERDICTS


def test_profile_with_two_workers_has_a_row_per_worker_and_fits_80_columns(dataset):
    output = _profile(dataset, "--workers", "2")
    names = [row[:9].strip() for row in _rows(output, "process")]  # the process column
    assert names == ["worker 0", "worker 1", "total"], output
    counted = [row[:9].strip() for row in _rows(output, "counts")]
    assert counted == ["worker 0", "worker 1", "total"], output
    too_long = [line for line in output.splitlines() if len(line) > 80]
    assert not too_long, "lines over 80 columns:\n" + "\n".join(too_long)


def _on_a_terminal(*args: str) -> tuple[str, str]:
    """``shardstream stream ... --profile`` with stderr on a pseudo-terminal: (stdout, stderr)."""
    leader, follower = pty.openpty()
    seen = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's last writer closed it
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-m", "shardstream_cli", "stream", *args, "--profile"],
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
        timeout=120,
        check=False,
    )
    os.close(follower)
    reader.join(10)
    os.close(leader)
    assert done.returncode == 0, seen.decode(errors="replace")
    return done.stdout.decode(), seen.decode(errors="replace")


def test_profile_draws_a_live_line_on_a_terminal_and_keeps_json_clean(dataset):
    stdout, stderr = _on_a_terminal(dataset, "--json")
    assert json.loads(stdout)["trainer"]["steps"] == 600
    redraws = stderr.replace("\x1b[K", "").replace("\n", "\r").split("\r")  # erase-to-end, new line
    draws = [d.strip() for d in redraws if "samples/s" in d]
    assert draws, stderr
    assert all("MB/s" in d and "exposed wait" in d for d in draws), draws
    assert draws[-1].split()[-1] in VERDICTS, draws
    assert all(len(d) < 80 for d in draws), draws
    _, quiet = _on_a_terminal(dataset, "-q")
    assert "samples/s" not in quiet, quiet


def test_profile_breakdown_of_a_long_run_on_many_workers_still_fits_80_columns(dataset):
    """A real run's statistics, grown to a day on 256 workers: hours of seconds, tens of millions of
    samples a worker, worker numbers of three digits; no line grows past 80 columns."""
    stats = json.loads(_profile(dataset, "--workers", "2", "--json"))
    grow = 50_000

    def grown(row):
        return {
            "seconds": {k: v * grow for k, v in row["seconds"].items()},
            "decode": {k: v * grow for k, v in row["decode"].items()},
            "counts": {k: (v + 3) * grow for k, v in row["counts"].items()},
            **{k: row[k] * grow for k in ("fill_seconds", "wall", "handoff")},
        }

    worker = grown(stats["workers"]["0"])
    stats["workers"] = {str(n): worker for n in range(256)}
    stats["total"] = grown(stats["total"])
    stats["trainer"] = {**stats["trainer"], "steps": 600 * grow, "first_wait": 3600.0, "wait_p99": 99.0}
    lines = breakdown(stats)
    assert sum(line.startswith("worker 255") for line in lines) == 2, lines
    too_long = [line for line in lines if len(line) > 80]
    assert not too_long, "lines over 80 columns:\n" + "\n".join(too_long)
