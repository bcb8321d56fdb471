"""collate and pad_collate on what SampleDecoder really gives: images, audio tuples, video, text, labels."""

from __future__ import annotations

import functools
import io
import wave

import numpy as np
import pytest
import torch
from PIL import Image

from streamer.batch.collate import Padded, collate, pad_collate
from streamer.decode.sample import SampleDecoder


def jpeg(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    pixels = np.linspace(0, 255, width * height * 3).reshape(height, width, 3).astype(np.uint8)
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def wav(frames: int, channels: int = 1, rate: int = 16000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(channels)
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes((np.arange(frames * channels, dtype="<i2") * 7).tobytes())
    return buffer.getvalue()


def decoded(*sizes: tuple[int, int], frames: tuple[int, ...] = (), image: str = "torch") -> list[dict]:
    decoder = SampleDecoder(image=image)
    frames = frames or (800,) * len(sizes)
    return [
        decoder(
            {
                "__key__": f"k{i}",
                "__url__": "file:///s/train-000000.tar",
                "jpg": jpeg(*size),
                "wav": wav(count),
                "json": b'{"caption": "x"}',
                "cls": str(i).encode(),
                "txt": f"text {i}".encode(),
            }
        )
        for i, (size, count) in enumerate(zip(sizes, frames, strict=True))
    ]


def test_equal_shapes_stack_and_scalars_become_tensors() -> None:
    batch = collate(decoded((32, 24), (32, 24), (32, 24)))
    assert batch["jpg"].shape == (3, 3, 24, 32) and batch["jpg"].dtype == torch.uint8
    waves, rates = batch["wav"]
    assert waves.shape == (3, 1, 800) and waves.dtype == torch.float32
    assert torch.equal(rates, torch.tensor([16000] * 3))
    assert torch.equal(batch["cls"], torch.tensor([0, 1, 2])) and batch["cls"].dtype == torch.int64
    assert batch["__key__"] == ["k0", "k1", "k2"] and batch["__url__"] == ["file:///s/train-000000.tar"] * 3
    assert batch["json"] == [{"caption": "x"}] * 3 and batch["txt"] == ["text 0", "text 1", "text 2"]


def test_different_shapes_stay_lists_of_what_the_samples_had() -> None:
    samples = decoded((32, 24), (40, 24), frames=(800, 1200))
    batch = collate(samples)
    assert isinstance(batch["jpg"], list) and [t.shape for t in batch["jpg"]] == [(3, 24, 32), (3, 24, 40)]
    assert batch["jpg"][0] is samples[0]["jpg"]
    waves, rates = batch["wav"]
    assert isinstance(waves, list) and [w.shape[-1] for w in waves] == [800, 1200]
    assert torch.equal(rates, torch.tensor([16000, 16000]))


def test_ndarrays_stack_into_tensors_or_stay_a_list() -> None:
    same = collate([{"a": np.full((2, 3), i, np.float32)} for i in range(4)])
    assert isinstance(same["a"], torch.Tensor) and same["a"].shape == (4, 2, 3)
    assert same["a"].dtype == torch.float32 and same["a"][3, 1, 2] == 3
    differ = collate([{"a": np.zeros(2)}, {"a": np.zeros(3)}])
    assert isinstance(differ["a"], list) and all(isinstance(v, np.ndarray) for v in differ["a"])
    dtypes = collate([{"a": np.zeros(2, np.float32)}, {"a": np.zeros(2, np.float64)}])
    assert isinstance(dtypes["a"], list)
    strings = collate([{"a": np.array(["x"])}, {"a": np.array(["y"])}])
    assert isinstance(strings["a"], list)
    scalars = collate([{"a": np.float32(1.5)}, {"a": np.float32(2.5)}])
    assert torch.equal(scalars["a"], torch.tensor([1.5, 2.5]))


def test_python_scalars_and_everything_else() -> None:
    image = Image.new("RGB", (2, 2))
    batch = collate(
        [
            {"i": 1, "f": 1.5, "m": 1, "b": True, "s": "a", "by": b"x", "d": {"k": 1}, "n": None, "p": image},
            {
                "i": 2,
                "f": 2.5,
                "m": 2.5,
                "b": False,
                "s": "b",
                "by": b"y",
                "d": {"k": 2},
                "n": None,
                "p": image,
            },
        ]
    )
    assert batch["i"].dtype == torch.int64 and batch["f"].dtype == torch.float64
    assert torch.equal(batch["m"], torch.tensor([1.0, 2.5], dtype=torch.float64))
    assert torch.equal(batch["b"], torch.tensor([True, False]))
    assert batch["s"] == ["a", "b"] and batch["by"] == [b"x", b"y"] and batch["d"] == [{"k": 1}, {"k": 2}]
    assert batch["n"] == [None, None] and batch["p"] == [image, image]
    mixed = collate([{"x": 1}, {"x": None}])
    assert mixed["x"] == [1, None]


def test_pil_images_collate_to_a_list() -> None:
    batch = collate(decoded((8, 8), (8, 8), image="pil"))
    assert isinstance(batch["jpg"], list) and all(isinstance(v, Image.Image) for v in batch["jpg"])


def test_a_key_missing_from_some_samples_is_a_key_error_naming_it() -> None:
    samples = decoded((8, 8), (8, 8))
    del samples[1]["txt"]
    with pytest.raises(KeyError, match=r"'txt'.*k1"):
        collate(samples)
    samples = decoded((8, 8), (8, 8))
    samples[1]["extra"] = 1
    with pytest.raises(KeyError, match="'extra'"):
        collate(samples)


def test_bad_batches_and_options_are_value_errors() -> None:
    with pytest.raises(ValueError, match="samples"):
        collate([])
    with pytest.raises(ValueError, match="samples"):
        collate({"a": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dims"):
        pad_collate([{"a": torch.zeros(2)}], dims={"a": 1.5})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="pad_value"):
        pad_collate([{"a": torch.zeros(2)}], dims={"a": 0}, pad_value="0")  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="'b'"):
        pad_collate([{"a": torch.zeros(2)}], dims={"b": 0})


def test_pad_collate_pads_audio_along_time_with_lengths() -> None:
    samples = decoded((8, 8), (8, 8), (8, 8), frames=(800, 1200, 500))
    batch = pad_collate(samples, dims={"wav": -1}, pad_value=-1.0)
    padded, rates = batch["wav"]
    assert isinstance(padded, Padded)
    assert padded.data.shape == (3, 1, 1200) and torch.equal(padded.lengths, torch.tensor([800, 1200, 500]))
    for i, sample in enumerate(samples):
        length = int(padded.lengths[i])
        assert torch.equal(padded.data[i, :, :length], sample["wav"][0])
        assert torch.all(padded.data[i, :, length:] == -1.0)
    assert torch.equal(rates, torch.tensor([16000] * 3))
    assert batch["jpg"].shape == (3, 3, 8, 8)  # the other keys collate as usual


def test_pad_collate_pads_video_along_frames_even_when_all_lengths_agree() -> None:
    clips = [torch.full((t, 3, 4, 4), t, dtype=torch.uint8) for t in (2, 5)]
    batch = pad_collate([{"mp4": clips[0]}, {"mp4": clips[1]}], dims={"mp4": 0})
    assert batch["mp4"].data.shape == (2, 5, 3, 4, 4) and batch["mp4"].data.dtype == torch.uint8
    assert torch.equal(batch["mp4"].lengths, torch.tensor([2, 5]))
    assert torch.all(batch["mp4"].data[0, :2] == 2) and torch.all(batch["mp4"].data[0, 2:] == 0)
    same = pad_collate([{"mp4": clips[1]}, {"mp4": clips[1].clone()}], dims={"mp4": 0})
    assert isinstance(same["mp4"], Padded)  # a fixed type, whatever the batch holds
    from_numpy = pad_collate([{"a": np.ones(2)}, {"a": np.ones(3)}], dims={"a": 0})
    assert from_numpy["a"].data.dtype == torch.float64 and from_numpy["a"].data.shape == (2, 3)


def test_pad_collate_refuses_shapes_that_differ_off_the_padded_dim() -> None:
    with pytest.raises(ValueError, match=r"'mp4'.*dim 0"):
        pad_collate([{"mp4": torch.zeros(2, 3, 4, 4)}, {"mp4": torch.zeros(2, 3, 5, 4)}], dims={"mp4": 0})
    with pytest.raises(ValueError, match="tensors or ndarrays"):
        pad_collate([{"txt": "a"}, {"txt": "b"}], dims={"txt": 0})
    with pytest.raises(ValueError, match="3 dims"):
        pad_collate([{"a": torch.zeros(1, 2, 3)}], dims={"a": 3})


def test_as_a_dataloader_collate_fn() -> None:
    samples = decoded((16, 16), (16, 16), (16, 16), (16, 16), frames=(400, 800, 400, 800))
    loader = torch.utils.data.DataLoader(
        samples, batch_size=2, collate_fn=functools.partial(pad_collate, dims={"wav": -1})
    )
    batches = list(loader)
    assert len(batches) == 2 and batches[0]["jpg"].shape == (2, 3, 16, 16)
    assert torch.equal(batches[1]["wav"][0].lengths, torch.tensor([400, 800]))
