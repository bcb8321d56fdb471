"""fsspec URLs (s3://, gs://, hf://, memory://, ...): streams and ranged reads, every failure named by URL.

Trade-off of the fork rule below: a forked child (a DataLoader worker) keeps the filesystems it inherited
alive, unused, for its whole life. fsspec drops them from its cache in a new process, and dropping an
s3fs filesystem closes its connection pool, whose sockets the parent still uses: after a loader with
fork-started workers, the parent's next read waited out a dead connection (15 s, then the GET again).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

from shardstream.errors import ShardNotFoundError, ShardReadError, redact_url

from .objstoreoptions import fork_hint

_INHERITED: list[Any] = []  # in a forked child: the parent's filesystems, kept so none closes its pool


def _keep_inherited_filesystems() -> None:
    """After fork, in the child: hold every cached fsspec filesystem so that fsspec's per-process cache
    reset does not finalize it (s3fs closes its aiohttp pool then, sockets shared with the parent)."""
    spec = sys.modules.get("fsspec.spec")
    if spec is None:
        return
    pending = [spec.AbstractFileSystem]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        _INHERITED.extend(getattr(cls, "_cache", {}).values())


os.register_at_fork(after_in_child=_keep_inherited_filesystems)

INSTALL_HINT = "pip install fsspec (plus e.g. s3fs for s3://, gcsfs for gs://, huggingface_hub for hf://)"


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem serving ``url`` and the path within it."""
    scheme = urlparse(url).scheme
    try:
        import fsspec.core
    except ImportError as exc:
        needs = f"reading {scheme}:// URLs needs fsspec and its {scheme} backend"
        raise ShardReadError(f"{needs}: {INSTALL_HINT}", url=url) from exc
    with backend_errors(url, "reach"):
        try:
            return fsspec.core.url_to_fs(url)
        except ImportError as exc:
            raise ShardReadError(
                fork_hint(scheme) or f"{scheme}:// needs a backend package: {exc}", url=url
            ) from exc


def open_at(url: str, offset: int = 0) -> FsspecStream:
    """A stream of the object from byte ``offset`` (one seek, so the backend starts its reads there)."""
    fs, path = filesystem(url)
    with backend_errors(url, "open"):
        handle = fs.open(path, "rb")
    if getattr(handle, "details", {}).get("type") == "directory":  # s3fs opens a prefix as 0 bytes
        handle.close()
        raise ShardNotFoundError("is a folder, not an object (an index or shard URL was meant?)", url=url)
    stream = FsspecStream(handle, url)
    if offset:
        stream.seek(offset)
    return stream


def cat(url: str, start: int | None = None, end: int | None = None) -> bytes:
    """Bytes [start, end) of the object (all of it by default): one request, no read-ahead past ``end``."""
    fs, path = filesystem(url)
    with backend_errors(url, "read", start):
        return fs.cat_file(path, start=start, end=end)


@contextlib.contextmanager
def backend_errors(url: str, action: str, offset: int | None = None) -> Iterator[None]:
    """Whatever a backend raises, as a ShardReadError naming the URL (a missing object: ShardNotFoundError).

    Backends raise their own types too (botocore's NoCredentialsError is no OSError), so all are caught.
    """
    try:
        yield
    except ShardReadError:
        raise
    except FileNotFoundError as exc:
        raise ShardNotFoundError(f"not found{_detail(exc, url)}", url=url) from exc
    except Exception as exc:
        reason = f"{type(exc).__name__}{_detail(exc, url)}"
        raise ShardReadError(f"cannot {action}: {reason}", url=url, offset=offset) from exc


def _detail(exc: BaseException, url: str) -> str:
    """``": reason"``, or nothing where the backend's message only repeats the path (s3fs's missing key)."""
    text = redact_url(str(exc).strip())
    return f": {text.splitlines()[0]}" if text and text not in url else ""


class FsspecStream(io.RawIOBase):
    """An fsspec file whose failures are ShardReadErrors naming the URL and the byte they happened at."""

    def __init__(self, handle: Any, url: str) -> None:
        super().__init__()
        self._handle = handle
        self.url = url
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        with backend_errors(self.url, "read", self.position):
            data = self._handle.read(-1 if size is None else size)
        self.position += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(view.nbytes)
        view[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        with backend_errors(self.url, "seek", offset):
            moved = self._handle.seek(offset, whence)
            self.position = moved if isinstance(moved, int) else self._handle.tell()
        return self.position

    def tell(self) -> int:
        return self.position

    def close(self) -> None:
        if not self.closed:
            with contextlib.suppress(Exception):  # a failed close loses nothing a reader needs
                self._handle.close()
        super().close()
