"""Slices partition a source: every cut, concatenated, is exactly the whole walk or manifest, in order."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from packer.sources import cut_source, open_source, read_records

NAMES = st.sampled_from(["a", "b", "a.b", "c0", "k1", "k2", "z", ".hid", "noext", "dir"])
EXTS = st.sampled_from(["jpg", "json", "txt", "JPG", "png"])


@st.composite
def trees(draw: st.DrawFn, depth: int = 0) -> dict[str, object]:
    """A folder: name -> bytes (a file) or a sub-folder; names include hidden, extension-less, dotted."""
    entries: dict[str, object] = {}
    for _ in range(draw(st.integers(0, 6))):
        name = draw(NAMES)
        if depth < 2 and draw(st.booleans()) and "." not in name.lstrip("."):
            entries[name] = draw(trees(depth + 1))
        else:
            full = name if name in ("noext",) or name.startswith(".") else f"{name}.{draw(EXTS)}"
            entries[full] = b"x"
    return entries


def _build(root: Path, tree: dict[str, object]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name, value in tree.items():
        if isinstance(value, dict):
            if (root / name).exists():
                continue
            _build(root / name, value)
        elif not (root / name).exists():
            (root / name).write_bytes(value)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=trees(), rows=st.integers(1, 7))
def test_folder_slices_concatenate_to_the_whole_walk(tmp_path_factory, tree, rows):
    root = tmp_path_factory.mktemp("tree")
    _build(root, tree)
    whole = list(open_source(str(root)))
    slices = cut_source(str(root), rows)
    parts = [list(open_source(str(root), part=s)) for s in slices]
    assert [item for part in parts for item in part] == whole
    assert [len(part) for part in parts] == [s.count for s in slices]
    assert sum(s.count for s in slices) == len(whole)
    assert all(s.first == sum(x.count for x in slices[:i]) for i, s in enumerate(slices))


def _write_manifest(path: Path, fmt: str, records: list[dict[str, object]], blanks: set[int]) -> None:
    if fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as handle:
            for i, record in enumerate(records):
                if i in blanks:
                    handle.write("\n  \n")
                handle.write(json.dumps(record) + "\r\n" * (i % 2) + "\n" * (1 - i % 2))
    elif fmt == "json":
        path.write_text(json.dumps(records))
    elif fmt == "csv":
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["id", "text"])
            for i, record in enumerate(records):
                if i in blanks:
                    handle.write("\r\n")
                writer.writerow([record["id"], record["text"]])
    else:
        table = pa.Table.from_pylist(records)
        pq.write_table(table, path, row_group_size=3)


TEXTS = st.text(alphabet=st.sampled_from('ab,"\n\r é'), max_size=6)


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(TEXTS, max_size=20), rows=st.integers(1, 8), blanks=st.sets(st.integers(0, 20)))
def test_manifest_slices_concatenate_to_the_whole_manifest(tmp_path_factory, fmt, texts, rows, blanks):
    path = tmp_path_factory.mktemp("m") / f"m.{fmt}"
    records = [{"id": f"k{i}", "text": text} for i, text in enumerate(texts)]
    _write_manifest(path, fmt, records, blanks)
    whole = list(read_records(path))
    slices = cut_source(str(path), rows)
    parts = [list(read_records(path, part=s)) for s in slices]
    assert [r for part in parts for r in part] == whole
    assert [len(part) for part in parts] == [s.count for s in slices]
    if fmt != "parquet":  # Parquet cuts take whole row groups, so a slice may hold more than ``rows``
        assert all(s.count == rows for s in slices[:-1])
    assert [n for n, _, _ in whole] == list(range(len(whole)))


def test_a_folder_slice_whose_start_key_is_gone_is_refused(tmp_path):
    for name in ("a", "b", "c", "d"):
        (tmp_path / f"{name}.txt").write_text(name)
    second = cut_source(str(tmp_path), 2)[1]
    assert second.start == "c"
    os.remove(tmp_path / "c.txt")
    with pytest.raises(Exception, match="starts at key 'c', which is gone"):
        list(open_source(str(tmp_path), part=second))


def test_cut_needs_at_least_one_row(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    with pytest.raises(ValueError, match="partition_rows must be >= 1"):
        cut_source(str(tmp_path), 0)
