"""The index file on disk: errors name the file, it is read as UTF-8 in any locale, counts are int64."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from shardstream.errors import FormatError
from shardstream.format import DatasetIndex, ShardEntry


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"format": "other"}', "not a shardstream index"),
        ('{"format": "shardstream", "version": 3}', "index version 3"),
        ('{"format": "shardstream", "version": 1}', "malformed index"),
    ],
)
def test_a_bad_index_file_is_named_in_the_error(tmp_path, text, problem):
    path = tmp_path / "shardstream-index.json"
    path.write_text(text)
    with pytest.raises(FormatError, match=rf"^{re.escape(str(path))}: {problem}"):
        DatasetIndex.load(path)


def test_an_index_with_raw_utf8_loads_the_same_in_a_c_locale(tmp_path):
    # JSON travels as UTF-8 (RFC 8259); an index written by another tool may not escape non-ASCII names.
    doc = {
        "format": "shardstream",
        "version": 1,
        "pattern": "ünï-{000000..000001}.tar",
        "shards": [["ünï-000000.tar", 3, 10240, "ab" * 32], ["ünï-000001.tar", 2, 8192, "cd" * 32]],
    }
    path = tmp_path / "shardstream-index.json"
    path.write_bytes(json.dumps(doc, ensure_ascii=False).encode("utf-8"))
    script = (
        "import sys; from shardstream.format import DatasetIndex; i = DatasetIndex.load(sys.argv[1]); "
        "print(ascii([i.pattern, [e.name for e in i.shards], i.samples]))"
    )
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    expected = ["ünï-{000000..000001}.tar", ["ünï-000000.tar", "ünï-000001.tar"], 5]
    assert done.stdout.strip() == ascii(expected)


def test_sample_counts_are_signed_int64():
    shards = [ShardEntry(f"s-{i}.tar", n, 512, "0" * 64) for i, n in enumerate([4, 0, 7])]
    index = DatasetIndex("s-{0..2}.tar", shards)
    counts = np.asarray(index.sample_counts())
    assert counts.dtype == np.int64
    assert counts.tolist() == [4, 0, 7]
    # Mixed with other int64 arithmetic it stays exact integers (uint64 would promote to float64).
    assert (counts - np.arange(3)).dtype == np.int64
