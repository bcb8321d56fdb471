"""A pack in parts with S3 (moto on 127.0.0.1) as media source and as OUTDIR: the local run's bytes."""

from __future__ import annotations

import json
import multiprocessing.forkserver
import os

import pytest
from typer.testing import CliRunner

from packer import PackOptions
from packer.cluster import pack_in_parts
from shardstream_cli import app
from streamer import ShardDataset
from tests.cluster.corpus import digests, make_corpus

pytest_plugins = ["tests.servers"]
runner = CliRunner()
ROWS = 40


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("corpus"))


def _download(bucket, url: str, folder):
    folder.mkdir()
    prefix = url.removeprefix("s3://")
    for key in bucket.fs.find(prefix):
        bucket.fs.get_file(key, str(folder / key.rsplit("/", 1)[-1]))
    return folder


def test_media_and_outdir_on_s3_give_the_local_shards_and_read_back_once(
    corpus, s3_bucket, tmp_path, monkeypatch
):
    monkeypatch.setenv("SHARDSTREAM_SCRATCH", str(tmp_path / "scratch"))
    # The loader pool's forkserver keeps the environment of its start, which an earlier test may have
    # made before moto's settings existed: a fresh one, as a new process would have.
    multiprocessing.forkserver._forkserver._stop()  # type: ignore[attr-defined]
    media = s3_bucket.upload(corpus.root / "img", "parts/media/img").removesuffix("/img")
    local = tmp_path / "local"
    pack_in_parts(corpus.manifest, local, PackOptions(max_count=9), partition_rows=ROWS)
    out = s3_bucket.url("parts/out")
    summary = pack_in_parts(
        corpus.manifest, out, PackOptions(max_count=9, media_root=media, workers=2), partition_rows=ROWS
    )
    assert summary.index == f"{out}/shardstream-index.json"
    assert summary.rejects == f"{out}/shardstream-rejects.jsonl"
    got = digests(_download(s3_bucket, out, tmp_path / "got"))
    want = digests(local)
    shards = {
        name for name in want if name.endswith((".tar", ".offsets")) or name.startswith("shardstream-keys")
    }
    assert {n: got[n] for n in shards} == {n: want[n] for n in shards}
    assert set(got) == set(want)  # nothing else left: no parts, no plan
    index = json.loads((tmp_path / "got" / "shardstream-index.json").read_text())
    local_index = json.loads((local / "shardstream-index.json").read_text())
    assert index["options"].pop("media_root") == media and local_index["options"].pop("media_root") is None
    assert index == local_index
    rejects = (tmp_path / "got" / "shardstream-rejects.jsonl").read_text()
    assert rejects.count('"missing"') == 4 and f"{media}/img/7.png" in rejects
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in rejects
    assert not any((tmp_path / "scratch").rglob("*.tar"))  # parts packed in scratch, uploaded, removed
    keys = [s["__key__"] for s in ShardDataset(f"{out}/shardstream-index.json", shuffle=False, decode=False)]
    assert sorted(keys) == sorted(corpus.good_keys)

    # The same by hand (a SLURM array on machines without a shared filesystem): the same objects.
    hand = s3_bucket.url("parts/hand")
    options = ["--max-count", "9", "--partition-rows", str(ROWS), "--media-root", media]
    planned = runner.invoke(app, ["pack", "plan", str(corpus.manifest), hand, *options])
    assert planned.exit_code == 0, planned.output
    for number in (2, 0, 3, 1):
        assert runner.invoke(app, ["pack", "part", hand, "--part", str(number)]).exit_code == 0
    committed = runner.invoke(app, ["pack", "commit", hand, "--json"])
    assert committed.exit_code == 0, committed.output
    assert digests(_download(s3_bucket, hand, tmp_path / "hand")) == got
    # A pack already committed there is refused without --overwrite, and --resume finds it finished.
    again = runner.invoke(app, ["pack", str(corpus.manifest), hand, *options])
    assert again.exit_code == 1 and "already holds shards or an index" in again.output
