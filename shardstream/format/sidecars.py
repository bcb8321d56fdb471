"""Sidecar names derived from a shard's name or URL, for sidecars kept apart from their shards.

A derived name is one flat file name: the shard's last path component with every character outside
``[A-Za-z0-9._-]`` replaced and no leading dot, plus a hash of the whole name, so two shards never share a
sidecar and no name (``..``, an absolute path, a URL with odd characters) can place one outside its folder.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import urlparse

from .constants import OFFSETS_SUFFIX, SAMPLE_COLUMNS_SUFFIX

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_STEM_LIMIT = 80


def sidecar_stem(shard: str) -> str:
    """``train-000001.tar-<12 hex>`` for ``https://host/a/train-000001.tar?x=1`` or ``a/train-000001.tar``."""
    path = urlparse(shard).path if "://" in shard else shard
    last = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    stem = _UNSAFE.sub("_", last).lstrip(".")[:_STEM_LIMIT] or "shard"
    digest = hashlib.sha256(shard.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"{stem}-{digest}"


def offsets_sidecar(shard: str) -> str:
    return sidecar_stem(shard) + OFFSETS_SUFFIX


def sample_columns_sidecar(shard: str) -> str:
    """The per-sample columns file's derived name, beside the offsets sidecar of the same shard."""
    return sidecar_stem(shard) + SAMPLE_COLUMNS_SUFFIX
