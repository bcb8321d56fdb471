"""Fixtures the mixture tests share."""

from __future__ import annotations

import pytest

from tests.streamer.mixture.twosources import write_two


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """code and web, written once per module (``twosources.py``)."""
    return write_two(tmp_path_factory.mktemp("two"))
