"""The node's metadata cache: a dataset's sidecars fetched once per node, keyed by URL and its index's hash.

Trade-off: no request checks a cached file against the server; the index, which every rank's main process
reads itself, vouches for them instead (its hash is in every key), so a sidecar replaced on the server
under an unchanged index is not seen until the index changes (re-indexing rewrites the index).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path

from shardstream.errors import redact_url
from shardstream.userwarn import warn_user

from .cache import ShardCache
from .metadata import over_cap
from .publish import write_atomic

try:
    import fcntl
except ImportError:  # Windows: no flock; each process fetches for itself, publishing atomically all the same
    fcntl = None  # type: ignore[assignment]

__all__ = ["CACHE_ENV", "MetadataCache", "default_folder", "node_cache"]

CACHE_ENV = "SHARDSTREAM_CACHE"  # the node's cache root; metadata goes in its metadata/ folder
_MAGIC = b"SSMETA1\n"
_HEAD = struct.Struct("<q32s")  # payload length (-1: the object is absent) and the payload's sha256
_ABSENT = -1
# Entries untouched this long are removed (once per process and folder): datasets read since keep theirs.
PRUNE_AGE = 14 * 86400.0
PRUNE_EVERY = 86400.0

Fetch = Callable[[], "bytes | None"]


def default_folder() -> Path:
    """``$SHARDSTREAM_CACHE/metadata``, else ``$XDG_CACHE_HOME`` / ``~/.cache`` + ``shardstream/metadata``."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root) / "metadata"
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(home) / "shardstream" / "metadata"


def node_cache(setting: str | bool) -> MetadataCache | None:
    """The cache ``HttpOptions.metadata_cache`` names (True: ``default_folder``, else a private folder in
    the temp dir when that cannot be made; a path: that folder; False: None, no cache)."""
    if setting is False:
        return None
    if setting is True:
        return _usable(str(default_folder())) or _usable(
            os.path.join(tempfile.gettempdir(), f"shardstream-metadata-{_uid()}")
        )
    return _usable(str(setting))


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


@lru_cache(maxsize=8)
def _usable(folder: str) -> MetadataCache | None:
    """The cache in ``folder`` when it can be made and written and is this user's (a folder another user
    made could hold planted files), else None: metadata is then fetched by each process, as without it."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        found = os.stat(folder)
    except OSError:
        return None
    if found.st_uid != _uid() or not os.access(folder, os.W_OK | os.X_OK):
        return None
    return MetadataCache(folder)


class MetadataCache:
    """Small objects (sidecars, key files, cost columns) by URL and version, one file each in ``folder``.

    ``read(url, version, fetch, cap)``: the cached bytes, else ``fetch()`` run by one process of the node
    at a time (an flock'd lock file; the others wait, then read its file). A file is checked whole on read
    (length and sha256 in its header): a damaged one is fetched again, with a warning.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self._names = ShardCache(self.folder)  # its file naming: a hash of the key, then the basename
        self._pruned = False

    def __repr__(self) -> str:
        return f"MetadataCache({str(self.folder)!r})"

    def path_for(self, url: str, version: str) -> Path:
        found = self._names.path_for(f"{url}#{version}")
        return found.with_name(found.name + ".meta")

    def read(self, url: str, version: str, fetch: Fetch, cap: int) -> bytes | None:
        """``url``'s bytes (None: it does not exist) as of ``version``, fetched at most once per node."""
        path = self.path_for(url, version)
        found = self._load(path, url, cap)
        if found is not None:
            return found[0]
        with self._locked(path):
            found = self._load(path, url, cap)  # another process fetched it while this one waited
            if found is not None:
                return found[0]
            data = fetch()
            # A full or read-only disk costs the sharing, not the read; a lost file is fetched again.
            with contextlib.suppress(OSError):
                write_atomic(path, _entry(data), durable=False, unique=True)
        self._prune()
        return data

    def _load(self, path: Path, url: str, cap: int) -> tuple[bytes | None] | None:
        """``(bytes or None)`` from a whole file; None when there is none or it is damaged (warned)."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(raw) >= len(_MAGIC) + _HEAD.size and raw.startswith(_MAGIC):
            length, digest = _HEAD.unpack_from(raw, len(_MAGIC))
            payload = memoryview(raw)[len(_MAGIC) + _HEAD.size :]
            if length == _ABSENT and not payload:
                return (None,)
            if length == len(payload) and hashlib.sha256(payload).digest() == digest:
                if length > cap:  # the cap holds for what is cached too: the options may have lowered it
                    raise over_cap(redact_url(url), cap, f"{length} bytes (cached in {path})")
                return (bytes(payload),)
        warn_user(
            f"{redact_url(url)}: its copy in the metadata cache ({path}) is damaged (cut short or changed); "
            "fetching it again"
        )
        return None

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        if fcntl is None:
            yield
            return
        try:
            fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:  # no lock to be had (a full disk): this process fetches for itself
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released when closed, and by the kernel if this process dies
            yield
        finally:
            os.close(fd)

    def _prune(self) -> None:
        """Remove entries (and their lock files) not written for ``PRUNE_AGE``: old datasets' versions.
        Once a day per folder (a marker file's age says when), not in every worker: the folder may be big."""
        if self._pruned:
            return
        self._pruned = True
        marker, now = self.folder / ".pruned", time.time()
        with contextlib.suppress(OSError):
            if now - marker.stat().st_mtime < PRUNE_EVERY:
                return
        with contextlib.suppress(OSError):
            marker.touch()
        old = now - PRUNE_AGE
        # A lock file pruned while held costs at most one more fetch of that entry: publishing is atomic.
        for entry in self.folder.iterdir():
            with contextlib.suppress(OSError):  # another process may prune the same file
                if entry.suffix in (".meta", ".lock") and entry.stat().st_mtime < old:
                    entry.unlink()


def _entry(data: bytes | None) -> bytes:
    if data is None:
        return _MAGIC + _HEAD.pack(_ABSENT, b"\0" * 32)
    return _MAGIC + _HEAD.pack(len(data), hashlib.sha256(data).digest()) + data
