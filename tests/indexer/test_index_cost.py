"""`shardstream index --cost FIELD` on tars webdataset's TarWriter wrote: each shard's costs from its .json
records in a .cols beside the offsets (or in the sidecars folder), the index's sums, bad costs reported
with no cost column, and a kill -9 mid-run resumed to the same bytes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import webdataset as wds

from shardstream.format import INDEX_NAME, DatasetIndex, decode_sample_columns
from shardstream.format.sidecars import sample_columns_sidecar
from tests.indexer.builders import shardwriter_dataset
from tests.indexer.test_index_command import SHARDSTREAM, index


def _cols(path: Path, samples: int) -> list[int]:
    return decode_sample_columns(path.read_bytes(), source=str(path), samples=samples)["cost"].tolist()


def test_costs_are_each_samples_json_field_in_a_cols_beside_the_offsets(tmp_path):
    data = tmp_path / "wds"
    samples = shardwriter_dataset(data, [15, 9, 21])
    summary = index(str(data), "--cost", "n")
    keys = sorted(samples)
    firsts = [0, 15, 24, 45]
    index_ = DatasetIndex.load(data / INDEX_NAME)
    assert index_.sample_columns == {"cost": "u8"}
    for shard in range(3):
        expected = [json.loads(samples[k]["json"])["n"] for k in keys[firsts[shard] : firsts[shard + 1]]]
        assert _cols(data / f"w-{shard:06d}.tar.cols", len(expected)) == expected
        assert index_.column_sums["cost"][shard] == sum(expected)
    assert summary["cost_total"] == sum(range(45))
    out = tmp_path / "out"  # the sidecars folder: the same bytes under the derived name
    index(str(data), "--out", str(out), "--cost", "n")
    moved = DatasetIndex.load(out / INDEX_NAME)
    for shard, entry in enumerate(moved.shards):
        beside = (data / f"w-{shard:06d}.tar.cols").read_bytes()
        assert (out / moved.sidecars / sample_columns_sidecar(entry.name)).read_bytes() == beside
    assert moved.column_sums == index_.column_sums


def test_a_bad_cost_is_reported_and_the_index_gets_no_cost_column(tmp_path):
    data = tmp_path / "wds"
    shardwriter_dataset(data, [10, 10])
    with wds.TarWriter(str(data / "w-000002.tar")) as writer:
        writer.write({"__key__": "z0", "json": b'{"n": 4}'})
        writer.write({"__key__": "z1", "json": b'{"m": 4}'})  # no such field
        writer.write({"__key__": "z2", "txt": b"no record at all"})
        writer.write({"__key__": "z3", "json": b'{"n": -3}'})
    summary = index(str(data), "--cost", "n")
    assert summary["skipped"] == {"bad-cost": 3} and summary["cost_total"] is None
    assert summary["samples"] == 24  # the samples are indexed all the same
    rejects = [json.loads(line) for line in (data / "shardstream-rejects.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rejects] == ["bad-cost"] * 3
    assert "'z1'" in rejects[0]["reason"] and "missing" in rejects[0]["reason"]
    assert "'z2'" in rejects[1]["reason"] and "no json member" in rejects[1]["reason"]
    assert "'z3'" in rejects[2]["reason"] and "is -3" in rejects[2]["reason"]
    assert all(r["source"].endswith("w-000002.tar") and r["offset"] > 0 for r in rejects)
    loaded = DatasetIndex.load(data / INDEX_NAME)
    assert loaded.sample_columns == {} and loaded.column_sums == {}
    assert not (data / "w-000002.tar.cols").exists()
    command = [SHARDSTREAM, "index", str(data), "--cost", "n", "-q"]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "cost:    none: 3 samples without a valid cost" in shown.stdout
    assert "from the journal" not in shown.stdout  # bad costs are samples, not shards left out


# Indexes argv[1] into argv[2] with --cost n and argv[3] workers; kills itself with SIGKILL from the
# progress hook once argv[4] shards are journaled.
KILLER = """
import os, signal, sys
from pathlib import Path
from shardstream.indexer import IndexOptions, index_source
landed = 0
def hook(record):
    global landed
    landed += 1
    if landed == int(sys.argv[4]):
        os.kill(os.getpid(), signal.SIGKILL)
options = IndexOptions(out=Path(sys.argv[2]), workers=int(sys.argv[3]), progress=hook, cost="n")
index_source(sys.argv[1], options)
raise SystemExit("the index finished before the planned kill")
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_mid_index_cost_then_rerun_gives_the_same_bytes(tmp_path, workers):
    data = tmp_path / "wds"
    shardwriter_dataset(data, [15] * 30)
    reference = tmp_path / "ref"
    index(str(data), "--out", str(reference), "--cost", "n")
    out = tmp_path / "out"
    command = [sys.executable, "-c", KILLER, str(data), str(out), str(workers), "13"]
    killed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (out / INDEX_NAME).exists()
    summary = index(str(data), "--out", str(out), "--workers", str(workers), "--cost", "n")
    assert summary["scanned"] <= 30 - 12
    assert (out / INDEX_NAME).read_bytes() == (reference / INDEX_NAME).read_bytes()
    made = sorted(p.name for p in (reference / "sidecars").glob("*.cols"))
    assert len(made) == 30
    assert sorted(p.name for p in (out / "sidecars").glob("*.cols")) == made
    for name in made:
        assert (out / "sidecars" / name).read_bytes() == (reference / "sidecars" / name).read_bytes()


def test_a_resume_with_another_cost_field_is_refused(tmp_path):
    data = tmp_path / "wds"
    shardwriter_dataset(data, [5] * 6)
    command = [sys.executable, "-c", KILLER, str(data), str(tmp_path / "out"), "1", "2"]
    subprocess.run(command, capture_output=True, text=True, timeout=120)
    command = [SHARDSTREAM, "index", str(data), "--out", str(tmp_path / "out")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "cost" in done.stderr and "--restart" in done.stderr
