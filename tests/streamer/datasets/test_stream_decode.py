"""Decoding while streaming: real images, audio and video from packed shards; bad media named exactly."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from packer import PackOptions, pack
from shardstream.errors import DecodeError
from streamer import ShardDataset


@pytest.fixture(scope="module")
def packed(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("packed")
    summary = pack(corpus.files_dir, out, PackOptions(max_size=40_000))
    return summary, corpus


def test_images_audio_video_decode_to_what_pillow_and_torchcodec_give(packed):
    summary, corpus = packed
    ds = ShardDataset(summary.index, image="numpy", video_frames=3, buffer_size=8)
    kinds = set()
    for sample in ds:
        key = sample["__key__"]
        for ext in ("jpg", "png", "webp"):
            if ext in sample:
                raw = (corpus.files_dir / f"{key}.{ext}").read_bytes()
                expected = np.asarray(Image.open(io.BytesIO(raw)).convert("RGB"))
                assert np.array_equal(sample[ext], expected)
                kinds.add("image")
        for ext in ("wav", "flac"):
            if ext in sample:
                waveform, rate = sample[ext]
                assert waveform.dtype.is_floating_point and waveform.ndim == 2 and rate == 16000
                kinds.add("audio")
        if "mp4" in sample:
            assert tuple(sample["mp4"].shape[:2]) == (3, 3)
            kinds.add("video")
        assert isinstance(sample["txt"], str) and isinstance(sample["json"], dict)
    assert kinds == {"image", "audio", "video"}


def test_fields_decode_only_what_is_asked(packed):
    summary, _ = packed
    sample = next(iter(ShardDataset(summary.index, fields=["txt"])))
    assert set(sample) == {"__key__", "__url__", "txt"}


@pytest.fixture
def one_bad_jpeg(tmp_path, corpus):
    src = tmp_path / "src"
    src.mkdir()
    good = next(corpus.files_dir.rglob("*.jpg")).read_bytes()
    for i in range(6):
        (src / f"{i:03d}.jpg").write_bytes(good if i != 3 else good[:150] + b"\xde\xad" * 40)
        (src / f"{i:03d}.txt").write_text(f"caption {i}")
    summary = pack(src, tmp_path / "out", PackOptions(max_count=4))
    return summary


def test_undecodable_sample_is_skipped_and_counted(one_bad_jpeg):
    ds = ShardDataset(one_bad_jpeg.index, on_error="skip", buffer_size=3, keep_length=False)
    keys = sorted(s["__key__"] for s in ds)
    assert keys == ["000", "001", "002", "004", "005"]
    assert ds.errors["decode_errors"] == 1


def test_undecodable_sample_raises_with_shard_member_and_offset(one_bad_jpeg):
    ds = ShardDataset(one_bad_jpeg.index, shuffle=False)
    with pytest.raises(DecodeError) as info:
        list(ds)
    error = info.value
    assert error.url.endswith("train-000000.tar") and error.member == "003.jpg"
    assert error.offset is not None and error.offset > 0 and f"at byte {error.offset}" in str(error)
    assert error.__cause__ is not None


def test_undecodable_samples_are_stood_in_for_so_length_holds(one_bad_jpeg):
    ds = ShardDataset(one_bad_jpeg.index, on_error="skip", buffer_size=3)
    keys = [s["__key__"] for s in ds]
    assert len(keys) == len(ds) == 6 and "003" not in keys and len(set(keys)) == 5
    assert ds.errors["decode_errors"] == 1 and ds.errors["samples_repeated"] == 1
