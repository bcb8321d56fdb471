"""Decoding sample members by extension, after the shuffle buffer: decoded samples are many times bigger.

A member's decoder is registered under its full name ("image.jpg") or else its last dotted part ("0.jpg" ->
jpg); ".gz" is gunzipped first, to at most ``gunzip_max_bytes``. No decoder: bytes kept. Images come out
8-bit RGB, EXIF-upright, alpha dropped; each is opened only as the format its extension names
(``IMAGE_FORMATS``), within ``image_max_pixels``. ``image_size=N``: shorter side at least N, cheaply
(JPEG draft mode decodes at 1/2, 1/4, 1/8 scale, then a power-of-two box reduction for any format), never
resized further or enlarged, so sizes vary.
``image_size=(height, width)``: exactly that, aspect not kept; the same reduction, then antialiased bilinear
(Pillow's for "pil", else torch's uint8 kernel: within one level of Pillow's and several times faster).
A SampleDecoder copies the registry when made, so it pickles with its decoders; decoders meant for spawned
workers must be module-level functions or ``functools.partial`` objects, not lambdas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from shardstream.checks import is_positive_int, one_of, positive_int_or_none
from shardstream.errors import DecodeError, short_reason
from shardstream.mediatypes import AUDIO_EXTENSIONS, IMAGE_FORMATS, VIDEO_EXTENSIONS
from shardstream.sizes import parse_size

from ..stats.timers import KIND_EVERY, decode_clock, kind_of, timed_into
from .clipdecode import decode_clips, decode_windows
from .clips import ClipOptions, WindowOptions, clip_options, window_options
from .fields import Fields
from .gunzip import GUNZIP_MAX_BYTES, gunzip
from .image import IMAGE_MAX_PIXELS, LISTED_FORMATS, turbo_jpeg
from .registry import (
    DECODERS,
    Decoder,
    check_decoder,
    check_name,
    decode_audio,
    decode_image,
    decode_video,
    keep,
    register_decoder,
)

__all__ = ["DECODERS", "DecodeOptions", "Decoder", "Fields", "SampleDecoder", "register_decoder"]

IMAGE_MODES = ("pil", "numpy", "torch", "raw")


@dataclass(frozen=True, kw_only=True)
class DecodeOptions:
    """What decoding makes of members; checked once, when made.

    Fields: ``image`` (what images become), ``image_size`` (N: the shorter side at least N, reduced
    cheaply; (height, width): exactly that; None: as stored; see the module docstring), ``audio_rate``
    (resample to this many Hz; None: the file's rate), ``audio_mono`` (average the channels into one),
    ``video_frames`` (N evenly spaced frames, first and last included; None: every frame), ``decoders``
    (``{"ext": fn}``), ``fields`` (None: every member, decoded or kept as bytes; ``["jpg", "json"]``:
    those members; ``{"image": "jpg;png", "meta": "json"}``: per name, the first of its members the
    sample has, decoded by its own extension and handed out under the name; a sample with none of an
    entry's members is a MissingMemberError; see ``fields.py``).

    Bounds on hostile members, each a DecodeError naming the member and the option: ``image_max_pixels``
    (an image whose header declares more pixels is refused before it is decoded, on Pillow's path and
    torchcodec's alike; default 178,956,970, Pillow's own refusal; None: no bound of ours, Pillow's
    ``PIL.Image.MAX_IMAGE_PIXELS`` still applies on its path), ``gunzip_max_bytes`` (a ``.gz`` member
    inflating past this is refused; bytes or a size like ``"1GiB"``; default 256 MiB, which it may hold).

    ``video`` (``{"clip_seconds": 4, "fps": 2, "clips": 1, "where": "random", "size": (224, 224)}``) and
    ``audio`` (``{"window_seconds": 30, "windows": 1, "where": "random", "rate": 16000, "mono": True}``):
    video members become ``decode_clips``'s dict and audio members ``decode_windows``'s, decoding only
    those seconds, placed per (seed, epoch, key) (``clips.py``; ``set_epoch`` says which).
    """

    image: str = "pil"  # pil, numpy (HWC uint8), torch (CHW uint8), raw (bytes kept)
    image_size: int | tuple[int, int] | None = None
    audio_rate: int | None = None
    audio_mono: bool = False
    video_frames: int | None = None
    decoders: Mapping[str, Decoder] | None = None  # by extension or member name, over the registry's
    fields: Fields | Sequence[str] | Mapping[str, str | Sequence[str]] | None = None  # parsed to Fields
    image_max_pixels: int | None = IMAGE_MAX_PIXELS
    gunzip_max_bytes: int | str = GUNZIP_MAX_BYTES
    video: ClipOptions | Mapping[str, Any] | None = None  # clips of long videos (clips.py)
    audio: WindowOptions | Mapping[str, Any] | None = None  # windows of long audio (clips.py)

    def __post_init__(self) -> None:
        one_of("image", self.image, IMAGE_MODES)
        object.__setattr__(self, "image_size", _check_image_size(self.image_size))
        if self.image_size is not None and self.image == "raw":
            raise ValueError("image_size needs decoded images; it does nothing with image='raw'")
        positive_int_or_none("audio_rate", self.audio_rate)
        positive_int_or_none("video_frames", self.video_frames)
        positive_int_or_none("image_max_pixels", self.image_max_pixels)
        object.__setattr__(
            self, "gunzip_max_bytes", parse_size(self.gunzip_max_bytes, name="gunzip_max_bytes")
        )
        if not isinstance(self.audio_mono, bool):
            raise ValueError(f"audio_mono must be True or False, not {self.audio_mono!r}")
        if self.decoders is not None and not isinstance(self.decoders, Mapping):
            raise ValueError(
                f"decoders must map extensions or member names to functions, not {self.decoders!r}"
            )
        object.__setattr__(self, "fields", Fields.of(self.fields))
        object.__setattr__(self, "video", clip_options(self.video))
        object.__setattr__(self, "audio", window_options(self.audio))
        if self.video is not None and self.video_frames is not None:
            raise ValueError("give video_frames or video (clips), not both")
        if self.audio is not None and (self.audio_rate is not None or self.audio_mono):
            raise ValueError("with audio (windows), give rate and mono inside it, not audio_rate/audio_mono")


class SampleDecoder:
    """Turn a sample's member bytes into Python objects by extension; see the module docstring.

    ``options``: one DecodeOptions; or DecodeOptions' fields as keywords, ``SampleDecoder(image="torch",
    ...)``; not both (neither: the defaults).
    """

    def __init__(self, options: DecodeOptions | None = None, **kwargs: Any) -> None:
        if options is not None and kwargs:
            raise ValueError("pass either a DecodeOptions or keyword options, not both")
        options = options if options is not None else DecodeOptions(**kwargs)
        self.options = options
        if options.image_size is None and options.image in ("torch", "numpy"):
            turbo_jpeg()  # import now, in the parent, so forked DataLoader workers inherit it
        self._table = _decoder_table(options)
        self._fields: Fields | None = options.fields  # type: ignore[assignment]  # parsed by DecodeOptions
        self._resolved: dict[str, Decoder] = {}
        self._timed: dict[str, Decoder] = {}  # the same decoders, each timed into its kind (statistics)
        self.seed = self.epoch = 0  # where clips and windows fall: set_epoch
        self._key = ""  # the sample being decoded, for clips and windows
        self._keyed = options.video is not None or options.audio is not None
        own = options.decoders or {}  # the caller's decoders stay theirs
        for given, names, fn, builtin in (
            (options.video, VIDEO_EXTENSIONS, self._clips, decode_video),
            (options.audio, AUDIO_EXTENSIONS, self._windows, decode_audio),
        ):  # in place of the built-in decoder only (not one registered or given instead)
            if given is not None:
                self._table.update((n, fn) for n in names if n not in own and DECODERS.get(n) is builtin)

    def set_epoch(self, seed: int, epoch: int) -> None:
        """Clips and windows from now on fall where (seed, epoch, key) puts them (the chain's epoch)."""
        self.seed, self.epoch = seed, epoch

    def _clips(self, data: bytes) -> dict[str, Any]:
        video = self.options.video
        return decode_clips(data, video, seed=self.seed, epoch=self.epoch, key=self._key)  # type: ignore[arg-type]

    def _windows(self, data: bytes) -> dict[str, Any]:
        audio = self.options.audio
        return decode_windows(data, audio, seed=self.seed, epoch=self.epoch, key=self._key)  # type: ignore[arg-type]

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        # One sample in KIND_EVERY goes through decoders timed one by one: the split of decoding time by
        # kind of member (streamer/stats/timers.py); the others cost one decrement.
        clock = decode_clock()
        clock.countdown -= 1
        resolved = self._resolved
        if not clock.countdown:
            clock.countdown, resolved = KIND_EVERY, self._timed
        if self._keyed:
            self._key = str(sample.get("__key__", ""))
        if self._fields is not None:
            return self._decode_fields(sample, self._fields, resolved)
        out: dict[str, Any] = {}
        name = ""
        try:  # one try around the loop, not a call per member: this is the per-sample hot path
            for name, value in sample.items():
                if name.startswith("__"):
                    out[name] = value
                elif type(value) is bytes:
                    fn = resolved.get(name)
                    if fn is None:
                        # Member names repeat from sample to sample: look each one up once.
                        fn = resolved[name] = self._looked_up(name, resolved)
                    out[name] = fn(value)
                elif isinstance(value, (bytearray, memoryview)):
                    out[name] = self._resolve(name)(bytes(value))
                else:
                    out[name] = value  # decoded already, by an earlier stage
        except ImportError:
            raise  # a missing optional dependency, not a bad shard
        except Exception as exc:
            raise _failed(sample, name, exc) from exc
        return out

    def _decode_fields(
        self, sample: dict[str, Any], fields: Fields, resolved: dict[str, Decoder]
    ) -> dict[str, Any]:
        """Each entry's member, decoded by its own name (a png as a png), under the entry's name."""
        picked = fields.pick(sample)  # a MissingMemberError naming every member the sample holds
        out = {k: v for k, v in sample.items() if k.startswith("__")}
        member = ""
        try:
            for name, member in picked:
                value = sample[member]
                if isinstance(value, (bytes, bytearray, memoryview)):
                    fn = resolved.get(member)
                    if fn is None:
                        fn = resolved[member] = self._looked_up(member, resolved)
                    value = fn(value if type(value) is bytes else bytes(value))
                out[name] = value  # (not bytes: decoded already, by an earlier stage)
        except ImportError:
            raise
        except Exception as exc:
            raise _failed(sample, member, exc) from exc
        return out

    def _looked_up(self, name: str, resolved: dict[str, Decoder]) -> Decoder:
        """The decoder for ``name`` as ``resolved`` keeps it: plain, or timed into the member's kind."""
        fn = self._resolve(name)
        return partial(timed_into, fn, kind_of(name)) if resolved is self._timed else fn

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
            then = self._resolve(rest) if rest else keep
            return partial(_gunzip_then, then, self.options.gunzip_max_bytes)
        return keep


def _decoder_table(options: DecodeOptions) -> dict[str, Decoder]:
    """The registry with the media decoders bound to the options (by partial: the table pickles)."""
    bound: dict[Decoder, Decoder] = {
        decode_audio: partial(decode_audio, rate=options.audio_rate, mono=options.audio_mono),
        decode_video: partial(decode_video, frames=options.video_frames),
    }
    # A global registration that replaced a media decoder is not a built-in any more: it is kept.
    table = {
        name: _image_decoder(options, name) if fn is decode_image else bound.get(fn, fn)
        for name, fn in DECODERS.items()
    }
    for name, fn in (options.decoders or {}).items():
        table[check_name(name, "decoders key")] = check_decoder(fn, f"decoders[{name!r}]")
    return table


def _image_decoder(options: DecodeOptions, name: str) -> Decoder:
    """The image decoder for a member name, opening only the formats its extension names (any listed
    format for a name the table lacks, registered to decode_image by hand)."""
    if options.image == "raw":
        return keep
    formats = IMAGE_FORMATS.get(name.rsplit(".", 1)[-1], LISTED_FORMATS)
    size, limit = options.image_size, options.image_max_pixels
    return partial(decode_image, mode=options.image, size=size, formats=formats, max_pixels=limit)


def _failed(sample: dict[str, Any], member: str, exc: Exception) -> DecodeError:
    return DecodeError(
        f"does not decode: {short_reason(exc)}",
        url=str(sample.get("__url__", "<no __url__>")),
        member=f"{sample.get('__key__')}.{member}",
        offset=sample.get("__offset__"),
    )


def _gunzip_then(decode: Decoder, max_bytes: int, data: bytes) -> Any:
    return decode(gunzip(data, max_bytes))


def _check_image_size(size: Any) -> int | tuple[int, int] | None:
    if size is None or is_positive_int(size):
        return size
    if isinstance(size, (tuple, list)) and len(size) == 2 and all(is_positive_int(side) for side in size):
        return (size[0], size[1])
    raise ValueError(
        f"image_size must be a positive integer (shorter side, at least) or (height, width), not {size!r}"
    )
