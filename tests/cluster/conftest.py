"""One local Ray instance for the whole test session (a head started as the packer starts its own)."""

from __future__ import annotations

import importlib.util
import logging

import pytest


@pytest.fixture(scope="session")
def ray_address():
    if importlib.util.find_spec("ray") is None:  # not imported yet: Ray reads its auth setting at import
        pytest.skip("Ray core is in the test extras: pip install -e '.[test]'")
    from packer.cluster.rayhead import LocalHead

    head = LocalHead.start(2)
    import ray

    ray.init(address=head.address, logging_level=logging.ERROR)
    yield head.address
    ray.shutdown()
    head.stop()
