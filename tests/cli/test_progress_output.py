"""What long commands show while they run (issue 33, item 8): a total and ETA for pack, a bar for stream
and packer.pack, steps for demo; and output the same way everywhere: sizes as 104.0 MB, paths one rule."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from packer import PackOptions, pack
from shardstream_cli import app

runner = CliRunner()
RECORDS = 9  # one of them names an image that is not there: a reject, counted in the total


def _bars(stderr: str) -> list[tuple[int, int | None]]:
    """(done, total) of every redraw of a tqdm bar in ``stderr``; total None where the bar had none."""
    found = []
    for line in re.split(r"[\r\n]", stderr):
        if match := re.search(r"(\d+)/(\d+) \[", line):
            found.append((int(match[1]), int(match[2])))
        elif match := re.search(r"(\d+) samples \[", line):
            found.append((int(match[1]), None))
    return found


def _source(tmp_path, kind):
    image = tmp_path / "pixel.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    records = [
        {
            "id": f"r{i:02d}",
            "caption": f"caption {i}",
            "image": str(image if i != 4 else tmp_path / "gone.png"),
        }
        for i in range(RECORDS)
    ]
    if kind == "folder":
        folder = tmp_path / "raw"
        folder.mkdir()
        for r in records[:-1]:
            (folder / f"{r['id']}.txt").write_text(r["caption"])
        (folder / "r99.txt").symlink_to(tmp_path / "nowhere.txt")  # a dangling link: a reject
        return folder
    if kind == "jsonl":
        path = tmp_path / "m.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        return path
    path = tmp_path / "m.parquet"
    pq.write_table(pa.Table.from_pylist(records), path, row_group_size=4)
    return path


@pytest.mark.parametrize("kind", ["folder", "jsonl", "parquet"])
def test_pack_counts_its_source_and_shows_items_of_the_total(tmp_path, kind):
    source = _source(tmp_path, kind)
    result = runner.invoke(app, ["pack", str(source), str(tmp_path / "out"), "--media-root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    bars = _bars(result.stderr)
    assert bars and bars[-1] == (RECORDS, RECORDS), result.stderr[-600:]
    assert "rejects=1" in result.stderr


def test_packer_pack_draws_a_bar_when_asked_and_nothing_otherwise(tmp_path, capfd):
    source = _source(tmp_path, "jsonl")
    pack(source, tmp_path / "a", PackOptions(media_root=str(tmp_path)), progress=True)
    assert _bars(capfd.readouterr().err)[-1] == (RECORDS, RECORDS)
    pack(source, tmp_path / "b", PackOptions(media_root=str(tmp_path)))  # stderr is no terminal here
    pack(source, tmp_path / "c", PackOptions(media_root=str(tmp_path)), progress=False)
    assert capfd.readouterr().err == ""


def test_stream_shows_a_bar_of_the_epoch_or_the_limit_and_q_hides_it(tmp_path):
    source = _source(tmp_path, "folder")
    assert runner.invoke(app, ["pack", str(source), str(tmp_path / "out"), "-q"]).exit_code == 0
    whole = runner.invoke(app, ["stream", str(tmp_path / "out"), "--no-decode"])
    assert whole.exit_code == 0, whole.output
    assert _bars(whole.stderr)[-1] == (RECORDS - 1, RECORDS - 1)
    limited = runner.invoke(app, ["stream", str(tmp_path / "out"), "--limit", "3"])
    assert _bars(limited.stderr)[-1] == (3, 3)
    quiet = runner.invoke(app, ["stream", str(tmp_path / "out"), "-q"])
    assert quiet.exit_code == 0 and _bars(quiet.stderr) == []


def test_demo_says_each_step_on_stderr_as_it_starts():
    result = subprocess.run(
        [sys.executable, "-m", "shardstream_cli", "demo", "--samples", "4"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    steps = [line for line in result.stderr.splitlines() if line.startswith("[")]
    assert [re.sub(r"^\[ *[\d.]+s\] ", "", s).split(" ")[0] for s in steps] == [
        "making",
        "packing",
        "streaming",
        "packing",
        "streaming",
    ], result.stderr
    assert result.stdout.count("streamed 4 samples") == 2


def test_info_prints_sizes_as_pack_and_stats_do(tmp_path):
    source = _source(tmp_path, "folder")
    packed = runner.invoke(app, ["pack", str(source), str(tmp_path / "out"), "-q"])
    size = re.search(r"\(([\d.]+ [kMG]?B)\)", packed.stdout)[1]
    info = runner.invoke(app, ["info", str(tmp_path / "out")])
    line = next(line for line in info.stdout.splitlines() if line.startswith("bytes:"))
    exact = json.loads(runner.invoke(app, ["info", str(tmp_path / "out"), "--json"]).stdout)["bytes"]
    assert line == f"bytes:    {size} ({exact:,} bytes)"


def test_pack_and_index_print_paths_by_one_rule(tmp_path, monkeypatch):
    """Inside the working folder: relative, however given; outside it: absolute. --json alike."""
    source = _source(tmp_path, "folder")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    printed = {}
    for command, args in {
        "pack-abs": ["pack", str(source), str(work / "p"), "-q"],
        "pack-rel": ["pack", str(source), "q", "-q"],
        "index-rel": ["index", "p", "--out", "idx", "-q"],
        "index-abs": ["index", str(work / "q"), "--out", str(work / "idx2"), "-q"],
        "outside": ["pack", str(source), str(tmp_path / "far"), "-q"],
    }.items():
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        printed[command] = re.search(r"^index: +(.*)$", result.stdout, re.M)[1]
    assert printed == {
        "pack-abs": "p/shardstream-index.json",
        "pack-rel": "q/shardstream-index.json",
        "index-rel": "idx/shardstream-index.json",
        "index-abs": "idx2/shardstream-index.json",
        "outside": str(tmp_path / "far" / "shardstream-index.json"),
    }
    as_json = runner.invoke(app, ["index", str(work / "q"), "--out", str(work / "idx3"), "-q", "--json"])
    assert json.loads(as_json.stdout)["index"] == os.path.join("idx3", "shardstream-index.json")
    plan = runner.invoke(app, ["pack", "plan", str(source), str(work / "parts"), "--partition-rows", "4"])
    assert plan.exit_code == 0, plan.output
    said = "records: parts/.shardstream-parts/plan.json\nnext: shardstream pack part parts --part N"
    assert said in plan.stdout
