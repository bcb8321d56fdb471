"""`shardstream subset` and make_subset over a real packed dataset: the masks written decode to exactly the
samples the rules keep (checked against the tars themselves), --json is one object on a clean stdout, and
errors are one line naming the file and the fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from shardstream.format.subsetindex import MASKS_NAME, SUBSET_NAME, SubsetIndex
from shardstream.format.subsetmasks import SubsetMasks
from shardstream.subset import SubsetOptions, make_subset, subset_masks
from shardstream_cli import app
from tests.conftest import write_dataset
from tests.subset.test_keys import DUPLICATE, pack_costed, places

SHARDSTREAM = str(Path(sys.executable).with_name("shardstream"))


@pytest.fixture(scope="module")
def costed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack_costed(tmp_path_factory.mktemp("cli"))


def kept_by_subset(out: Path, dataset: Path) -> set[tuple[int, int]]:
    """(shard, sample) of every sample the subset in ``out`` keeps, decoded from its masks file."""
    index = SubsetIndex.from_json((out / SUBSET_NAME).read_text(), source="subset")
    assert (out / index.dataset).resolve() == (dataset / "shardstream-index.json").resolve()
    counts = np.bincount([s for s, *_ in places(dataset)]).astype(np.int64)
    masks = SubsetMasks((out / MASKS_NAME).read_bytes(), counts, source=MASKS_NAME)
    assert masks.total == index.kept
    kept = set()
    for shard, count in enumerate(counts.tolist()):
        indices = masks.indices(shard)
        kept |= {(shard, int(i)) for i in (range(count) if indices is None else indices)}
    return kept


def run(*argv: str) -> object:
    return CliRunner().invoke(app, ["subset", *map(str, argv)], env={"COLUMNS": "80"})


def test_exclude_and_where_from_the_cli_keep_exactly_the_expected_samples(costed, tmp_path):
    keys = tmp_path / "blocklist.txt"
    keys.write_text(f"{DUPLICATE}\nk030\nnot-there\n")
    out = tmp_path / "subsets" / "clean"
    result = run(costed, "--out", out, "--exclude", keys, "--where", "cost >= 100 and cost != 400", "-q")
    assert result.exit_code == 0, result.output
    expected = {(s, i) for s, i, key, cost in places(costed) if key not in (DUPLICATE, "k030")}
    expected = {(s, i) for s, i, key, cost in places(costed) if (s, i) in expected and 100 <= cost != 400}
    assert kept_by_subset(out, costed) == expected
    assert "kept 47 of 60 samples" in result.output
    assert "left out by exclude: 3" in result.output  # both samples of the repeated key, and k030
    assert "left out by where: 10" in result.output  # k000..k009 less k005 (gone already), and k040
    assert "exclude keys: 2 found, 1 not in the dataset" in result.output


def test_include_with_a_function_predicate_from_python(costed, tmp_path):
    options = SubsetOptions(include={"k001", "k002", DUPLICATE, "k050"}, where=lambda c: c["cost"] % 20 == 0)
    summary = make_subset(costed, tmp_path / "s", options)
    expected = {(s, i) for s, i, key, cost in places(costed) if key in ("k002", "k050")}
    assert kept_by_subset(tmp_path / "s", costed) == expected
    assert summary.left_out == {"include": 55, "where": 3}  # k001, and both samples of k005 (50 and 7)
    assert summary.rule["include"]["keys"] == "a Python set of 4 keys"


def test_json_is_one_object_on_a_clean_stdout(costed, tmp_path):
    keys = tmp_path / "keep.txt"
    keys.write_text("k001\nk002\nk099\n")
    done = subprocess.run(
        [SHARDSTREAM, "subset", str(costed), "--out", str(tmp_path / "s"), "--include", str(keys), "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["samples"], doc["kept"], doc["left_out"]) == (60, 2, {"include": 58})
    assert doc["rule"]["include"]["missing"] == 1 and doc["index"] == f"s/{SUBSET_NAME}"


def test_masks_of_every_kind_decode(costed):
    """A shard kept whole (None), one partly and one left out whole."""
    result = subset_masks(costed, SubsetOptions(where="cost >= 200 and cost < 450"))
    assert result.masks[1] is None and not result.masks[0].any() and result.masks[2].sum() == 5
    assert result.kept == 25 and result.left_out == {"where": 35}


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--exclude", "{tmp}/absent.txt"], "exclude: {tmp}/absent.txt: no such keys file"),
        (
            ["--where", "quality > 3"],
            "'quality' is not a column of {data}/shardstream-index.json; its columns are: cost",
        ),
        (["--where", "__import__('os')"], "a call (__import__('os')) is not allowed"),
        ([], "give at least one of include, exclude or where"),
    ],
)
def test_errors_are_one_line_naming_the_file(costed, tmp_path, argv, said):
    result = run(costed, "--out", tmp_path / "s", *[a.format(tmp=tmp_path) for a in argv])
    assert result.exit_code == 1
    assert said.format(tmp=tmp_path, data=costed) in result.output
    assert not (tmp_path / "s").exists()


def test_a_dataset_without_an_index_or_a_key_file_says_how_to_make_one(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run(tmp_path / "empty", "--out", tmp_path / "s", "--where", "cost > 1")
    assert (
        result.exit_code == 1 and f"{tmp_path}/empty/shardstream-index.json: index not found" in result.output
    )
    write_dataset(tmp_path / "plain", [2, 2])
    keys = tmp_path / "k.txt"
    keys.write_text("s000-00001\n")
    result = run(tmp_path / "plain", "--out", tmp_path / "s", "--exclude", keys)
    assert result.exit_code == 1 and "no key file" in result.output and "`shardstream index" in result.output
    result = run(tmp_path / "plain", "--out", tmp_path / "s", "--where", "cost > 1")
    assert result.exit_code == 1 and "has no per-sample columns" in result.output


def test_help_fits_80_columns():
    result = CliRunner().invoke(app, ["subset", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert max(len(line) for line in result.output.splitlines()) <= 80 and "…" not in result.output
    for option in ("--out", "--include", "--exclude", "--column", "--where", "--json", "--quiet", "-q"):
        assert option in result.output
    squashed = " ".join(result.output.split())
    assert "shardstream subset data/ --exclude eval.txt --out subsets/clean" in squashed
