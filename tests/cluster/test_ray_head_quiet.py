"""A ``pack --engine ray`` that succeeds says nothing alarming and leaves no process of its own Ray head;
it says while it starts the head (seconds with nothing else to show), and its bar has the plan's total."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from packer.cluster.rayhead import live_sessions
from tests.cluster.corpus import head_below


def test_a_successful_ray_pack_prints_no_warning_and_leaves_no_ray_process(tmp_path):
    pytest.importorskip("ray", reason="Ray core is in the test extras: pip install -e '.[test]'")
    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(12):
        (raw / f"{i:03d}.txt").write_text(f"sample {i}")
    command = [
        *(sys.executable, "-m", "shardstream_cli", "pack", str(raw), str(tmp_path / "out")),
        *("--max-count", "4", "--partition-rows", "6", "--engine", "ray", "--workers", "2"),
    ]
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = None
    deadline = time.monotonic() + 60
    while head is None and driver.poll() is None and time.monotonic() < deadline:
        head = head_below(driver.pid)
        time.sleep(0.05)
    _, err = driver.communicate(timeout=120)
    stderr = err.decode()
    assert driver.returncode == 0, stderr[-4000:]
    assert head is not None, "the pack's Ray head was never seen"
    assert "warning" not in stderr.lower(), stderr[-4000:]
    assert "starting a Ray head for this pack" in stderr and "Ray head up at" in stderr, stderr[-4000:]
    assert "12/12 [" in stderr, stderr[-4000:]  # every item of the plan, of a total known from the start
    # Killed processes take a moment to go, on a loaded machine: what is still there after 5 s is left.
    deadline = time.monotonic() + 5
    while (
        left := sorted(p for p, s in (live_sessions() or {}).items() if s == head)
    ) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"the pack exited and left {len(left)} processes of its Ray head's session"
    assert (tmp_path / "out" / "shardstream-index.json").exists()
