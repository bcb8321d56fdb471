"""Tables as shipped (HF `datasets` Parquet and save_to_disk Arrow) and Python records pack as they are."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
import wave
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image as PILImage
from typer.testing import CliRunner

import packer
from packer import PackError, PackOptions
from packer.cluster import pack_in_parts
from shardstream.mediatypes import sniff_extension
from shardstream_cli import app
from tests.cluster.corpus import digests, read_keys, rejects
from tests.conftest import read_with_webdataset

datasets = pytest.importorskip("datasets")
ROWS = 7
PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(24)


def _wav(path: Path, frames: int) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(bytes(range(256)) * (frames // 128))


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Path:
    """An HF dataset built from local files the way users build theirs, saved as Arrow and as Parquet."""
    root = tmp_path_factory.mktemp("hub")
    files = root / "files"
    files.mkdir()
    for i in range(ROWS):
        PILImage.new("RGB", (9 + i, 7), (30 * i, 5, 9)).save(files / f"{i}.jpg", quality=80)
        PILImage.new("RGB", (5, 5 + i), (1, 20 * i, 3)).save(files / f"{i}.png")
        _wav(files / f"{i}.wav", 400 + 128 * i)
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "image": datasets.Image(),
            "audio": datasets.Audio(),
            "images": datasets.List(datasets.Image()),
            "conversations": datasets.List(
                {"from": datasets.Value("string"), "value": datasets.Value("string")}
            ),
        }
    )
    columns = {
        "id": [f"row{i}" for i in range(ROWS)],
        "image": [str(files / f"{i}.jpg") for i in range(ROWS)],
        "audio": [str(files / f"{i}.wav") for i in range(ROWS)],
        "images": [
            [str(files / f"{i}.png"), str(files / f"{(i + 1) % ROWS}.jpg")][: 1 + i % 2] for i in range(ROWS)
        ],
        "conversations": [[{"from": "human", "value": f"what is {i}?"}, {"from": "gpt", "value": "é"}]]
        * ROWS,
    }
    built = datasets.Dataset.from_dict(columns, features=features)
    built.to_parquet(str(root / "paths.parquet"))  # `datasets` 5 keeps local files as paths here, no bytes
    built.save_to_disk(str(root / "arrow"))  # embeds the files' bytes, as push_to_hub does
    embedded = datasets.load_from_disk(str(root / "arrow"))
    (root / "parquet").mkdir()
    for n in range(2):  # two files, as the hub ships them: record numbers run on across them
        shard = embedded.shard(2, n, contiguous=True)
        shard.to_parquet(str(root / "parquet" / f"train-{n:05d}-of-00002.parquet"))
    (root / "parquet" / "README.md").write_text("# a dataset card\n")
    return root


def _rows(hub: Path) -> list[dict]:
    return datasets.load_from_disk(str(hub / "arrow")).with_format("arrow")[:].to_pylist()


def _members(outdir: Path) -> dict[str, bytes]:
    found = {}
    for shard in sorted(outdir.glob("*.tar")):
        with tarfile.open(shard) as tar:
            found.update({m.name: tar.extractfile(m).read() for m in tar.getmembers()})  # type: ignore[union-attr]
    return found


def _pack_cli(source: Path, outdir: Path, *more: str) -> None:
    result = CliRunner().invoke(app, ["pack", str(source), str(outdir), "-q", "--max-count", "3", *more])
    assert result.exit_code == 0, result.output


def test_hub_parquet_and_arrow_pack_with_every_member_the_embedded_bytes(hub, tmp_path):
    rows = _rows(hub)
    for kind in ("arrow", "parquet"):
        _pack_cli(hub / kind, tmp_path / kind)
        members = _members(tmp_path / kind)
        assert len(members) == sum(3 + len(r["images"]) for r in rows)  # jpg, wav, json + images
        for row in rows:
            key = row["id"]
            assert members[f"{key}.jpg"] == row["image"]["bytes"]
            assert members[f"{key}.wav"] == row["audio"]["bytes"]
            for i, item in enumerate(row["images"]):
                assert members[f"{key}.{i}.{item['path'].rsplit('.', 1)[1]}"] == item["bytes"]
            assert json.loads(members[f"{key}.json"]) == {
                "id": key,
                "image": {"path": row["image"]["path"]},
                "audio": {"path": row["audio"]["path"]},
                "images": [{"path": item["path"]} for item in row["images"]],
                "conversations": row["conversations"],
            }
        assert sorted(read_keys(tmp_path / kind)) == sorted(r["id"] for r in rows)
        theirs = read_with_webdataset(str(tmp_path / kind / "train-{000000..000002}.tar"))
        assert sorted(theirs) == sorted(r["id"] for r in rows)
    assert digests(tmp_path / "arrow").keys() == digests(tmp_path / "parquet").keys()
    shards = [name for name in digests(tmp_path / "arrow") if name.endswith(".tar")]
    assert [digests(tmp_path / "arrow")[s] for s in shards] == [
        digests(tmp_path / "parquet")[s] for s in shards
    ]


def test_structs_with_only_a_path_read_the_file_and_media_options_apply_to_embedded_bytes(hub, tmp_path):
    assert pq.read_table(hub / "paths.parquet").column("image")[0].as_py()["bytes"] is None
    _pack_cli(hub / "paths.parquet", tmp_path / "paths")
    _pack_cli(hub / "arrow", tmp_path / "arrow")
    by_path, embedded = _members(tmp_path / "paths"), _members(tmp_path / "arrow")
    media = sorted(name for name in embedded if not name.endswith(".json"))
    assert media == sorted(name for name in by_path if not name.endswith(".json"))
    assert all(by_path[name] == embedded[name] for name in media)
    _pack_cli(hub / "arrow", tmp_path / "small", "--image-max-side", "4", "--image-format", "png")
    small = _members(tmp_path / "small")
    assert sorted(name for name in small if name.endswith(".png")) == sorted(
        name.rsplit(".", 1)[0] + ".png" for name in media if not name.endswith(".wav")
    )
    for name, data in small.items():
        if name.endswith(".png"):
            assert max(PILImage.open(io.BytesIO(data)).size) <= 4, name


def test_pack_over_a_generator_and_datasets_gives_the_cli_shards(hub, tmp_path):
    _pack_cli(hub / "parquet", tmp_path / "cli")
    expected = {n: d for n, d in digests(tmp_path / "cli").items() if n.endswith(".tar")}
    options = PackOptions(max_count=3)
    loaded = datasets.load_from_disk(str(hub / "arrow"))  # decoding on: pack must read the stored bytes
    sources = {
        "generator": (row for row in _rows(hub)),
        "dataset": loaded,
        "iterable": loaded.to_iterable_dataset(),
        "parquet-dataset": datasets.Dataset.from_parquet(
            str(hub / "parquet" / "*.parquet"), cache_dir=str(tmp_path / "hf-cache")
        ),
    }
    for name, records in sources.items():
        summary = packer.pack(records, tmp_path / name, options)
        assert summary.samples == ROWS, name
        got = {n: d for n, d in digests(tmp_path / name).items() if n.endswith(".tar")}
        assert got == expected, name


def test_a_generator_resumes_by_reading_again_from_the_start(hub, tmp_path):
    rows = [{**row, "id": f"{row['id']}-{copy}"} for copy in range(6) for row in _rows(hub)]
    options = PackOptions(max_count=2)
    packer.pack(iter(rows), tmp_path / "whole", options)

    def breaks_after(n: int):
        yield from rows[:n]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        packer.pack(breaks_after(37), tmp_path / "resumed", options)
    published = len(list((tmp_path / "resumed").glob("*.tar")))
    assert 0 < published < len(rows) // 2
    summary = packer.pack(iter(rows), tmp_path / "resumed", PackOptions(max_count=2, resume=True))
    assert summary.resumed_from_shard == published
    assert digests(tmp_path / "resumed") == digests(tmp_path / "whole")


def test_binary_columns_are_sniffed_and_bad_values_are_counted_rejects(tmp_path):
    jpeg, png = io.BytesIO(), io.BytesIO()
    PILImage.new("RGB", (4, 4)).save(jpeg, "JPEG")
    PILImage.new("RGB", (4, 4)).save(png, "PNG")
    table = pa.table(
        {
            "blob": [
                jpeg.getvalue(),
                png.getvalue(),
                b"\x00plain",
                jpeg.getvalue(),
                b"\xff\xd8\xffnot a jpeg",
            ],
            "shots": [[png.getvalue(), jpeg.getvalue()], [], [png.getvalue()], [jpeg.getvalue()], []],
            "media": [
                {"bytes": None, "path": "absent.jpg"},
                {"bytes": png.getvalue(), "path": None},
                {"bytes": None, "path": None},
                {"bytes": png.getvalue(), "path": "frame.APNG"},
                {"bytes": jpeg.getvalue(), "path": "x"},
            ],
            "caption": ["a", "b", "c", "d", "e"],
        }
    )
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=2)
    _pack_cli(tmp_path / "t.parquet", tmp_path / "out", "--verify-media", "--member-naming", "field")
    assert sorted(_members(tmp_path / "out")) == [
        *("000000001.blob.png", "000000001.json", "000000001.media.png"),
        *("000000003.blob.jpg", "000000003.json", "000000003.media.apng", "000000003.shots.0.jpg"),
    ]
    members = _members(tmp_path / "out")
    assert members["000000003.blob.jpg"] == members["000000003.shots.0.jpg"] == jpeg.getvalue()
    # Named by the path's extension (lower-cased) over the bytes' type; by the type without a path.
    assert members["000000003.media.apng"] == members["000000001.media.png"] == png.getvalue()
    # Binary columns leave the JSON; a struct keeps its path; an empty list is kept as it is.
    assert json.loads(members["000000003.json"]) == {"media": {"path": "frame.APNG"}, "caption": "d"}
    assert json.loads(members["000000001.json"]) == {"shots": [], "media": {"path": None}, "caption": "b"}
    found = {r["source"].rsplit(":", 1)[1]: r for r in rejects(tmp_path / "out")}
    assert sorted(found) == ["record 0", "record 2", "record 4"]
    assert (
        found["record 0"]["kind"] == "missing" and "absent.jpg (field 'media')" in found["record 0"]["reason"]
    )
    assert found["record 2"] == {
        "source": f"{tmp_path / 't.parquet'}:record 2",
        "reason": "field 'media': holds neither bytes nor a path",
        "kind": "bad-record",
    }
    assert found["record 4"]["kind"] == "media" and "record 4 (field 'blob')" in found["record 4"]["reason"]
    index = json.loads((tmp_path / "out" / "shardstream-index.json").read_text())
    assert index["rejected"] == {"missing": 1, "bad-record": 1, "media": 1}


def test_record_numbers_run_on_across_a_folders_files(tmp_path):
    folder = tmp_path / "table"
    (folder / "b").mkdir(parents=True)
    pq.write_table(pa.table({"blob": [PNG_BYTES] * 3}), folder / "a.parquet")
    pq.write_table(
        pa.table({"blob": [PNG_BYTES] * 2, "note": [None, {"bytes": None, "path": None}]}),
        folder / "b" / "c.parquet",
    )
    summary = packer.pack(folder, tmp_path / "out", PackOptions())
    assert read_keys(tmp_path / "out") == [f"{n:09d}" for n in range(4)]
    assert [r["source"] for r in rejects(tmp_path / "out")] == [f"{folder}:record 4"]
    assert summary.rejected == {"bad-record": 1}


def test_python_values_of_unsupported_types_are_rejects_naming_the_field(tmp_path):
    records = [
        {"id": "ok", "image": Path(__file__).with_name("test_tables.py"), "n": 1},
        {"id": "pil", "image": PILImage.new("RGB", (2, 2))},
        {"id": "obj", "meta": {"deep": object()}},
        {"id": "struct", "image": {"bytes": "text, not bytes", "path": None}},
        {"id": "clash", "a": PNG_BYTES, "b": {"bytes": PNG_BYTES, "path": None}},
    ]
    summary = packer.pack(records, tmp_path / "out", PackOptions())
    assert summary.samples == 1
    found = {r["source"]: r["reason"] for r in rejects(tmp_path / "out")}
    assert found["record 1"].startswith(
        "field 'image': cannot be stored as JSON: PIL.Image.Image is not JSON"
    )
    assert found["record 2"].startswith("field 'meta': cannot be stored as JSON: builtins.object")
    assert found["record 3"] == "field 'image': bytes is a str, not binary"
    assert found["record 4"].startswith("fields 'a' and 'b' both map to member clash.png")
    assert summary.rejected == {"bad-record": 3, "member-clash": 1}
    with pytest.raises(ValueError, match="source must be a path or an iterable of dicts"):
        packer.pack(42, tmp_path / "bad", PackOptions())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="source must be a path for a pack in parts"):
        pack_in_parts(iter(records), tmp_path / "bad", PackOptions(), partition_rows=2)  # type: ignore[arg-type]


def test_a_folder_of_several_splits_is_refused_and_raw_folders_stay_raw(hub, tmp_path):
    mixed = tmp_path / "mixed"
    shutil.copytree(hub / "parquet", mixed)
    shutil.copy(mixed / "train-00000-of-00002.parquet", mixed / "test-00000-of-00001.parquet")
    with pytest.raises(PackError, match=r"several splits \(test, train\)"):
        packer.pack(mixed, tmp_path / "out", PackOptions())
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(hub / "files" / "0.jpg", raw / "a.jpg")
    shutil.copy(mixed / "test-00000-of-00001.parquet", raw / "a.parquet")
    summary = packer.pack(raw, tmp_path / "raw-out", PackOptions())
    assert summary.fields == {"jpg": 1, "parquet": 1}


def _same_output(parts: Path, whole: Path) -> None:
    """Every file byte-identical; the index too, but for the partition size it records."""
    index = json.loads((parts / "shardstream-index.json").read_text())
    assert index["options"].pop("partition_rows") > 0
    assert index == json.loads((whole / "shardstream-index.json").read_text())
    ours, theirs = digests(parts), digests(whole)
    assert ours.pop("shardstream-index.json") and theirs.pop("shardstream-index.json")
    assert ours == theirs


def test_a_table_folder_packs_in_parts_to_the_same_bytes(hub, tmp_path):
    options = PackOptions(max_count=2)
    packer.pack(hub / "parquet", tmp_path / "whole", options)
    for rows in (1, 3, 100):
        pack_in_parts(hub / "parquet", tmp_path / f"parts{rows}", options, partition_rows=rows)
        _same_output(tmp_path / f"parts{rows}", tmp_path / "whole")
    packer.pack(hub / "arrow", tmp_path / "arrow-whole", options)
    pack_in_parts(hub / "arrow", tmp_path / "arrow-parts", options, partition_rows=2)
    _same_output(tmp_path / "arrow-parts", tmp_path / "arrow-whole")


@pytest.mark.parametrize(
    ("ext", "make"),
    [
        ("jpg", "image:JPEG"),
        ("png", "image:PNG"),
        ("webp", "image:WEBP"),
        ("gif", "image:GIF"),
        ("wav", "ffmpeg:wav"),
        ("flac", "ffmpeg:flac"),
        ("mp3", "ffmpeg:mp3"),
        ("ogg", "ffmpeg:ogg"),
        ("mp4", "ffmpeg:mp4"),
        ("webm", "ffmpeg:webm"),
    ],
)
def test_unnamed_bytes_are_named_by_their_first_bytes(ext, make, tmp_path):
    kind, fmt = make.split(":")
    if kind == "image":
        out = io.BytesIO()
        PILImage.new("RGB", (8, 8), (10, 200, 30)).save(out, fmt)
        data = out.getvalue()
    else:
        if shutil.which("ffmpeg") is None:
            pytest.skip("ffmpeg not installed")
        source = "testsrc=size=32x32:duration=0.2" if ext in ("mp4", "webm") else "sine=duration=0.2"
        target = tmp_path / f"x.{ext}"
        subprocess.run(
            ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", source, str(target)], check=True, timeout=60
        )
        data = target.read_bytes()
    assert sniff_extension(data) == ext
    assert sniff_extension(b"plain text") is None
