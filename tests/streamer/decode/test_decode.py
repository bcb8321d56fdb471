"""SampleDecoder on real media made here: Pillow images, WAV by hand, FLAC and MP4 from torchcodec."""

from __future__ import annotations

import functools
import gzip
import io
import json
import pickle
import subprocess
import sys
import warnings
import wave

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from shardstream.errors import DecodeError, MissingMemberError, ShardReadError
from streamer.decode.sample import DECODERS, SampleDecoder, register_decoder

URL = "file:///data/train-000003.tar"
PIL_FORMATS = {"jpg": "JPEG", "png": "PNG", "webp": "WEBP"}


def picture(width: int, height: int, seed: int = 0) -> np.ndarray:
    """Gradients plus noise: asymmetric, so a rotation or a flip changes it; compressible, yet not flat."""
    rng = np.random.default_rng(seed)
    ys = np.linspace(0, 200, height)[:, None, None]
    xs = np.linspace(0, 120, width)[None, :, None]
    pixels = ys + xs * np.array([1.0, 0.3, -0.5]) + rng.normal(0, 6, (height, width, 3)) + 40
    return np.clip(pixels, 0, 255).astype(np.uint8)


def image_bytes(ext: str = "jpg", size: tuple[int, int] = (256, 192), mode: str = "RGB", **save) -> bytes:
    image = Image.fromarray(picture(*size)).convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, PIL_FORMATS[ext], **({"quality": 90} if ext != "png" else {}), **save)
    return buffer.getvalue()


def plain_pillow(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def wav_bytes(pcm: np.ndarray, rate: int) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(pcm.shape[0])
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(np.ascontiguousarray(pcm.T).astype("<i2").tobytes())
    return buffer.getvalue()


def flac_bytes(samples: torch.Tensor, rate: int) -> bytes:
    from torchcodec.encoders import AudioEncoder

    return AudioEncoder(samples, sample_rate=rate).to_tensor("flac").numpy().tobytes()


LEVELS = [30, 50, 70, 90, 110, 130, 150, 170]


@pytest.fixture(scope="module")
def mp4() -> bytes:
    from torchcodec.encoders import VideoEncoder

    # Flat frames of rising grey: a decoded frame's mean tells which frame it is.
    frames = torch.stack([torch.full((3, 32, 48), level, dtype=torch.uint8) for level in LEVELS])
    return VideoEncoder(frames, frame_rate=8).to_tensor("mp4", codec="mpeg4").numpy().tobytes()


def sample(**members: object) -> dict[str, object]:
    return {"__key__": "part0/000017", "__url__": URL, "__offset__": 1536, **members}


@pytest.fixture
def restore_registry():
    saved = dict(DECODERS)
    yield
    DECODERS.clear()
    DECODERS.update(saved)


# Module-level so that decoders holding them pickle.
def shout(data: bytes) -> str:
    return data.decode().upper()


def tag(data: bytes) -> str:
    return f"tagged {len(data)}"


# Images


@pytest.mark.parametrize("ext", ["jpg", "png", "webp"])
def test_each_image_mode_gives_its_type_and_plain_pillow_pixels(ext: str) -> None:
    data = image_bytes(ext)
    expected = plain_pillow(data)
    pil = SampleDecoder(image="pil")(sample(**{ext: data}))[ext]
    assert isinstance(pil, Image.Image) and pil.mode == "RGB" and pil.size == (256, 192)
    np.testing.assert_array_equal(np.asarray(pil), expected)
    array = SampleDecoder(image="numpy")(sample(**{ext: data}))[ext]
    assert isinstance(array, np.ndarray) and array.shape == (192, 256, 3) and array.dtype == np.uint8
    assert array.flags.writeable
    np.testing.assert_array_equal(array, expected)
    tensor = SampleDecoder(image="torch")(sample(**{ext: data}))[ext]
    assert isinstance(tensor, torch.Tensor) and tensor.shape == (3, 192, 256) and tensor.dtype == torch.uint8
    np.testing.assert_array_equal(tensor.permute(1, 2, 0).numpy(), expected)
    assert SampleDecoder(image="raw")(sample(**{ext: data}))[ext] is data


def test_grey_alpha_and_palette_images_come_out_rgb_without_warnings() -> None:
    rgba = Image.fromarray(np.dstack([picture(16, 8), np.full((8, 16), 100, np.uint8)]), "RGBA")
    palette = Image.fromarray(picture(16, 8)).convert("P")
    buffers = {"l": io.BytesIO(), "rgba": io.BytesIO(), "p": io.BytesIO()}
    Image.fromarray(picture(16, 8)).convert("L").save(buffers["l"], "PNG")
    rgba.save(buffers["rgba"], "PNG")
    palette.save(buffers["p"], "PNG", transparency=bytes(range(256)))  # byte transparency: Pillow warns
    decoder = SampleDecoder(image="torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = decoder(sample(**{f"{name}.png": buffer.getvalue() for name, buffer in buffers.items()}))
    for name in buffers:
        assert out[f"{name}.png"].shape == (3, 8, 16)
    np.testing.assert_array_equal(out["rgba.png"].permute(1, 2, 0).numpy(), picture(16, 8))
    grey = out["l.png"]
    assert torch.equal(grey[0], grey[1]) and torch.equal(grey[1], grey[2])


def test_image_size_int_decodes_jpeg_in_draft_mode_just_covering_the_target() -> None:
    data = image_bytes("jpg", (256, 192))
    for target, expected_size in [(64, (128, 96)), (48, (64, 48)), (24, (32, 24)), (100, (256, 192))]:
        out = SampleDecoder(image="numpy", image_size=target)(sample(jpg=data))["jpg"]
        assert out.shape == (expected_size[1], expected_size[0], 3)
        assert min(out.shape[:2]) >= target
        drafted = Image.open(io.BytesIO(data))
        drafted.draft("RGB", (target, target))
        np.testing.assert_array_equal(out, np.asarray(drafted))  # libjpeg's own reduced decode


def test_image_size_int_reduces_other_formats_alike_and_never_enlarges() -> None:
    data = image_bytes("png", (256, 192))
    out = SampleDecoder(image="numpy", image_size=64)(sample(png=data))["png"]
    np.testing.assert_array_equal(out, np.asarray(Image.open(io.BytesIO(data)).convert("RGB").reduce(2)))
    small = SampleDecoder(image="numpy", image_size=500)(sample(png=data))["png"]
    np.testing.assert_array_equal(small, plain_pillow(data))


@pytest.mark.parametrize("ext", ["jpg", "png"])
def test_image_size_tuple_gives_exactly_height_by_width(ext: str) -> None:
    data = image_bytes(ext, (256, 192))
    out = SampleDecoder(image="torch", image_size=(50, 70))(sample(**{ext: data}))[ext]
    assert out.shape == (3, 50, 70)
    full = Image.open(io.BytesIO(data)).convert("RGB").resize((70, 50), Image.Resampling.BILINEAR)
    difference = np.abs(out.permute(1, 2, 0).numpy().astype(int) - np.asarray(full).astype(int))
    assert difference.mean() < 3  # the same picture; the cheap path only rounds differently
    if ext == "jpg":
        drafted = Image.open(io.BytesIO(data))
        drafted.draft("RGB", (70, 50))
        assert drafted.size == (128, 96)
        expected = np.asarray(drafted.resize((70, 50), Image.Resampling.BILINEAR))
        pil = SampleDecoder(image="pil", image_size=(50, 70))(sample(**{ext: data}))[ext]
        np.testing.assert_array_equal(np.asarray(pil), expected)  # Pillow's resize after libjpeg's draft
        # numpy/torch output is resized by torch's uint8 kernel: within one level of Pillow's.
        np.testing.assert_allclose(out.permute(1, 2, 0).numpy(), expected, atol=1)
    enlarged = SampleDecoder(image="numpy", image_size=(300, 400))(sample(**{ext: data}))[ext]
    assert enlarged.shape == (300, 400, 3) and enlarged.flags.c_contiguous


def test_exif_orientation_is_applied_and_sizes_are_of_the_upright_picture() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # stored on its side: turn 90 degrees clockwise to view
    data = image_bytes("jpg", (64, 32), exif=exif)
    upright = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB"))
    assert upright.shape == (64, 32, 3)
    out = SampleDecoder(image="numpy")(sample(jpg=data))["jpg"]
    np.testing.assert_array_equal(out, upright)
    sized = SampleDecoder(image="numpy", image_size=(40, 20))(sample(jpg=data))["jpg"]
    assert sized.shape == (40, 20, 3)
    expected = np.asarray(Image.fromarray(upright).resize((20, 40), Image.Resampling.BILINEAR))
    assert np.abs(sized.astype(int) - expected.astype(int)).mean() < 3


def test_member_names_pick_their_decoder_by_the_last_dotted_part_in_any_case() -> None:
    data = image_bytes("png", (16, 8))
    out = SampleDecoder(image="torch")(sample(**{"0.png": data, "image.PNG": data, "a.b.json": b"[1]"}))
    assert out["0.png"].shape == out["image.PNG"].shape == (3, 8, 16)
    assert out["a.b.json"] == [1]


# Audio and video


def test_wav_decodes_to_float_channels_by_time_with_its_rate() -> None:
    pcm = (np.sin(np.arange(4000) / 7.0) * 12000).astype(np.int16)[None, :]
    waveform, rate = SampleDecoder()(sample(wav=wav_bytes(pcm, 16000)))["wav"]
    assert rate == 16000 and waveform.shape == (1, 4000) and waveform.dtype == torch.float32
    np.testing.assert_allclose(waveform.numpy(), pcm / 32768.0, atol=1e-6)


def test_flac_stereo_downmixes_to_mono_and_resamples() -> None:
    import torchaudio.functional

    left = torch.linspace(-0.5, 0.5, 4000)
    stereo = torch.stack([left, torch.sin(torch.arange(4000) / 5.0) * 0.25])
    data = flac_bytes(stereo, 16000)
    waveform, rate = SampleDecoder()(sample(flac=data))["flac"]
    assert rate == 16000 and waveform.shape == (2, 4000)
    assert torch.allclose(waveform, stereo, atol=1e-4)
    mono, _ = SampleDecoder(audio_mono=True)(sample(flac=data))["flac"]
    assert mono.shape == (1, 4000) and torch.allclose(mono, waveform.mean(dim=0, keepdim=True))
    resampled, new_rate = SampleDecoder(audio_rate=8000)(sample(flac=data))["flac"]
    assert new_rate == 8000 and resampled.shape == (2, 2000)
    assert torch.allclose(resampled, torchaudio.functional.resample(waveform, 16000, 8000))
    both, _ = SampleDecoder(audio_rate=8000, audio_mono=True)(sample(flac=data))["flac"]
    assert both.shape == (1, 2000)


def test_video_decodes_all_frames_or_evenly_spaced_ones(mp4: bytes) -> None:
    frames = SampleDecoder()(sample(mp4=mp4))["mp4"]
    assert frames.shape == (8, 3, 32, 48) and frames.dtype == torch.uint8
    np.testing.assert_allclose(frames.float().mean(dim=(1, 2, 3)).numpy(), LEVELS, atol=3)
    three = SampleDecoder(video_frames=3)(sample(mp4=mp4))["mp4"]
    assert three.shape == (3, 3, 32, 48)
    np.testing.assert_allclose(three.float().mean(dim=(1, 2, 3)).numpy(), [30, 110, 170], atol=3)
    more = SampleDecoder(video_frames=12)(sample(mp4=mp4))["mp4"]
    assert more.shape == (12, 3, 32, 48)  # frames repeat, so clips of any length batch together
    means = more.float().mean(dim=(1, 2, 3)).numpy()
    assert means[0] < 33 and means[-1] > 167 and np.all(np.diff(means) >= -1)


def test_corrupt_audio_and_video_raise_decode_errors(mp4: bytes) -> None:
    decoder = SampleDecoder()
    for name, data in [
        ("wav", b"RIFF\x00\x00\x00\x00WAVEjunk"),
        ("mp4", mp4[: len(mp4) // 3] + b"\x00" * 50),
    ]:
        with pytest.raises(DecodeError) as info:
            decoder(sample(**{name: data}))
        assert not isinstance(info.value, ShardReadError)  # the bytes were read; they do not decode
        assert info.value.member == f"part0/000017.{name}" and info.value.__cause__ is not None


def test_missing_torchcodec_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torchcodec.decoders", None)  # makes its import fail
    with pytest.raises(ImportError, match=r"pip install 'shardstream\[audio\]'"):
        SampleDecoder()(sample(wav=wav_bytes(np.zeros((1, 10), np.int16), 8000)))
    with pytest.raises(ImportError, match=r"pip install 'shardstream\[video\]'"):
        SampleDecoder()(sample(mp4=b"not a video"))


# Everything else


def test_text_numbers_arrays_and_gzip() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    npy, npz, pth = io.BytesIO(), io.BytesIO(), io.BytesIO()
    np.save(npy, array)
    np.savez(npz, a=array, b=np.array([1, 2], np.int64))
    torch.save({"w": torch.ones(2, 3)}, pth)
    members = {
        "txt": "ünïcode caption\n".encode(),
        "json": b'{"label": 3, "tags": ["a"]}',
        "cls": b"7\n",
        "cls2": b" 12",
        "index": b"5",
        "inx": b"6",
        "id": b"99",
        "npy": npy.getvalue(),
        "npz": npz.getvalue(),
        "pth": pth.getvalue(),
        "pt": pth.getvalue(),
        "txt.gz": gzip.compress(b"zipped text"),
        "meta.json.gz": gzip.compress(b'{"a": 1}'),
        "gz": gzip.compress(b"just bytes"),
        "xyz": b"\x00\x01unknown",
    }
    out = SampleDecoder()(sample(**members))
    assert out["txt"] == "ünïcode caption\n"
    assert out["json"] == {"label": 3, "tags": ["a"]}
    assert (out["cls"], out["cls2"], out["index"], out["inx"], out["id"]) == (7, 12, 5, 6, 99)
    np.testing.assert_array_equal(out["npy"], array)
    assert set(out["npz"]) == {"a", "b"}
    np.testing.assert_array_equal(out["npz"]["a"], array)
    assert torch.equal(out["pth"]["w"], torch.ones(2, 3)) and torch.equal(out["pt"]["w"], torch.ones(2, 3))
    assert out["txt.gz"] == "zipped text" and out["meta.json.gz"] == {"a": 1} and out["gz"] == b"just bytes"
    assert out["xyz"] == members["xyz"]


RAN: list[str] = []  # what a payload unpickled from a shard did


def record(what: str) -> str:
    RAN.append(what)
    return what


class Payload:
    """Unpickling this calls ``record``: a stand-in for a pickle that runs code."""

    def __reduce__(self):
        return (record, ("payload ran",))


class Plain:
    """An ordinary class instance from an importable module: not a tensor, not a container of them."""

    def __init__(self, value: int) -> None:
        self.value = value


def _saved(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("ext", ["pth", "pt", "0.pth"])
def test_pth_members_decode_tensors_but_refuse_any_other_pickled_object(ext: str) -> None:
    import fractions

    good = _saved({"w": torch.arange(6.0).reshape(2, 3), "step": 7, "names": ["a", "b"]})
    out = SampleDecoder()(sample(**{ext: good}))[ext]
    assert torch.equal(out["w"], torch.arange(6.0).reshape(2, 3)) and out["step"] == 7
    assert out["names"] == ["a", "b"]
    RAN.clear()
    for obj in (Payload(), Plain(3), {"w": torch.ones(1), "extra": fractions.Fraction(1, 3)}):
        data = _saved(obj)
        with pytest.raises(DecodeError) as info:
            SampleDecoder()(sample(**{ext: data}))
        assert info.value.member == f"part0/000017.{ext}"
    assert RAN == []  # the payload never ran
    # The same bytes are live: a plain unpickler runs the payload and rebuilds the instance.
    assert torch.load(io.BytesIO(_saved(Payload())), weights_only=False) == "payload ran"
    assert RAN == ["payload ran"]
    assert torch.load(io.BytesIO(_saved(Plain(3))), weights_only=False).value == 3
    RAN.clear()


def test_msgpack_members_stay_bytes_without_msgpack() -> None:
    try:
        import msgpack
    except ImportError:
        assert SampleDecoder()(sample(mp=b"\x81\xa1a\x01"))["mp"] == b"\x81\xa1a\x01"
    else:
        assert SampleDecoder()(sample(mp=msgpack.packb({"a": 1})))["mp"] == {"a": 1}


def test_metadata_and_already_decoded_values_pass_through() -> None:
    decoded = {"already": True}
    out = SampleDecoder()(sample(json=decoded, txt=b"x", __extra__=b"{}"))
    assert out["json"] is decoded and out["__extra__"] == b"{}" and out["txt"] == "x"
    assert (out["__key__"], out["__url__"], out["__offset__"]) == ("part0/000017", URL, 1536)


# User decoders


def test_user_decoders_override_by_extension_and_by_full_member_name() -> None:
    data = image_bytes("jpg", (16, 8))
    decoder = SampleDecoder(image="torch", decoders={"txt": shout, "image.jpg": tag})
    out = decoder(sample(**{"txt": b"hi", "0.txt": b"yo", "image.jpg": data, "0.jpg": data}))
    assert out["txt"] == "HI" and out["0.txt"] == "YO"
    assert out["image.jpg"] == f"tagged {len(data)}"
    assert out["0.jpg"].shape == (3, 8, 16)
    assert SampleDecoder()(sample(txt=b"hi"))["txt"] == "hi"  # only that decoder was changed


@pytest.mark.usefixtures("restore_registry")
def test_register_decoder_is_global_for_decoders_made_afterwards() -> None:
    before = SampleDecoder()
    register_decoder("xyz", shout)
    register_decoder("jpg", tag)  # wins over the image option of later decoders
    after = SampleDecoder(image="torch")
    data = image_bytes("jpg", (16, 8))
    assert after(sample(xyz=b"abc", jpg=data)) == {**sample(), "xyz": "ABC", "jpg": f"tagged {len(data)}"}
    assert before(sample(xyz=b"abc"))["xyz"] == b"abc"
    assert isinstance(before(sample(jpg=data))["jpg"], Image.Image)
    with pytest.raises(ValueError, match="ext"):
        register_decoder(".xyz", shout)
    with pytest.raises(ValueError, match="fn"):
        register_decoder("xyz", "not callable")  # type: ignore[arg-type]


# Fields, errors, pickling


def test_fields_keep_only_the_members_asked_for_and_name_what_is_missing() -> None:
    decoder = SampleDecoder(fields=["txt", "cls"])
    out = decoder(sample(txt=b"a", cls=b"1", jpg=b"not even decoded", json=b"{}"))
    assert out == {**sample(), "txt": "a", "cls": 1}
    with pytest.raises(MissingMemberError) as info:
        decoder(sample(txt=b"a", json=b"{}"))
    assert isinstance(info.value, KeyError) and info.value.member is None  # no such member to name
    message = str(info.value)
    assert "'cls'" in message and "part0/000017" in message and URL in message and "json" in message


@pytest.mark.parametrize("data", [b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x13" * 64, "truncated"])
def test_a_corrupt_jpeg_raises_a_decode_error_naming_url_member_and_offset(data: bytes | str) -> None:
    if data == "truncated":
        data = image_bytes("jpg")[:1500]
    with pytest.raises(DecodeError) as info:
        SampleDecoder(image="torch")(sample(**{"0.jpg": data}))
    error = info.value
    assert not isinstance(error, ShardReadError)
    assert (error.url, error.member, error.offset) == (URL, "part0/000017.0.jpg", 1536)
    assert URL in str(error) and "part0/000017.0.jpg" in str(error) and "1536" in str(error)
    assert error.__cause__ is not None


def test_a_sample_decoder_pickles_with_its_options_and_decoders(mp4: bytes) -> None:
    decoder = SampleDecoder(
        image="torch",
        image_size=(20, 30),
        audio_rate=8000,
        audio_mono=True,
        video_frames=2,
        decoders={"txt": shout},
        fields=["jpg", "wav", "mp4", "txt"],
    )
    clone = pickle.loads(pickle.dumps(decoder))
    pcm = np.zeros((2, 1600), np.int16)
    data = sample(jpg=image_bytes("jpg", (64, 48)), wav=wav_bytes(pcm, 16000), mp4=mp4, txt=b"hi", cls=b"1")
    a, b = decoder(data), clone(data)
    assert a.keys() == b.keys() == {"__key__", "__url__", "__offset__", "jpg", "wav", "mp4", "txt"}
    assert torch.equal(a["jpg"], b["jpg"]) and b["jpg"].shape == (3, 20, 30)
    assert b["wav"][0].shape == (1, 800) and b["wav"][1] == 8000
    assert torch.equal(a["mp4"], b["mp4"]) and b["mp4"].shape[0] == 2
    assert b["txt"] == "HI"


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"image": "cv2"}, "image"),
        ({"image_size": 0}, "image_size"),
        ({"image_size": (10, 0)}, "image_size"),
        ({"image_size": True}, "image_size"),
        ({"image": "raw", "image_size": 10}, "image_size"),
        ({"audio_rate": 0}, "audio_rate"),
        ({"audio_rate": 16000.0}, "audio_rate"),
        ({"audio_mono": 1}, "audio_mono"),
        ({"video_frames": 0}, "video_frames"),
        ({"decoders": {"txt": "upper"}}, "decoders"),
        ({"decoders": {".txt": shout}}, "decoders"),
        ({"fields": "jpg"}, "fields"),
        ({"fields": ["jpg", 3]}, "fields"),
    ],
)
def test_bad_options_raise_value_errors_naming_the_argument(kwargs: dict, argument: str) -> None:
    with pytest.raises(ValueError, match=argument):
        SampleDecoder(**kwargs)


def test_the_registry_covers_the_documented_extensions() -> None:
    documented = (
        "jpg jpeg png webp gif bmp tif tiff ppm wav flac mp3 ogg opus m4a mp4 webm mkv avi mov "
        "txt json cls cls2 index inx id npy npz pth pt mp msgpack"
    )
    assert set(documented.split()) <= set(DECODERS)


def test_turbo_jpeg_path_matches_pillow_and_defers_exif_to_pillow():
    from streamer.decode import image as decode_module

    if decode_module.turbo_jpeg() is None:
        pytest.skip("torchcodec is not importable here")
    rng = np.random.default_rng(5)
    pixels = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    data = buffer.getvalue()
    fast = decode_module.fast_jpeg(data, "torch")
    assert fast is not None and fast.shape == (3, 48, 64)
    reference = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    assert np.abs(fast.permute(1, 2, 0).numpy().astype(int) - reference.astype(int)).max() <= 1
    exif = Image.Exif()
    exif[0x0112] = 6
    rotated = io.BytesIO()
    Image.fromarray(pixels).save(rotated, "JPEG", exif=exif.tobytes())
    assert decode_module.fast_jpeg(rotated.getvalue(), "torch") is None  # orientation: Pillow's path
    assert decode_module.decode_image(rotated.getvalue(), "torch").shape == (3, 64, 48)
    assert decode_module.fast_jpeg(data[:200], "torch") is None  # damage: Pillow reports it


def test_turbo_jpeg_calls_the_op_under_decode_jpeg_and_decodes_as_it_does():
    """The wrapper's checks cost ~9 us a call, so the op under it is used, once it has decoded a probe
    exactly as the public function does; a torchcodec whose op decodes differently keeps the public one."""
    from streamer.decode import image as decode_module

    decode = decode_module.turbo_jpeg()
    if decode is None:
        pytest.skip("torchcodec is not importable here")
    from torchcodec._core.ops import decode_jpeg as op
    from torchcodec.decoders import decode_jpeg

    assert isinstance(decode, functools.partial) and decode.func is op
    rng = np.random.default_rng(9)
    for shape in ((48, 64, 3), (31, 17, 3), (256, 256, 3)):
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, shape, dtype=np.uint8)).save(buffer, "JPEG", quality=85)
        encoded = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
        assert torch.equal(decode(encoded), decode_jpeg(encoded, mode="RGB"))
    assert decode_module._direct_op(lambda encoded: torch.zeros(3, 8, 16, dtype=torch.uint8)) is None


def test_jpegs_to_tensors_stay_silent_and_fast_under_warnings_as_errors() -> None:
    """The decoder is handed a tensor over the JPEG's bytes: torch warns once per process that bytes are
    not writable; that first warning is silenced, and no later call warns (a fresh process, -W error)."""
    script = (
        "import io, torch\n"
        "from PIL import Image\n"
        "from streamer.decode.image import decode_image\n"
        "buf = io.BytesIO(); Image.new('RGB', (40, 24), (200, 30, 90)).save(buf, 'JPEG', quality=95)\n"
        "chw = [decode_image(buf.getvalue(), 'torch') for _ in range(3)]\n"
        "assert chw[0].shape == (3, 24, 40) and all(torch.equal(chw[0], c) for c in chw)\n"
        "print(chw[0][:, 0, 0].tolist())\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    red, green, blue = json.loads(done.stdout)
    assert abs(red - 200) < 8 and abs(green - 30) < 8 and abs(blue - 90) < 8
