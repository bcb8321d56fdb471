"""Media kinds by file extension, defined once: what the packer processes, manifests name, decoders read."""

from __future__ import annotations

IMAGE_EXTENSIONS: frozenset[str] = frozenset(
    {"jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff", "ppm"}
)
AUDIO_EXTENSIONS: frozenset[str] = frozenset({"wav", "flac", "mp3", "ogg", "opus", "m4a"})
VIDEO_EXTENSIONS: frozenset[str] = frozenset({"mp4", "webm", "mkv", "avi", "mov"})
MEDIA_EXTENSIONS: frozenset[str] = IMAGE_EXTENSIONS | AUDIO_EXTENSIONS | VIDEO_EXTENSIONS

# A manifest string ending in one of these is a path to a file that becomes a member; the rest is text.
FILE_MEMBER_EXTENSIONS: frozenset[str] = MEDIA_EXTENSIONS | {"txt", "npy", "npz", "pth", "cls", "json"}

