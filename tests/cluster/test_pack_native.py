"""A pack into s3:// written natively (obstore, moto on 127.0.0.1): the local pack's bytes, big shards in
multipart uploads, s3fs as the way back, and a refused write named without credentials."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from packer import PackOptions
from packer.cluster import pack_in_parts
from packer.cluster.nativestore import NativeStore
from packer.cluster.store import FsspecStore, open_store
from shardstream.errors import PackError
from shardstream.io.objstoreoptions import ObjectStoreOptions
from tests.servers.s3 import SECRET_KEY, S3Bucket

pytest_plugins = ["tests.servers"]
BLOB = 3 << 20  # each record's payload: a shard of four is over the 8 MiB part size


def _manifest(folder, records: int = 8):
    folder.mkdir()
    with open(folder / "m.jsonl", "w") as handle:
        for i in range(records):
            data = hashlib.sha256(str(i).encode()).hexdigest() * (BLOB // 64)
            handle.write(json.dumps({"id": f"k{i:03d}", "txt": data}) + "\n")
    return folder / "m.jsonl"


def _objects(bucket: S3Bucket, url: str) -> dict[str, bytes]:
    prefix = url.removeprefix("s3://")
    return {key.rsplit("/", 1)[-1]: bucket.fs.cat_file(key) for key in bucket.fs.find(prefix)}


def test_a_native_pack_writes_the_local_bytes_and_uploads_big_shards_in_parts(
    s3_bucket, tmp_path, monkeypatch
):
    monkeypatch.setenv("SHARDSTREAM_SCRATCH", str(tmp_path / "scratch"))
    manifest = _manifest(tmp_path / "src")
    options = PackOptions(max_count=4, max_size=1 << 30)
    local = tmp_path / "local"
    pack_in_parts(manifest, local, options, partition_rows=4)
    out = s3_bucket.url("native/out")
    assert isinstance(open_store(out), NativeStore)
    pack_in_parts(manifest, out, options, partition_rows=4)
    got = _objects(s3_bucket, out)
    want = {path.name: path.read_bytes() for path in local.iterdir() if path.is_file()}
    assert got.keys() == want.keys()
    assert {name: hashlib.sha256(data).hexdigest() for name, data in got.items()} == {
        name: hashlib.sha256(data).hexdigest() for name, data in want.items()
    }
    assert all(len(got[name]) > 8 << 20 for name in got if name.endswith(".tar"))  # parts went up in pieces


def test_s3fs_is_the_way_back(s3_bucket, monkeypatch):
    monkeypatch.setenv("SHARDSTREAM_S3_CLIENT", "s3fs")
    assert isinstance(open_store(s3_bucket.url("native/back")), FsspecStore)
    monkeypatch.delenv("SHARDSTREAM_S3_CLIENT")
    assert isinstance(open_store(s3_bucket.url("native/back")), NativeStore)


def test_a_store_lists_copies_and_removes_what_it_wrote(s3_bucket, tmp_path):
    store = NativeStore(s3_bucket.url("native/ops"), ObjectStoreOptions(part_size=5 << 20))
    assert store.names() == [] and store.read("nothing") is None and not store.exists("nothing")
    source = tmp_path / "big.bin"
    source.write_bytes(os.urandom(11 << 20))
    store.put(source, "parts/0/big.bin")
    # Over the part size: a multipart upload, to which S3 gives an ETag "<md5 of the parts' md5s>-<parts>".
    etag = s3_bucket.fs.info(f"{s3_bucket.name}/native/ops/parts/0/big.bin")["ETag"]
    assert etag.strip('"').endswith("-3"), etag
    store.write("parts/0/done.json", b"{}")
    store.publish("parts/0/big.bin", "big.bin")
    assert store.names() == ["big.bin", "parts"]
    assert store.fetch("big.bin").read_bytes() == source.read_bytes()
    with pytest.raises(PackError, match=r"parts/9/none\.bin: missing"):
        store.publish("parts/9/none.bin", "none.bin")
    store.remove("parts", first="0/done.json")
    assert store.names() == ["big.bin"]
    store.delete("big.bin")
    store.delete("big.bin")  # already gone: fine
    assert store.names() == []


def test_a_refused_write_names_the_url_without_credentials(s3_bucket, monkeypatch):
    settings = pytest.importorskip("moto.settings")
    store = NativeStore(s3_bucket.url("native/denied"), ObjectStoreOptions(retries=0))
    monkeypatch.setattr(settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # moto's server runs in this process
    with pytest.raises(PackError) as caught:
        store.write("shardstream-index.json", b"{}")
    text = str(caught.value)
    assert "s3://shardstream-test/native/denied/shardstream-index.json: cannot write" in text
    assert "gave up" not in text  # a refusal is not retried
    assert SECRET_KEY not in text and os.environ["AWS_ACCESS_KEY_ID"] not in text
