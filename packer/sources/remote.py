"""Media named by URL (s3://, gs://, ...): fetched through fsspec, a load batch's objects in one call
(s3fs runs them concurrently), so a remote source costs round trips per batch, not per file."""

from __future__ import annotations

from collections.abc import Iterable

from shardstream.errors import PackError, redact_url
from shardstream.io.urls import is_remote, local_path


def join_media(root: str, item: str) -> str:
    """``item`` as given when it is a remote URL, else under ``root`` (a URL or a local folder); a
    ``file://`` URL is its local path (``shardstream.io.urls``, the rule every package follows)."""
    import os

    if is_remote(item):
        return item
    if is_remote(root):
        return f"{root.rstrip('/')}/{item}"
    item = local_path(item)
    return item if os.path.isabs(item) else os.path.join(local_path(root), item)


def fetch_all(urls: Iterable[str]) -> dict[str, bytes | Exception]:
    """Every URL's bytes, or the error reading it (FileNotFoundError when it is not there)."""
    wanted = list(dict.fromkeys(urls))
    if not wanted:
        return {}
    try:
        import fsspec
    except ImportError as exc:
        hint = "media URLs need fsspec and its backend: pip install 'shardstream[remote]' s3fs"
        raise PackError(hint) from exc
    found: dict[str, bytes | Exception] = {}
    by_protocol: dict[str, list[str]] = {}
    for url in wanted:
        by_protocol.setdefault(url.split("://", 1)[0], []).append(url)
    for protocol, group in by_protocol.items():
        try:
            fs = fsspec.filesystem(protocol)
            by_path = {fs._strip_protocol(url): url for url in group}
            got = fs.cat(list(by_path), on_error="return")
            found.update({by_path.get(path, path): value for path, value in got.items()})
        except Exception as exc:  # a backend missing or failing for the whole batch: each URL says so
            found.update({url: exc for url in group})
    return found


def describe(exc: Exception) -> str:
    """A backend's error, in words and without credentials."""
    return redact_url(f"{type(exc).__name__}: {exc}")
