"""What ``shardstream index`` scans: SOURCE (a pattern, folder, list file or URL) as a sorted shard list.

Local sources list every shard up front (a folder is walked, sorted; a pattern's missing names are kept so
they can be reported). Remote ones (http(s), fsspec) come from a brace pattern, a list file, or, for
fsspec, a folder listing. Compressed shards (.tar.gz, .tgz) cannot be entered at a sample, so they are
listed as skipped, with the reason, rather than indexed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FormatError, redact_url
from ..format.constants import SHARD_SUFFIX
from ..format.patterns import BracePattern
from ..io.urls import is_remote, local_path, scheme_of

_COMPRESSED = (".tar.gz", ".tgz")


@dataclass
class ShardSource:
    """Shards in scan order: ``urls`` to open; ``home`` is the local folder the source lives in (None when
    remote); ``skipped`` pairs a URL with why it is not scanned (compressed)."""

    text: str
    urls: list[str]
    home: Path | None
    skipped: list[tuple[str, str]] = field(default_factory=list)


def resolve_source(text: str) -> ShardSource:
    """SOURCE as the index command takes it; a FormatError/ValueError that names the fix if unusable."""
    if is_remote(text):
        return _remote(text)
    text = local_path(text)
    if "{" in text:
        urls = [os.path.abspath(u) for u in BracePattern(text)]
        home = Path(os.path.abspath(os.path.dirname(text.split("{", 1)[0] + "x") or "."))
        return _split_compressed(ShardSource(text, urls, home))
    path = Path(text)
    if path.is_dir():
        return _split_compressed(ShardSource(text, _walk(path), path.resolve()))
    if path.is_file() and not path.name.endswith((SHARD_SUFFIX, *_COMPRESSED)):
        return _split_compressed(_list_file(path))
    if path.name.endswith((SHARD_SUFFIX, *_COMPRESSED)):
        return _split_compressed(ShardSource(text, [str(path.resolve())], path.resolve().parent))
    raise ValueError(f"source: {text!r} is not a folder, a shard, a list file or a brace pattern")


def _walk(root: Path) -> list[str]:
    """Every .tar (and compressed tar) under ``root``, hidden folders and files left out, sorted by path."""
    found = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(
            os.path.join(folder, name)
            for name in files
            if not name.startswith(".") and name.endswith((SHARD_SUFFIX, *_COMPRESSED))
        )
    found.sort(key=lambda p: os.path.relpath(p, root).split(os.sep))
    return [os.path.abspath(p) for p in found]


def _list_file(path: Path) -> ShardSource:
    """One shard per line (paths relative to the list's folder, or URLs); blank and # lines ignored."""
    base = path.resolve().parent
    urls = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            entry = line.strip()
            if not entry or entry.startswith("#"):
                continue
            if "\0" in entry:
                raise FormatError(f"{path}:{number}: a NUL byte in a shard name")
            urls.append(entry if is_remote(entry) else os.path.normpath(os.path.join(base, entry)))
    if not urls:
        raise ValueError(f"source: the list file {path} names no shards")
    remote = [is_remote(u) for u in urls]
    if any(remote) and not all(remote):
        raise ValueError(f"source: {path} mixes URLs and local paths; index them separately")
    return ShardSource(str(path), urls, None if all(remote) else base)


def _remote(text: str) -> ShardSource:
    if "{" in text:
        return _split_compressed(ShardSource(text, list(BracePattern(text)), None))
    if text.endswith((SHARD_SUFFIX, *_COMPRESSED)):
        return _split_compressed(ShardSource(text, [text], None))
    if scheme_of(text) in ("http", "https"):
        raise ValueError(
            f"source: {redact_url(text)!r}: an HTTP folder cannot be listed; give a brace pattern "
            "(https://host/train-{000000..000127}.tar) or a list file of URLs"
        )
    import fsspec  # a folder on object storage: list it

    fs, root = fsspec.core.url_to_fs(text)
    names = sorted(p for p in fs.find(root) if p.endswith((SHARD_SUFFIX, *_COMPRESSED)))
    urls = [fs.unstrip_protocol(p) for p in names]
    if not urls:
        raise ValueError(f"source: no .tar files under {redact_url(text)!r}")
    return _split_compressed(ShardSource(text, urls, None))


def _split_compressed(source: ShardSource) -> ShardSource:
    kept = []
    for url in source.urls:
        if url.endswith(_COMPRESSED):
            source.skipped.append(
                (
                    url,
                    "compressed: a gzip stream cannot be entered at a sample; "
                    "decompress it (gunzip) to index it",
                )
            )
        else:
            kept.append(url)
    source.urls = kept
    return source
