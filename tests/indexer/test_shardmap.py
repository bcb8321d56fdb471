"""ShardMap: [i] and .get(key) give the bytes a full read gives, locally and over nginx, one Range request
per sample; unknown positions and keys are IndexError and KeyError."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from shardstream.errors import FormatError
from streamer import HttpOptions, ShardDataset, ShardMap
from tests.conftest import write_dataset
from tests.indexer.builders import gnu_tar_dataset, shardwriter_dataset
from tests.servers import nginx

SHARDSTREAM = str(Path(sys.executable).with_name("shardstream"))
FAST = HttpOptions(connect_timeout=2, read_timeout=5, retries=1, backoff=0.01)


def index(*args: str) -> dict:
    done = subprocess.run(
        [SHARDSTREAM, "index", *args, "--json", "--quiet"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> tuple[Path, list[dict]]:
    """ShardWriter shards with a gap, indexed beside themselves; every sample in index order, read whole."""
    root = tmp_path_factory.mktemp("map") / "wds"
    shardwriter_dataset(root, [13, 1, 20, 7, 9], gaps=(3,))
    index(str(root))
    in_order = list(ShardDataset(root, decode=False, shuffle=False))
    return root, in_order


def test_every_position_and_key_equals_a_full_read(indexed):
    root, in_order = indexed
    samples = ShardMap(root, decode=False)
    assert len(samples) == len(in_order) == 43
    for i in [*range(len(in_order)), -1, -len(in_order)]:
        assert samples[i] == in_order[i]
    for expected in in_order:
        assert samples.get(expected["__key__"]) == expected


def test_unknown_positions_and_keys_are_clear_errors(indexed):
    root, in_order = indexed
    samples = ShardMap(root, decode=False)
    for bad in (len(in_order), -len(in_order) - 1, 10**12):
        with pytest.raises(IndexError, match="out of range"):
            samples[bad]
    for key in ("s9999999", "", "s000000", in_order[0]["__key__"] + "x", "a\nb"):
        with pytest.raises(KeyError):
            samples.get(key)
    with pytest.raises(TypeError):
        samples["s0000000"]  # type: ignore[index]


def test_decoding_and_fields_as_in_shard_dataset(indexed):
    root, in_order = indexed
    labels = ShardMap(root, fields=["cls"])
    assert labels[5] == {
        "__key__": in_order[5]["__key__"],
        "__url__": in_order[5]["__url__"],
        "cls": int(in_order[5]["cls"]),
    }


def test_in_dataloader_workers(indexed):
    root, in_order = indexed
    loader = DataLoader(ShardMap(root, decode=False), batch_size=None, num_workers=2, shuffle=True)
    assert sorted(s["__key__"] for s in loader) == sorted(s["__key__"] for s in in_order)


def test_a_packer_index_without_key_file_reads_by_position_and_says_how_to_get_keys(tmp_path):
    root = write_dataset(tmp_path / "packed", [4, 6]).parent
    samples = ShardMap(root, decode=False)
    in_order = list(ShardDataset(root, decode=False, shuffle=False))
    assert len(samples) == 10 and samples[7]["__key__"] == in_order[7]["__key__"]
    with pytest.raises(FormatError, match="shardstream index"):
        samples.get("anything")
    with pytest.raises(ValueError, match="not an index"):
        ShardMap(str(root / "train-{000000..000001}.tar"))


def test_gnu_tar_samples_by_key(tmp_path):
    expected = gnu_tar_dataset(tmp_path, "g", 12)
    index(str(tmp_path / "g.tar"))
    samples = ShardMap(tmp_path, decode=False)
    for key, members in expected.items():
        got = samples.get(key)
        assert got["bin"] == members["bin"] and got["txt"] == members["txt"]


def test_over_nginx_one_range_request_per_sample(indexed, tmp_path):
    root, in_order = indexed
    www = tmp_path / "www"
    shutil.copytree(root, www / "d")
    with nginx(www) as server:
        samples = ShardMap(f"{server.url}/d/shardstream-index.json", decode=False, http=FAST)
        picks = [3, 4, 5, 20, 21, 42, 0]  # shards 0, 2 and 4: each sidecar fetched once
        before = len(server.wait_requests(1))
        for i in picks:
            assert samples[i] == {**in_order[i], "__url__": samples[i]["__url__"]}
        log = server.wait_requests(before + 2 * len(picks) + 3)[before:]
        tars = [r for r in log if r.path.endswith(".tar")]
        sidecars = [r for r in log if r.path.endswith(".offsets")]
        assert len(tars) == 2 * len(picks) and len(sidecars) == 3  # every [i] above ran twice
        assert all(r.range is not None and r.status == 206 for r in tars)
        # Bounded ranges: each answer is one sample's span (3 members, each pax + header + data: 6 KiB),
        # and the header after it (checked to start another key) unless the sample is its shard's last.
        assert {r.bytes_sent for r in tars} <= {6144, 6144 + 512} and 6144 + 512 in {
            r.bytes_sent for r in tars
        }
        # By key: one Range request into the key file, one for the sample.
        before = len(server.wait_requests(1))
        key = in_order[30]["__key__"]
        assert samples.get(key)["jpg"] == in_order[30]["jpg"]
        log = server.wait_requests(before + 3)[before:]
        ranged = [Path(r.path).name for r in log if r.range]
        assert ranged == ["shardstream-keys", "w-000004.tar"] or ranged == [
            "shardstream-keys",
            "w-000002.tar",
        ]


def test_index_of_remote_shards_over_nginx_equals_the_local_index(indexed, tmp_path):
    root, in_order = indexed
    www = tmp_path / "www"
    (www / "d").mkdir(parents=True)
    for tar in root.glob("*.tar"):
        shutil.copy(tar, www / "d" / tar.name)
    with nginx(www) as server:
        out = tmp_path / "remote-index"
        summary = index(f"{server.url}/d/w-{{000000..000004}}.tar", "--out", str(out), "--workers", "2")
        assert summary["samples"] == len(in_order) and summary["skipped"] == {"missing-shard": 1}
        read = list(ShardDataset(out, decode=False, shuffle=False, http=FAST))
        assert [s["__key__"] for s in read] == [s["__key__"] for s in in_order]
        assert all(a["jpg"] == b["jpg"] for a, b in zip(read, in_order, strict=True))
        remote_map = ShardMap(out, decode=False, http=FAST)
        assert remote_map.get(in_order[17]["__key__"])["cls"] == in_order[17]["cls"]
    assert (out / "shardstream-keys").read_bytes() == (root / "shardstream-keys").read_bytes()


def test_credentials_in_shard_urls_never_reach_the_index(indexed, tmp_path):
    root = indexed[0]
    www = tmp_path / "www"
    (www / "d").mkdir(parents=True)
    shutil.copy(root / "w-000000.tar", www / "d" / "w-000000.tar")
    with nginx(www) as server:  # nginx ignores the user:password; the point is where it is written
        url = server.url.replace("://", "://alice:s3cret@") + "/d/w-{000000..000001}.tar"
        out = tmp_path / "idx"
        summary = index(url, "--out", str(out))
        assert summary["samples"] == 13 and summary["skipped"] == {"missing-shard": 1}
    written = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert b"s3cret" not in written and "s3cret" not in json.dumps(summary)
