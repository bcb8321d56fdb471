"""`shardstream columns DATASET --fn module:function` in real processes: the function's values in every
shard's .cols and the index, other columns kept, shards untouched, a kill -9 mid-run resumed to the same
bytes (100,000 samples in the slow test), a changed shard and a changed resume refused."""

from __future__ import annotations

import io
import json
import random
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from shardstream.format import INDEX_NAME, DatasetIndex, decode_sample_columns

REPO = Path(__file__).resolve().parents[2]
SHARDSTREAM = str(Path(sys.executable).with_name("shardstream"))
FNS = "tests.cli.columns_fns"


def tiny_dataset(root: Path, shards: int, per_shard: int) -> list[list[int]]:
    """Shards of tiny samples (txt of 0-63 bytes, json {"n": i}), indexed; each shard's txt lengths."""
    root.mkdir(parents=True)
    rng, lengths, number = random.Random(7), [], 0
    for shard in range(shards):
        with tarfile.open(root / f"t-{shard:04d}.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
            lengths.append([])
            for _ in range(per_shard):
                text = b"x" * rng.randrange(64)
                for ext, data in (("txt", text), ("json", b'{"n": %d}' % number)):
                    info = tarfile.TarInfo(f"s{number:08d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                lengths[-1].append(len(text))
                number += 1
    run("index", str(root))
    return lengths


def run(*args: str, expect: int = 0, quiet: bool = True) -> subprocess.CompletedProcess:
    command = [SHARDSTREAM, *args, *(["-q"] if quiet else [])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == expect, done.stderr
    return done


def columns_of(root: Path, shard: int) -> dict[str, list[int]]:
    path = root / f"t-{shard:04d}.tar.cols"
    return {
        k: v.tolist() for k, v in decode_sample_columns(path.read_bytes(), source="", samples=None).items()
    }


def sidecar_bytes(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.glob("*.cols"))} | {
        INDEX_NAME: (root / INDEX_NAME).read_bytes()
    }


def test_columns_writes_the_functions_values_and_keeps_other_columns(tmp_path):
    root = tmp_path / "d"
    lengths = tiny_dataset(root, 3, 50)
    tars = {p.name: p.read_bytes() for p in root.glob("*.tar")}
    done = run("columns", str(root), "--fn", f"{FNS}:text_length", "--workers", "2", "--json")
    summary = json.loads(done.stdout)
    assert summary["columns"] == {"cost": "u8"} and summary["samples"] == 150
    assert summary["sums"] == {"cost": sum(map(sum, lengths))}
    assert [columns_of(root, s)["cost"] for s in range(3)] == lengths
    index = DatasetIndex.load(root / INDEX_NAME)
    assert index.sample_columns == {"cost": "u8"} and index.column_sums == {"cost": [sum(x) for x in lengths]}
    run("columns", str(root), "--fn", f"{FNS}:two_columns")  # a dict: two columns more, cost kept
    for shard in range(3):
        got = columns_of(root, shard)
        assert list(got) == ["cost", "length", "score"] and got["cost"] == got["length"] == lengths[shard]
        assert got["score"] == [50 * shard + i - 5 for i in range(50)]
    again = DatasetIndex.load(root / INDEX_NAME)
    assert again.sample_columns == {"cost": "u8", "length": "i8", "score": "i8"}
    assert again.column_sums["score"] == [sum(50 * s + i - 5 for i in range(50)) for s in range(3)]
    assert {p.name: p.read_bytes() for p in root.glob("*.tar")} == tars  # never a shard rewritten


def test_a_bad_function_or_result_is_refused_with_the_sample_named(tmp_path):
    root = tmp_path / "d"
    tiny_dataset(root, 1, 5)
    bad = run("columns", str(root), "--fn", f"{FNS}:not_an_int", expect=1)
    assert "sample 's00000000'" in bad.stderr and "not an int" in bad.stderr
    missing = run("columns", str(root), "--fn", f"{FNS}:nope", expect=1)
    assert "cannot be loaded" in missing.stderr
    assert "not a function" in run("columns", str(root), "--fn", f"{FNS}:NOT_A_FUNCTION", expect=1).stderr
    assert not (root / "t-0000.tar.cols").exists()
    run("columns", str(root), "--fn", f"{FNS}:text_length")  # after a failed first shard: a fresh run


def test_a_shard_changed_since_it_was_indexed_is_refused(tmp_path):
    root = tmp_path / "d"
    tiny_dataset(root, 2, 20)
    other = tmp_path / "o"
    tiny_dataset(other, 1, 7)
    shutil.copy(other / "t-0000.tar", root / "t-0001.tar")
    bad = run("columns", str(root), "--fn", f"{FNS}:text_length", expect=1)
    assert "7 samples, the index says 20" in bad.stderr and "shardstream index" in bad.stderr
    assert not (root / "t-0001.tar.cols").exists()


# Computes argv[2] over argv[1] with argv[3] workers; kills itself with SIGKILL from the progress hook once
# argv[4] shards are journaled.
KILLER = """
import os, signal, sys
from shardstream.columns import ColumnOptions, compute_columns
landed = 0
def hook(record):
    global landed
    landed += 1
    if landed == int(sys.argv[4]):
        os.kill(os.getpid(), signal.SIGKILL)
compute_columns(sys.argv[1], ColumnOptions(fn=sys.argv[2], workers=int(sys.argv[3]), progress=hook))
raise SystemExit("the run finished before the planned kill")
"""


def kill_then_resume(
    tmp_path: Path, shards: int, per_shard: int, workers: int
) -> subprocess.CompletedProcess:
    root, reference = tmp_path / "d", tmp_path / "ref"
    tiny_dataset(root, shards, per_shard)
    shutil.copytree(root, reference)
    run("columns", str(reference), "--fn", f"{FNS}:text_length", "--workers", str(workers))
    command = [sys.executable, "-c", KILLER, str(root), f"{FNS}:text_length", str(workers), str(shards // 2)]
    killed = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert DatasetIndex.load(root / INDEX_NAME).sample_columns == {}  # the index is written last
    done = run("columns", str(root), "--fn", f"{FNS}:text_length", "--workers", str(workers), quiet=False)
    assert sidecar_bytes(root) == sidecar_bytes(reference)
    assert len(sidecar_bytes(root)) == shards + 1
    assert not (root / ".shardstream-columns-work").exists()
    return done


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_mid_columns_then_rerun_gives_the_same_bytes(tmp_path, workers):
    done = kill_then_resume(tmp_path, 8, 100, workers)
    assert "from the journal" in done.stdout


@pytest.mark.slow
def test_columns_over_100000_samples_kill_9_resume_with_a_progress_bar(tmp_path):
    done = kill_then_resume(tmp_path, 20, 5_000, 2)
    computed = int(done.stdout.split("(")[2].split(" computed")[0])
    assert 0 < computed <= 10
    assert f"{computed * 5000}/{computed * 5000}" in done.stderr  # tqdm's bar over what this run did
    assert DatasetIndex.load(tmp_path / "d" / INDEX_NAME).samples == 100_000


def test_a_resume_with_another_function_is_refused(tmp_path):
    root = tmp_path / "d"
    tiny_dataset(root, 4, 10)
    command = [sys.executable, "-c", KILLER, str(root), f"{FNS}:text_length", "1", "2"]
    subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
    refused = run("columns", str(root), "--fn", f"{FNS}:two_columns", expect=1)
    assert "other options (fn)" in refused.stderr and "--restart" in refused.stderr
    run("columns", str(root), "--fn", f"{FNS}:two_columns", "--restart")
    assert list(columns_of(root, 3)) == ["length", "score"]
