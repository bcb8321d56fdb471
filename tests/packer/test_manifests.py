"""Manifest formats: JSONL, JSON array, CSV and Parquet give the same samples; key and media options work."""

from __future__ import annotations

import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from packer import PackError, PackOptions, pack
from tests.conftest import read_with_webdataset


@pytest.fixture
def records(tmp_path, corpus):
    lines = corpus.manifest.read_text().splitlines()[:6]
    base = corpus.manifest.parent
    out = []
    for line in lines:
        record = json.loads(line)
        flat = {"id": record["id"], "caption": f"caption of {record['id']}"}
        image = record.get("image") or record.get("images", [None])[0]
        flat["image"] = str(base / image) if image else ""
        out.append(flat)
    return out


def _samples(out, summary):
    return read_with_webdataset(str(out / summary.pattern))


def test_all_manifest_formats_give_the_same_samples(tmp_path, records):
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    array = tmp_path / "m.json"
    array.write_text(json.dumps(records, indent=1))
    table = tmp_path / "m.csv"
    with table.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    parquet = tmp_path / "m.parquet"
    pq.write_table(pa.Table.from_pylist(records), parquet, row_group_size=2)
    results = {}
    for manifest in (jsonl, array, table, parquet):
        out = tmp_path / f"out-{manifest.suffix[1:]}"
        summary = pack(manifest, out, PackOptions())
        assert summary.samples == len(records) and summary.skipped == 0
        results[manifest.suffix] = _samples(out, summary)
    reference = results[".jsonl"]
    assert set(reference) == {r["id"] for r in records}
    assert sum(len(v) for v in reference.values()) > len(records)  # media members, not only the json
    for suffix, samples in results.items():
        media = {k: {e: b for e, b in v.items() if e != "json"} for k, v in samples.items()}
        assert media == {k: {e: b for e, b in v.items() if e != "json"} for k, v in reference.items()}, suffix
        assert {k: json.loads(v["json"]) for k, v in samples.items()} == {r["id"]: r for r in records}


def test_key_field_media_field_and_record_numbers(tmp_path, records):
    for i, record in enumerate(records):
        record["uid"] = f"u{i}"
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "by-uid"
    summary = pack(jsonl, out, PackOptions(key_field="uid"))
    assert set(_samples(out, summary)) == {f"u{i}" for i in range(len(records))}
    no_ids = tmp_path / "noid.jsonl"
    no_ids.write_text("".join(json.dumps({"image": r["image"]}) + "\n" for r in records))
    out = tmp_path / "numbers"
    summary = pack(no_ids, out, PackOptions())
    assert sorted(_samples(out, summary)) == [f"{i:09d}" for i in range(len(records))]
    with_image = [r for r in records if r["image"]]
    for record in with_image:
        record["thumb"] = record["image"]  # same extension: a clash unless only "image" counts as media
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in with_image))
    out = tmp_path / "only-image"
    summary = pack(jsonl, out, PackOptions(media_fields=("image",)))
    assert summary.samples == len(with_image) and summary.skipped == 0
    assert all(len(sample) == 2 for sample in _samples(out, summary).values())  # the image and the json
    out = tmp_path / "caption-as-media"
    with pytest.raises(PackError, match=r"'caption'.*has no file extension"):
        pack(jsonl, out, PackOptions(media_fields=("caption",), strict=True))


def test_a_missing_key_field_rejects_the_record(tmp_path, records):
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(Exception, match="no field 'nope'"):
        pack(jsonl, tmp_path / "out", PackOptions(key_field="nope", strict=True))


def test_llava_record_with_several_images_audio_and_video(tmp_path, corpus):
    records = [json.loads(line) for line in corpus.manifest.read_text().splitlines()]
    with_list = next(r for r in records if "images" in r)
    out = tmp_path / "out"
    summary = pack(corpus.manifest, out, PackOptions())
    sample = _samples(out, summary)[with_list["id"]]
    for i, path in enumerate(with_list["images"]):
        ext = path.rsplit(".", 1)[1]
        assert sample[f"{i}.{ext}"] == (corpus.manifest.parent / path).read_bytes()
    assert json.loads(sample["json"]) == with_list
    assert any("audio" in r for r in records) and any("video" in r for r in records)
    assert {"wav", "mp4"} & set(summary.fields) or {"flac", "mp4"} & set(summary.fields)
