"""`shardstream index` on tars other tools wrote: ShardWriter with gaps, GNU tar, webdataset's own test
shards, damaged shards among good ones, kill -9 and resume, parts; then ShardDataset reads every sample."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from shardstream.format import INDEX_NAME, DatasetIndex
from streamer import ShardDataset, ShardMap
from tests.indexer.builders import gnu_tar_dataset, shardwriter_dataset

SHARDSTREAM = str(Path(sys.executable).with_name("shardstream"))
FOREIGN = Path(__file__).resolve().parents[2].parent / "shared" / "foreign-shards"


def index(*args: str, expect: int = 0) -> dict:
    command = [SHARDSTREAM, "index", *args, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == expect, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else {}


def read_all(source, ranks: int = 1, workers: int = 0, **kwargs) -> list[list[str]]:
    """Keys each rank yields in one epoch (DataLoader workers as given)."""
    out = []
    for rank in range(ranks):
        ds = ShardDataset(source, decode=False, seed=5, rank=rank, world_size=ranks, **kwargs)
        loader = DataLoader(ds, batch_size=None, num_workers=workers)
        out.append([sample["__key__"] for sample in loader])
    return out


def test_shardwriter_with_gaps_reads_once_as_3_ranks_by_2_workers(tmp_path):
    data = tmp_path / "wds"
    samples = shardwriter_dataset(data, [40, 7, 33, 51, 12, 29], gaps=(1, 4))
    summary = index(str(data), "--workers", "2")
    assert summary["shards"] == 4 and summary["samples"] == len(samples) == 153
    assert summary["pattern"] is None and not summary["problems"]  # the gaps break any single pattern
    loaded = DatasetIndex.load(data / INDEX_NAME)
    assert [e.name for e in loaded.shards] == ["w-000000.tar", "w-000002.tar", "w-000003.tar", "w-000005.tar"]
    assert loaded.fields == {"cls": 153, "jpg": 153, "json": 153}
    assert loaded.field_bytes["jpg"] == sum(len(s["jpg"]) for s in samples.values())
    per_rank = read_all(data, ranks=3, workers=2, remainder="drop")
    assert {len(keys) for keys in per_rank} == {153 // 3}
    seen = Counter(key for keys in per_rank for key in keys)
    assert max(seen.values()) == 1 and set(seen) == set(samples)
    # The bytes are the tar's own: a full read through the index equals what ShardWriter was given.
    read = {s["__key__"]: s for s in ShardDataset(data, decode=False, shuffle=False)}
    assert all(read[k][ext] == v for k, sample in samples.items() for ext, v in sample.items())


def test_a_pattern_with_holes_reports_the_missing_shards(tmp_path):
    data = tmp_path / "wds"
    shardwriter_dataset(data, [5, 5, 5, 5], gaps=(2,))
    summary = index(str(data / "w-{000000..000003}.tar"))
    assert summary["samples"] == 15 and summary["skipped"] == {"missing-shard": 1}
    assert summary["problems"][0]["shard"].endswith("w-000002.tar")
    rejects = [json.loads(line) for line in (data / "shardstream-rejects.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in rejects] == ["missing-shard"]


def test_gnu_tar_archives_with_directory_entries(tmp_path):
    expected = gnu_tar_dataset(tmp_path, "a", 10) | gnu_tar_dataset(tmp_path, "b", 8, start=10)
    summary = index(str(tmp_path / "{a,b}.tar"))
    assert summary["samples"] == 18 and summary["pattern"] is None  # names without a number: no range
    for workers in (0, 2):
        got = {}
        for keys_and_samples in DataLoader(
            ShardDataset(tmp_path, decode=False, seed=1), batch_size=None, num_workers=workers
        ):
            got[keys_and_samples["__key__"]] = keys_and_samples
        assert set(got) == set(expected)
        assert all(got[k]["bin"] == v["bin"] and got[k]["txt"] == v["txt"] for k, v in expected.items())
    # Two ranks, each starting mid-shard through the sidecar: nothing lost or doubled at directory entries.
    halves = read_all(tmp_path, ranks=2, workers=0)
    assert sorted(halves[0] + halves[1]) == sorted(expected)


def test_webdatasets_own_test_shards_read_back_as_webdataset_reads_them(tmp_path):
    if not FOREIGN.is_dir():
        pytest.skip(f"{FOREIGN} is not here")
    out = tmp_path / "idx"
    summary = index(str(FOREIGN), "--out", str(out))
    # The .tgz cannot be entered at a sample: reported, not silently dropped.
    assert summary["skipped"] == {"compressed-shard": 1}
    import webdataset as wds

    expected = Counter()
    for tar in sorted(FOREIGN.glob("*.tar")):
        expected.update(s["__key__"] for s in wds.WebDataset(str(tar), shardshuffle=False, empty_check=False))
    got = Counter(s["__key__"] for s in ShardDataset(out, decode=False, seed=0))
    assert got == expected and summary["samples"] == sum(expected.values())
    assert not list(FOREIGN.glob("*.offsets"))  # the shards' folder was not written to


def test_damaged_shards_are_reported_and_the_rest_indexed(tmp_path):
    data = tmp_path / "wds"
    samples = shardwriter_dataset(data, [20, 20, 20, 20])
    whole = (data / "w-000001.tar").read_bytes()
    (data / "w-000001.tar").write_bytes(whole[: len(whole) // 2 + 700])  # truncated mid-member
    (data / "w-000003.tar").write_bytes(os.urandom(5000))  # garbage
    summary = index(str(data))
    assert summary["samples"] == 40 and summary["shards"] == 2
    assert summary["skipped"] == {"damaged-shard": 2}
    by_shard = {Path(p["shard"]).name: p for p in summary["problems"]}
    assert "truncated" in by_shard["w-000001.tar"]["reason"]
    assert "checksum" in by_shard["w-000003.tar"]["reason"] and by_shard["w-000003.tar"]["offset"] == 0
    keys = {s["__key__"] for s in ShardDataset(data, decode=False)}
    assert keys == {k for k in samples if int(k[1:]) < 20 or 40 <= int(k[1:]) < 60}
    # The shards after a dropped one move up in the index; the key file follows them.
    by_key = ShardMap(data, decode=False)
    assert all(by_key.get(k)["jpg"] == samples[k]["jpg"] for k in keys)
    # --partial keeps the samples before the damage, each whole.
    partial = index(str(data), "--partial", "--restart")
    assert partial["skipped"] == {"partial-shard": 1, "damaged-shard": 1}
    read = {s["__key__"]: s for s in ShardDataset(data, decode=False)}
    kept = [k for k in read if 20 <= int(k[1:]) < 40]
    assert 0 < len(kept) < 20 and all(read[k]["jpg"] == samples[k]["jpg"] for k in kept)


# Indexes argv[1] into argv[2] with argv[3] workers and kills itself with SIGKILL from inside the progress
# hook once argv[4] shards are journaled: a kill -9 that lands at a known point, mid-run.
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
index_source(sys.argv[1], IndexOptions(out=Path(sys.argv[2]), workers=int(sys.argv[3]), progress=hook))
raise SystemExit("the index finished before the planned kill")
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_kill_9_mid_index_then_rerun_gives_the_same_index(tmp_path, workers):
    data = tmp_path / "wds"
    shardwriter_dataset(data, [15] * 40)
    reference = tmp_path / "ref"
    index(str(data), "--out", str(reference))
    expected = (reference / INDEX_NAME).read_text().replace(str(reference), "")
    out = tmp_path / "out"
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, str(data), str(out), str(workers), "17"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    journal = out / ".shardstream-index-work" / "journal.jsonl"
    assert journal.read_text().count("\n") >= 16 and not (out / INDEX_NAME).exists()
    summary = index(str(data), "--out", str(out), "--workers", str(workers))
    assert summary["scanned"] <= 40 - 16
    assert (out / INDEX_NAME).read_text().replace(str(out), "") == expected
    assert (out / "shardstream-keys").read_bytes() == (reference / "shardstream-keys").read_bytes()
    assert not (out / ".shardstream-index-work").exists()


def test_parts_then_merge_equal_one_run(tmp_path):
    data = tmp_path / "wds"
    shardwriter_dataset(data, [9, 4, 13, 8, 2, 11, 6])
    whole = tmp_path / "whole"
    index(str(data), "--out", str(whole))
    parts = tmp_path / "parts"
    first = index(str(data), "--out", str(parts), "--part", "1/3")
    assert first["part"] == "1/3" and first["remaining"] == 5 and not (parts / INDEX_NAME).exists()
    index(str(data), "--out", str(parts), "--part", "3/3", "--workers", "2")
    index(str(data), "--out", str(parts), "--part", "2/3")
    merged = index(str(data), "--out", str(parts))
    assert merged["scanned"] == 0
    for name in (INDEX_NAME, "shardstream-keys", "shardstream-keys.idx"):
        in_parts = (parts / name).read_bytes().replace(bytes(parts), b"")
        assert in_parts == (whole / name).read_bytes().replace(bytes(whole), b"")
    # Different options over an unfinished folder are refused, naming the option.
    index(str(data), "--out", str(tmp_path / "p2"), "--part", "1/2")
    done = subprocess.run(
        [SHARDSTREAM, "index", str(data), "--out", str(tmp_path / "p2"), "--checksum"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "checksum" in done.stderr


def test_checksum_lets_the_streamer_check_cached_copies(tmp_path):
    data = tmp_path / "wds"
    shardwriter_dataset(data, [6, 6])
    summary = index(str(data), "--checksum")
    loaded = DatasetIndex.load(Path(summary["index"]))
    import hashlib

    assert [e.sha256 for e in loaded.shards] == [
        hashlib.sha256((data / e.name).read_bytes()).hexdigest() for e in loaded.shards
    ]


def test_sidecar_names_from_odd_shard_names_stay_inside_out(tmp_path):
    data = tmp_path / "deep" / "data"
    shardwriter_dataset(data, [3, 3])
    odd = data / "..weird name?&=.tar"
    shutil.copy(data / "w-000000.tar", odd)
    listing = tmp_path / "list.txt"
    listing.write_text(f"deep/data/w-000000.tar\n../{tmp_path.name}/deep/data/w-000001.tar\n{odd}\n")
    out = tmp_path / "out"
    summary = index(str(listing), "--out", str(out))
    assert summary["shards"] == 3 and summary["samples"] == 9
    written = [p for p in tmp_path.rglob("*") if p.is_file() and not str(p).startswith(str(out))]
    assert sorted(p.name for p in written) == sorted(
        ["..weird name?&=.tar", "list.txt", "w-000000.tar", "w-000001.tar"]
    )
    sidecars = sorted(p.name for p in (out / "sidecars").iterdir())
    assert len(sidecars) == 3 and all("/" not in n and not n.startswith(".") for n in sidecars)
    assert len(list(ShardDataset(out, decode=False))) == 9


def test_a_packed_datasets_own_index_is_never_replaced(tmp_path):
    from tests.conftest import write_dataset

    root = write_dataset(tmp_path / "packed", [3, 4]).parent
    before = (root / INDEX_NAME).read_bytes()
    done = subprocess.run([SHARDSTREAM, "index", str(root)], capture_output=True, text=True)
    assert done.returncode == 1 and "--out" in done.stderr
    assert (root / INDEX_NAME).read_bytes() == before
    summary = index(str(root), "--out", str(tmp_path / "elsewhere"))
    assert summary["samples"] == 7
    # The same offsets as the packer wrote: one definition of a sample's span.
    for tar in sorted(root.glob("*.tar")):
        from shardstream.format.sidecars import offsets_sidecar

        named = os.path.relpath(tar.resolve(), (tmp_path / "elsewhere").resolve())  # as the index names it
        derived = tmp_path / "elsewhere" / "sidecars" / offsets_sidecar(named)
        assert derived.read_bytes() == Path(f"{tar}.offsets").read_bytes()


def test_a_shard_changed_since_its_journal_line_is_scanned_again(tmp_path):
    data = tmp_path / "wds"
    shardwriter_dataset(data, [5, 5, 5, 5])
    out = tmp_path / "out"
    index(str(data), "--out", str(out), "--part", "1/2")  # shards 0 and 1 journaled
    replacement = tmp_path / "other"
    shardwriter_dataset(replacement, [9])
    shutil.copy(replacement / "w-000000.tar", data / "w-000000.tar")  # shard 0 now holds 9 samples
    summary = index(str(data), "--out", str(out))
    assert summary["scanned"] == 3 and summary["samples"] == 9 + 15
