"""Packs in parts on Ray core: the local bytes; a killed worker's part retried, a killed driver resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from packer import PackOptions, verify_dataset
from packer.cluster import pack_in_parts
from packer.cluster.part import DONE_NAME
from packer.cluster.plan import PARTS_DIR_NAME, part_dir
from packer.cluster.rayhead import live_sessions
from shardstream.format.constants import JOURNAL_NAME
from tests.cluster.corpus import HeldImage, digests, head_below, make_corpus, read_keys

ROWS = 40
HELD_RECORD = 70  # in part 1 (records 40..79): its first 16 (one load batch, 14 samples) make a shard


def _options(**more: object) -> PackOptions:
    return PackOptions(max_count=9, **more)  # type: ignore[arg-type]


def _until(condition, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not after {seconds} s"
        time.sleep(0.05)


def _holder(out: Path, number: int) -> int | None:
    """The pid in a part's lock file, once that part has published a shard (it then waits on its image)."""
    folder = part_dir(out, number)
    journal = folder / JOURNAL_NAME
    if not journal.exists() or journal.read_text().count("\n") < 2:
        return None
    text = (folder / ".lock").read_text().strip()
    return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ray_with_one_or_two_parts_at_once_gives_the_local_bytes(ray_address, tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    pack_in_parts(corpus.manifest, tmp_path / "local", _options(), partition_rows=ROWS)
    for in_flight in (1, 2):
        out = tmp_path / f"ray{in_flight}"
        summary = pack_in_parts(
            corpus.manifest, out, _options(workers=in_flight), partition_rows=ROWS, engine="ray"
        )
        assert digests(out) == digests(tmp_path / "local")
        assert summary.samples == len(corpus.good_keys)
    assert verify_dataset(tmp_path / "ray2" / "shardstream-index.json") == []
    assert sorted(read_keys(tmp_path / "ray2")) == sorted(corpus.good_keys)


def test_a_worker_killed_mid_part_is_retried_by_ray_with_the_same_bytes(ray_address, tmp_path):
    held = HeldImage(HELD_RECORD)
    corpus = make_corpus(tmp_path / "corpus", held=held)
    out, failure = tmp_path / "ray", []

    def run() -> None:
        try:
            pack_in_parts(corpus.manifest, out, _options(workers=2), partition_rows=ROWS, engine="ray")
        except BaseException as exc:  # handed to the test's thread
            failure.append(exc)

    packing = threading.Thread(target=run)
    packing.start()
    try:
        _until(lambda: _holder(out, 1) is not None, "part 1 waiting on its held image")
        killed = _holder(out, 1)
        os.kill(killed, signal.SIGKILL)  # type: ignore[arg-type]
        retried = lambda: _holder(out, 1) not in (None, killed)  # noqa: E731
        _until(lambda: retried() or not packing.is_alive(), "Ray running part 1 again")
        assert not failure, f"the pack failed instead of Ray running the part again: {failure}"
        held.serve()
        packing.join(timeout=120)
        assert not packing.is_alive() and not failure, failure
        pack_in_parts(corpus.manifest, tmp_path / "local", _options(), partition_rows=ROWS)
    finally:
        held.stop()
    assert digests(out) == digests(tmp_path / "local")
    assert not (out / PARTS_DIR_NAME).exists()


def _head_of(driver: int) -> int:
    """The session of the Ray head a ``pack --engine ray`` driver started for itself."""
    head = head_below(driver)
    if head is None:
        raise AssertionError(f"no Ray head below the driver {driver}")
    return head  # it leads its own session


def test_a_driver_killed_leaves_no_ray_process_and_resume_gives_the_same_bytes(ray_address, tmp_path):
    held = HeldImage(HELD_RECORD)
    corpus = make_corpus(tmp_path / "corpus", held=held)
    out = tmp_path / "out"
    command = [
        *(sys.executable, "-m", "shardstream_cli", "pack", str(corpus.manifest), str(out)),
        *("--max-count", "9", "--partition-rows", str(ROWS), "--engine", "ray", "--workers", "2", "-q"),
    ]
    driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _until(lambda: _holder(out, 1) is not None or driver.poll() is not None, "part 1 on its held image")
        assert driver.poll() is None, driver.stderr.read().decode()  # type: ignore[union-attr]
        # The other slot runs parts 0, 2 and 3 meanwhile; wait for their done markers so the
        # resume has finished parts to skip (the kill otherwise races them).
        finished = lambda: all((part_dir(out, n) / DONE_NAME).exists() for n in (0, 2, 3))  # noqa: E731
        _until(lambda: finished() or driver.poll() is not None, "parts 0, 2 and 3 done")
        assert driver.poll() is None, driver.stderr.read().decode()  # type: ignore[union-attr]
        head, worker = _head_of(driver.pid), _holder(out, 1)
        driver.kill()
        driver.wait()
        # The head's whole session goes (Ray's agents too), and the worker with its raylet.
        _until(lambda: head not in (live_sessions() or {}).values(), "the Ray head's session ending", 30)
        _until(lambda: not _alive(worker), "the part's Ray worker ending", 30)  # type: ignore[arg-type]
        held.serve()
        resumed = pack_in_parts(
            corpus.manifest,
            out,
            _options(workers=2, resume=True),
            partition_rows=ROWS,
            engine="ray",
            ray_address=ray_address,
        )
        assert resumed.resumed_from_shard > 0
        pack_in_parts(corpus.manifest, tmp_path / "local", _options(), partition_rows=ROWS)
    finally:
        held.stop()
        if driver.poll() is None:
            driver.kill()
    assert digests(out) == digests(tmp_path / "local")
    assert not (out / PARTS_DIR_NAME).exists()


def test_our_own_head_gets_a_token_of_its_own_only_when_the_user_has_none(tmp_path, monkeypatch):
    from packer.cluster import rayhead

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv(rayhead.AUTH_TOKEN, raising=False)
    monkeypatch.delenv(rayhead.AUTH_TOKEN_PATH, raising=False)
    rayhead._ensure_token()
    token = os.environ[rayhead.AUTH_TOKEN]
    assert len(token) == 64 and int(token, 16) >= 0
    assert not (tmp_path / ".ray").exists()  # nothing left behind in the user's home
    rayhead._ensure_token()
    assert os.environ[rayhead.AUTH_TOKEN] == token
    monkeypatch.delenv(rayhead.AUTH_TOKEN)
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("theirs")
    rayhead._ensure_token()
    assert rayhead.AUTH_TOKEN not in os.environ  # the user's own token file is Ray's to read
