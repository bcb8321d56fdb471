"""The packer against input that changes under it, and a disk that fills (issue 32, item 15).

A folder's file swapped after SOURCE was listed (for a FIFO, for a link out of SOURCE, its folder for a link
to another) is a counted reject naming it: never a hang, never bytes from outside SOURCE. A manifest naming
a FIFO is the same reject. A full disk (here: a file size limit, which needs no root) ends ``pack`` with
"disk full at shard N; ... --resume", no temp file left, and the resumed pack is the clean pack's bytes.

The swaps are made between the packer's two steps, listing (``walk_directory``, what ``pack`` plans from)
and loading (``load_batch``, what its workers run): deterministic, no race with a thread.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import packer
from packer import PackOptions
from packer.load import load_batch
from packer.sample import Reject, Sample, SamplePlan
from packer.sources.directory import walk_directory

pytestmark = pytest.mark.timeout(60)  # a hang is the bug: fail, do not wait for CI's limit

SECRET = b"outside SOURCE: these bytes must never reach a shard"
DEADLINE = 30  # seconds for one CLI run (each takes about one)


def _folder(root: Path, count: int = 4) -> Path:
    src = root / "src"
    (src / "sub").mkdir(parents=True)
    for i in range(count):
        (src / f"{i:04d}.txt").write_bytes(f"sample {i}".encode())
        (src / "sub" / f"{i:04d}.txt").write_bytes(f"nested {i}".encode())
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "0001.txt").write_bytes(SECRET)  # the name a swapped-in folder link would be read under
    return src


def _listed(src: Path) -> list[SamplePlan]:
    plans = list(walk_directory(src))
    assert all(isinstance(p, SamplePlan) for p in plans), plans  # nothing odd at listing time
    return plans  # type: ignore[return-value]


def _swap(path: Path, make) -> None:
    """Put what ``make(staged)`` creates in ``path``'s place by rename, as a hostile writer would."""
    staged = path.with_name(path.name + ".staged")
    make(staged)
    os.replace(staged, path)


def _only_reject(loaded: list[Sample | Reject], key: str) -> Reject:
    """The one reject, for ``key``; every other plan loaded, and no loaded byte came from outside."""
    rejects = [item for item in loaded if isinstance(item, Reject)]
    assert len(rejects) == 1 and rejects[0].source.endswith(key), loaded
    for item in loaded:
        if isinstance(item, Sample):
            assert all(SECRET not in data for _, data in item.members), item
    return rejects[0]


def test_a_file_swapped_for_a_fifo_after_listing_is_a_reject_not_a_hang(tmp_path):
    src = _folder(tmp_path)
    plans = _listed(src)
    victim = Path(os.path.realpath(src / "0001.txt"))
    _swap(victim, os.mkfifo)  # opening it for reading would wait for a writer forever
    reject = _only_reject(load_batch(plans), "0001")
    assert reject.kind == "unreadable" and str(victim) in reject.reason and "FIFO" in reject.reason


def test_a_file_swapped_for_a_link_out_of_source_after_listing_is_a_reject(tmp_path):
    src = _folder(tmp_path)
    plans = _listed(src)
    victim = Path(os.path.realpath(src / "0001.txt"))
    _swap(victim, lambda staged: staged.symlink_to(tmp_path / "outside" / "secret.txt"))
    reject = _only_reject(load_batch(plans), "0001")
    assert reject.kind == "unreadable" and str(victim) in reject.reason and "listed" in reject.reason


def test_a_folder_swapped_for_a_link_out_of_source_after_listing_is_a_reject(tmp_path):
    # The file's own name is no link (O_NOFOLLOW alone would pass it): only the identity listed catches it.
    src = _folder(tmp_path, count=2)
    plans = _listed(src)
    os.rename(src / "sub", tmp_path / "moved")
    (src / "sub").symlink_to(tmp_path / "outside")
    loaded = load_batch(plans)
    rejects = [item for item in loaded if isinstance(item, Reject)]
    # sub/0000.txt has no twin outside (missing), sub/0001.txt has one (another file): both refused.
    assert sorted(os.path.basename(r.source) for r in rejects) == ["0000", "0001"], loaded
    assert all(SECRET not in d for s in loaded if isinstance(s, Sample) for _, d in s.members)
    assert any("listed" in r.reason and "sub/0001.txt" in r.reason for r in rejects), rejects


def test_a_file_rewritten_in_place_after_listing_is_read_as_it_is_now(tmp_path):
    # Same file, new bytes (a log being appended to): not a swap, so not refused.
    src = _folder(tmp_path, count=2)
    plans = _listed(src)
    (src / "0001.txt").write_bytes(b"rewritten in place")
    loaded = load_batch(plans)
    assert all(isinstance(item, Sample) for item in loaded), loaded
    assert (("txt", b"rewritten in place"),) in [s.members for s in loaded]  # type: ignore[union-attr]


def test_pack_refuses_a_fifo_and_links_out_of_source_found_at_listing_time(tmp_path):
    src = _folder(tmp_path, count=2)
    os.mkfifo(src / "pipe.txt")
    (src / "link.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    summary = packer.pack(src, tmp_path / "out", PackOptions())
    assert summary.samples == 4
    assert not any(SECRET in p.read_bytes() for p in (tmp_path / "out").glob("*.tar"))
    rejected = [json.loads(line) for line in (tmp_path / "out" / "shardstream-rejects.jsonl").open()]
    assert sorted(r["kind"] for r in rejected) == ["outside", "unreadable"]


def test_a_manifest_naming_a_fifo_rejects_that_record_without_hanging(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"a")
    os.mkfifo(tmp_path / "b.txt")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"id": k, "text": f"{k}.txt"}) + "\n" for k in "ab"))
    summary = packer.pack(manifest, tmp_path / "out", PackOptions())
    assert summary.samples == 1
    (rejected,) = [json.loads(line) for line in (tmp_path / "out" / "shardstream-rejects.jsonl").open()]
    assert rejected["kind"] == "unreadable" and "b.txt" in rejected["reason"] and "FIFO" in rejected["reason"]


# -- a full disk ---------------------------------------------------------------------------------------
# RLIMIT_FSIZE makes any write past LIMIT fail with EFBIG, as a full disk fails it with ENOSPC; the child
# ignores SIGXFSZ, which would otherwise kill it at that write.
_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from shardstream_cli import main
sys.argv = ["shardstream", *sys.argv[2:]]
main()
"""
LIMIT = 150_000  # bytes: the 5 shards of 84,992 before the big sample fit; the big one's shard does not


def _pack(*args: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "shardstream_cli"] if limit is None else [sys.executable, "-c", _LIMITED]
    command += [] if limit is None else [str(limit)]
    command += ["pack", *args, "--max-size", "100KB", "-q"]
    return subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE)


def _digests(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir()) if p.is_file()}


def test_a_full_disk_names_the_shard_says_resume_and_leaves_no_temp_file(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):
        size = 200_000 if i == 20 else 20_000  # sample 20 gets a shard of its own: shard 5, past LIMIT
        (src / f"{i:04d}.bin").write_bytes(hashlib.shake_256(str(i).encode()).digest(size))
    out, clean = tmp_path / "out", tmp_path / "clean"
    full = _pack(str(src), str(out), limit=LIMIT)
    assert full.returncode != 0, full.stderr
    assert "Traceback" not in full.stderr, full.stderr
    assert "disk full at shard 5" in full.stderr and "--resume" in full.stderr, full.stderr
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")], sorted(out.rglob("*"))
    assert sorted(p.name for p in out.glob("*.tar")) == [f"train-00000{i}.tar" for i in range(5)]
    resumed = _pack(str(src), str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert _pack(str(src), str(clean)).returncode == 0
    assert _digests(out) == _digests(clean)


_EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 16 16\n%%EndComments\nnewpath 0 0 moveto 16 16 lineto\n"


@pytest.mark.parametrize("option", ["--image-max-side=64", "--verify-media"])
def test_packing_an_eps_named_as_an_image_never_runs_ghostscript(tmp_path, option):
    """Media processing opens source images as raster formats only: Pillow runs ``gs`` on EPS. A fake
    ``gs`` first on PATH leaves a mark if it runs; a PNG named .jpg still converts (common in the wild)."""
    from PIL import Image

    src, bin_dir, mark = tmp_path / "src", tmp_path / "bin", tmp_path / "gs-ran"
    src.mkdir()
    bin_dir.mkdir()
    (bin_dir / "gs").write_text(f'#!/bin/sh\necho "$@" >> {mark}\nexit 1\n')
    (bin_dir / "gs").chmod(0o755)
    (src / "a.png").write_bytes(_EPS)
    Image.new("RGB", (8, 8), "red").save(src / "b.jpg", format="PNG")  # a PNG under a .jpg name
    command = [
        sys.executable,
        "-m",
        "shardstream_cli",
        "pack",
        str(src),
        str(tmp_path / "out"),
        option,
        "--json",
    ]
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert not mark.exists(), f"Ghostscript ran: {mark.read_text()!r}"
    summary = json.loads(done.stdout)
    assert summary["samples"] == 1 and summary["rejected"] == {"media": 1}, summary
