"""Local files opened for reading: regular files only, checked on the open descriptor; costs one fstat.

A path a listing, an index row or a user names can be a FIFO (opening blocks until a writer comes, reading
never ends), a device such as ``/dev/zero`` (endless) or a directory. Checking the path first (``isfile``)
races with whoever swaps it; checking the descriptor after opening does not. The open itself must not block
either, hence ``O_NONBLOCK``, which a regular file ignores for reads.
"""

from __future__ import annotations

import io
import os
import stat
from typing import BinaryIO

__all__ = ["NotRegularFile", "open_regular", "open_regular_fd"]

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFile(OSError):
    """The path opened is not a regular file; ``str()`` says what it is. An OSError, so callers that
    already turn an unreadable file into a named error (a bad shard, a counted skip) need no new branch."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(path, kind)
        self.strerror = f"not a regular file: it is {kind}"  # what callers print after the path
        self.filename = path
        self.kind = kind

    def __str__(self) -> str:
        return f"{self.filename} is {self.kind}, not a regular file"

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.filename, self.kind)


def open_regular_fd(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> int:
    """A descriptor of ``path`` for reading; NotRegularFile (closed first) when it is not a regular file.
    ``follow_symlinks=False`` adds ``O_NOFOLLOW``: a link as the last part fails with ELOOP, unopened."""
    fd = os.open(path, _FLAGS if follow_symlinks else _FLAGS | os.O_NOFOLLOW)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise NotRegularFile(os.fspath(path), kind)
        os.set_blocking(fd, True)  # reads of a regular file never block on O_NONBLOCK anyway; be plain
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str | os.PathLike[str], *, buffering: int = -1) -> BinaryIO:
    """``open(path, "rb", buffering=...)``, refusing anything but a regular file (NotRegularFile)."""
    raw = io.FileIO(open_regular_fd(path), "rb", closefd=True)
    raw.name = os.fspath(path)  # as open() names it: callers print and map by name
    if buffering == 0:
        return raw  # type: ignore[return-value]
    return io.BufferedReader(raw, buffering if buffering > 1 else io.DEFAULT_BUFFER_SIZE)  # type: ignore[return-value]
