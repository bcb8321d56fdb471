from __future__ import annotations

import functools
import io
import multiprocessing
import wave
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from PIL import Image

from packer.media import (
    AUDIO_EXTENSIONS,
    IMAGE_EXTENSIONS,
    VIDEO_EXTENSIONS,
    MediaOptions,
    process_media,
)
from shardstream.errors import MediaError

RATE = 16_000


def image_bytes(size=(64, 48), fmt="JPEG", mode="RGB", seed=0, **save) -> bytes:
    rng = np.random.default_rng(seed)
    bands = len(mode)
    pixels = rng.integers(0, 256, size=(size[1], size[0], bands), dtype=np.uint8)
    image = Image.fromarray(pixels if bands > 1 else pixels[..., 0], mode)
    buffer = io.BytesIO()
    image.save(buffer, fmt, **save)
    return buffer.getvalue()


def wav_bytes(channels=2, rate=RATE, seconds=0.25) -> bytes:
    t = np.arange(int(rate * seconds)) / rate
    tone = np.stack([0.3 * np.sin(2 * np.pi * (220 + 110 * c) * t) for c in range(channels)])
    pcm = np.round(tone * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(channels)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(pcm.T.tobytes())
    return buffer.getvalue()


def decode_image(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def decode_audio(data: bytes):
    from torchcodec.decoders import AudioDecoder

    return AudioDecoder(data).get_all_samples()


@pytest.fixture
def torchcodec():
    return pytest.importorskip("torchcodec")


def test_extension_sets_are_lower_case_without_dots():
    for names in (IMAGE_EXTENSIONS, AUDIO_EXTENSIONS, VIDEO_EXTENSIONS):
        assert all(name == name.lower() and "." not in name for name in names)
    assert (
        {"jpg", "jpeg", "tif"} <= IMAGE_EXTENSIONS
        and "opus" in AUDIO_EXTENSIONS
        and "mov" in VIDEO_EXTENSIONS
    )


@pytest.mark.parametrize(
    ("size", "max_side", "expected"),
    [((400, 300), 100, (100, 75)), ((300, 400), 100, (75, 100)), ((1600, 1200), 100, (100, 75))],
)
def test_resize_respects_max_side_and_aspect(size, max_side, expected):
    # 1600x1200 goes through the JPEG draft (DCT-scaled decode) path.
    ext, out = process_media("jpg", image_bytes(size), MediaOptions(image_max_side=max_side), source="a.jpg")
    assert ext == "jpg"
    assert decode_image(out).size == expected


def test_image_needing_no_change_keeps_its_bytes_and_extension():
    data = image_bytes((64, 48))
    assert process_media("jpeg", data, MediaOptions(image_max_side=64), source="a") == ("jpeg", data)
    # Asking for the format it already has keeps the bytes but names the extension after the format.
    assert process_media("jpeg", data, MediaOptions(image_format="jpeg"), source="a") == ("jpg", data)


def test_exif_orientation_is_applied():
    exif = Image.Exif()
    exif[0x0112] = 6  # stored landscape, shown rotated 90 degrees
    data = image_bytes((64, 48), exif=exif.tobytes())
    ext, out = process_media("jpg", data, MediaOptions(image_max_side=1000), source="a")
    assert ext == "jpg" and out != data
    result = decode_image(out)
    assert result.size == (48, 64)
    assert result.getexif().get(0x0112) is None
    _, smaller = process_media("jpg", data, MediaOptions(image_max_side=32), source="a")
    assert decode_image(smaller).size == (24, 32)


def test_png_rgba_to_jpeg_changes_extension_and_flattens_alpha():
    pixels = np.zeros((20, 30, 4), dtype=np.uint8)
    pixels[..., 0] = 200  # red, but fully transparent: must come out white, not red
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGBA").save(buffer, "PNG")
    ext, out = process_media("png", buffer.getvalue(), MediaOptions(image_format="jpeg"), source="a")
    assert ext == "jpg"
    result = decode_image(out)
    assert (result.format, result.mode, result.size) == ("JPEG", "RGB", (30, 20))
    assert min(result.getpixel((15, 10))) > 245


@pytest.mark.parametrize(
    ("fmt", "mode"), [("webp", "RGBA"), ("png", "P"), ("jpeg", "L"), ("webp", "LA"), ("jpeg", "CMYK")]
)
def test_mode_conversions_for_targets(fmt, mode):
    source = Image.open(io.BytesIO(image_bytes((40, 30), fmt="PNG"))).convert(mode)
    buffer = io.BytesIO()
    source.save(buffer, "TIFF")
    ext, out = process_media(
        "tif", buffer.getvalue(), MediaOptions(image_format=fmt, image_max_side=20), source="a"
    )
    assert ext == {"jpeg": "jpg"}.get(fmt, fmt)
    result = decode_image(out)
    assert result.size == (20, 15)
    assert result.format == fmt.upper()


def test_animated_gif_keeps_first_frame_as_png():
    frames = [Image.new("RGB", (60, 40), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:])
    ext, out = process_media("gif", buffer.getvalue(), MediaOptions(image_max_side=30), source="a.gif")
    assert ext == "png"
    result = decode_image(out)
    assert result.size == (30, 20) and getattr(result, "n_frames", 1) == 1
    red, _, blue = result.convert("RGB").getpixel((15, 10))
    assert red > 200 and blue < 50


BAD_IMAGES = {
    "truncated": image_bytes((200, 150))[:1500],
    "garbage": b"\xff\xd8\xff not really a jpeg" * 20,
    "empty": b"",
}


@pytest.mark.parametrize("bad", sorted(BAD_IMAGES))
@pytest.mark.parametrize(
    "options",
    [MediaOptions(verify=True), MediaOptions(image_max_side=64), MediaOptions(image_format="webp")],
    ids=["verify", "resize", "reencode"],
)
def test_corrupt_image_raises_media_error(bad, options):
    with pytest.raises(MediaError) as caught:
        process_media("jpg", BAD_IMAGES[bad], options, source="bad.jpg")
    assert caught.value.source == "bad.jpg"
    assert caught.value.reason.startswith("image does not decode")
    assert "0x" not in caught.value.reason  # no object addresses: reasons must be reproducible


def test_truncated_later_gif_frame_is_caught():
    frames = [Image.effect_noise((64, 64), 60 + 20 * i).convert("P") for i in range(3)]
    buffer = io.BytesIO()
    frames[0].save(buffer, "GIF", save_all=True, append_images=frames[1:])
    with pytest.raises(MediaError):
        process_media("gif", buffer.getvalue()[:-400], MediaOptions(verify=True), source="a.gif")


def test_decompression_bomb_is_an_error_not_a_warning():
    buffer = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(buffer, "PNG")  # 100 Mpixel, a few kB
    with pytest.raises(MediaError, match="decompression bomb"):
        process_media("png", buffer.getvalue(), MediaOptions(verify=True), source="bomb.png")


@pytest.mark.parametrize("ext", ["txt", "json", "cls", "npy"])
def test_non_media_passes_through_untouched(ext):
    data = b"\x00 not media \xff"
    options = MediaOptions(
        image_max_side=8, image_format="png", audio_rate=8000, audio_mono=True, verify=True
    )
    assert process_media(ext, data, options, source="x") == (ext, data)


def test_inactive_options_return_input_without_decoding():
    garbage = b"definitely not an image"
    assert not MediaOptions().active
    assert not MediaOptions(image_quality=40).active  # quality alone asks for no work
    for ext in ("jpg", "wav", "mp4"):
        out_ext, out = process_media(ext, garbage, MediaOptions(), source="x")
        assert out_ext == ext and out is garbage
    # Image options leave audio and video alone, and audio options leave images alone.
    assert process_media("wav", garbage, MediaOptions(image_max_side=10), source="x") == ("wav", garbage)
    assert process_media("jpg", garbage, MediaOptions(audio_rate=8000), source="x") == ("jpg", garbage)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("image_max_side", 0),
        ("image_max_side", True),
        ("image_format", "gif"),
        ("image_quality", 0),
        ("image_quality", 101),
        ("audio_rate", -8000),
        ("audio_format", "mp3"),
    ],
)
def test_validate_names_the_option(field, value):
    with pytest.raises(ValueError, match=field):  # checked once, when the options are made
        MediaOptions(**{field: value})


def test_valid_options_pass_validation():
    options = MediaOptions(
        image_max_side=1, image_format="webp", image_quality=100, audio_rate=8000, audio_format="flac"
    )
    assert process_media("txt", b"text", options, source="x") == ("txt", b"text")


def test_audio_resample_gives_right_rate_and_length(torchcodec):
    ext, out = process_media("wav", wav_bytes(), MediaOptions(audio_rate=8000), source="a.wav")
    assert ext == "wav"
    decoded = decode_audio(out)
    assert decoded.sample_rate == 8000
    assert tuple(decoded.data.shape) == (2, 2000)
    with wave.open(io.BytesIO(out)) as reader:  # plain 16-bit PCM, readable by the standard library
        assert (reader.getsampwidth(), reader.getframerate(), reader.getnframes()) == (2, 8000, 2000)


def test_audio_mono_downmix(torchcodec):
    ext, out = process_media("wav", wav_bytes(channels=2), MediaOptions(audio_mono=True), source="a.wav")
    decoded = decode_audio(out)
    assert ext == "wav" and decoded.data.shape[0] == 1 and decoded.sample_rate == RATE


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_audio_outputs_decode(torchcodec, fmt):
    source = wav_bytes(channels=1)
    options = MediaOptions(audio_format=fmt, audio_rate=8000)
    ext, out = process_media("wav", source, options, source="a.wav")
    assert ext == fmt
    decoded = decode_audio(out)
    assert decoded.sample_rate == 8000 and tuple(decoded.data.shape) == (1, 2000)


def test_flac_is_lossless_on_the_16_bit_grid(torchcodec):
    source = wav_bytes(channels=2)
    ext, out = process_media("wav", source, MediaOptions(audio_format="flac"), source="a.wav")
    assert ext == "flac" and out[:4] == b"fLaC"
    assert decode_audio(out).data.equal(decode_audio(source).data)


def test_audio_needing_no_change_keeps_its_bytes(torchcodec):
    data = wav_bytes(channels=1)
    options = MediaOptions(audio_rate=RATE, audio_mono=True, audio_format="wav")
    assert process_media("wav", data, options, source="a") == ("wav", data)


def test_lossy_audio_becomes_flac_when_reencoded(torchcodec):
    import torch
    from torchcodec.encoders import AudioEncoder

    mp3 = AudioEncoder(torch.zeros(1, RATE // 4), sample_rate=RATE).to_tensor("mp3").numpy().tobytes()
    ext, out = process_media("mp3", mp3, MediaOptions(audio_rate=8000), source="a.mp3")
    assert ext == "flac" and decode_audio(out).sample_rate == 8000


@pytest.mark.parametrize(
    "bad",
    [b"RIFF garbage that is not audio" * 10, wav_bytes()[:40], wav_bytes()[: len(wav_bytes()) // 2], b""],
    ids=["garbage", "header-only", "truncated", "empty"],
)
def test_corrupt_audio_raises_media_error(torchcodec, bad):
    for options in (MediaOptions(verify=True), MediaOptions(audio_rate=8000)):
        with pytest.raises(MediaError, match="audio does not decode"):
            process_media("wav", bad, options, source="bad.wav")


def test_audio_verify_keeps_bytes(torchcodec):
    data = wav_bytes()
    assert process_media("wav", data, MediaOptions(verify=True), source="a") == ("wav", data)


def mp4_bytes() -> bytes:
    import torch
    from torchcodec.encoders import VideoEncoder

    frames = (
        torch.arange(8 * 3 * 32 * 32, dtype=torch.int64).remainder(251).to(torch.uint8).reshape(8, 3, 32, 32)
    )
    return VideoEncoder(frames, frame_rate=8).to_tensor("mp4", codec="mpeg4").numpy().tobytes()


def test_video_verify_accepts_good_and_rejects_bad(torchcodec):
    good = mp4_bytes()
    assert process_media("mp4", good, MediaOptions(verify=True), source="v.mp4") == ("mp4", good)
    # Audio or image options do not touch video.
    assert process_media("mp4", b"junk", MediaOptions(audio_rate=8000), source="v.mp4") == ("mp4", b"junk")
    for bad in (b"\x00\x00\x00\x18ftypmp42 not a video" * 10, good[: len(good) // 2], wav_bytes()):
        with pytest.raises(MediaError, match="video does not decode"):
            process_media("mp4", bad, MediaOptions(verify=True), source="v.mp4")


def _determinism_jobs() -> list[tuple[str, bytes, MediaOptions]]:
    exif = Image.Exif()
    exif[0x0112] = 8
    jobs = [
        ("jpg", image_bytes((300, 200), exif=exif.tobytes()), MediaOptions(image_max_side=64)),
        ("png", image_bytes((300, 200), fmt="PNG", mode="RGBA"), MediaOptions(image_format="webp")),
        ("png", image_bytes((90, 70), fmt="PNG"), MediaOptions(image_max_side=50)),
    ]
    try:
        import torchcodec  # noqa: F401
    except ImportError:
        return jobs
    return [*jobs, ("wav", wav_bytes(), MediaOptions(audio_rate=11025, audio_format="flac", audio_mono=True))]


def test_output_is_deterministic_across_calls_and_processes():
    exts, datas, options = zip(*_determinism_jobs(), strict=True)
    run = functools.partial(process_media, source="job")
    here = list(map(run, exts, datas, options))
    assert here == list(map(run, exts, datas, options))
    assert all(out != data for (_, out), data in zip(here, datas, strict=True))
    # A fresh interpreter (spawn), as the packer's workers are: no state shared with this process.
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        there = list(pool.map(run, exts, datas, options))
    assert there == here


@pytest.mark.parametrize("spelled", ["jpg", "JPG", "Jpeg", "jpeg"])
def test_image_format_takes_the_extension_users_type(spelled):
    """Issue 33, item 9: `--image-format jpg` was refused ("must be jpeg, png or webp")."""
    options = MediaOptions(image_format=spelled)
    assert options.image_format == "jpeg"  # one spelling in the index, so a resume with the other matches
    buffer = io.BytesIO()
    Image.new("RGB", (8, 6), "red").save(buffer, "PNG")
    ext, out = process_media("png", buffer.getvalue(), options, source="a")
    assert ext == "jpg" and decode_image(out).format == "JPEG"
    with pytest.raises(ValueError, match="image_format must be jpeg, png or webp, not 'gif'"):
        MediaOptions(image_format="GIF")


def test_the_cli_takes_image_format_jpg(tmp_path):
    import tarfile

    from typer.testing import CliRunner

    from shardstream_cli import app

    (tmp_path / "src").mkdir()
    Image.new("RGB", (8, 6), "red").save(tmp_path / "src" / "a.png", "PNG")
    args = ["pack", str(tmp_path / "src"), str(tmp_path / "out"), "--image-format", "JPG"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    with tarfile.open(tmp_path / "out" / "train-000000.tar") as tar:
        assert [m.name for m in tar] == ["a.jpg"]
