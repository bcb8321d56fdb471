"""What `shardstream index` takes as SOURCE, and the sidecar names it derives, which stay in their folder."""

from __future__ import annotations

import os
from pathlib import Path

import fsspec
import pytest

from shardstream.format.sidecars import offsets_sidecar, sidecar_stem
from shardstream.indexer import IndexOptions, index_source, resolve_source
from shardstream.io.openers import open_stream
from streamer import ShardDataset, ShardMap
from tests.indexer.builders import shardwriter_dataset


@pytest.mark.parametrize(
    "name",
    [
        "../../etc/passwd",
        "/abs/path/x.tar",
        "https://h/a/b.tar?sig=1&x=/../../y",
        "..",
        ".hidden.tar",
        "a b\\c:d*.tar",
        "é" * 300 + ".tar",
        "https://h/",
        "x/",
    ],
)
def test_derived_sidecar_names_are_one_plain_file_name(tmp_path, name):
    derived = offsets_sidecar(name)
    assert "/" not in derived and "\\" not in derived and not derived.startswith(".")
    assert all(c.isalnum() or c in "._-" for c in derived) and len(derived) < 120
    assert (tmp_path / derived).resolve().parent == tmp_path.resolve()


def test_names_that_clean_up_alike_still_get_their_own_sidecars():
    assert sidecar_stem("a/x?.tar") != sidecar_stem("b/x?.tar") != sidecar_stem("a/x_.tar")


def test_a_folder_is_walked_sorted_without_hidden_files(tmp_path):
    shardwriter_dataset(tmp_path / "b", [2])
    shardwriter_dataset(tmp_path / "a", [2, 2])
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "x.tar").write_bytes(b"")
    (tmp_path / "a" / "notes.txt").write_text("not a shard")
    source = resolve_source(str(tmp_path))
    assert [os.path.relpath(u, tmp_path) for u in source.urls] == [
        "a/w-000000.tar",
        "a/w-000001.tar",
        "b/w-000000.tar",
    ]


def test_bad_sources_name_the_fix(tmp_path):
    with pytest.raises(ValueError, match="not a folder, a shard, a list file or a brace pattern"):
        resolve_source(str(tmp_path / "nothing-here"))
    with pytest.raises(ValueError, match="brace pattern"):
        resolve_source("https://host/folder/")
    listing = tmp_path / "list.txt"
    listing.write_text("# nothing\n\n")
    with pytest.raises(ValueError, match="names no shards"):
        resolve_source(str(listing))
    with pytest.raises(ValueError, match="--out"):
        index_source("https://127.0.0.1:9/x-{0..1}.tar", IndexOptions())


def _open(url: str):
    return open_stream(url)


def test_an_fsspec_folder_is_listed_and_streamed(tmp_path):
    local = tmp_path / "wds"
    samples = shardwriter_dataset(local, [4, 6])
    fs = fsspec.filesystem("memory")
    for tar in sorted(local.glob("*.tar")):
        fs.pipe(f"/idx-test/data/{tar.name}", tar.read_bytes())
    try:
        out = tmp_path / "out"
        summary = index_source("memory://idx-test/data/", IndexOptions(out=out, open_remote=_open))
        assert summary.samples == 10 and summary.shards == 2 and not summary.problems
        read = {s["__key__"]: s for s in ShardDataset(out, decode=False)}
        assert {k: v["jpg"] for k, v in read.items()} == {k: v["jpg"] for k, v in samples.items()}
        key = sorted(samples)[7]
        assert ShardMap(out, decode=False).get(key)["json"] == samples[key]["json"]
        assert not Path(out / "sidecars").is_symlink() and len(list((out / "sidecars").iterdir())) == 2
    finally:
        fs.rm("/idx-test", recursive=True)


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("a/train-000001.tar", "train-000001.tar-0f5a1d16ea91"),
        ("https://h/a/train-000001.tar?x=1", "train-000001.tar-8e2fa4cbb10d"),
        ("..x y.tar", "x_y.tar-84a7aa73b474"),
        ("https://h/", "shard-29aec5d72901"),
        ("é.tar", "_.tar-4509dba8dc48"),
        ("a\\b.tar", "b.tar-867cd6b4b03f"),
        ("x" * 100 + ".tar", "x" * 80 + "-12edfa3c614e"),
        ("a/x?y.tar", "x_y.tar-32488e90334b"),  # a path, not a URL: "?" is part of the name
        ("a/b/", "b-ff3b4c420a39"),
        ("a/X/", "X-0b5393b56c4c"),
        ("X.tar", "X.tar-4df0a1e94a0d"),
        ("\udcff.tar", "_.tar-5fcd958d7bd1"),  # a file name that is not UTF-8, as os.listdir gives it
    ],
)
def test_sidecar_stems_are_pinned(name, stem):
    # Pinned: an index written today names its sidecars this way, so a reader must derive the same names.
    assert sidecar_stem(name) == stem and offsets_sidecar(name) == stem + ".offsets"
