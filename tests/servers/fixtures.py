"""pytest fixtures: each server on an empty folder the test fills through ``server.root``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers.fault_server import FaultServer
from tests.servers.nginx import NginxServer, nginx

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
