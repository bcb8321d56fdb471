from __future__ import annotations

import importlib.util
import io
import json
import time
from pathlib import Path

import pytest
from PIL import Image

from shardstream_cli.demo.synth import Corpus, make_corpus, make_jpegs

HAS_TORCHCODEC = importlib.util.find_spec("torchcodec") is not None


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return make_corpus(tmp_path_factory.mktemp("corpus") / "c", samples=24, seed=0)


def test_corpus_paths(corpus):
    assert corpus.samples == 24
    assert corpus.files_dir.is_dir() and corpus.manifest.is_file()
    assert corpus.files_dir.is_relative_to(corpus.root) and corpus.manifest.is_relative_to(corpus.root)


def test_files_layout_has_every_promised_member(corpus):
    files = sorted(p for p in corpus.files_dir.rglob("*") if p.is_file())
    assert {p.parent.name for p in files} == {"part0", "part1", "part2"}
    by_key: dict[str, set[str]] = {}
    for path in files:
        key, _, ext = path.name.partition(".")
        by_key.setdefault(f"{path.parent.name}/{key}", set()).add(ext)
    assert len(by_key) == 24
    image_exts, audio_exts = set(), set()
    for exts in by_key.values():
        assert {"txt", "json"} <= exts
        images = exts & {"jpg", "png", "webp"}
        assert len(images) == 1
        image_exts |= images
        audio_exts |= exts & {"wav", "flac"}
    assert image_exts == {"jpg", "png", "webp"}
    assert audio_exts == ({"wav", "flac"} if HAS_TORCHCODEC else {"wav"})
    assert any("mp4" in exts for exts in by_key.values()) == HAS_TORCHCODEC


def test_files_decode(corpus):
    for path in corpus.files_dir.rglob("*"):
        if path.suffix in (".jpg", ".png", ".webp"):
            with Image.open(path) as image:
                image.load()
                assert image.size == (64, 48)
        elif path.suffix == ".json":
            assert json.loads(path.read_text())["key"] == path.stem
        elif path.suffix == ".txt":
            assert path.read_text().strip()


@pytest.mark.skipif(not HAS_TORCHCODEC, reason="needs torchcodec")
def test_audio_and_video_decode(corpus):
    from torchcodec.decoders import AudioDecoder, VideoDecoder

    for path in corpus.files_dir.rglob("*"):
        if path.suffix in (".wav", ".flac"):
            samples = AudioDecoder(path.read_bytes()).get_all_samples()
            assert samples.sample_rate == 16_000 and tuple(samples.data.shape) == (1, 4000)
        elif path.suffix == ".mp4":
            decoder = VideoDecoder(path.read_bytes())
            assert len(decoder) == 8 and tuple(decoder[0].shape) == (3, 32, 32)


def test_manifest_records_point_at_existing_files(corpus):
    records = [json.loads(line) for line in corpus.manifest.read_text().splitlines()]
    assert len(records) == 24
    ids = [record["id"] for record in records]
    assert len(set(ids)) == 24 and not any("." in i for i in ids)
    seen = set()
    for record in records:
        media = [record[k] for k in ("image", "audio", "video") if k in record] + record.get("images", [])
        assert media, record
        for relative in media:
            assert relative.startswith("media/")
            assert (corpus.manifest.parent / relative).is_file()
        seen |= record.keys()
        human, gpt = record["conversations"]
        assert human["from"] == "human" and gpt["from"] == "gpt" and gpt["value"]
        tokens = human["value"].count("<image>")
        assert tokens == len(record.get("images", [])) + ("image" in record)
    assert {"image", "images", "audio"} <= seen
    assert ("video" in seen) == HAS_TORCHCODEC
    assert {len(r["images"]) for r in records if "images" in r} == {2, 3}


def test_same_seed_same_bytes_other_seed_differs(tmp_path, corpus):
    again = make_corpus(tmp_path / "again", samples=24, seed=0)
    assert tree(again.root) == tree(corpus.root)
    other = make_corpus(tmp_path / "other", samples=24, seed=1)
    assert tree(other.root) != tree(corpus.root)


def test_without_video(tmp_path):
    plain = make_corpus(tmp_path / "plain", samples=12, video=False)
    assert not list(plain.root.rglob("*.mp4"))
    assert all("video" not in json.loads(line) for line in plain.manifest.read_text().splitlines())


def test_make_corpus_is_fast(tmp_path, corpus):
    start = time.perf_counter()  # the module fixture already paid for importing torch/torchcodec
    make_corpus(tmp_path / "fast", samples=24)
    assert time.perf_counter() - start < 2.0


def test_make_corpus_refuses_bad_arguments(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.txt").write_text("left over")
    with pytest.raises(ValueError, match="root"):
        make_corpus(tmp_path / "full")
    with pytest.raises(ValueError, match="samples"):
        make_corpus(tmp_path / "none", samples=0)


def test_make_jpegs(tmp_path):
    root = make_jpegs(tmp_path / "jpegs", 7, size=(48, 32), seed=3)
    assert root == tmp_path / "jpegs"
    jpgs = sorted(root.rglob("*.jpg"))
    assert [p.name for p in jpgs] == [f"{i:08d}.jpg" for i in range(7)]
    assert all(p.parent.name == "0000" for p in jpgs)
    for path in jpgs:
        with Image.open(io.BytesIO(path.read_bytes())) as image:
            image.load()
            assert (image.format, image.size, image.mode) == ("JPEG", (48, 32), "RGB")
        label = path.with_suffix(".cls").read_text().strip()
        assert label.isdigit() and 0 <= int(label) < 1000
    # Smooth content compresses well below raw size: these stand in for real photos in benchmarks.
    assert max(p.stat().st_size for p in jpgs) < 48 * 32 * 3
    assert tree(make_jpegs(tmp_path / "again", 7, size=(48, 32), seed=3)) == tree(root)
    with pytest.raises(ValueError, match="count"):
        make_jpegs(tmp_path / "bad", -1)
