"""Manifests: .ndjson is JSONL by its name; keys come from id, else key, else the record number."""

from __future__ import annotations

import json

import pytest

from packer import PackError, PackOptions, pack
from tests.conftest import read_with_tarfile, shard_paths


@pytest.fixture
def media(tmp_path):
    folder = tmp_path / "media"
    folder.mkdir()
    for name in ("a.png", "b.jpg", "c.wav"):
        (folder / name).write_bytes(f"bytes of {name}".encode())
    return folder


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_ndjson_packs_exactly_as_jsonl(tmp_path, media):
    records = [{"id": "x1", "image": "a.png"}, {"id": "x2", "image": "b.jpg", "audio": "c.wav"}]
    jsonl = _write(media / "m.jsonl", records)
    ndjson = _write(media / "m.ndjson", records)
    (media / "upper.NDJSON").write_text(ndjson.read_text())
    got = {}
    for manifest in (jsonl, ndjson, media / "upper.NDJSON"):
        out = tmp_path / manifest.name
        summary = pack(manifest, out, PackOptions())
        assert summary.samples == 2 and summary.skipped == 0
        got[manifest.name] = [p.read_bytes() for p in shard_paths(out)]
    assert got["m.ndjson"] == got["m.jsonl"] == got["upper.NDJSON"]
    samples = read_with_tarfile(shard_paths(tmp_path / "m.ndjson"))
    json_member = json.dumps(records[1]).encode()
    assert samples["x2"] == {"jpg": b"bytes of b.jpg", "wav": b"bytes of c.wav", "json": json_member}


def test_unknown_suffix_still_refused(tmp_path, media):
    manifest = _write(media / "m.ndjsonx", [{"id": "x1", "image": "a.png"}])
    with pytest.raises(PackError, match=r"\.ndjson.*--manifest-format"):
        pack(manifest, tmp_path / "out", PackOptions())


def test_key_field_falls_back_from_id_to_key_to_the_record_number(tmp_path, media):
    records = [
        {"key": "by-key", "image": "a.png"},  # no id: the key field names the sample
        {"id": "by-id", "key": "ignored", "image": "a.png"},  # id wins over key
        {"image": "b.jpg"},  # neither: the record number, zero-padded
        {"key": 7, "image": "a.png"},  # an integer key is its decimal text
    ]
    manifest = _write(media / "m.jsonl", records)
    summary = pack(manifest, tmp_path / "out", PackOptions())
    assert summary.samples == 4 and summary.skipped == 0
    samples = read_with_tarfile(shard_paths(tmp_path / "out"))
    assert set(samples) == {"by-key", "by-id", "000000002", "7"}
    assert json.loads(samples["by-key"]["json"]) == records[0]
    assert samples["000000002"]["jpg"] == b"bytes of b.jpg"


def test_a_bad_key_in_the_key_field_rejects_the_record(tmp_path, media):
    manifest = _write(
        media / "m.jsonl",
        [{"key": "ok", "image": "a.png"}, {"key": "a.b", "image": "a.png"}, {"key": ["x"], "image": "a.png"}],
    )
    summary = pack(manifest, tmp_path / "out", PackOptions())
    assert summary.samples == 1 and summary.rejected == {"bad-key": 2}
    lines = (tmp_path / "out" / "shardstream-rejects.jsonl").read_text().splitlines()
    rejects = [json.loads(line) for line in lines]
    assert [r["source"].rsplit(" ", 1)[1] for r in rejects] == ["1", "2"]
    assert "'a.b'" in rejects[0]["reason"] and "not list" in rejects[1]["reason"]
