"""A local shard cache shared by threads and processes without locks: atomic publish, LRU by mtime.

The trade-off: with no lock, the size limit is enforced after each fetch, not during it, so while fetches
are in flight the folder can hold up to one extra object per fetcher, and a path returned by ``get`` can
be evicted by another process before it is opened (``open`` returns a handle, which eviction cannot take).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlparse

from shardstream.errors import ShardNotFoundError, ShardReadError
from shardstream.userwarn import warn_user

from .httpoptions import redact
from .publish import fsync_dir

__all__ = ["STALE_TEMP_AGE", "ShardCache"]

Fetch = Callable[[BinaryIO], None]

# A temp file untouched this long belongs to a process that died (kill -9); a live fetch keeps writing.
STALE_TEMP_AGE = 3600.0
_TEMP_SUFFIX = ".tmp"
_ABSENT_SUFFIX = ".absent"
_KEY_HEX = 32
_MAX_BASENAME = 100
_CHUNK = 1 << 20
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


class ShardCache:
    """Whole objects (shards) by URL in one folder; ``get`` fetches on a miss, then evicts the oldest.

    ``cache_dir``: the folder (made if missing; threads and processes may share it). ``cache_size``: bytes
    kept, an int; after each fetch the least recently used files are deleted until the rest fit (None: no
    limit; a single object over it is kept, with a warning).
    """

    def __init__(self, cache_dir: str | os.PathLike[str], cache_size: int | None = None) -> None:
        if cache_size is not None and (
            isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size <= 0
        ):
            raise ValueError(f"cache_size must be a positive number of bytes or None, got {cache_size!r}")
        self.cache_dir = Path(cache_dir)
        self.cache_size = cache_size
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            message = f"cache_dir {str(cache_dir)!r} is not a folder (a file is in the way): {exc}"
            raise ValueError(message) from exc

    def __repr__(self) -> str:
        return f"ShardCache({str(self.cache_dir)!r}, cache_size={self.cache_size!r})"

    def path_for(self, url: str) -> Path:
        """Where ``url``'s bytes live: a hash of the whole URL, then its basename for humans."""
        # surrogatepass: a URL made from undecodable file names still has one stable key.
        digest = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:_KEY_HEX]
        return self.cache_dir / f"{digest}-{_basename(url)}"

    def contains(self, url: str) -> bool:
        return self.path_for(url).is_file()

    def absent(self, url: str) -> bool:
        """Whether ``url`` was remembered as missing (``remember_absent``), so it need not be asked again."""
        return self._absent_marker(url).exists()

    def remember_absent(self, url: str) -> None:
        """Note that ``url`` does not exist: an optional sidecar, looked for once per cache, not per epoch."""
        marker = self._absent_marker(url)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()

    def _absent_marker(self, url: str) -> Path:
        path = self.path_for(url)
        return path.with_name(path.name + _ABSENT_SUFFIX)

    def get(self, url: str, fetch: Fetch, *, sha256: str | None = None, size: int | None = None) -> Path:
        """The cached file for ``url``, fetched first on a miss; a hit marks it recently used."""
        sha256, size = _check_expected(sha256, size)
        path = self.path_for(url)
        if _touch_if_valid(path, size):
            return path
        self._fetch(url, path, fetch, sha256, size).close()
        return path

    def open(self, url: str, fetch: Fetch, *, sha256: str | None = None, size: int | None = None) -> BinaryIO:
        """Like ``get``, but an open binary handle at offset 0, valid even if the file is evicted next."""
        sha256, size = _check_expected(sha256, size)
        path = self.path_for(url)
        try:
            handle: BinaryIO = open(path, "rb")  # noqa: SIM115 - the caller owns and closes it
        except (FileNotFoundError, IsADirectoryError):  # a folder in the way is no hit; publishing says why
            return self._fetch(url, path, fetch, sha256, size)
        except NotADirectoryError as exc:
            message = f"cache {self.cache_dir} is no longer a folder: {exc}"
            raise ShardReadError(message, url=redact(url)) from exc
        if size is not None and os.fstat(handle.fileno()).st_size != size:
            handle.close()
            return self._fetch(url, path, fetch, sha256, size)
        _touch(path)
        return handle

    def total_bytes(self) -> int:
        """Bytes in published files; temp files of fetches in flight are not counted."""
        return sum(size for _, size, _ in self._published())

    def evict(self) -> int:
        """Delete stale temp files, then least-recently-used files down to ``cache_size``; bytes freed."""
        return self._evict(keep=None)

    def _fetch(self, url: str, path: Path, fetch: Fetch, sha256: str | None, size: int | None) -> BinaryIO:
        url = redact(url)  # only shown from here on (errors, the warning): never with user:password
        try:
            fd, name = tempfile.mkstemp(
                dir=self.cache_dir, prefix=f".{path.name}.{os.getpid()}.", suffix=_TEMP_SUFFIX
            )
        except OSError as exc:
            raise ShardReadError(
                f"cannot create a temp file in cache {self.cache_dir}: {exc}", url=url
            ) from exc
        temp = Path(name)
        handle: BinaryIO = os.fdopen(fd, "w+b")
        try:
            try:
                fetch(handle)
            except FileNotFoundError as exc:
                # Keep "not there" apart from "failed": callers remember absence, and do not retry it.
                raise ShardNotFoundError(f"fetch found nothing: {exc}", url=url) from exc
            except OSError as exc:
                raise ShardReadError(f"fetch failed: {exc}", url=url) from exc
            handle.flush()
            _verify(handle, url, sha256, size)
            # mkstemp makes 0600; a cached shard is as readable as the dataset it came from.
            os.fchmod(handle.fileno(), 0o644)
            os.fsync(handle.fileno())
            _stamp(handle)
            os.replace(temp, path)
            fsync_dir(self.cache_dir)
            handle.seek(0)
        except BaseException as exc:
            with contextlib.suppress(OSError):  # a failing close must not leave the temp file behind
                handle.close()
            _unlink(temp)
            if isinstance(exc, OSError):
                raise ShardReadError(f"cannot publish to cache {self.cache_dir}: {exc}", url=url) from exc
            raise
        got = os.fstat(handle.fileno()).st_size
        if self.cache_size is not None and got > self.cache_size:
            warn_user(
                f"{url}: {got} bytes is more than cache_size={self.cache_size}; kept anyway, "
                "but the cache is too small to hold it next to anything else"
            )
        try:
            self._evict(keep=path)
        except OSError as exc:
            handle.close()
            raise ShardReadError(f"cannot evict from cache {self.cache_dir}: {exc}", url=url) from exc
        return handle

    def _published(self) -> list[tuple[int, int, Path]]:
        """(mtime_ns, size, path) of every published file, skipping any that vanish while listed."""
        files = []
        for entry in _scan(self.cache_dir):
            if entry.name.startswith("."):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                files.append((st.st_mtime_ns, st.st_size, Path(entry.path)))
        return files

    def _evict(self, keep: Path | None) -> int:
        freed = self._remove_stale_temps()
        if self.cache_size is None:
            return freed
        files = sorted(self._published())
        total = sum(size for _, size, _ in files)
        for _, size, path in files:
            if total <= self.cache_size:
                break
            if path == keep:
                continue
            total -= size
            # Another process may have evicted it first: it is gone either way, only one of us freed it.
            if _unlink(path):
                freed += size
        return freed

    def _remove_stale_temps(self) -> int:
        cutoff = time.time() - STALE_TEMP_AGE
        freed = 0
        for entry in _scan(self.cache_dir):
            if not (entry.name.startswith(".") and entry.name.endswith(_TEMP_SUFFIX)):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if st.st_mtime < cutoff and _unlink(Path(entry.path)):
                freed += st.st_size
        return freed


def _basename(url: str) -> str:
    name = urlparse(url).path.rstrip("/").rsplit("/", 1)[-1]
    name = _UNSAFE.sub("_", name)[-_MAX_BASENAME:]
    return name or "object"


def _check_expected(sha256: str | None, size: int | None) -> tuple[str | None, int | None]:
    if sha256 is not None and not (isinstance(sha256, str) and _SHA256.fullmatch(sha256)):
        raise ValueError(f"sha256 must be 64 hex digits or None, got {sha256!r}")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        raise ValueError(f"size must be a non-negative number of bytes or None, got {size!r}")
    return (sha256.lower() if sha256 else None), size


def _verify(handle: BinaryIO, url: str, sha256: str | None, size: int | None) -> None:
    got = os.fstat(handle.fileno()).st_size
    if size is not None and got != size:
        raise ShardReadError(f"size mismatch: expected {size} bytes, got {got}", url=url)
    if sha256 is not None:
        # Re-read rather than hash on the way in: fetch may seek (ranged or parallel downloads).
        handle.seek(0)
        digest = hashlib.sha256()
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
        if digest.hexdigest() != sha256:
            raise ShardReadError(f"sha256 mismatch: expected {sha256}, got {digest.hexdigest()}", url=url)


def _touch_if_valid(path: Path, size: int | None) -> bool:
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):  # no folder: a miss, and the fetch names the cause
        return False
    # A size that disagrees means the remote object changed since it was cached: fetch it again.
    if not stat.S_ISREG(st.st_mode) or (size is not None and st.st_size != size):
        return False
    return _touch(path)


def _now_ns() -> tuple[int, int]:
    # Explicit times: the kernel's own "now" is coarse (a few ms), which would tie files used in a row.
    now = time.time_ns()
    return now, now


def _touch(path: Path) -> bool:
    try:
        os.utime(path, ns=_now_ns())
    except FileNotFoundError:
        return False
    except PermissionError:
        pass  # someone else's file in a shared cache: still a valid hit, only its LRU age is stale
    return True


def _stamp(handle: BinaryIO) -> None:
    os.utime(handle.fileno(), ns=_now_ns())


def _scan(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except FileNotFoundError:
        return []


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
