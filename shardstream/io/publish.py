"""Publish files atomically: write a temp file beside the final name, fsync, rename; readers never see half.

The one home of the temp-file + rename rule, for whole byte strings (``write_atomic``), for files written
piece by piece (``Publishing``: a shard, a key file) and for a ``with`` block (``publishing``). A failed
or abandoned write leaves the old file and no temp file. ``durable=False`` skips the fsyncs where a
later record vouches for the file (the indexer's sidecars, whose journal line is written after them).
Trade-off: one temp name per final name (``.NAME.tmp``), so two writers of one file in one folder must
pass ``unique=True`` (the process id joins the temp name).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def temp_path(final: Path, *, unique: bool = False) -> Path:
    """Where ``final`` is written before it is renamed into place."""
    return final.with_name(f".{final.name}.{os.getpid()}.tmp" if unique else f".{final.name}.tmp")


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` survive a power cut."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Publishing:
    """A file written to its temp path, renamed to ``final`` by ``commit()``, removed by ``abort()``.

    ``final``: where the file appears; ``mode`` and ``open_options``: as ``open`` takes them (binary by
    default); ``durable``: fsync the file before the rename and the folder after it; ``unique``: a temp
    name of this process's own.
    """

    def __init__(
        self,
        final: Path,
        mode: str = "wb",
        *,
        durable: bool = True,
        unique: bool = False,
        **open_options: Any,
    ) -> None:
        self.final, self.durable = Path(final), durable
        self.temp = temp_path(self.final, unique=unique)
        self.handle: IO[Any] = open(self.temp, mode, **open_options)  # noqa: SIM115 - commit()/abort() close it

    def commit(self, *, sync_folder: bool = True) -> None:
        """Flush, fsync (when durable) and rename into place; ``sync_folder=False`` leaves the folder's
        fsync to the caller, who publishes several files in one folder (``fsync_dir`` once after)."""
        self.handle.flush()
        if self.durable:
            os.fsync(self.handle.fileno())
        self.handle.close()
        os.replace(self.temp, self.final)
        if self.durable and sync_folder:
            fsync_dir(self.final.parent)

    def abort(self) -> None:
        """Close and remove the temp file; the final name keeps what it had."""
        try:
            self.handle.close()  # may fail again after a failed write: the temp file goes all the same
        finally:
            self.temp.unlink(missing_ok=True)


@contextmanager
def publishing(final: Path, mode: str = "wb", **options: Any) -> Iterator[IO[Any]]:
    """``with publishing(path) as handle:`` writes ``path`` atomically when the block ends without error."""
    file = Publishing(final, mode, **options)
    try:
        yield file.handle
        file.commit()
    except BaseException:
        file.abort()  # a failed write (disk full, Ctrl-C) leaves the old file and no litter
        raise


def write_atomic(final: Path, data: bytes, *, durable: bool = True, unique: bool = False) -> None:
    """``final`` holds ``data``, whole, or what it held before."""
    with publishing(Path(final), durable=durable, unique=unique) as handle:
        handle.write(data)
