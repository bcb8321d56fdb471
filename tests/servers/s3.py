"""moto's S3 server on 127.0.0.1, and the environment that points s3fs, here and in child processes, at it."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers.common import HOST

MOTO_INSTALL_HINT = "the S3 tests need moto's server and s3fs: pip install 'moto[server]' s3fs"
BUCKET = "shardstream-test"
# Dummy credentials: moto accepts any. The secret is distinctive so tests can assert no error shows it.
ACCESS_KEY = "AKIASHARDSTREAMTEST1"
SECRET_KEY = "shardstream-test-secret-do-not-print"
# A developer's own AWS setup must not leak in: a profile, a session token, an endpoint override, an
# instance-metadata lookup (which would wait on a network that is not there).
CLEARED = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")


def s3_environment(endpoint_url: str) -> dict[str, str]:
    """What botocore (under s3fs) reads from the environment: plain ``s3://`` URLs then reach moto.

    botocore honours AWS_ENDPOINT_URL_S3 (since 1.31.57), so child processes (DataLoader workers, any
    start method) inherit the endpoint as they inherit the credentials: nothing to pass by hand.
    """
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": endpoint_url,
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


class MotoS3Server:
    """moto's server in a daemon thread on a free port of 127.0.0.1: ``endpoint_url``; ``start``/``stop``."""

    def __init__(self) -> None:
        self._server: Any = None
        self.port: int | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> MotoS3Server:
        moto_server = pytest.importorskip("moto.server", reason=MOTO_INSTALL_HINT)
        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request on stderr
        self._server = moto_server.ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
        self._server.start()  # returns once it listens
        self.port = self._server.get_host_and_port()[1]
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    def __enter__(self) -> MotoS3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class S3Bucket:
    """A bucket on a running moto server, reached through an s3fs configured only by the environment."""

    def __init__(self, server: MotoS3Server, fs: Any, name: str = BUCKET) -> None:
        self.server, self.fs, self.name = server, fs, name

    def url(self, key: str) -> str:
        return f"s3://{self.name}/{key.lstrip('/')}"

    def upload(self, folder: Path, prefix: str) -> str:
        """Every file under ``folder`` to ``s3://bucket/prefix/...``; returns that folder's URL."""
        for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
            self.fs.put_file(str(path), f"{self.name}/{prefix}/{path.relative_to(folder).as_posix()}")
        return self.url(prefix)


def _clear_s3fs_instances() -> None:
    """Forget cached S3FileSystem instances: one made before the environment changed keeps its endpoint."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


@contextlib.contextmanager
def moto_s3(bucket: str = BUCKET) -> Iterator[S3Bucket]:
    """A moto server, this process's environment pointed at it (undone on exit) and an empty bucket."""
    s3fs = pytest.importorskip("s3fs", reason=MOTO_INSTALL_HINT)
    with MotoS3Server() as server, pytest.MonkeyPatch.context() as patch:
        for name in CLEARED:
            patch.delenv(name, raising=False)
        for name, value in s3_environment(server.endpoint_url).items():
            patch.setenv(name, value)
        _clear_s3fs_instances()
        try:
            fs = s3fs.S3FileSystem()
            fs.mkdir(bucket)
            yield S3Bucket(server, fs, bucket)
        finally:
            _clear_s3fs_instances()
