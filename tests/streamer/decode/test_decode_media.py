"""Every registered image, audio and video extension decoded from real files: Pillow images, ffmpeg media."""

from __future__ import annotations

import io
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch
from PIL import Image

from streamer import ShardDataset
from streamer.decode.registry import decode_audio, decode_image, decode_video
from streamer.decode.sample import DECODERS, SampleDecoder

FFMPEG = shutil.which("ffmpeg")
TONE, RATE, SECONDS = 440, 48000, 0.5
WIDTH, HEIGHT, FRAMES = 64, 48, 10
SINE = ["-f", "lavfi", "-i", f"sine=frequency={TONE}:sample_rate={RATE}:duration={SECONDS}", "-ac", "1"]
TESTSRC = ["-f", "lavfi", "-i", f"testsrc=size={WIDTH}x{HEIGHT}:rate=10:duration=1"]
# extension -> (ffmpeg encoder, its output arguments)
AUDIO = {
    "mp3": ("libmp3lame", [*SINE, "-c:a", "libmp3lame"]),
    "ogg": ("libvorbis", [*SINE, "-c:a", "libvorbis"]),
    "opus": ("libopus", [*SINE, "-c:a", "libopus"]),
    "m4a": ("aac", [*SINE, "-c:a", "aac"]),
}
VIDEO = {
    "webm": ("libvpx", [*TESTSRC, "-c:v", "libvpx", "-b:v", "1M", "-pix_fmt", "yuv420p"]),
    "mkv": ("libx264", [*TESTSRC, "-c:v", "libx264", "-pix_fmt", "yuv420p"]),
    "avi": ("mpeg4", [*TESTSRC, "-c:v", "mpeg4", "-q:v", "2"]),
    "mov": ("libx264", [*TESTSRC, "-c:v", "libx264", "-pix_fmt", "yuv420p"]),
}
RAW = [*TESTSRC, "-f", "rawvideo", "-pix_fmt", "rgb24"]  # the frames the videos were encoded from
PILLOW = {"gif": "GIF", "bmp": "BMP", "tif": "TIFF", "tiff": "TIFF", "ppm": "PPM"}


def _encoders() -> set[str]:
    """The encoder names this ffmpeg lists (lines like `` A....D libmp3lame  libmp3lame MP3 ...``)."""
    run = subprocess.run([FFMPEG, "-hide_banner", "-encoders"], capture_output=True, text=True, check=True)
    return set(re.findall(r"^ [VAS][.A-Z]{5} (\S+)", run.stdout, flags=re.MULTILINE))


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, bytes | str]:
    """Each extension's bytes, made once (ffmpeg runs side by side), or why it could not be made."""
    if FFMPEG is None:
        pytest.skip("ffmpeg is not installed (apt-get install ffmpeg)")
    folder = tmp_path_factory.mktemp("media")
    available = _encoders()
    jobs, out = {}, {}
    for ext, (encoder, args) in {**AUDIO, **VIDEO, "rgb": ("rawvideo", RAW)}.items():
        if encoder not in available and encoder != "rawvideo":
            out[ext] = f"this ffmpeg has no {encoder} encoder"
            continue
        command = [FFMPEG, "-v", "error", "-nostdin", "-y", *args, str(folder / f"clip.{ext}")]
        jobs[ext] = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for ext, job in jobs.items():
        _, errors = job.communicate(timeout=60)
        out[ext] = (folder / f"clip.{ext}").read_bytes() if job.returncode == 0 else errors.decode()[-500:]
    return out


def _made(media, ext: str) -> bytes:
    data = media[ext]
    if isinstance(data, str):
        pytest.skip(f"{ext}: {data}")
    return data


def picture() -> np.ndarray:
    rng = np.random.default_rng(1)
    ys, xs = np.mgrid[0:24, 0:40]
    smooth = np.dstack([ys * 10, xs * 6, (ys + xs) * 4]).astype(np.uint8)
    return smooth ^ rng.integers(0, 8, (24, 40, 3), np.uint8)


def image_file(ext: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(picture()).save(buffer, PILLOW[ext])
    return buffer.getvalue()


def test_every_media_extension_is_registered_to_its_kind_of_decoder():
    kinds = {
        **dict.fromkeys(PILLOW, decode_image),
        **dict.fromkeys(AUDIO, decode_audio),
        **dict.fromkeys(VIDEO, decode_video),
    }
    assert {ext: DECODERS[ext] for ext in kinds} == kinds


@pytest.mark.parametrize("ext", sorted(PILLOW))
def test_gif_bmp_tiff_and_ppm_images_decode_in_every_image_mode(ext):
    data = image_file(ext)
    expected = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    if ext != "gif":  # lossless: the very pixels saved (a GIF's palette quantises them)
        np.testing.assert_array_equal(expected, picture())
    member = {"__key__": "k", f"0.{ext}": data}
    pil = SampleDecoder(image="pil")(member)[f"0.{ext}"]
    assert isinstance(pil, Image.Image) and pil.mode == "RGB" and pil.size == (40, 24)
    np.testing.assert_array_equal(np.asarray(pil), expected)
    array = SampleDecoder(image="numpy")(member)[f"0.{ext}"]
    assert isinstance(array, np.ndarray) and array.shape == (24, 40, 3) and array.dtype == np.uint8
    np.testing.assert_array_equal(array, expected)
    tensor = SampleDecoder(image="torch")(member)[f"0.{ext}"]
    assert tensor.shape == (3, 24, 40) and tensor.dtype == torch.uint8
    np.testing.assert_array_equal(tensor.permute(1, 2, 0).numpy(), expected)


@pytest.mark.parametrize("ext", sorted(AUDIO))
def test_compressed_audio_decodes_to_the_tone_it_was_made_of(media, ext):
    data = _made(media, ext)
    waveform, rate = SampleDecoder()({"__key__": "k", ext: data})[ext]
    assert rate == RATE and waveform.dtype == torch.float32 and waveform.shape[0] == 1
    assert abs(waveform.shape[1] - RATE * SECONDS) < 0.1 * RATE  # codec padding aside, half a second
    spectrum = np.abs(np.fft.rfft(waveform[0].numpy()))
    assert abs(np.argmax(spectrum) * rate / waveform.shape[1] - TONE) < 5  # the 440 Hz sine, not noise
    resampled, new_rate = SampleDecoder(audio_rate=16000)({"__key__": "k", ext: data})[ext]
    assert new_rate == 16000 and abs(resampled.shape[1] * 3 - waveform.shape[1]) <= 3


@pytest.mark.parametrize("ext", sorted(VIDEO))
def test_webm_mkv_avi_and_mov_decode_to_the_frames_they_were_made_of(media, ext):
    data = _made(media, ext)
    raw = np.frombuffer(_made(media, "rgb"), np.uint8).reshape(FRAMES, HEIGHT, WIDTH, 3)
    frames = SampleDecoder()({"__key__": "k", ext: data})[ext]
    assert frames.shape == (FRAMES, 3, HEIGHT, WIDTH) and frames.dtype == torch.uint8
    error = np.abs(frames.permute(0, 2, 3, 1).numpy().astype(int) - raw.astype(int)).mean(axis=(1, 2, 3))
    assert error.max() < 15, error  # lossy and chroma-subsampled, yet each frame the one encoded
    three = SampleDecoder(video_frames=3)({"__key__": "k", ext: data})[ext]
    assert three.shape == (3, 3, HEIGHT, WIDTH)
    assert torch.equal(three[0], frames[0]) and torch.equal(three[2], frames[-1])


def test_a_shard_of_every_media_kind_decodes_through_the_dataset(media, tmp_path):
    from packer.sample import Sample
    from packer.shardwriter import TarShardWriter, encode_sample

    members = {f"{ext}": image_file(ext) for ext in PILLOW}
    members |= {ext: media[ext] for ext in (*AUDIO, *VIDEO) if isinstance(media[ext], bytes)}
    writer = TarShardWriter(tmp_path / "media-000000.tar", max_size=None, max_count=None)
    chunks = encode_sample(Sample("clip", "clip", tuple(members.items())))
    writer.add("clip", chunks, sum(len(c) for c in chunks))
    writer.close()
    (sample,) = list(ShardDataset(str(tmp_path / "media-000000.tar"), image="torch", video_frames=2))
    for ext in members:
        value = sample[ext]
        if ext in PILLOW:
            assert value.shape == (3, 24, 40), ext
        elif ext in AUDIO:
            assert value[1] == RATE and value[0].shape[0] == 1, ext
        else:
            assert value.shape == (2, 3, HEIGHT, WIDTH), ext
