"""pytest fixtures: HTTP servers on an empty folder each (filled through ``server.root``); an S3 bucket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers.fault_server import FaultServer
from tests.servers.nginx import NginxServer, nginx
from tests.servers.s3 import S3Bucket, moto_s3

# Use with `pytest_plugins = ["tests.servers"]` in a test module, which re-exports these.


@pytest.fixture
def fault_server(tmp_path: Path) -> Iterator[FaultServer]:
    root = tmp_path / "fault-www"
    root.mkdir()
    with FaultServer(root) as server:
        yield server


@pytest.fixture
def nginx_server(tmp_path: Path) -> Iterator[NginxServer]:
    root = tmp_path / "nginx-www"
    root.mkdir()
    with nginx(root) as server:
        yield server


@pytest.fixture
def nginx_https_server(tmp_path: Path) -> Iterator[NginxServer]:
    root = tmp_path / "nginx-https-www"
    root.mkdir()
    with nginx(root, https=True) as server:
        yield server


@pytest.fixture(scope="session")
def s3_bucket() -> Iterator[S3Bucket]:
    """One moto S3 server per session, an empty bucket on it, and the environment (AWS_ENDPOINT_URL_S3,
    dummy credentials) that sends plain ``s3://`` URLs there, in this process and in its children. Tests
    share the bucket: each writes under a prefix of its own. Skipped when moto or s3fs is missing."""
    with moto_s3() as bucket:
        yield bucket
