"""pack --cost FIELD: a .cols file of per-sample costs beside every shard, the sums in the index, bad costs
counted rejects, and the same bytes after a kill -9 and --resume, and in parts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from packer import PackOptions, pack
from packer.cluster import pack_in_parts
from shardstream.errors import PackError
from shardstream.format import DatasetIndex, decode_sample_columns, iter_samples, sample_columns_name
from shardstream_cli import app
from tests.packer.killing import pack_killed

COST = PackOptions(max_count=7, max_size=None, cost="num_tokens")
KILLED = {"max_count": 7, "max_size": None, "cost": "num_tokens"}  # COST for a child killed in shard 4
BAD = {"b-bool": True, "b-frac": 2.5, "b-neg": -3, "b-str": "12", "b-nan": None}


def _manifest(folder: Path, count: int = 40, bad: bool = True) -> Path:
    rows = [{"id": f"s{i:03d}", "text": "w " * i, "num_tokens": i * 13 + 1} for i in range(count)]
    rows.insert(5, {"id": "s-float", "num_tokens": 12.0})  # an integral float is the integer
    if bad:
        rows[9:9] = [{"id": key, "num_tokens": value} for key, value in BAD.items()]
        rows.insert(20, {"id": "b-missing"})
    path = folder / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _costs_by_key(out: Path) -> dict[str, int]:
    """Every shard read back with the reader, its keys zipped with its .cols values in order."""
    index = DatasetIndex.load(out / "shardstream-index.json")
    found: dict[str, int] = {}
    for number, entry in enumerate(index.shards):
        with open(out / entry.name, "rb") as stream:
            keys = [s["__key__"] for s in iter_samples(stream, url=entry.name)]
        cols = out / sample_columns_name(entry.name)
        data = cols.read_bytes()
        costs = decode_sample_columns(data, source=str(cols), samples=entry.samples)["cost"]
        assert costs.dtype.str == "<u8" and len(keys) == len(costs)
        assert index.column_sums["cost"][number] == int(costs.sum())
        found.update(zip(keys, costs.tolist(), strict=True))
    assert index.sample_columns == {"cost": "u8"}
    return found


def _expected(manifest: Path) -> dict[str, int]:
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    return {r["id"]: int(r["num_tokens"]) for r in rows if not r["id"].startswith("b-")}


def test_cols_beside_every_shard_hold_the_records_costs_in_shard_order(tmp_path):
    manifest = _manifest(tmp_path)
    summary = pack(manifest, tmp_path / "out", COST)
    assert summary.shards == 6
    assert _costs_by_key(tmp_path / "out") == _expected(manifest)
    rejects = [
        json.loads(x) for x in (tmp_path / "out" / "shardstream-rejects.jsonl").read_text().splitlines()
    ]
    assert [r["kind"] for r in rejects] == ["bad-cost"] * 6
    for key, r in zip([*BAD, "b-missing"], rejects, strict=True):
        assert f"sample {key!r}" in r["reason"] and "'num_tokens'" in r["reason"]
    assert DatasetIndex.load(tmp_path / "out" / "shardstream-index.json").rejected == {"bad-cost": 6}
    shown = CliRunner().invoke(app, ["info", str(tmp_path / "out"), "--json"])
    total = sum(_expected(manifest).values())
    assert json.loads(shown.stdout)["sample_columns"] == {"cost": {"dtype": "u8", "total": total}}
    assert f"cost (u8, total {total:,})" in CliRunner().invoke(app, ["info", str(tmp_path / "out")]).stdout


def test_without_cost_no_cols_and_the_index_is_unchanged(tmp_path):
    pack(_manifest(tmp_path, bad=False), tmp_path / "out", PackOptions(max_count=7, max_size=None))
    assert not list((tmp_path / "out").glob("*.cols"))
    doc = json.loads((tmp_path / "out" / "shardstream-index.json").read_text())
    assert "sample_columns" not in doc and "column_sums" not in doc and "cost" not in doc["options"]


def test_strict_stops_at_a_bad_cost(tmp_path):
    with pytest.raises(PackError, match=r"b-bool.*num_tokens.*--strict"):
        pack(_manifest(tmp_path), tmp_path / "out", PackOptions(max_count=7, strict=True, cost="num_tokens"))


def test_the_cli_flag_and_a_folder_of_key_json_members(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(12):
        (src / f"k{i:02d}.txt").write_text("t" * i)
        (src / f"k{i:02d}.json").write_text(json.dumps({"num_tokens": 100 + i}))
    (src / "k99.txt").write_text("no record, no cost")
    done = CliRunner().invoke(
        app, ["pack", str(src), str(tmp_path / "out"), "--cost", "num_tokens", "--max-count", "5"]
    )
    assert done.exit_code == 0, done.output
    assert _costs_by_key(tmp_path / "out") == {f"k{i:02d}": 100 + i for i in range(12)}
    reject = json.loads((tmp_path / "out" / "shardstream-rejects.jsonl").read_text())
    assert reject["kind"] == "bad-cost" and "no json member" in reject["reason"]


def test_python_records_and_a_resume_with_another_cost_is_refused(tmp_path):
    records = [{"id": f"r{i}", "n": i, "m": 2 * i} for i in range(20)]
    pack(records, tmp_path / "out", PackOptions(max_count=6, cost="n"))
    assert _costs_by_key(tmp_path / "out") == {f"r{i}": i for i in range(20)}
    with pytest.raises(PackError, match="other options"):
        pack(records, tmp_path / "out", PackOptions(max_count=6, cost="m", resume=True))
    pack(records, tmp_path / "out", PackOptions(max_count=6, cost="m", overwrite=True))
    assert _costs_by_key(tmp_path / "out") == {f"r{i}": 2 * i for i in range(20)}


def _digests(out: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(out.iterdir())
        if p.is_file() and not p.name.startswith(".")
    }


def test_resume_after_kill_9_gives_the_same_shards_and_cols(tmp_path):
    manifest = _manifest(tmp_path)
    pack(manifest, tmp_path / "whole", COST)
    pack_killed(manifest, tmp_path / "cut", KILLED, shards=3, samples=1)
    assert len(list((tmp_path / "cut").glob("*.cols"))) == 3
    (tmp_path / "cut" / "train-000001.tar.cols").unlink()  # a resume checks each done shard's costs
    with pytest.raises(PackError, match="costs are missing or changed"):
        pack(manifest, tmp_path / "cut", PackOptions(**{**COST.__dict__, "resume": True}))
    pack_killed(manifest, tmp_path / "again", KILLED, shards=3, samples=1)
    with pytest.raises(PackError, match="different options"):
        pack(manifest, tmp_path / "again", PackOptions(max_count=7, max_size=None, cost="other", resume=True))
    pack(manifest, tmp_path / "again", PackOptions(**{**COST.__dict__, "resume": True}))
    whole = _digests(tmp_path / "whole")
    assert _digests(tmp_path / "again") == whole
    assert sum(name.endswith(".cols") for name in whole) == 6


def test_parts_write_the_same_cols_and_sums(tmp_path):
    manifest = _manifest(tmp_path)
    pack_in_parts(manifest, tmp_path / "parts", COST, partition_rows=15)
    assert _costs_by_key(tmp_path / "parts") == _expected(manifest)
    pack_in_parts(
        manifest, tmp_path / "again", PackOptions(**{**COST.__dict__, "workers": 2}), partition_rows=15
    )
    assert _digests(tmp_path / "again") == _digests(tmp_path / "parts")
    index = DatasetIndex.load(tmp_path / "parts" / "shardstream-index.json")
    assert index.options["cost"] == "num_tokens" and len(index.column_sums["cost"]) == len(index.shards)
