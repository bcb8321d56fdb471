"""Interrupted packs: shards publish atomically, rejects and journal agree, Ctrl-C then --resume is exact."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from packer import MediaOptions, PackOptions, ProgressHook, pack
from packer.sample import Sample
from packer.shardwriter import TarShardWriter, encode_sample
from shardstream.errors import PackError
from shardstream.format import REJECTS_NAME, write_atomic
from shardstream.format.constants import JOURNAL_NAME
from tests.packer.killing import pack_killed

OPTIONS = {"max_count": 40, "max_size": None}


def _digests(outdir: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(outdir.iterdir())
        if p.is_file() and not p.name.startswith(".")
    }


def _journal(outdir: Path) -> list[dict]:
    lines = (outdir / JOURNAL_NAME).read_text().splitlines()[1:]
    return [json.loads(line) for line in lines]


def _kill_at(source: Path, out: Path, *, shards: int, samples: int = 0, rejects: int = 0) -> None:
    """A kill -9 that lands at an exact point of the run, mid-shard (``tests/packer/killing.py``)."""
    pack_killed(source, out, OPTIONS, shards=shards, samples=samples, rejects=rejects)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four folders of 40 samples; folders 1-3 start with 120 extensionless files, each one a reject."""
    root = tmp_path_factory.mktemp("tree") / "src"
    for part in range(4):
        folder = root / f"part{part}"
        folder.mkdir(parents=True)
        for i in range(40):
            (folder / f"{i:03d}.txt").write_text(f"caption {part} {i}\n" * (i % 5 + 1))
            (folder / f"{i:03d}.bin").write_bytes(bytes([part, i]) * (100 + 37 * i))
        if part:
            for i in range(120):
                (folder / f"notes-{i:03d}").write_text("no extension: reported, not packed")
    return root


@pytest.fixture(scope="module")
def clean(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("clean") / "out"
    pack(tree, out, PackOptions(**OPTIONS))
    digests = _digests(out)
    assert REJECTS_NAME in digests and len([n for n in digests if n.endswith(".tar")]) == 4
    return digests


def test_a_shard_never_exists_under_its_final_name_before_it_is_complete(tree, tmp_path):
    out = tmp_path / "out"

    class Watch(ProgressHook):
        published = 0
        checks = 0

        def shard(self, count):
            self.published = count

        def sample(self, nbytes):
            names = sorted(p.name for p in out.glob("*.tar"))
            assert names == [f"train-{i:06d}.tar" for i in range(self.published)], "unpublished shard visible"
            self.checks += 1

    hook = Watch()
    pack(tree, out, PackOptions(**OPTIONS), hook=hook)
    assert hook.checks == 160 and hook.published == 4


def test_kill_9_mid_shard_leaves_only_journaled_shards_under_final_names(tree, clean, tmp_path):
    out = tmp_path / "killed"
    _kill_at(tree, out, shards=2, samples=7)  # shard 2 is open and holds 7 samples
    journaled = _journal(out)
    assert len(journaled) == 2
    entries = [entry["shard"] for entry in journaled]
    assert sorted(p.name for p in out.glob("*.tar")) == [name for name, *_ in entries]
    for name, _samples, size, sha256 in entries:
        data = (out / name).read_bytes()
        assert len(data) == size and hashlib.sha256(data).hexdigest() == sha256
        assert (out / f"{name}.offsets").exists()
    pack(tree, out, PackOptions(**OPTIONS, resume=True))
    assert _digests(out) == clean
    assert not list(out.glob(".*.tmp")) and not (out / JOURNAL_NAME).exists()


def test_resume_drops_rejects_reported_after_the_last_journal_entry(tree, clean, tmp_path):
    out = tmp_path / "killed"
    # Shard 1 (part1's samples) is full but unpublished; part2's rejects are being written when it dies.
    _kill_at(tree, out, shards=1, rejects=110)
    (entry,) = _journal(out)
    on_disk = (out / REJECTS_NAME).stat().st_size
    assert on_disk > entry["rejects_bytes"], "the kill must land after rejects reached the file unjournaled"
    pack(tree, out, PackOptions(**OPTIONS, resume=True))
    assert _digests(out) == clean


def test_resume_drops_a_stray_reject_line_the_journal_never_counted(tree, clean, tmp_path):
    out = tmp_path / "killed"
    _kill_at(tree, out, shards=2, samples=3)
    stray = {"source": "x", "reason": "written, then killed before the journal entry", "kind": "no-extension"}
    with (out / REJECTS_NAME).open("a") as handle:
        handle.write(json.dumps(stray) + "\n")
    pack(tree, out, PackOptions(**OPTIONS, resume=True))
    assert _digests(out) == clean


@pytest.mark.parametrize("damage", ["deleted", "cut short"])
def test_resume_refuses_a_rejects_file_shorter_than_the_journal_counts(tree, tmp_path, damage):
    """Resuming would lose reported rejects (or pad the file with NULs): a PackError naming the fix."""
    out = tmp_path / "killed"
    _kill_at(tree, out, shards=2, samples=3)
    assert _journal(out)[-1]["rejects_bytes"] > 0
    rejects = out / REJECTS_NAME
    if damage == "deleted":
        rejects.unlink()
    else:
        rejects.write_bytes(rejects.read_bytes()[:5])
    with pytest.raises(PackError, match=r"shardstream-rejects\.jsonl.*missing or shorter.*--overwrite"):
        pack(tree, out, PackOptions(**OPTIONS, resume=True))


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "shardstream_cli", *args]


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """18 big PNGs to downscale: a sample costs more than a shard's fsyncs, so Ctrl-C lands mid-shard."""
    import io

    import numpy as np
    from PIL import Image

    ramp = (np.add.outer(np.arange(600), np.arange(600)) % 256).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(np.stack([ramp, ramp.T, ramp // 2], -1)).save(buffer, "PNG", compress_level=1)
    root = tmp_path_factory.mktemp("images") / "src"
    for part in range(2):
        folder = root / f"part{part}"
        folder.mkdir(parents=True)
        for i in range(9):
            (folder / f"{i:03d}.png").write_bytes(buffer.getvalue())
            (folder / f"{i:03d}.txt").write_text(f"image {part} {i}")
        (folder / "README").write_text("no extension: reported, not packed")
    return root


@pytest.fixture(scope="module")
def images_packed(images: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("images-clean") / "out"
    pack(images, out, PackOptions(max_count=3, media=MediaOptions(image_max_side=32)))
    digests = _digests(out)
    assert len([name for name in digests if name.endswith(".tar")]) == 6
    return digests


def _as_in_a_terminal() -> None:
    # A job started in the background by a non-interactive shell (nohup ... &, a CI runner) inherits
    # SIGINT ignored, and Python then never raises KeyboardInterrupt; a terminal's Ctrl-C finds it default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_mid_pack(images: Path, out: Path, workers: int) -> tuple[int, str]:
    options = ["--max-count", "3", "--image-max-side", "32", "--workers", str(workers), "-q"]
    command = _cli("pack", str(images), str(out), *options)
    # A terminal's Ctrl-C signals the whole foreground process group, workers included.
    proc = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_as_in_a_terminal
    )
    journal, next_shard = out / JOURNAL_NAME, out / ".train-000003.tar.tmp"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:  # a pack that already ended: try again
        with contextlib.suppress(FileNotFoundError):  # the pack may end (and drop its journal) meanwhile
            if next_shard.exists() and journal.read_text().count("\n") >= 4:
                os.killpg(proc.pid, signal.SIGINT)  # shard 3 is open: its first sample is in, 2 more coming
                break
        time.sleep(0.001)
    _, stderr = proc.communicate(timeout=60)
    return proc.returncode, stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_mid_shard_then_resume_gives_identical_output(images, images_packed, tmp_path, workers):
    # The window (shard 3 open) lasts a few milliseconds, less with a worker decoding ahead: a poll that
    # misses it sees the pack end (exit 0) and tries again, at most 10 times.
    for attempt in range(10):
        out = tmp_path / f"out{attempt}"
        returncode, stderr = _interrupt_mid_pack(images, out, workers)
        if returncode != 0:
            break
    journal = out / JOURNAL_NAME
    assert returncode == 130, stderr
    assert "interrupted; run the same command with --resume" in stderr
    assert 3 <= len(list(out.glob("*.tar"))) < 6, "Ctrl-C must land mid-pack"
    assert not (out / "shardstream-index.json").exists()
    pack(images, out, PackOptions(max_count=3, media=MediaOptions(image_max_side=32), resume=True))
    assert _digests(out) == images_packed
    assert REJECTS_NAME in images_packed
    assert not journal.exists() and not list(out.glob(".*.tmp"))


def test_shard_writer_publishes_only_on_close(tmp_path):
    final = tmp_path / "train-000000.tar"
    writer = TarShardWriter(final, max_size=None, max_count=None)
    sample = Sample("k", "k", (("txt", b"x" * 5000),))
    chunks = encode_sample(sample)
    writer.add("k", chunks, sum(len(c) for c in chunks))
    assert not final.exists() and not (tmp_path / "train-000000.tar.offsets").exists()
    entry = writer.close()
    assert final.stat().st_size == entry.size and (tmp_path / "train-000000.tar.offsets").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train-000000.tar", "train-000000.tar.offsets"]
    doomed = TarShardWriter(tmp_path / "train-000001.tar", max_size=None, max_count=None)
    doomed.add("k", chunks, sum(len(c) for c in chunks))
    doomed.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train-000000.tar", "train-000000.tar.offsets"]


_FAILING_WRITE = textwrap.dedent(
    """
    import resource, signal, sys
    from pathlib import Path
    from shardstream.format import write_atomic

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
    try:
        write_atomic(Path(sys.argv[1]), b"n" * 1_000_000)
    except OSError as exc:
        print("failed:", exc.strerror)
    """
)


def test_write_atomic_that_fails_midway_leaves_the_old_file_whole(tmp_path):
    final = tmp_path / "shardstream-index.json"
    write_atomic(final, b"old contents")
    assert final.read_bytes() == b"old contents" and sorted(tmp_path.iterdir()) == [final]
    # A real short write: the file size limit stops the write after 64 KiB, as a full disk would.
    done = subprocess.run([sys.executable, "-c", _FAILING_WRITE, str(final)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("failed:"), done.stdout + done.stderr
    assert final.read_bytes() == b"old contents"
    fresh = tmp_path / "new.json"
    done = subprocess.run([sys.executable, "-c", _FAILING_WRITE, str(fresh)], capture_output=True, text=True)
    assert done.stdout.startswith("failed:") and not fresh.exists()
    assert sorted(tmp_path.iterdir()) == [final]  # no half-written temp file left behind either
