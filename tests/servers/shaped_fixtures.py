"""The shaped S3 server's fixture, as a plugin: ``pytest_plugins = ["tests.servers.shaped_fixtures"]``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers.shaped_s3 import ShapedS3Server


@pytest.fixture
def shaped_s3(tmp_path: Path) -> Iterator[ShapedS3Server]:
    """A fresh, unshaped server per test on an empty folder (``srv.root``): shaping, faults and the request
    log are the test's own (a server starts in milliseconds, so nothing is gained by sharing one)."""
    root = tmp_path / "shaped-s3"
    root.mkdir()
    with ShapedS3Server(root) as server:
        yield server


@pytest.fixture
def pointed_s3(shaped_s3: ShapedS3Server, monkeypatch) -> Iterator[ShapedS3Server]:
    """``shaped_s3`` with this process and its children pointed at it (endpoint, dummy credentials), and
    s3fs's cached clients forgotten before and after: the index is read through s3fs when installed, and
    a client keeps the endpoint it was made with."""
    for name, value in shaped_s3.environment().items():
        monkeypatch.setenv(name, value)
    forget_s3fs_clients()
    yield shaped_s3
    forget_s3fs_clients()


def forget_s3fs_clients() -> None:
    """Drop s3fs's cached filesystems (each holds the endpoint it was made with)."""
    try:
        import s3fs
    except ImportError:
        return
    s3fs.S3FileSystem.clear_instance_cache()
