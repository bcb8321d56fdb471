"""A ``pack --engine ray`` that succeeds says nothing alarming and leaves no process of its own Ray head."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest


def _sessions() -> dict[int, int]:
    """pid -> session id of every live process."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            found[int(stat.parent.name)] = int(fields[3])
    return found


def _head_below(driver: int) -> int | None:
    """The Ray head a ``pack --engine ray`` driver started for itself: it leads its own session."""
    for pid in _sessions():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        if ppid == driver and b"packer.cluster.rayhead" in cmdline:
            return pid
    return None


def test_a_successful_ray_pack_prints_no_warning_and_leaves_no_ray_process(tmp_path):
    pytest.importorskip("ray", reason="Ray core is in the test extras: pip install -e '.[test]'")
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(12):
        (raw / f"{i:03d}.txt").write_text(f"sample {i}")
    command = [
        *(sys.executable, "-m", "shardstream_cli", "pack", str(raw), str(tmp_path / "out")),
        *("--max-count", "4", "--partition-rows", "6", "--engine", "ray", "--workers", "2", "-q"),
    ]
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = None
    deadline = time.monotonic() + 60
    while head is None and driver.poll() is None and time.monotonic() < deadline:
        head = _head_below(driver.pid)
        time.sleep(0.05)
    _, err = driver.communicate(timeout=120)
    stderr = err.decode()
    assert driver.returncode == 0, stderr[-4000:]
    assert head is not None, "the pack's Ray head was never seen"
    assert "warning" not in stderr.lower(), stderr[-4000:]
    # Killed processes take a moment to go, on a loaded machine: what is still there after 5 s is left.
    deadline = time.monotonic() + 5
    while (left := sorted(p for p, s in _sessions().items() if s == head)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"the pack exited and left {len(left)} processes of its Ray head's session"
    assert (tmp_path / "out" / "shardstream-index.json").exists()
