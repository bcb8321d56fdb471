"""The one URL rule: what is a URL, its scheme, a ``file://`` URL's local path, a name beside another.

Every package asks here, so a ``file://`` URL is a local file to the streamer, the indexer, ``verify`` and
the packer alike, ``pipe:`` is a command, and a one-letter scheme is a Windows drive, not a URL.
Trade-off: parsing with ``urllib.parse`` on every call, a microsecond, where a prefix test would do; no
caller asks per sample.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

LOCAL = ("file", "pipe")  # schemes read on this machine: a path, or a command's output


def scheme_of(url: str) -> str:
    """``pipe`` for ``pipe:CMD``; the URL's scheme (``https``, ``s3``, ``file``, ...); ``file`` for a path."""
    if url.startswith("pipe:"):
        return "pipe"
    scheme = urlparse(url).scheme
    return scheme if len(scheme) > 1 else "file"  # one letter: a Windows drive (C:/data)


def is_remote(url: str) -> bool:
    """Whether ``url`` names bytes on another machine (HTTP(S), s3://, gs://, hf://, ...)."""
    return scheme_of(url) not in LOCAL


def local_path(url: str) -> str:
    """A ``file://`` URL's path; any other text as it is."""
    return urlparse(url).path if url.startswith("file://") else url


def join_url(base: str, name: str) -> str:
    """``name`` relative to the folder of ``base`` (a path or URL); a URL or absolute path stays itself."""
    if "://" in name or name.startswith("/"):
        return name
    if "://" in base:
        return base.rsplit("/", 1)[0] + "/" + name
    return os.path.join(os.path.dirname(base), name)
