"""A pack in parts (plan -> parts -> commit) run locally and by hand: the same bytes, each sample once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time

import pytest
from typer.testing import CliRunner

from packer import PackOptions, verify_dataset
from packer.cluster import commit, make_plan, pack_in_parts, run_part
from packer.cluster.part import part_done
from packer.cluster.plan import PARTS_DIR_NAME, part_dir
from shardstream.errors import PackError
from shardstream.format import BracePattern, DatasetIndex, shard_digits, shard_name, shard_pattern
from shardstream.format.constants import JOURNAL_NAME
from shardstream_cli import app
from tests.cluster.corpus import DUPLICATE, RECORDS, HeldImage, digests, make_corpus, read_keys, rejects

runner = CliRunner()
OPTIONS = PackOptions(max_count=9)
ROWS = 40


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    summary = pack_in_parts(corpus.manifest, out, OPTIONS, partition_rows=ROWS)
    assert summary.samples == len(corpus.good_keys)
    return out, digests(out)


def test_local_parts_give_a_dataset_that_verifies_and_reads_every_sample_once(corpus, reference):
    out, found = reference
    assert not any(name.startswith(".") for name in found) and not (out / PARTS_DIR_NAME).exists()
    assert verify_dataset(out / "shardstream-index.json") == []
    assert sorted(read_keys(out)) == sorted(corpus.good_keys)
    index = DatasetIndex.load(out / "shardstream-index.json")
    assert index.options["partition_rows"] == ROWS
    # Each part ends its last shard early: part 0 is 40 records less one missing file, in 9-sample shards.
    assert [s.samples for s in index.shards][:5] == [9, 9, 9, 9, 3]
    reported = rejects(out)
    # Record numbers are global, though each part reads from its own byte offset.
    missing = {r["source"].rsplit(":", 1)[1] for r in reported if r["kind"] == "missing"}
    assert missing == {"record 7", "record 44", "record 45", "record 102"}
    assert [r["source"].rsplit(":", 1)[1] for r in reported if r["kind"] == "bad-record"] == ["record 61"]
    duplicate = [r for r in reported if r["kind"] == "duplicate-key-across-shards"]
    assert [r["source"] for r in duplicate] == [DUPLICATE[0]]


def test_more_workers_and_the_steps_by_hand_give_the_same_bytes(corpus, reference, tmp_path):
    pack_in_parts(corpus.manifest, tmp_path / "w2", PackOptions(max_count=9, workers=2), partition_rows=ROWS)
    assert digests(tmp_path / "w2") == reference[1]
    hand = tmp_path / "hand"
    planned = runner.invoke(
        app, ["pack", "plan", str(corpus.manifest), str(hand), "--max-count", "9", "--partition-rows", "40"]
    )
    assert planned.exit_code == 0, planned.output
    for number in (3, 1, 0, 2):  # any order, any machine
        done = runner.invoke(app, ["pack", "part", str(hand), "--part", str(number)])
        assert done.exit_code == 0, done.output
    # Again: a finished part is left alone (a requeued array task).
    assert runner.invoke(app, ["pack", "part", str(hand)], env={"SLURM_ARRAY_TASK_ID": "2"}).exit_code == 0
    committed = runner.invoke(app, ["pack", "commit", str(hand), "--json"])
    assert committed.exit_code == 0, committed.output
    assert digests(hand) == reference[1]
    again = runner.invoke(app, ["pack", "commit", str(hand)])
    assert again.exit_code == 0 and digests(hand) == reference[1]


def test_the_pack_command_runs_in_parts_with_partition_rows(corpus, reference, tmp_path):
    result = runner.invoke(
        app, ["pack", str(corpus.manifest), str(tmp_path), "--max-count", "9", "--partition-rows", "40", "-q"]
    )
    assert result.exit_code == 0, result.output
    assert digests(tmp_path) == reference[1]


def test_commit_before_every_part_is_done_names_the_missing_parts(corpus, tmp_path):
    make_plan(corpus.manifest, OPTIONS, ROWS).save(tmp_path)
    run_part(tmp_path, 1)
    with pytest.raises(PackError, match=r"3 of 4 parts are not done \(0, 2, 3\)"):
        commit(tmp_path)
    assert runner.invoke(app, ["pack", "part", str(tmp_path)]).exit_code == 2  # no --part, no SLURM id


# Renames in a commit: shard and sidecar per shard, then the rejects, the index, the parts folder.
@pytest.mark.parametrize("crash_at", [0, 1, 5, 12, -3, -2, -1])
def test_a_commit_stopped_anywhere_is_finished_by_running_it_again(
    corpus, reference, tmp_path, monkeypatch, crash_at
):
    make_plan(corpus.manifest, OPTIONS, ROWS).save(tmp_path)
    for number in range(4):
        run_part(tmp_path, number)
    shards = len(DatasetIndex.load(reference[0] / "shardstream-index.json").shards)
    crash_at = crash_at if crash_at >= 0 else 2 * shards + 3 + crash_at
    real, calls = os.replace, []

    def replace_then_crash(src, dst):
        calls.append(dst)
        if len(calls) > crash_at:
            raise KeyboardInterrupt  # what a kill leaves: every rename before it done, none after
        real(src, dst)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", replace_then_crash)
        with pytest.raises(KeyboardInterrupt):
            commit(tmp_path)
    assert len(calls) > crash_at  # the crash happened inside the commit, at the rename asked for
    commit(tmp_path)
    assert digests(tmp_path) == reference[1]


def test_resume_continues_and_refuses_other_options(corpus, reference, tmp_path):
    make_plan(corpus.manifest, OPTIONS, ROWS).save(tmp_path)
    run_part(tmp_path, 0)
    with pytest.raises(PackError, match="unfinished pack in parts"):
        pack_in_parts(corpus.manifest, tmp_path, OPTIONS, partition_rows=ROWS)
    with pytest.raises(PackError, match=r"different options \(partition_rows: 40 -> 30\)"):
        pack_in_parts(corpus.manifest, tmp_path, PackOptions(max_count=9, resume=True), partition_rows=30)
    resume = PackOptions(max_count=9, resume=True)
    summary = pack_in_parts(corpus.manifest, tmp_path, resume, partition_rows=ROWS)
    assert summary.resumed_from_shard == 5
    assert digests(tmp_path) == reference[1]
    # Finished: --resume again is a no-op, a plain pack refuses, --overwrite starts over.
    pack_in_parts(corpus.manifest, tmp_path, PackOptions(max_count=9, resume=True), partition_rows=ROWS)
    with pytest.raises(PackError, match="already holds shards or an index"):
        pack_in_parts(corpus.manifest, tmp_path, OPTIONS, partition_rows=ROWS)
    pack_in_parts(corpus.manifest, tmp_path, PackOptions(max_count=9, overwrite=True), partition_rows=ROWS)
    assert digests(tmp_path) == reference[1]


def test_a_second_run_of_a_part_being_packed_refuses_naming_the_first(tmp_path):
    # Two real packers of one part, the first held mid-part (a shard published, its next image not served).
    held = HeldImage(20)  # part 0's second load batch: its first one (records 0..15) makes shard 0
    corpus = make_corpus(tmp_path / "corpus", held=held)
    out = tmp_path / "out"
    make_plan(corpus.manifest, OPTIONS, ROWS).save(out)
    command = [sys.executable, "-m", "shardstream_cli", "pack", "part", str(out), "--part", "0"]
    journal = part_dir(out, 0) / JOURNAL_NAME
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = None
    try:
        deadline = time.monotonic() + 60
        while not (journal.exists() and journal.read_text().count("\n") >= 2) and first.poll() is None:
            assert time.monotonic() < deadline, "the first run never published its first shard"
            time.sleep(0.05)
        assert first.poll() is None, first.communicate()
        second = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, err = second.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the second run did not refuse: it is packing the part the first one holds")
        assert second.returncode != 0
        assert f"process {first.pid} is packing this part right now" in err, err
        held.serve()
        assert first.wait(timeout=60) == 0, first.communicate()
    finally:
        held.stop()
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    done = part_done(out, 0)
    assert done is not None and done.samples == 39  # records 0..39 less the missing record 7


def test_a_key_in_two_parts_is_reported_under_the_final_shard_names(corpus, reference):
    out, _ = reference
    holders = []
    for path in sorted(out.glob("*.tar")):
        with tarfile.open(path) as shard:
            if f"{DUPLICATE[0]}.json" in shard.getnames():
                holders.append(path.name)
    assert len(holders) == 2  # records 3 and 97: parts 0 and 2, whose own first shards share one name
    (duplicate,) = [r for r in rejects(out) if r["kind"] == "duplicate-key-across-shards"]
    assert duplicate["reason"] == f"key is in 2 shards: {', '.join(holders)} (kept in all)"


def test_a_source_changed_since_the_plan_is_refused(corpus, tmp_path):
    manifest = tmp_path / "m.jsonl"
    lines = corpus.manifest.read_text().splitlines(keepends=True)
    manifest.write_text("".join(lines))
    make_plan(manifest, PackOptions(max_count=9, media_root=str(corpus.root)), ROWS).save(tmp_path / "out")
    manifest.write_text("".join(lines[:-3]))
    with pytest.raises(PackError, match="part 2 should hold 40 records or items but read 38"):
        run_part(tmp_path / "out", 2)


def test_fallback_keys_are_global_record_numbers(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(f'{{"text": "t{i}"}}\n' for i in range(25)))
    pack_in_parts(manifest, tmp_path / "out", OPTIONS, partition_rows=10)
    assert read_keys(tmp_path / "out") == [f"{i:09d}" for i in range(25)]


@pytest.mark.parametrize("kind", ["folder", "csv", "parquet", "json"])
def test_other_sources_give_the_same_bytes_with_any_workers(corpus, tmp_path, kind):
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = corpus.manifest.read_text().splitlines()
    records = [json.loads(line) for line in lines if line.startswith('{"')]
    if kind == "folder":
        source = tmp_path / "tree"
        for i, record in enumerate(records[:60]):
            folder = source / f"d{i % 4}" / ("deep" if i % 3 == 0 else "")
            folder.mkdir(parents=True, exist_ok=True)
            image = corpus.root / record["image"]
            if image.exists():
                shutil.copy(image, folder / f"{record['id']}.png")
            (folder / f"{record['id']}.txt").write_text(record["caption"])
        (source / "d1" / ".hidden").write_text("x")
        (source / "d2" / "noext").write_text("x")
    elif kind == "csv":
        source = tmp_path / "m.csv"
        rows = "".join(f"{r['id']},{r['image']},{r['caption']}\n" for r in records)
        source.write_text("id,image,caption\n" + rows)
    elif kind == "parquet":
        source = tmp_path / "m.parquet"
        pq.write_table(pa.Table.from_pylist(records), source, row_group_size=16)
    else:
        source = tmp_path / "m.json"
        source.write_text(json.dumps(records))
    options = dict(max_count=7, media_root=str(corpus.root))
    one = pack_in_parts(source, tmp_path / "one", PackOptions(**options), partition_rows=25)
    two = pack_in_parts(source, tmp_path / "two", PackOptions(**options, workers=2), partition_rows=25)
    assert digests(tmp_path / "one") == digests(tmp_path / "two")
    assert one.samples == two.samples > 0
    assert verify_dataset(tmp_path / "one" / "shardstream-index.json") == []
    assert len(read_keys(tmp_path / "one")) == one.samples


def test_shard_names_widen_past_a_million_and_the_pattern_agrees():
    assert shard_digits(1_000_000) == 6 and shard_digits(1_000_001) == 7
    assert shard_name("t", 999_999, shard_digits(1_000_000)) == "t-999999.tar"
    pattern = shard_pattern("t", 1_000_001)
    assert pattern == "t-{0000000..1000000}.tar"
    names = BracePattern(pattern)
    assert len(names) == 1_000_001 and names[0] == "t-0000000.tar" and names[-1] == "t-1000000.tar"
    assert RECORDS == 120
