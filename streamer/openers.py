"""Openers by URL scheme, in a name-to-function registry: a shard URL in, a byte stream at an offset out.

Local files seek; gzip-compressed shards and pipes cannot, so their callers read and skip instead.
"""

from __future__ import annotations

import gzip
import os
import shlex
import subprocess
from collections.abc import Callable
from typing import BinaryIO
from urllib.parse import urlparse

from packer.errors import ShardReadError

Opener = Callable[[str, int], BinaryIO]
OPENERS: dict[str, Opener] = {}
_BUFFER = 1 << 20


def register_opener(scheme: str, opener: Opener) -> None:
    """Make ``scheme://...`` URLs (or ``pipe:``) open through ``opener(url, offset)``."""
    OPENERS[scheme] = opener


def scheme_of(url: str) -> str:
    if url.startswith("pipe:"):
        return "pipe"
    parsed = urlparse(url)
    # One-letter schemes are Windows drive letters, not URLs.
    return parsed.scheme if len(parsed.scheme) > 1 else "file"


def is_compressed(url: str) -> bool:
    return url.endswith((".gz", ".tgz"))


def seekable(url: str) -> bool:
    return scheme_of(url) == "file" and not is_compressed(url)


def _local_path(url: str) -> str:
    return urlparse(url).path if url.startswith("file://") else url


def _open_file(url: str, offset: int) -> BinaryIO:
    path = _local_path(url)
    try:
        handle = open(path, "rb", buffering=_BUFFER)  # noqa: SIM115 - the caller closes it
    except FileNotFoundError as exc:
        raise ShardReadError("shard not found", url=url) from exc
    except OSError as exc:
        raise ShardReadError(f"cannot open shard: {exc.strerror or exc}", url=url) from exc
    if offset:
        handle.seek(offset)
    return handle


def _open_pipe(url: str, offset: int) -> BinaryIO:
    command = url[len("pipe:") :]
    process = subprocess.Popen(shlex.split(command), stdout=subprocess.PIPE, bufsize=_BUFFER)
    assert process.stdout is not None
    _skip(process.stdout, offset, url)
    return process.stdout


def _skip(stream: BinaryIO, count: int, url: str) -> None:
    while count > 0:
        chunk = stream.read(min(count, _BUFFER))
        if not chunk:
            raise ShardReadError(f"stream ended before byte {count}", url=url)
        count -= len(chunk)


register_opener("file", _open_file)
register_opener("pipe", _open_pipe)


def open_stream(url: str, offset: int = 0) -> BinaryIO:
    """A stream of the (decompressed) shard starting at byte ``offset``."""
    scheme = scheme_of(url)
    opener = OPENERS.get(scheme)
    if opener is None:
        raise ShardReadError(
            f"no opener for {scheme}:// URLs; known: {', '.join(sorted(OPENERS))} "
            "(register one with streamer.register_opener)",
            url=url,
        )
    if not is_compressed(url):
        return opener(url, offset)
    stream = gzip.GzipFile(fileobj=opener(url, 0), mode="rb")
    _skip(stream, offset, url)  # type: ignore[arg-type]
    return stream  # type: ignore[return-value]


def read_small(url: str) -> bytes | None:
    """The whole of a small file (an index, an offsets sidecar), or None when it does not exist."""
    if scheme_of(url) == "file":
        try:
            with open(_local_path(url), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
    try:
        with open_stream(url) as stream:
            return stream.read()
    except ShardReadError as exc:
        if isinstance(exc.__cause__, FileNotFoundError) or "not found" in str(exc):
            return None
        raise


def join_url(base: str, name: str) -> str:
    """``name`` relative to the folder of ``base`` (a path or URL)."""
    if "://" in base:
        return base.rsplit("/", 1)[0] + "/" + name
    return os.path.join(os.path.dirname(base), name)
