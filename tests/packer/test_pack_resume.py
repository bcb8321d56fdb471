"""kill -9 in the middle of a pack, then --resume: the same shards, index and rejects as one clean run."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shardstream.format.constants import JOURNAL_NAME


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "shardstream_cli", *args]


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid``, from /proc (the forkserver, its workers, the resource tracker)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _digests(outdir: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(outdir.iterdir())
        if p.is_file() and not p.name.startswith(".")
    }


def _wait_for_lines(journal: Path, lines: int, seconds: float = 180) -> None:
    """Until the journal has ``lines`` lines; a clear failure (not a wrong verdict later) if it never does."""
    deadline = time.monotonic() + seconds
    while not (journal.exists() and journal.read_text().count("\n") >= lines):
        assert time.monotonic() < deadline, f"{journal} had fewer than {lines} lines after {seconds} s"
        time.sleep(0.002)


@pytest.fixture(scope="module")
def many_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("many") / "src"
    for part in range(6):
        folder = root / f"part{part}"
        folder.mkdir(parents=True)
        for i in range(600):
            (folder / f"{i:05d}.txt").write_text(f"caption {part} {i}\n" * (i % 7 + 1))
            (folder / f"{i:05d}.bin").write_bytes(os.urandom(200 + (i * 37) % 3000))
        (folder / "README").write_text("no extension: reported, not packed")
        (folder / ".hidden.txt").write_text("hidden: reported, not packed")
    return root


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_then_resume_gives_identical_output(many_files, tmp_path, workers):
    args = ["--max-count", "40", "--workers", str(workers), "--quiet"]
    clean = tmp_path / "clean"
    subprocess.run(_cli("pack", str(many_files), str(clean), *args), check=True, capture_output=True)

    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        _cli("pack", str(many_files), str(killed), *args), stderr=subprocess.PIPE, start_new_session=True
    )
    journal = killed / JOURNAL_NAME
    _wait_for_lines(journal, 4)  # header + 3 shards published
    os.killpg(proc.pid, signal.SIGSTOP)  # frozen first: listing its workers takes time the pack must not get
    helpers = _descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGCONT)  # the workers go on, to find their packer gone
    if workers > 1:
        assert helpers, "the pack should have had worker processes"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(pid) for pid in helpers):
            time.sleep(0.1)
        assert not [pid for pid in helpers if _alive(pid)], "workers outlived a kill -9 of the packer"
    published = [p for p in killed.glob("*.tar")]
    assert 3 <= len(published) < len(list(clean.glob("*.tar"))), "the kill must land mid-pack"
    assert not (killed / "shardstream-index.json").exists()

    refused = subprocess.run(
        _cli("pack", str(many_files), str(killed), *args), capture_output=True, text=True
    )
    assert refused.returncode != 0 and "--resume" in refused.stderr

    subprocess.run(
        _cli("pack", str(many_files), str(killed), *args, "--resume"), check=True, capture_output=True
    )
    assert _digests(killed) == _digests(clean)
    assert not journal.exists() and not list(killed.glob(".*.tmp"))


def test_resume_refuses_changed_options(many_files, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(_cli("pack", str(many_files), str(out), "--max-count", "40", "--quiet"))
    _wait_for_lines(out / JOURNAL_NAME, 2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    changed = subprocess.run(
        _cli("pack", str(many_files), str(out), "--max-count", "50", "--resume", "--quiet"),
        capture_output=True,
        text=True,
    )
    assert changed.returncode == 1
    assert "max_count: 40 -> 50" in changed.stderr


def test_resume_of_a_finished_pack_changes_nothing(many_files, tmp_path):
    out = tmp_path / "out"
    args = ["--max-count", "400", "--quiet"]
    subprocess.run(_cli("pack", str(many_files), str(out), *args), check=True)
    before = _digests(out)
    subprocess.run(_cli("pack", str(many_files), str(out), *args, "--resume"), check=True)
    assert _digests(out) == before
