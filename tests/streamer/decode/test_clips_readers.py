"""Clips and windows through every reader (issue 38): a ``Mixture`` source (Python and YAML) and a
``ShardMap`` decode the same clips and windows as ``ShardDataset`` for the same (seed, epoch, key), so a
sample's clips do not depend on which reader, source order or topology reads it."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")
pytest.importorskip("torchcodec.decoders")

VIDEO = {"clip_seconds": 1, "fps": 4, "clips": 2, "size": [48, 64]}
AUDIO = {"window_seconds": 0.5, "windows": 2, "rate": 8000, "mono": True}


def _ffmpeg(args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args.split()], check=True)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """Two packed datasets of real media: ``video`` (6 samples of a 4 s H.264 .mp4) and ``audio`` (6 of
    a 4 s FLAC), each sample the same member under its own key (so only the key moves its clips)."""
    from packer import PackOptions, pack

    root = tmp_path_factory.mktemp("clipreaders")
    raw = root / "raw"
    raw.mkdir()
    _ffmpeg(
        "-f lavfi -i testsrc=size=80x60:rate=10:duration=4 -c:v libx264 -preset ultrafast "
        f"-pix_fmt yuv420p -g 10 {raw / 'v.mp4'}"
    )
    _ffmpeg(f"-f lavfi -i sine=frequency=300:sample_rate=16000:duration=4 {raw / 'a.flac'}")
    out = {}
    for kind, ext in (("video", "mp4"), ("audio", "flac")):
        folder = root / kind
        folder.mkdir()
        for i in range(6):
            shutil.copy(raw / f"{'v' if kind == 'video' else 'a'}.{ext}", folder / f"{kind}{i}.{ext}")
        out[kind] = root / f"{kind}-shards"
        pack(folder, out[kind], PackOptions(max_count=4), progress=False)
    return out


def _starts(samples, ext):
    return {s["__key__"]: s[ext]["starts"].tolist() for s in samples}


def _dataset(path, ext, epoch, seed=5):
    from streamer import ShardDataset

    options = {"video": VIDEO} if ext == "mp4" else {"audio": AUDIO}
    ds = ShardDataset(path, shuffle=False, seed=seed, **options)
    ds.set_epoch(epoch)
    return _starts(list(ds), ext)


def test_a_mixtures_sources_decode_the_clips_and_windows_shard_dataset_does(datasets):
    from streamer import Mixture

    def mixed(epoch, seed=5):
        sources = [
            {"path": str(datasets["video"]), "weight": 1, "video": VIDEO},
            {"path": str(datasets["audio"]), "weight": 1, "audio": AUDIO},
        ]
        mix = Mixture(sources, seed=seed)
        mix.set_epoch(epoch)
        samples = list(mix)
        clips = [s for s in samples if s["__source__"] == "video-shards"]
        windows = [s for s in samples if s["__source__"] == "audio-shards"]
        assert clips[0]["mp4"]["frames"].shape == (2, 4, 3, 48, 64)
        assert windows[0]["flac"]["audio"].shape == (2, 1, 4000)
        return _starts(clips, "mp4"), _starts(windows, "flac")

    for epoch in (0, 1):
        clips, windows = mixed(epoch)
        assert len(clips) == 6 and len(windows) == 6
        assert clips == _dataset(datasets["video"], "mp4", epoch)
        assert windows == _dataset(datasets["audio"], "flac", epoch)
    assert mixed(0) != mixed(1)  # the epoch moves them
    assert mixed(0) != mixed(0, seed=6)  # and the seed


def test_a_mixture_from_yaml_takes_video_and_audio_and_names_a_bad_option(datasets, tmp_path):
    from streamer import Mixture

    config = tmp_path / "mix.yaml"
    config.write_text(
        f"seed: 5\nsources:\n  - path: {datasets['video']}\n    weight: 1\n"
        "    video: {clip_seconds: 1, fps: 4, clips: 2, size: [48, 64]}\n"
    )
    clips = _starts(list(Mixture.from_yaml(config)), "mp4")
    assert clips == _dataset(datasets["video"], "mp4", 0)
    config.write_text(f"sources:\n  - path: {datasets['video']}\n    weight: 1\n    video: {{seconds: 1}}\n")
    with pytest.raises(ValueError, match=r"source 'video-shards'.*unknown option 'seconds'"):
        Mixture.from_yaml(config)


def test_a_shard_map_decodes_the_same_clips_per_epoch_and_seed(datasets):
    from streamer import ShardMap

    videos = ShardMap(datasets["video"], video=VIDEO, seed=5)
    sounds = ShardMap(datasets["audio"], audio=AUDIO, seed=5)
    for epoch in (0, 1):
        if epoch:
            videos.set_epoch(epoch)
            sounds.set_epoch(epoch)
        assert _starts([videos[i] for i in range(len(videos))], "mp4") == _dataset(
            datasets["video"], "mp4", epoch
        )
        assert _starts([sounds[i] for i in range(6)], "flac") == _dataset(datasets["audio"], "flac", epoch)
    assert videos.get("video3")["mp4"]["starts"].tolist() == videos[3]["mp4"]["starts"].tolist()
    with pytest.raises(ValueError, match="epoch must be an int >= 0"):
        videos.set_epoch(-1)
    with pytest.raises(ValueError, match="video_frames or video"):
        ShardMap(datasets["video"], video=VIDEO, video_frames=4)


@pytest.fixture(scope="module")
def media_folder(tmp_path_factory):
    """Samples of real media of known lengths: v1, v3, v5 (an H.264 .mp4 and a FLAC of 1, 3, 5 s), w (a
    2 s VP9 .webm), bad (an .mp4 that is not a video), text (a .txt)."""
    raw = tmp_path_factory.mktemp("mediafolder")
    for seconds in (1, 3, 5):
        _ffmpeg(
            f"-f lavfi -i testsrc=size=64x48:rate=10:duration={seconds} -c:v libx264 -preset ultrafast "
            f"-pix_fmt yuv420p {raw / f'v{seconds}.mp4'}"
        )
        _ffmpeg(f"-f lavfi -i sine=sample_rate=22050:duration={seconds} {raw / f'v{seconds}.flac'}")
    _ffmpeg(f"-f lavfi -i testsrc=size=64x48:rate=8:duration=2 -c:v libvpx-vp9 -cpu-used 8 {raw / 'w.webm'}")
    (raw / "bad.mp4").write_bytes(b"not a video at all" * 10)
    (raw / "text.txt").write_text("no media")
    return raw


def test_media_columns_from_headers_filter_the_stream(media_folder, tmp_path):
    """``shardstream columns --fn shardstream.mediaprobe:media_columns``: each sample's video and audio
    lengths from their headers (no frame decoded) as columns, which ``where=`` then filters on; a member
    that is not media is -1, a sample without one 0."""
    from packer import PackOptions, pack
    from shardstream.columns import ColumnOptions, compute_columns
    from shardstream.format.samplecols import decode_sample_columns
    from streamer import ShardDataset

    raw = media_folder
    shards = tmp_path / "shards"
    pack(raw, shards, PackOptions(max_count=3), progress=False)
    compute_columns(shards, ColumnOptions(fn="shardstream.mediaprobe:media_columns", name="media"))
    rows = []
    for cols in sorted(shards.glob("*.cols")):  # the shards' order
        table = decode_sample_columns(cols.read_bytes(), source=str(cols), samples=None)
        rows += [{name: int(v[i]) for name, v in table.items()} for i in range(len(table["video_ms"]))]
    keys = [s["__key__"] for s in ShardDataset(shards, decode=False, shuffle=False)]
    by_key = dict(zip(keys, rows, strict=True))
    assert by_key["v3"] == {"video_ms": 3000, "video_frames": 30, "audio_ms": 3000, "audio_rate": 22050}
    assert by_key["v1"]["video_frames"] == 10 and by_key["v5"]["audio_ms"] == 5000
    assert by_key["w"]["video_frames"] == 16 and 1900 <= by_key["w"]["video_ms"] <= 2100
    assert by_key["bad"] == {"video_ms": -1, "video_frames": -1, "audio_ms": 0, "audio_rate": 0}
    assert by_key["text"] == dict.fromkeys(by_key["text"], 0)
    long_enough = ShardDataset(shards, decode=False, shuffle=False, where="video_ms >= 2000")
    assert [s["__key__"] for s in long_enough] == ["v3", "v5", "w"]


def test_a_resumed_run_and_another_topology_give_the_same_clips(datasets):
    """A StatefulLoader (2 workers) resumed after its second batch gives the uninterrupted run's clips
    (shuffled, so the order is the plan's, not the keys'); and 2 ranks together give each key the clips
    one process gives it."""
    import pickle

    from streamer import ShardDataset, StatefulLoader

    def loader(**options):
        ds = ShardDataset(datasets["video"], video=VIDEO, seed=5, buffer_size=3, **options)
        ds.set_epoch(1)
        return StatefulLoader(ds, batch_size=2, num_workers=2, collate_fn=list)

    def clips(batches):
        return [(s["__key__"], s["mp4"]["starts"].tolist()) for b in batches for s in b]

    whole = clips(loader())
    first = loader()
    it = iter(first)
    head = [next(it), next(it)]
    state = pickle.loads(pickle.dumps(first.state_dict()))
    del it
    second = loader()
    second.load_state_dict(state)
    assert clips(head) + clips(second) == whole and len(whole) == 6
    ranks = [clips(loader(rank=r, world_size=2)) for r in (0, 1)]
    assert dict(ranks[0] + ranks[1]) == dict(whole) == _dataset(datasets["video"], "mp4", 1)


def test_a_packs_cost_estimate_counts_seconds_of_media_from_their_headers(media_folder, tmp_path):
    """``--cost @estimate:video_second_tokens=10,audio_second_tokens=5``: each sample's cost counts its
    media's seconds (a budget then counts frames at a fixed rate); a member with no readable duration is a
    bad-cost reject, named, and the rest pack."""
    from packer import PackOptions, pack
    from shardstream.format import REJECTS_NAME
    from shardstream.format.samplecols import decode_sample_columns
    from streamer import ShardDataset

    shards = tmp_path / "shards"
    cost = "@estimate:video_second_tokens=10,audio_second_tokens=5"
    summary = pack(media_folder, shards, PackOptions(cost=cost, max_count=3), progress=False)
    rejects = [json.loads(line) for line in (shards / REJECTS_NAME).read_text().splitlines()]
    assert [r["kind"] for r in rejects] == ["bad-cost"] and "'mp4' gives no duration" in rejects[0]["reason"]
    assert summary.samples == 5
    costs = []
    for cols in sorted(shards.glob("*.cols")):
        costs += decode_sample_columns(cols.read_bytes(), source=str(cols), samples=None)["cost"].tolist()
    keys = [s["__key__"] for s in ShardDataset(shards, decode=False, shuffle=False)]
    # v3: 3 s of video x 10 + 3 s of audio x 5; text: 8 characters at 4 a token; w: 2 s x 10
    assert dict(zip(keys, costs, strict=True)) == {"text": 2, "v1": 15, "v3": 45, "v5": 75, "w": 20}
