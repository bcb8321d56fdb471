"""The one URL rule: what is a URL, its scheme, a ``file://`` URL's local path, a name beside another.

Every package asks here, so a ``file://`` URL is a local file to the streamer, the indexer, ``verify`` and
the packer alike, ``pipe:`` is a command, a one-letter scheme is a Windows drive, not a URL, and a remote
index names only remote shards (``join_url``). How a URL is *shown* (without user:password or tokens) is
``shardstream.errors.redact_url``, beside the errors that show them.
Trade-off: parsing with ``urllib.parse`` on every call, a microsecond, where a prefix test would do; no
caller asks per sample.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from ..errors import FormatError

LOCAL = ("file", "pipe")  # schemes read on this machine: a path, or a command's output
_SAME_KIND = {"https": "http"}  # http and https: one kind of server (an index may name either)


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
    """``name`` relative to the folder of ``base`` (a path or URL); a URL or absolute path stays itself.

    This is how an index's rows (and its columns and key files) become URLs, ``base`` being the index, so
    it decides what an index may name. A local index: anything, local paths and ``file://`` included (it
    is the user's own). A remote index (http(s), s3://, hf://, ...: whoever serves it wrote it): a name
    relative to itself, which resolves against its URL and so stays on its server (``../x.tar`` included),
    or a URL of its own kind (its scheme; http and https are one kind). Anything else is a FormatError
    naming the index and the row: an absolute path (``/etc/...``), ``file://``, ``pipe:`` (a command) or
    another scheme (fsspec's ``local://``, a chained ``simplecache::file://``, s3:// from an https index)
    would have this machine read its own files or run commands on a stranger's say. Which hosts of that
    kind a remote index may name is the HTTP options' rule, not this one.
    """
    if is_remote(base) and not _stays_remote(base, name):
        raise FormatError(
            f"{base}: the index names {name!r}, which a remote index may not: only names relative to "
            f"itself or {scheme_of(base)} URLs, never a local path, file://, pipe: or another scheme; "
            "fix the index, or download the shards and index them locally"
        )
    if "://" in name or name.startswith("/"):
        return name
    if "://" in base:
        return base.rsplit("/", 1)[0] + "/" + name
    return os.path.normpath(os.path.join(os.path.dirname(base), name))  # "idx/../d/x.tar" shows as "d/x.tar"


def _stays_remote(base: str, name: str) -> bool:
    """Whether ``name``, a row of the remote index ``base``, names bytes on that kind of server."""
    if name.startswith("pipe:"):
        return False  # else joined as base's folder + "pipe:...": harmless, but never what the row meant
    if "://" not in name and not name.startswith("/"):
        return True  # relative: joined to the index's URL
    kind = scheme_of(name)
    return _SAME_KIND.get(kind, kind) == _SAME_KIND.get(scheme_of(base), scheme_of(base))
