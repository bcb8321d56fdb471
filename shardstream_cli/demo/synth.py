"""A tiny synthetic multimodal corpus for the demo, tests and benchmarks: deterministic, fast, unrealistic.

Images and WAV need only Pillow and numpy. FLAC and MP4 are written by torchcodec; without it (or without
the FFmpeg libraries it loads) FLAC samples are written as WAV instead and no video is made.
"""

from __future__ import annotations

import io
import json
import os
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

_IMAGE_EXTS = ("jpg", "png", "webp")
_PIL_NAMES = {"jpg": "JPEG", "png": "PNG", "webp": "WEBP"}
_SAMPLES_PER_PART = 10
_FILES_PER_FOLDER = 10_000
_IMAGE_SIZE = (64, 48)
_AUDIO_RATE = 16_000
_AUDIO_SECONDS = 0.25
_VIDEO_FRAMES, _VIDEO_SIDE, _VIDEO_FPS = 8, 32, 8
_COLOURS = ("red", "green", "blue", "amber", "violet", "grey", "teal", "orange")
_THINGS = ("gradient", "sky", "field", "wall", "sunset", "sea", "fog", "glow")
_MOODS = ("calm", "bright", "dim", "noisy", "soft", "bold")


@dataclass(frozen=True)
class Corpus:
    root: Path
    files_dir: Path
    manifest: Path
    samples: int


def make_corpus(
    root: str | os.PathLike[str], samples: int = 24, *, seed: int = 0, video: bool = True
) -> Corpus:
    """Write the same ``samples`` twice: as sibling files sharing a key, and as a LLaVA-style JSONL manifest.

    Files: ``files/partN/KEY.{jpg|png|webp}`` + ``.txt`` + ``.json`` for every sample, ``.wav``/``.flac``
    on every 4th, ``.mp4`` on every 6th. Manifest: ``manifest/manifest.jsonl`` plus ``manifest/media/``;
    records rotate through one image, an ``images`` list, image + ``audio``, and ``video``.
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise ValueError(f"samples must be a positive integer, not {samples!r}")
    base = Path(root)
    if base.exists() and (not base.is_dir() or any(base.iterdir())):
        # Leftovers from a bigger corpus would silently join this one.
        raise ValueError(f"root must be a missing or empty folder: {base}")
    files_dir, manifest_dir = base / "files", base / "manifest"
    (manifest_dir / "media").mkdir(parents=True)
    encoders = _torchcodec_encoders()
    with_video = video and encoders is not None
    rng = np.random.default_rng(seed)
    records = []
    for i in range(samples):
        key = f"{i:06d}"
        part = files_dir / f"part{i // _SAMPLES_PER_PART}"
        part.mkdir(parents=True, exist_ok=True)
        caption = _caption(rng)
        image_ext = _IMAGE_EXTS[i % len(_IMAGE_EXTS)]
        image = _image_bytes(rng, _IMAGE_SIZE, image_ext)
        (part / f"{key}.{image_ext}").write_bytes(image)
        (part / f"{key}.txt").write_text(caption + "\n", encoding="utf-8")
        meta = {"key": key, "index": i, "label": int(rng.integers(10)), "size": list(_IMAGE_SIZE)}
        (part / f"{key}.json").write_text(json.dumps(meta) + "\n", encoding="utf-8")
        if i % 4 == 1:
            audio_ext, audio = _audio_bytes(rng, "flac" if (i // 4) % 2 else "wav", encoders)
            (part / f"{key}.{audio_ext}").write_bytes(audio)
        if with_video and i % 6 == 5:
            (part / f"{key}.mp4").write_bytes(_video_bytes(rng, encoders))
        records.append(_record(i, key, caption, image_ext, image, rng, manifest_dir, encoders, with_video))
    manifest = manifest_dir / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return Corpus(root=base, files_dir=files_dir, manifest=manifest, samples=samples)


def _record(
    i: int,
    key: str,
    caption: str,
    image_ext: str,
    image: bytes,
    rng: np.random.Generator,
    manifest_dir: Path,
    encoders: Any,
    with_video: bool,
) -> dict[str, Any]:
    def put(name: str, data: bytes) -> str:
        (manifest_dir / "media" / name).write_bytes(data)
        return f"media/{name}"

    record: dict[str, Any] = {"id": f"s{key}"}
    kind = i % 4
    if kind == 1:
        exts = [_IMAGE_EXTS[(i + n) % len(_IMAGE_EXTS)] for n in range(2 + (i // 4) % 2)]
        record["images"] = [
            put(f"{key}_{n}.{e}", _image_bytes(rng, _IMAGE_SIZE, e)) for n, e in enumerate(exts)
        ]
        prompt = "<image>\n" * len(exts) + "How do these pictures differ?"
    elif kind == 3 and with_video:
        record["video"] = put(f"{key}.mp4", _video_bytes(rng, encoders))
        prompt = "<video>\nWhat happens in the clip?"
    else:
        record["image"] = put(f"{key}.{image_ext}", image)
        prompt = "<image>\nWhat is shown?"
        if kind == 2:
            audio_ext, audio = _audio_bytes(rng, "flac" if (i // 4) % 2 else "wav", encoders)
            record["audio"] = put(f"{key}.{audio_ext}", audio)
            prompt = "<image>\n<audio>\nWhat is shown, and what is heard?"
    record["conversations"] = [{"from": "human", "value": prompt}, {"from": "gpt", "value": caption}]
    return record


def make_jpegs(
    root: str | os.PathLike[str], count: int, size: tuple[int, int] = (256, 256), *, seed: int = 0
) -> Path:
    """Write ``count`` compressible JPEGs (gradients plus a little noise) with ``.cls`` labels; returns root.

    Names are ``{i:08d}.jpg``/``.cls`` in folders ``0000``, ``0001``... of at most 10,000 files each.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be a non-negative integer, not {count!r}")
    width, height = size
    if width < 1 or height < 1:
        raise ValueError(f"size must be two positive integers, not {size!r}")
    base = Path(root)
    rng = np.random.default_rng(seed)
    # One noise bank cropped at random offsets costs far less than fresh noise for every image.
    bank = rng.integers(-6, 7, size=(2 * height, 2 * width, 3), dtype=np.int16)
    per_folder = _FILES_PER_FOLDER // 2  # a .jpg and a .cls per image
    for i in range(count):
        folder = base / f"{i // per_folder:04d}"
        if i % per_folder == 0:
            folder.mkdir(parents=True, exist_ok=True)
        y, x = rng.integers(height), rng.integers(width)
        pixels = np.clip(_gradient(rng, width, height) + bank[y : y + height, x : x + width], 0, 255)
        buffer = io.BytesIO()
        Image.fromarray(pixels.astype(np.uint8), "RGB").save(buffer, "JPEG", quality=90)
        (folder / f"{i:08d}.jpg").write_bytes(buffer.getvalue())
        (folder / f"{i:08d}.cls").write_text(f"{int(rng.integers(1000))}\n", encoding="ascii")
    return base


def _gradient(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    start, across, down = (rng.uniform(0, 255, 3).astype(np.float32) for _ in range(3))
    return (start + (across - start) * xs + (down - start) * ys * 0.5).astype(np.int16)


def _image_bytes(rng: np.random.Generator, size: tuple[int, int], ext: str) -> bytes:
    width, height = size
    noise = rng.integers(-40, 41, size=(height, width, 3), dtype=np.int16)
    pixels = np.clip(_gradient(rng, width, height) + noise, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, _PIL_NAMES[ext], quality=85)
    return buffer.getvalue()


def _audio_bytes(rng: np.random.Generator, ext: str, encoders: Any) -> tuple[str, bytes]:
    count = int(_AUDIO_RATE * _AUDIO_SECONDS)
    t = np.arange(count, dtype=np.float64) / _AUDIO_RATE
    tone = 0.3 * np.sin(2 * np.pi * rng.uniform(110, 880) * t) + rng.normal(0, 0.01, count)
    pcm = np.round(np.clip(tone, -1, 1) * 32767).astype("<i2")
    if ext == "flac" and encoders is not None:
        import torch

        samples = torch.from_numpy((pcm.astype(np.float32) / 32768.0)[None, :])
        return "flac", encoders.AudioEncoder(samples, sample_rate=_AUDIO_RATE).to_tensor(
            "flac"
        ).numpy().tobytes()
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(_AUDIO_RATE)
        writer.writeframes(pcm.tobytes())
    return "wav", buffer.getvalue()


def _video_bytes(rng: np.random.Generator, encoders: Any) -> bytes:
    import torch

    side = _VIDEO_SIDE
    base = _gradient(rng, 2 * side, side)
    # A gradient sliding sideways: real motion, so the codec has inter-frame work, yet it compresses.
    frames = np.stack([base[:, f * 2 : f * 2 + side] for f in range(_VIDEO_FRAMES)]).clip(0, 255)
    tensor = torch.from_numpy(frames.astype(np.uint8)).permute(0, 3, 1, 2).contiguous()
    # MPEG-4 Part 2, not H.264: through torchcodec 0.17, libx264 gives different bytes run to run for the
    # same frames (the ffmpeg CLI does not); the mpeg4 encoder is byte-stable and every FFmpeg decodes it.
    encoder = encoders.VideoEncoder(tensor, frame_rate=_VIDEO_FPS)
    return encoder.to_tensor("mp4", codec="mpeg4").numpy().tobytes()


def _torchcodec_encoders() -> Any:
    try:
        import torchcodec.encoders as encoders
    except (ImportError, OSError, RuntimeError):
        return None
    return encoders


def _caption(rng: np.random.Generator) -> str:
    colour, thing, mood = (str(rng.choice(words)) for words in (_COLOURS, _THINGS, _MOODS))
    return f"A {mood} {colour} {thing}."
