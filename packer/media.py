"""Optional media processing at pack time (resize, re-encode, verify): decoding costs far more than copying.

* Types no option asks about pass through unopened. Once an option asks about a type (``verify`` asks
  about all), each such file is decoded in full, so a corrupt one raises ``MediaError`` even if kept.
* A file needing no change (small enough, same format, upright, right rate and channels) keeps its bytes:
  no generation loss, metadata kept. A re-encoded one keeps its format if we write it (JPEG/PNG/WebP,
  WAV/FLAC), else becomes lossless PNG or FLAC; its extension follows the bytes; only ICC metadata survives.
* Every frame of an animated image is decoded to check it; one that must be re-encoded keeps frame 0.
* Output is byte-deterministic for the same input and library builds; FLAC embeds FFmpeg's version string.
"""

from __future__ import annotations

import io
import struct
import warnings
import wave
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from shardstream.checks import is_positive_int, positive_int_or_none
from shardstream.errors import MediaError, PackError, short_reason
from shardstream.extras import require
from shardstream.mediatypes import AUDIO_EXTENSIONS, IMAGE_EXTENSIONS, RASTER_FORMATS, VIDEO_EXTENSIONS

# option value -> (Pillow format name, extension written)
_IMAGE_TARGETS = {"jpeg": ("JPEG", "jpg"), "png": ("PNG", "png"), "webp": ("WEBP", "webp")}
_IMAGE_SPELLINGS = {"jpg": "jpeg"}  # another name for a target, kept as the target's own in the index
# Pillow's name for what was decoded -> our option value; MPO is what Pillow calls many camera JPEGs.
_PIL_FORMATS = {"JPEG": "jpeg", "MPO": "jpeg", "PNG": "png", "WEBP": "webp"}
_AUDIO_TARGETS = ("wav", "flac")
_ORIENTATION_TAG = 0x0112
_RESIZABLE = {"1": "L", "P": "RGB", "PA": "RGBA", "CMYK": "RGB"}
_FAMILY = {"1": "L", "LA": "L", "I": "L", "I;16": "L", "F": "L", "P": "RGB", "PA": "RGB", "RGBA": "RGB"}


@dataclass(frozen=True)
class MediaOptions:
    image_max_side: int | None = None
    image_format: str | None = None
    image_quality: int = 90  # only used when an image is re-encoded; on its own it asks for no work
    audio_rate: int | None = None
    audio_format: str | None = None
    audio_mono: bool = False
    verify: bool = False

    def __post_init__(self) -> None:
        positive_int_or_none("image_max_side", self.image_max_side)
        if isinstance(self.image_format, str):  # "jpg", "JPEG": the extension users type, in any case
            spelled = self.image_format.lower()
            object.__setattr__(self, "image_format", _IMAGE_SPELLINGS.get(spelled, spelled))
        if self.image_format is not None and self.image_format not in _IMAGE_TARGETS:
            raise ValueError(f"image_format must be jpeg, png or webp, not {self.image_format!r}")
        if not is_positive_int(self.image_quality) or self.image_quality > 100:
            raise ValueError(f"image_quality must be 1..100, not {self.image_quality!r}")
        positive_int_or_none("audio_rate", self.audio_rate, " (Hz)")
        if self.audio_format is not None and self.audio_format not in _AUDIO_TARGETS:
            raise ValueError(f"audio_format must be wav or flac, not {self.audio_format!r}")

    @property
    def active(self) -> bool:
        return self._image_work or self._audio_work or self.verify

    @property
    def _image_work(self) -> bool:
        return self.image_max_side is not None or self.image_format is not None

    @property
    def _audio_work(self) -> bool:
        return self.audio_rate is not None or self.audio_format is not None or self.audio_mono


def process_media(ext: str, data: bytes, options: MediaOptions, *, source: str) -> tuple[str, bytes]:
    """Return (extension, bytes) after the requested processing; raise MediaError(source, reason)."""
    if not options.active:
        return ext, data
    kind = ext.lower()
    if kind in IMAGE_EXTENSIONS and (options._image_work or options.verify):
        return _process_image(ext, data, options, source)
    if kind in AUDIO_EXTENSIONS and (options._audio_work or options.verify):
        return _process_audio(ext, data, options, source)
    if kind in VIDEO_EXTENSIONS and options.verify:
        _verify_video(data, source)
    return ext, data


def _process_image(ext: str, data: bytes, options: MediaOptions, source: str) -> tuple[str, bytes]:
    max_side = options.image_max_side
    try:
        # Pillow only warns between 1x and 2x its pixel limit; a packer must refuse, not print and go on.
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            # Any raster format (a PNG named .jpg is common in the wild and converts fine), never EPS or
            # PostScript, which Pillow hands to Ghostscript.
            image = Image.open(io.BytesIO(data), formats=RASTER_FORMATS)
            if getattr(image, "n_frames", 1) > 1:
                for frame in range(image.n_frames):  # check every frame; frame 0 is the one re-encoded
                    image.seek(frame)
                    image.load()
                image.seek(0)
            elif max_side is not None and image.format in ("JPEG", "MPO") and max(image.size) > 2 * max_side:
                # DCT-domain downscale while decoding, kept at >= 2x the target so LANCZOS still sees detail.
                scale = 2 * max_side / max(image.size)
                image.draft(None, (int(image.width * scale), int(image.height * scale)))
            image.load()
            orientation = image.getexif().get(_ORIENTATION_TAG, 1)
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise MediaError(source, f"image refused as a possible decompression bomb: {exc}") from exc
    except UnidentifiedImageError as exc:
        raise MediaError(source, "image does not decode: not a format Pillow recognises") from exc
    except Exception as exc:  # decoders raise a zoo of types (OSError, SyntaxError, struct.error...)
        raise MediaError(source, f"image does not decode: {short_reason(exc)}") from exc

    source_format = _PIL_FORMATS.get(image.format or "")
    upright = orientation not in range(2, 9)
    # A drafted JPEG is still >= 2x max_side, so it never counts as small.
    small = max_side is None or max(image.size) <= max_side
    same_format = options.image_format is None or options.image_format == source_format
    if not options._image_work or (upright and small and same_format):
        keep_ext = ext if options.image_format is None else _IMAGE_TARGETS[options.image_format][1]
        return keep_ext, data

    target = options.image_format or source_format or "png"
    try:
        return _IMAGE_TARGETS[target][1], _reencode(image, target, max_side, options.image_quality)
    except Exception as exc:
        raise MediaError(source, f"image does not re-encode as {target}: {short_reason(exc)}") from exc


def _reencode(image: Image.Image, target: str, max_side: int | None, quality: int) -> bytes:
    icc = image.info.get("icc_profile")
    source_mode = image.mode
    image = ImageOps.exif_transpose(image)
    image = _resizable(image)
    if max_side is not None and max(image.size) > max_side:
        scale = max_side / max(image.size)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.LANCZOS, reducing_gap=None)
    image = _for_target(image, target)
    # An ICC profile only describes pixels of its own colour family (a CMYK profile on RGB data is wrong).
    keep_icc = icc and _FAMILY.get(source_mode, source_mode) == _FAMILY.get(image.mode, image.mode)
    image.info = {}  # nothing from the source (EXIF, text chunks, dpi) leaks in; same bytes every time
    settings: dict[str, Any] = {"icc_profile": icc} if keep_icc else {}
    if target != "png":
        settings["quality"] = quality
    if target == "jpeg":
        settings["optimize"] = True  # better Huffman tables: smaller, still deterministic
    buffer = io.BytesIO()
    image.save(buffer, _IMAGE_TARGETS[target][0], **settings)
    return buffer.getvalue()


def _resizable(image: Image.Image) -> Image.Image:
    # Pillow resizes "P" and "1" with NEAREST whatever is asked, and a tRNS colour key would not survive.
    if "transparency" in image.info:
        return image.convert("RGBA")
    return image.convert(_RESIZABLE[image.mode]) if image.mode in _RESIZABLE else image


def _for_target(image: Image.Image, target: str) -> Image.Image:
    mode = image.mode
    if mode.startswith("I"):
        # 16/32-bit grey: convert("L") would clip everything above 255 to white, so scale to 8 bits.
        if target == "png" and mode in ("I;16", "I"):
            return image
        grey = np.asarray(image.convert("I"), dtype=np.int64) >> 8
        image, mode = Image.fromarray(np.clip(grey, 0, 255).astype(np.uint8), "L"), "L"
    has_alpha = "A" in image.getbands()
    if target == "jpeg":
        if mode in ("L", "RGB"):
            return image
        if has_alpha:
            # JPEG has no alpha: composite on white rather than expose whatever hides under alpha 0.
            rgba = image.convert("RGBA")
            white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
            return Image.alpha_composite(white, rgba).convert("RGB")
        return image.convert("RGB")
    if target == "webp":
        return image if mode in ("RGB", "RGBA") else image.convert("RGBA" if has_alpha else "RGB")
    return image if mode in ("L", "LA", "RGB", "RGBA") else image.convert("RGBA" if has_alpha else "RGB")


def _process_audio(ext: str, data: bytes, options: MediaOptions, source: str) -> tuple[str, bytes]:
    samples, rate = _decode_audio(data, source)
    if not options._audio_work:
        return ext, data
    out_rate = options.audio_rate or rate
    to_mono = options.audio_mono and samples.shape[0] > 1
    same_format = options.audio_format is None or options.audio_format == ext.lower()
    if out_rate == rate and not to_mono and same_format:
        return ext, data

    target = options.audio_format or (ext.lower() if ext.lower() in _AUDIO_TARGETS else "flac")
    try:
        if out_rate != rate:
            samples = _resample(samples, rate, out_rate)
        if to_mono:
            samples = samples.mean(dim=0, keepdim=True)
        pcm = np.asarray((samples.clamp(-1.0, 1.0) * 32768.0).round().clamp(-32768, 32767), dtype="<i2")
        return target, _encode_wav(pcm, out_rate) if target == "wav" else _encode_flac(pcm, out_rate)
    except PackError:
        raise
    except Exception as exc:
        raise MediaError(source, f"audio does not re-encode as {target}: {short_reason(exc)}") from exc


def _decode_audio(data: bytes, source: str) -> tuple[Any, int]:
    decoders = require("torchcodec.decoders", "audio processing", "audio", PackError)
    try:
        decoded = decoders.AudioDecoder(data).get_all_samples()
    except Exception as exc:
        raise MediaError(source, f"audio does not decode: {short_reason(exc)}") from exc
    if decoded.data.numel() == 0:
        raise MediaError(source, "audio does not decode: no samples")
    # FFmpeg decodes a cut-off WAV up to the cut without complaint; the RIFF header knows the real length.
    missing = _wav_missing_bytes(data)
    if missing:
        raise MediaError(source, f"audio does not decode: WAV data is cut short by {missing} bytes")
    return decoded.data, int(decoded.sample_rate)


def _wav_missing_bytes(data: bytes) -> int:
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return 0
    pos = 12
    while pos + 8 <= len(data):
        chunk_id, size = data[pos : pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        if chunk_id == b"data":
            # 0 and 0xFFFFFFFF are what streaming writers leave when they never learnt the length.
            return 0 if size in (0, 0xFFFFFFFF) else max(0, size - (len(data) - pos - 8))
        pos += 8 + size + (size & 1)
    return 0


def _resample(samples: Any, rate: int, out_rate: int) -> Any:
    audio_functional = require("torchaudio.functional", "audio resampling", "audio", PackError)
    return audio_functional.resample(samples, rate, out_rate)


def _encode_wav(pcm: np.ndarray, rate: int) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(pcm.shape[0])
        writer.setsampwidth(2)
        writer.setframerate(rate)
        writer.writeframes(np.ascontiguousarray(pcm.T).tobytes())
    return buffer.getvalue()


def _encode_flac(pcm: np.ndarray, rate: int) -> bytes:
    import torch

    encoders = require("torchcodec.encoders", "audio processing", "audio", PackError)
    # torchcodec always writes FLAC from s32; samples on the 16-bit grid leave the low bits zero, which
    # FFmpeg's encoder strips ("wasted bits"), so real audio costs about what a 16-bit FLAC would.
    samples = torch.from_numpy(pcm.astype(np.float32) / 32768.0)
    return encoders.AudioEncoder(samples, sample_rate=rate).to_tensor("flac").numpy().tobytes()


def _verify_video(data: bytes, source: str) -> None:
    decoders = require("torchcodec.decoders", "video verification", "video", PackError)
    try:
        # "exact" scans every packet up front: it notices a cut-off file and gives a true frame count.
        decoder = decoders.VideoDecoder(data, seek_mode="exact")
        frames = len(decoder)
        if frames == 0:
            raise ValueError("no frames")
        decoder[0]
        decoder[frames - 1]
    except Exception as exc:
        raise MediaError(source, f"video does not decode: {short_reason(exc)}") from exc
