"""Fixtures of the hostile-input tests: ``reader`` runs a test once with the C tar header fast path and
once with pure Python, since each must refuse the same damage."""

from __future__ import annotations

import pytest

import shardstream.format.tarread as tarread


@pytest.fixture(params=["c", "python"])
def reader(request, monkeypatch):
    if request.param == "c" and tarread._member_at is None:
        pytest.skip("shardstream/format/_tarscan.c is not built")
    if request.param == "python":
        monkeypatch.setattr(tarread, "_member_at", None)
    return request.param
