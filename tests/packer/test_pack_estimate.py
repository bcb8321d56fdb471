"""`--cost @estimate`: the built-in cost of a multimodal record, text characters / chars_per_token plus a
count per image member, written like any cost column."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from packer import PackOptions, pack
from shardstream.format import decode_sample_columns
from shardstream_cli import app
from streamer import ShardDataset


def _llava(folder, n=6):
    folder.mkdir()
    for i in range(n):
        record = {"id": f"r{i}", "conversations": [{"from": "human", "value": "x" * (40 * i)}]}
        (folder / f"r{i}.json").write_text(json.dumps(record))
        for k in range(i % 3):  # 0, 1 or 2 images
            (folder / f"r{i}.{k}.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    return folder


def _expected(i, chars_per_token=4, image_tokens=576):
    text = len(f"r{i}") + len("human") + 40 * i  # every string of the record
    return math.ceil(text / chars_per_token) + (i % 3) * image_tokens


@pytest.mark.parametrize(
    ("cost", "params"),
    [
        ("@estimate", {}),
        ("@estimate:chars_per_token=2,image_tokens=100", {"chars_per_token": 2, "image_tokens": 100}),
    ],
)
def test_the_estimate_counts_text_and_images(tmp_path, cost, params):
    raw = _llava(tmp_path / "raw")
    pack(raw, tmp_path / "out", PackOptions(cost=cost))
    got = {}
    for cols in sorted((tmp_path / "out").glob("*.cols")):
        ds = ShardDataset(tmp_path / "out", decode=False, shuffle=False)
        keys = [s["__key__"] for s in ds]
        got = dict(
            zip(
                keys,
                decode_sample_columns(cols.read_bytes(), source=str(cols), samples=None)["cost"].tolist(),
                strict=True,
            )
        )
    assert got == {f"r{i}": _expected(i, **params) for i in range(6)}


def test_a_bad_estimate_parameter_is_refused_before_packing(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "pack",
            str(_llava(tmp_path / "raw")),
            str(tmp_path / "out"),
            "--cost",
            "@estimate:tokens_per_image=9",
        ],
    )
    assert result.exit_code == 2 and "is not one of chars_per_token=N" in result.output
    assert not (tmp_path / "out").exists()


def test_an_estimate_past_the_cost_columns_range_is_a_named_reject_not_a_crash(tmp_path):
    """The .cols cost is a u8: an estimate past 2**64-1 (here 1e30 tokens an image) is a bad-cost reject
    naming the sample; the samples without images still pack."""
    from shardstream.format import REJECTS_NAME

    raw = _llava(tmp_path / "raw")
    summary = pack(raw, tmp_path / "out", PackOptions(cost="@estimate:image_tokens=1e30"))
    rejects = [json.loads(line) for line in (tmp_path / "out" / REJECTS_NAME).read_text().splitlines()]
    assert sorted(r["kind"] for r in rejects) == ["bad-cost"] * 4  # r1, r2, r4, r5 hold images
    assert all("past 2**64-1" in r["reason"] for r in rejects)
    assert summary.samples == 2
