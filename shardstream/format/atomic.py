"""Publish files atomically: write a temp file in the same folder, fsync, rename; readers never see half."""

from __future__ import annotations

import os
from pathlib import Path


def temp_path(final: Path) -> Path:
    return final.with_name(f".{final.name}.tmp")


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(final: Path, data: bytes) -> None:
    tmp = temp_path(final)
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a failed write (disk full, Ctrl-C) leaves the old file and no litter
        raise
    fsync_dir(final.parent)
