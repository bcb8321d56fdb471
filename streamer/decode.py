"""Decoding sample members by extension, after the shuffle buffer: decoded samples are many times bigger.

A member's decoder is registered under its full name ("image.jpg") or else its last dotted part ("0.jpg" ->
jpg); ".gz" is gunzipped first. No decoder: bytes kept. Images come out 8-bit RGB, EXIF-upright, alpha
dropped. ``image_size=N``: shorter side at least N, cheaply (JPEG draft mode decodes at 1/2, 1/4, 1/8
scale, then a power-of-two box reduction for any format), never resized further or enlarged, so sizes vary.
``image_size=(height, width)``: exactly that, aspect not kept; the same reduction, then antialiased bilinear
(Pillow's for "pil", else torch's uint8 kernel: within one level of Pillow's and several times faster).
A SampleDecoder copies the registry when made, so it pickles with its decoders; decoders meant for spawned
workers must be module-level functions or ``functools.partial`` objects, not lambdas.
"""

from __future__ import annotations

import gzip
import importlib
import io
import json
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
import torch

from packer.errors import ShardReadError

from .image import decode_image, turbo_jpeg

__all__ = ["DECODERS", "Decoder", "SampleDecoder", "register_decoder"]

Decoder = Callable[[bytes], Any]

IMAGE_EXTENSIONS = ("jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff", "ppm")
AUDIO_EXTENSIONS = ("wav", "flac", "mp3", "ogg", "opus", "m4a")
VIDEO_EXTENSIONS = ("mp4", "webm", "mkv", "avi", "mov")
_IMAGE_MODES = ("pil", "numpy", "torch", "raw")
def _decode_audio(data: bytes, rate: int | None = None, mono: bool = False) -> tuple[torch.Tensor, int]:
    decoders = _require("torchcodec.decoders", "audio decoding", "audio")
    decoded = decoders.AudioDecoder(data).get_all_samples()
    samples, sample_rate = decoded.data, int(decoded.sample_rate)
    if mono and samples.shape[0] != 1:
        samples = samples.mean(dim=0, keepdim=True)  # before resampling: one channel costs less
    if rate is not None and rate != sample_rate:
        # torchaudio's resampler, not FFmpeg's: the one the packer's --audio-rate uses, so audio resampled
        # at pack time and at read time match.
        resampling = _require("torchaudio.functional", "audio resampling", "audio")
        samples, sample_rate = resampling.resample(samples, sample_rate, rate), rate
    return samples, sample_rate


def _decode_video(data: bytes, frames: int | None = None) -> torch.Tensor:
    decoders = _require("torchcodec.decoders", "video decoding", "video")
    # "exact" scans the packets once, without decoding, for a true frame count to spread indices over.
    decoder = decoders.VideoDecoder(data, seek_mode="exact")
    count = len(decoder)
    if count == 0:
        raise ValueError("the video has no frames")
    if frames is None:
        return decoder.get_frames_in_range(0, count).data
    # First and last frame included; asking for more frames than there are repeats some, so the shape
    # is always [frames, C, H, W] and clips batch together.
    indices = np.linspace(0, count - 1, frames).round().astype(np.int64).tolist()
    return decoder.get_frames_at(indices).data


def _require(module: str, what: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except (ImportError, OSError, RuntimeError) as exc:  # OSError/RuntimeError: FFmpeg libraries missing
        package = module.split(".")[0]
        raise ImportError(f"{what} needs {package}: pip install 'shardstream[{extra}]' ({exc})") from exc


def _keep(data: bytes) -> bytes:
    return data


def _npy(data: bytes) -> np.ndarray:
    return np.load(io.BytesIO(data), allow_pickle=False)


def _npz(data: bytes) -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def _torch(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), weights_only=True)


def _msgpack(data: bytes) -> Any:
    try:
        import msgpack
    except ImportError:
        return data  # msgpack is not a dependency; without it these members stay bytes, like unknown ones
    return msgpack.unpackb(data, raw=False)


def _json(data: bytes) -> Any:
    # Decoding UTF-8 first skips json's per-call encoding sniffing on bytes (~1.4 us a sample).
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return json.loads(data)  # UTF-16/32 JSON, which json detects from the bytes
    return json.loads(text)


DECODERS: dict[str, Decoder] = {
    **dict.fromkeys(IMAGE_EXTENSIONS, decode_image),
    **dict.fromkeys(AUDIO_EXTENSIONS, _decode_audio),
    **dict.fromkeys(VIDEO_EXTENSIONS, _decode_video),
    "txt": partial(str, encoding="utf-8"),
    "json": _json,
    # int() takes ASCII bytes and ignores surrounding whitespace: b"7\n" -> 7.
    **dict.fromkeys(("cls", "cls2", "index", "inx", "id"), int),
    "npy": _npy,
    "npz": _npz,
    **dict.fromkeys(("pth", "pt"), _torch),
    **dict.fromkeys(("mp", "msgpack"), _msgpack),
}


def register_decoder(ext: str, fn: Decoder) -> None:
    """Set the decoder of an extension ("jpg") or member name ("image.jpg") for SampleDecoders made later."""
    DECODERS[_check_name(ext, "ext")] = _check_decoder(fn, "fn")


def _check_name(name: Any, argument: str) -> str:
    if not isinstance(name, str) or not name or name.startswith(".") or name.endswith("."):
        raise ValueError(
            f"{argument} must be an extension like 'jpg' or a member name like 'image.jpg', not {name!r}"
        )
    return name.lower()


def _check_decoder(fn: Any, argument: str) -> Decoder:
    if not callable(fn):
        raise ValueError(f"{argument} must be callable, taking bytes, not {fn!r}")
    return fn


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


class SampleDecoder:
    """Turn a sample's member bytes into Python objects by extension; see the module docstring."""

    def __init__(
        self,
        *,
        image: str = "pil",
        image_size: int | tuple[int, int] | None = None,
        audio_rate: int | None = None,
        audio_mono: bool = False,
        video_frames: int | None = None,
        decoders: Mapping[str, Decoder] | None = None,
        fields: Sequence[str] | None = None,
    ) -> None:
        if image not in _IMAGE_MODES:
            raise ValueError(f"image must be one of {', '.join(_IMAGE_MODES)}, not {image!r}")
        size = _check_image_size(image_size)
        if size is not None and image == "raw":
            raise ValueError("image_size needs decoded images; it does nothing with image='raw'")
        if size is None and image in ("torch", "numpy"):
            turbo_jpeg()  # import now, in the parent, so forked DataLoader workers inherit it
        for argument, value in (("audio_rate", audio_rate), ("video_frames", video_frames)):
            if value is not None and not _positive_int(value):
                raise ValueError(f"{argument} must be a positive integer, not {value!r}")
        if not isinstance(audio_mono, bool):
            raise ValueError(f"audio_mono must be True or False, not {audio_mono!r}")
        if decoders is not None and not isinstance(decoders, Mapping):
            raise ValueError(f"decoders must map extensions or member names to functions, not {decoders!r}")
        if fields is not None and (
            isinstance(fields, str)
            or not isinstance(fields, Sequence)
            or not all(isinstance(f, str) and f for f in fields)
        ):
            raise ValueError(f"fields must be a list of member names like ['jpg', 'json'], not {fields!r}")

        # Bound to plain data with partial, not closures, so the table pickles.
        bound: dict[Decoder, Decoder] = {
            decode_image: _keep if image == "raw" else partial(decode_image, mode=image, size=size),
            _decode_audio: partial(_decode_audio, rate=audio_rate, mono=audio_mono),
            _decode_video: partial(_decode_video, frames=video_frames),
        }
        # A global registration that replaced a media decoder is not a built-in any more: it is kept.
        table = {name: bound.get(fn, fn) for name, fn in DECODERS.items()}
        for name, fn in (decoders or {}).items():
            table[_check_name(name, "decoders key")] = _check_decoder(fn, f"decoders[{name!r}]")
        self._table = table
        self._fields = None if fields is None else tuple(fields)
        self._field_set = None if fields is None else frozenset(self._fields)
        self._resolved: dict[str, Decoder] = {}

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        if self._fields is not None:
            missing = [name for name in self._fields if name not in sample]
            if missing:
                present = sorted(name for name in sample if not name.startswith("__"))
                raise KeyError(
                    f"sample {sample.get('__key__')!r} from {sample.get('__url__')} has no member "
                    f"{missing[0]!r} (fields asked for: {list(self._fields)}; present: {present})"
                )
        out: dict[str, Any] = {}
        fields = self._field_set
        resolved = self._resolved
        name = ""
        try:  # one try around the loop, not a call per member: this is the per-sample hot path
            for name, value in sample.items():
                if name.startswith("__"):
                    out[name] = value
                elif fields is not None and name not in fields:
                    continue
                elif type(value) is bytes:
                    fn = resolved.get(name)
                    if fn is None:
                        # Member names repeat from sample to sample: look each one up once.
                        fn = resolved[name] = self._resolve(name)
                    out[name] = fn(value)
                elif isinstance(value, (bytearray, memoryview)):
                    out[name] = self._resolve(name)(bytes(value))
                else:
                    out[name] = value  # decoded already, by an earlier stage
        except ImportError:
            raise  # a missing optional dependency, not a bad shard
        except Exception as exc:
            raise ShardReadError(
                f"does not decode: {_reason(exc)}",
                url=str(sample.get("__url__", "<no __url__>")),
                member=f"{sample.get('__key__')}.{name}",
                offset=sample.get("__offset__"),
            ) from exc
        return out

    def _resolve(self, name: str) -> Decoder:
        """The decoder for a member name: by full name, then by its last part; ``.gz`` unwraps first."""
        lowered = name.lower()
        fn = self._table.get(lowered)
        if fn is not None:
            return fn
        ext = lowered.rsplit(".", 1)[-1]
        fn = self._table.get(ext)
        if fn is not None:
            return fn
        if ext == "gz":
            rest = name[: -len(".gz")]
            return partial(_gunzip_then, self._resolve(rest) if rest else _keep)
        return _keep


def _gunzip_then(decode: Decoder, data: bytes) -> Any:
    return decode(gzip.decompress(data))


def _check_image_size(size: Any) -> int | tuple[int, int] | None:
    if size is None or _positive_int(size):
        return size
    if isinstance(size, (tuple, list)) and len(size) == 2 and all(_positive_int(side) for side in size):
        return (size[0], size[1])
    raise ValueError(
        f"image_size must be a positive integer (shorter side, at least) or (height, width), not {size!r}"
    )


def _reason(exc: BaseException) -> str:
    # torchcodec prefixes C++ frames ("SingleStreamDecoder, /path/File.cpp:70, ..."); keep the human part.
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    # Pillow names the BytesIO it was handed, which tells a reader nothing.
    return re.sub(r"^.*\.cpp:\d+, | <_io\.BytesIO object at 0x[0-9a-f]+>", "", first)
