"""`shardstream columns --engine ray`: the shards as Ray tasks give the bytes a local run gives, from the
API on a connected Ray and from the command line on a cluster's address."""

from __future__ import annotations

import shutil

from shardstream.columns import ColumnOptions, compute_columns
from tests.cli.test_columns_command import FNS, run, sidecar_bytes, tiny_dataset


def test_ray_engine_gives_the_local_bytes(ray_address, tmp_path):
    root = tmp_path / "local"
    tiny_dataset(root, 6, 300)
    for copy in ("api", "cli"):
        shutil.copytree(root, tmp_path / copy)
    run("columns", str(root), "--fn", f"{FNS}:two_columns", "--workers", "2")
    options = ColumnOptions(fn=f"{FNS}:two_columns", workers=2, engine="ray")
    summary = compute_columns(tmp_path / "api", options)
    assert summary.computed == 6 and summary.samples == 1800
    assert sidecar_bytes(tmp_path / "api") == sidecar_bytes(root)
    more = ("--workers", "2", "--engine", "ray", "--address", ray_address)
    run("columns", str(tmp_path / "cli"), "--fn", f"{FNS}:two_columns", *more)
    assert sidecar_bytes(tmp_path / "cli") == sidecar_bytes(root)
