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
