"""The one URL rule, asked by every package: a file:// URL is a local file to the streamer, the indexer,
verify and the packer alike; pipe: is a command; a one-letter scheme is a Windows drive."""

from __future__ import annotations

import pytest

from packer.sources.remote import join_media
from shardstream.format.verify import check_dataset
from shardstream.indexer.sources import resolve_source
from shardstream.io.urls import is_remote, join_url, local_path, scheme_of
from streamer import ShardDataset
from tests.conftest import write_dataset


@pytest.mark.parametrize(
    ("url", "scheme", "remote"),
    [
        ("data/train-000000.tar", "file", False),
        ("/abs/train.tar", "file", False),
        ("file:///abs/train.tar", "file", False),
        ("C:/data/train.tar", "file", False),
        ("pipe:curl -s https://host/a.tar", "pipe", False),
        ("https://host/a.tar", "https", True),
        ("s3://bucket/a.tar", "s3", True),
        ("hf://datasets/org/name/a.tar", "hf", True),
        ("git+https://host/a.tar", "git+https", True),
    ],
)
def test_one_rule_for_schemes(url, scheme, remote):
    assert scheme_of(url) == scheme
    assert is_remote(url) is remote


def test_local_paths_and_names_beside_others():
    assert local_path("file:///abs/train.tar") == "/abs/train.tar"
    assert local_path("rel/train.tar") == "rel/train.tar"
    assert join_url("s3://b/data/index.json", "a.tar") == "s3://b/data/a.tar"
    assert join_url("/data/index.json", "a.tar") == "/data/a.tar"
    assert join_url("/data/index.json", "s3://other/a.tar") == "s3://other/a.tar"


def test_every_package_reads_a_file_url_as_the_local_file(tmp_path):
    index = write_dataset(tmp_path / "d", [5, 4], prefix="d")
    url = f"file://{index}"
    assert len(list(ShardDataset(url, decode=False, shuffle=False))) == 9
    source = resolve_source(f"file://{tmp_path / 'd'}")
    assert source.home is not None and len(source.urls) == 2
    assert check_dataset(index).problems == []
    text = index.read_text()
    for name in ("d-000000.tar", "d-000001.tar"):  # shards named by file:// URL are verified, not skipped
        text = text.replace(f'["{name}"', f'["file://{index.parent / name}"')
    index.write_text(text)
    verified = check_dataset(index)
    assert verified.problems == [] and len(verified.shards) == 2
    assert join_media(f"file://{tmp_path}", "a.jpg") == str(tmp_path / "a.jpg")
    assert join_media(str(tmp_path), f"file://{tmp_path}/b.jpg") == f"{tmp_path}/b.jpg"
    assert join_media("s3://bucket/media", "a.jpg") == "s3://bucket/media/a.jpg"
