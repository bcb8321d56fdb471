"""Clips and windows (issue 38), on real files made with ffmpeg: the frames a clip decodes by seeking are
the frames a whole decode plays at the same times, planning is a function of (seed, epoch, key), and a
long member is never decoded whole (a member cut short after its clip's bytes still gives the clip)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

from streamer.decode.clips import ClipOptions, WindowOptions, draw, starts

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")
torchcodec = pytest.importorskip("torchcodec.decoders")


def _ffmpeg(args: str) -> None:
    """ffmpeg with ``args`` split on spaces (the paths here have none)."""
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args.split()], check=True)


H264 = "-c:v libx264 -preset ultrafast -pix_fmt yuv420p"


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    root = tmp_path_factory.mktemp("clips")
    src = "-f lavfi -i testsrc=size=160x120:rate=25:duration="
    _ffmpeg(f"{src}10 {H264} -g 25 -movflags +faststart {root / 'h264.mp4'}")
    _ffmpeg(f"{src}6 -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 25 {root / 'vp9.webm'}")
    _ffmpeg(f"{src}2 {H264} {root / 'short.mp4'}")
    ten_minutes = "-f lavfi -i testsrc=size=64x48:rate=5:duration=600"
    _ffmpeg(f"{ten_minutes} {H264} -g 10 -movflags +faststart {root / 'long.mp4'}")
    _ffmpeg(f"-f lavfi -i sine=frequency=440:sample_rate=16000:duration=20 -ac 2 {root / 'a.wav'}")
    _ffmpeg(f"-i {root / 'a.wav'} {root / 'a.flac'}")
    _ffmpeg(f"-i {root / 'a.wav'} -b:a 64k {root / 'a.mp3'}")
    return {path.name: path.read_bytes() for path in root.iterdir()}


def _played(whole, t: float) -> torch.Tensor:
    """The frame a whole decode shows at ``t``: the last whose time is at or before it."""
    index = int((whole.pts_seconds <= t + 1e-9).nonzero().max())
    return whole.data[index]


@pytest.mark.parametrize("name", ["h264.mp4", "vp9.webm"])
@pytest.mark.parametrize("seek_mode", ["approximate", "exact"])
def test_a_clips_frames_are_the_whole_decodes_frames_at_the_same_times(media, name, seek_mode):
    from streamer.decode.clipdecode import decode_clips

    options = ClipOptions(seconds=2, fps=2, clips=3, where="random", seek_mode=seek_mode)
    out = decode_clips(media[name], options, seed=1, epoch=0, key="k")
    assert out["frames"].shape == (3, 4, 3, 120, 160) and out["frames"].dtype == torch.uint8
    decoder = torchcodec.VideoDecoder(media[name], seek_mode="exact")
    whole = decoder.get_frames_in_range(0, decoder.metadata.num_frames)
    for c in range(3):
        assert 0 <= out["starts"][c] <= decoder.metadata.duration_seconds - 2
        for k in range(4):
            assert abs(out["pts"][c, k] - (out["starts"][c] + k / 2)) < 1 / 25 + 1e-6
            assert torch.equal(out["frames"][c, k], _played(whole, float(out["pts"][c, k])))


def test_random_clips_follow_seed_epoch_and_key_and_uniform_needs_no_seed():
    def at(**kw):
        return starts(100.0, 4.0, 3, kw.pop("where", "random"), **{"seed": 0, "epoch": 0, "key": "a", **kw})

    assert at() == at() and at() != at(epoch=1) and at() != at(key="b") and at() != at(seed=1)
    assert all(0 <= s <= 96 for s in at() + at(epoch=5))
    assert at(where="uniform") == at(where="uniform", seed=9, epoch=3) == [0.0, 48.0, 96.0]
    assert at(where="start") == [0.0] * 3
    assert starts(3.0, 4.0, 2, "random", seed=0, epoch=0, key="a") == [0.0, 0.0]  # shorter than a clip
    draws = [draw(0, 0, f"k{i}", 0) for i in range(2000)]
    assert 0.45 < sum(draws) / len(draws) < 0.55 and min(draws) >= 0 and max(draws) < 1


def test_a_member_shorter_than_its_clip_repeats_its_last_frame_and_keeps_the_shape(media):
    from streamer.decode.clipdecode import decode_clips

    out = decode_clips(media["short.mp4"], ClipOptions(seconds=4, fps=2, size=(60, 80)))
    assert out["frames"].shape == (1, 8, 3, 60, 80)
    assert out["pts"][0, -1] < 2.0 and torch.equal(out["frames"][0, -1], out["frames"][0, -2])


def test_a_long_member_is_not_decoded_whole(media):
    """A ten-minute video cut after its first quarter (its index kept, most frames gone): a whole decode
    fails, the clip at its start decodes, and its frames are the uncut member's."""
    from streamer.decode.clipdecode import decode_clips

    data = media["long.mp4"]
    cut = data[: len(data) // 4]
    options = ClipOptions(seconds=4, fps=2, where="start")
    assert torch.equal(decode_clips(cut, options)["frames"], decode_clips(data, options)["frames"])
    decoder = torchcodec.VideoDecoder(cut)
    with pytest.raises(RuntimeError):
        decoder.get_frames_in_range(0, decoder.metadata.num_frames)


@pytest.mark.parametrize("name", ["a.wav", "a.flac", "a.mp3"])
def test_audio_windows_are_the_whole_decodes_samples_from_their_start(media, name):
    from streamer.decode.clipdecode import decode_windows

    out = decode_windows(media[name], WindowOptions(seconds=3, windows=3, where="uniform"))
    assert out["audio"].shape == (3, 2, 48_000) and out["rate"] == 16_000
    expected = [0.0, 8.5, 17.0]  # uniform over 20 s (an MP3's header says ~20.09: its encoder's padding)
    assert out["starts"].tolist() == pytest.approx(expected, abs=0.1 if name == "a.mp3" else 0)
    whole = torchcodec.AudioDecoder(media[name]).get_all_samples().data
    for w, start in enumerate(out["starts"].tolist()):
        begin = round(start * 16_000)
        ref = whole[:, begin : begin + 48_000]
        got = out["audio"][w][:, : ref.shape[-1]]
        if name == "a.mp3":  # decoded from a nearby frame and cut: the same sound, its phase not exact
            rms = got.pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()
            assert 0.95 < rms < 1.05 and (w > 0 or torch.equal(got, ref))
        else:  # WAV and FLAC seek to the sample
            assert torch.equal(got, ref)


@pytest.mark.parametrize("piece", [60.0, 7.0, 5.0])  # one piece; a part piece at the end; exact pieces
def test_audio_without_a_length_in_its_header_is_scanned_a_piece_at_a_time(media, piece, monkeypatch):
    """A FLAC written to a pipe has no length in its header: ``decode_windows`` learns it by decoding a
    piece at a time (none kept), and its windows are still the whole decode's samples; 20 s in pieces of
    5 s ends exactly at a piece (torchcodec then raises for the next one)."""
    from streamer.decode import clipdecode

    piped = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", "-", "-f", "flac", "-"],
        input=media["a.wav"],
        capture_output=True,
        check=True,
    ).stdout
    assert torchcodec.AudioDecoder(piped).metadata.duration_seconds_from_header is None
    monkeypatch.setattr(clipdecode, "SCAN_SECONDS", piece)
    out = clipdecode.decode_windows(piped, WindowOptions(seconds=3, windows=3, where="uniform"))
    assert out["starts"].tolist() == [0.0, 8.5, 17.0]  # uniform over the 20 s the scan found
    whole = torchcodec.AudioDecoder(piped).get_all_samples().data
    for w, start in enumerate(out["starts"].tolist()):
        begin = round(start * 16_000)
        assert torch.equal(out["audio"][w], whole[:, begin : begin + 48_000])


def test_mono_and_resampled_windows_and_bad_options():
    with pytest.raises(ValueError, match="where"):
        ClipOptions(seconds=1, fps=1, where="middle")
    with pytest.raises(ValueError, match="fps"):
        ClipOptions(seconds=1, fps=0)
    with pytest.raises(ValueError, match="size"):
        ClipOptions(seconds=1, fps=1, size=(224,))
    with pytest.raises(ValueError, match="seconds"):
        WindowOptions(seconds=-1)
    with pytest.raises(ValueError, match="rate"):
        WindowOptions(seconds=1, rate=0)


def test_windows_mono_at_another_rate(media):
    from streamer.decode.clipdecode import decode_windows

    out = decode_windows(media["a.flac"], WindowOptions(seconds=2, windows=2, rate=8000, mono=True))
    assert out["audio"].shape == (2, 1, 16_000) and out["rate"] == 8000


def test_a_member_without_frames_or_samples_is_a_value_error(media):
    from streamer.decode.clipdecode import decode_clips, decode_windows

    with pytest.raises((ValueError, RuntimeError)):
        decode_clips(media["a.wav"], ClipOptions(seconds=1, fps=1))
    with pytest.raises((ValueError, RuntimeError)):
        decode_windows(media["h264.mp4"], WindowOptions(seconds=1))


def _tar(path, members):
    import io
    import tarfile

    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def test_a_dataset_decodes_clips_and_windows_per_seed_epoch_and_key(media, tmp_path):
    """``ShardDataset(video=..., audio=...)``: each sample's clips and windows fall where (seed, epoch,
    key) puts them: the same on a second run, elsewhere next epoch; a damaged member is skipped, counted."""
    from streamer import ShardDataset

    members = []
    for i in range(4):
        members += [(f"s{i}.mp4", media["h264.mp4"]), (f"s{i}.flac", media["a.flac"])]
    members += [("bad.mp4", media["h264.mp4"][:300]), ("bad.flac", media["a.flac"])]
    shard = _tar(tmp_path / "clips-000000.tar", members)
    video = {"clip_seconds": 2, "fps": 2, "clips": 2, "size": [60, 80]}
    audio = {"window_seconds": 1, "rate": 8000, "mono": True}

    def epoch(number, **options):
        ds = ShardDataset(shard, video=video, audio=audio, shuffle=False, seed=3, **options)
        ds.set_epoch(number)
        return ds, list(ds)

    ds, first = epoch(0, on_error="skip", keep_length=False)
    assert [s["__key__"] for s in first] == ["s0", "s1", "s2", "s3"]
    assert ds.errors["decode_errors"] == 1, dict(ds.errors)  # the cut video, skipped and counted
    sample = first[0]
    assert sample["mp4"]["frames"].shape == (2, 4, 3, 60, 80)
    assert sample["flac"]["audio"].shape == (1, 1, 8000) and sample["flac"]["rate"] == 8000
    starts = [s["mp4"]["starts"].tolist() for s in first]
    assert len({tuple(x) for x in starts}) == 4  # each key its own clips
    again = [s["mp4"]["starts"].tolist() for s in epoch(0, on_error="skip", keep_length=False)[1]]
    later = [s["mp4"]["starts"].tolist() for s in epoch(1, on_error="skip", keep_length=False)[1]]
    assert again == starts and later != starts
    with pytest.raises(ValueError, match="video_frames or video"):
        ShardDataset(shard, video=video, video_frames=4)
    with pytest.raises(ValueError, match="unknown option 'seconds'"):
        ShardDataset(shard, video={"seconds": 2, "fps": 2})
