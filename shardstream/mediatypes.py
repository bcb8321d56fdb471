"""Media kinds by file extension, defined once: what the packer processes, manifests name, decoders read."""

from __future__ import annotations

# Image extension -> the Pillow formats its bytes may be: a decoder opens a member only as these, so
# bytes of another format (an EPS named x.png, whose Pillow plugin runs Ghostscript) are refused, not
# sniffed. Pillow's JPEG opener also gives MPO (many camera JPEGs); its PPM plugin reads PBM, PGM and PPM.
IMAGE_FORMATS: dict[str, tuple[str, ...]] = {
    "jpg": ("JPEG",),
    "jpeg": ("JPEG",),
    "png": ("PNG",),
    "webp": ("WEBP",),
    "gif": ("GIF",),
    "bmp": ("BMP",),
    "tif": ("TIFF",),
    "tiff": ("TIFF",),
    "ppm": ("PPM",),
}
IMAGE_EXTENSIONS: frozenset[str] = frozenset(IMAGE_FORMATS)
# Every format an image member may be opened as, whatever its extension says: raster formats Pillow
# decodes itself. Never EPS/PS (Pillow runs Ghostscript on them) or other plugins' formats.
RASTER_FORMATS: tuple[str, ...] = tuple(sorted({f for formats in IMAGE_FORMATS.values() for f in formats}))
AUDIO_EXTENSIONS: frozenset[str] = frozenset({"wav", "flac", "mp3", "ogg", "opus", "m4a"})
VIDEO_EXTENSIONS: frozenset[str] = frozenset({"mp4", "webm", "mkv", "avi", "mov"})
MEDIA_EXTENSIONS: frozenset[str] = IMAGE_EXTENSIONS | AUDIO_EXTENSIONS | VIDEO_EXTENSIONS

# A manifest string ending in one of these is a path to a file that becomes a member; the rest is text.
FILE_MEMBER_EXTENSIONS: frozenset[str] = MEDIA_EXTENSIONS | {"txt", "npy", "npz", "pth", "cls", "json"}


def sniff_extension(data: bytes | memoryview) -> str | None:
    """The extension a media file's first bytes announce (JPEG, PNG, WebP, GIF, WAV, FLAC, MP3, OGG, MP4,
    WebM), or None; for bytes that come without a name, e.g. a Parquet column."""
    head = bytes(data[:64])
    if head.startswith(b"\xff\xd8\xff"):
        return "jpg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if head.startswith(b"RIFF") and head[8:12] in _RIFF:
        return _RIFF[head[8:12]]
    if head.startswith(b"fLaC"):
        return "flac"
    if head.startswith(b"OggS"):
        return "ogg"
    if head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE6 == 0xE2):
        return "mp3"  # an ID3 tag, or an MPEG frame sync whose layer bits say III (AAC's ADTS says 00)
    if head[4:8] == b"ftyp":
        return "mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "webm" if b"webm" in head else "mkv"
    return None


_RIFF = {b"WEBP": "webp", b"WAVE": "wav", b"AVI ": "avi"}
