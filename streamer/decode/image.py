"""Image decoding: Pillow (draft-mode reduced-size JPEGs, EXIF orientation) and libjpeg-turbo via torchcodec.

Plain JPEGs decoded to tensors or arrays go through torchcodec (~2x Pillow here, the same pixels); EXIF
orientation, reduced sizes, other formats and damaged data take Pillow's path. Bytes are opened only as
the formats their extension names (``IMAGE_FORMATS`` in ``shardstream.mediatypes``): Pillow would
otherwise guess, and its EPS plugin runs Ghostscript on whatever it is handed. Both paths read the
stored size from the header before decoding and refuse more than ``max_pixels`` (``IMAGE_MAX_PIXELS``).
"""

from __future__ import annotations

import base64
import io
import warnings
from collections.abc import Callable
from functools import cache, partial
from typing import Any

import numpy as np
import torch
import torch.nn.functional as nnf
from PIL import Image, UnidentifiedImageError

from shardstream.mediatypes import IMAGE_FORMATS, sniff_extension

_ORIENTATION_TAG = 0x0112
_TRANSPOSES = {  # EXIF orientation -> what makes the picture upright, as in ImageOps.exif_transpose
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}

# Pillow's own refusal (twice its PIL.Image.MAX_IMAGE_PIXELS): ~179 Mpx, 537 MB as RGB. The same bound on
# torchcodec's path, which has none of its own (a 1 KB JPEG claiming 20000x20000 took 1.85 GB).
IMAGE_MAX_PIXELS = 178_956_970
# The formats an image decoder not bound to an extension opens: every one the table names, no other.
LISTED_FORMATS: tuple[str, ...] = tuple(sorted({f for names in IMAGE_FORMATS.values() for f in names}))
_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # SOFn; C4, C8, CC are other segments

JpegDecoder = Callable[[torch.Tensor], torch.Tensor]  # encoded uint8 bytes -> RGB CHW uint8
# An 8x16 gradient saved by Pillow (optimize=True), 336 bytes. A literal: encoding one at start-up made
# Pillow load its plugins, ~5 ms before the first sample of a decoder that never uses Pillow for JPEGs.
_PROBE_JPEG = (
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAx"
    "NDQ0Hyc5PTgyPC4zNDL/2wBDAQkJCQwLDBgNDRgyIRwhMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIy"
    "MjIyMjIyMjL/wAARCAAIABADASIAAhEBAxEB/8QAFgABAQEAAAAAAAAAAAAAAAAAAAIF/8QAJBAAAgECAwkAAAAAAAAAAAAAAgQA"
    "AREDBQYSEyEjJVGBlNP/xAAVAQEBAAAAAAAAAAAAAAAAAAAAAf/EABQRAQAAAAAAAAAAAAAAAAAAAAD/2gAMAwEAAhEDEQA/AMhj"
    "JtBJLUxVzafPapTcrJGJW78ygDbzeUsGj+HQM89bB+sRKP/Z"
)


@cache
def turbo_jpeg() -> JpegDecoder | None:
    """torchcodec's libjpeg-turbo decoder, a JPEG's bytes as a uint8 tensor to an RGB CHW tensor: ~2x
    Pillow's decode to an array here. Its op is called directly where it decodes a probe as the public
    ``decode_jpeg`` does: the wrapper's checks and list building cost ~9 us a call (~2% of a 35 KB JPEG)."""
    try:
        from torchcodec.decoders import decode_jpeg
    except (ImportError, OSError, RuntimeError):
        return None
    public = partial(decode_jpeg, mode="RGB")
    return _direct_op(public) or public


def _direct_op(public: JpegDecoder) -> JpegDecoder | None:
    """The op under ``decode_jpeg`` bound to RGB, or None when this torchcodec has none that decodes a
    probe JPEG to the public function's pixels (its private layout moved)."""
    try:
        from torchcodec._core.ops import decode_jpeg as op
        from torchcodec.decoders._image_decoders import ImageReadMode

        direct = partial(op, mode=ImageReadMode.RGB.value)
        encoded = torch.frombuffer(bytearray(base64.b64decode(_PROBE_JPEG)), dtype=torch.uint8)
        return direct if torch.equal(direct(encoded), public(encoded)) else None
    except Exception:  # anything at all: the public function stays, slower by the wrapper only
        return None


_quiet_frombuffer = False  # whether torch's one-time "buffer is not writable" warning is behind us


def _encoded_tensor(data: bytes | memoryview) -> torch.Tensor:
    """The JPEG's bytes as a uint8 tensor, sharing them (the decoder only reads). torch warns once per
    process that a buffer is not writable (bytes): that one call is silenced; given bytes, torchcodec
    silences every call (a warnings.catch_warnings per image, ~7 us, 1-2% of a 35 KB JPEG's decode)."""
    global _quiet_frombuffer
    if _quiet_frombuffer or (isinstance(data, memoryview) and not data.readonly):
        return torch.frombuffer(data, dtype=torch.uint8)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given buffer is not writable", category=UserWarning)
        tensor = torch.frombuffer(data, dtype=torch.uint8)
    _quiet_frombuffer = True
    return tensor


def check_pixels(width: int, height: int, max_pixels: int | None) -> None:
    """Refuse a picture of more than ``max_pixels`` (None: no bound here), before it is decoded."""
    if max_pixels is not None and width * height > max_pixels:
        raise ValueError(
            f"{width}x{height} = {width * height} pixels, over image_max_pixels={max_pixels} (a "
            "decompression bomb?); raise image_max_pixels (a decoding option) if such images are expected"
        )


def jpeg_frame(data: bytes) -> tuple[bool, int, int] | None:
    """(has EXIF, width, height) from a JPEG's segments before its scan, walked marker by marker (a few
    steps, not a search: scanning a 35 KB JPEG cost ~20 us, 4% of its decode); None when the walk meets
    something else (Pillow then reads the file, and reports damage in its words)."""
    at, size, exif, frame = 2, len(data), False, None
    while at + 4 <= size and data[at] == 0xFF:
        marker = data[at + 1]
        if marker == 0xDA:  # start of scan: every header segment is behind
            return None if frame is None else (exif, *frame)
        if marker == 0xE1 and data[at + 4 : at + 10] == b"Exif\0\0":
            exif = True
        elif marker in _FRAME_MARKERS and at + 9 <= size:
            frame = (
                int.from_bytes(data[at + 7 : at + 9], "big"),
                int.from_bytes(data[at + 5 : at + 7], "big"),
            )
        at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
    return None


def fast_jpeg(data: bytes, mode: str, max_pixels: int | None = IMAGE_MAX_PIXELS) -> Any:
    """Tensor/array output of a plain JPEG without EXIF (orientation is Pillow's job), else None."""
    if data[:3] != b"\xff\xd8\xff":
        return None
    frame = jpeg_frame(data)
    if frame is None or frame[0]:
        return None
    check_pixels(frame[1], frame[2], max_pixels)
    decode = turbo_jpeg()
    if decode is None:
        return None
    try:
        chw = decode(_encoded_tensor(data))
    except (RuntimeError, ValueError):
        return None  # let Pillow decode it, or report the damage in its words
    return chw if mode == "torch" else chw.permute(1, 2, 0).contiguous().numpy()


def open_image(data: bytes, formats: tuple[str, ...], max_pixels: int | None) -> Image.Image:
    """Pillow's lazy open (the header only) as one of ``formats``, within ``max_pixels``."""
    try:
        image = Image.open(io.BytesIO(data), formats=formats)
    except UnidentifiedImageError:
        looks = sniff_extension(data)
        hint = f"; they look like {looks}" if looks else ""
        raise ValueError(
            f"the bytes are not {' or '.join(formats)}, the format(s) the member's extension names{hint}"
        ) from None
    except Image.DecompressionBombError as exc:  # Pillow's own limit, checked as it opens
        raise ValueError(f"{exc} (Pillow's PIL.Image.MAX_IMAGE_PIXELS; see image_max_pixels)") from None
    check_pixels(image.width, image.height, max_pixels)
    return image


def decode_image(
    data: bytes,
    mode: str = "pil",
    size: int | tuple[int, int] | None = None,
    *,
    formats: tuple[str, ...] = LISTED_FORMATS,
    max_pixels: int | None = IMAGE_MAX_PIXELS,
) -> Any:
    """An image as ``mode`` says; ``formats``: the Pillow formats the bytes may be (the member's extension's,
    from ``IMAGE_FORMATS``); ``max_pixels``: the stored size refused past this, on every path."""
    if size is None and mode != "pil" and "JPEG" in formats:
        fast = fast_jpeg(data, mode, max_pixels)
        if fast is not None:
            return fast
    image = open_image(data, formats, max_pixels)
    orientation = image.getexif().get(_ORIENTATION_TAG, 1)
    # Sizes asked for are of the upright picture; the stored one lies on its side for orientations 5-8.
    exact = (size[1], size[0]) if isinstance(size, tuple) else None  # (width, height), as Pillow has it
    if exact is not None:
        stored = exact[::-1] if orientation >= 5 else exact
    else:
        stored = None if size is None else (size, size)
    if stored is not None:
        image.draft("RGB", stored)  # JPEG only: libjpeg scales the DCT, skipping much of the work
    if image.mode != "RGB":
        # Pillow warns when a palette with byte transparency goes straight to RGB; via RGBA it is silent.
        if image.mode in ("P", "PA") and "transparency" in image.info:
            image = image.convert("RGBA")
        image = image.convert("RGB")
    if stored is not None:
        factor = _reduction(image.size, stored)
        if factor > 1:
            image = image.reduce(factor)  # a box filter: what draft mode left, or any other format
    transpose = _TRANSPOSES.get(orientation)
    if transpose is not None:
        image = image.transpose(transpose)
    resize = exact is not None and image.size != exact
    if mode == "pil":
        if resize:
            image = image.resize(exact, Image.Resampling.BILINEAR)
        image.load()
        return image
    # np.asarray would be a read-only view of Pillow's bytes; one more copy of the pixels (a few percent
    # of a JPEG decode) buys a writable array, which torch.from_numpy needs to share memory safely.
    pixels = np.array(image)
    if not resize:
        return pixels if mode == "numpy" else torch.from_numpy(pixels).permute(2, 0, 1)
    # torch's antialiased bilinear kernel for uint8 is within one level of Pillow's and several times faster.
    chw = torch.from_numpy(pixels).permute(2, 0, 1)[None]
    chw = nnf.interpolate(chw, size=(exact[1], exact[0]), mode="bilinear", antialias=True)[0]
    return chw if mode == "torch" else chw.permute(1, 2, 0).contiguous().numpy()


def _reduction(size: tuple[int, int], target: tuple[int, int]) -> int:
    scale = min(size[0] // target[0], size[1] // target[1])
    # Powers of two, as JPEG's draft mode offers, so every format reduces alike.
    return 1 << (scale.bit_length() - 1) if scale > 1 else 1
