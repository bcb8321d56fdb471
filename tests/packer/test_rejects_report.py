"""The rejects report: truncation to the journaled length, what it counts, its bytes, when the file stays."""

from __future__ import annotations

import json
import os

import pytest

from packer import PackError, PackOptions, pack
from packer.rejects import RejectsReport
from packer.sample import Reject
from shardstream.format import REJECTS_NAME
from shardstream.format.constants import JOURNAL_NAME
from tests.packer.killing import pack_killed

LINE = b'{"source": "s", "reason": "r", "kind": "k"}\n'


def test_a_new_report_starts_empty_over_an_old_file(tmp_path):
    path = tmp_path / REJECTS_NAME
    path.write_bytes(LINE * 3)
    with RejectsReport(path) as report:
        assert report.count_total == 0 and path.read_bytes() == b""
        report.write(Reject("a", "why", "no-extension"))
        assert report.flush() == path.stat().st_size
    assert json.loads(path.read_text()) == {"source": "a", "reason": "why", "kind": "no-extension"}


def test_keep_bytes_keeps_exactly_that_much_counts_its_lines_and_appends_after(tmp_path):
    path = tmp_path / REJECTS_NAME
    path.write_bytes(LINE * 3 + b'{"source": "unjournaled')
    with RejectsReport(path, keep_bytes=2 * len(LINE)) as report:
        assert path.read_bytes() == LINE * 2 and report.count_total == 2
        report.write(Reject("b", "why", "hidden"))
        report.write(Reject("c", "why", "hidden"))
        assert report.count_total == 4
        assert report.flush() == path.stat().st_size > 2 * len(LINE)
    lines = path.read_bytes().splitlines(keepends=True)
    assert lines[:2] == [LINE, LINE] and [json.loads(x)["source"] for x in lines[2:]] == ["b", "c"]


def test_flush_makes_each_write_durable_and_returns_the_end(tmp_path):
    path = tmp_path / REJECTS_NAME
    with RejectsReport(path) as report:
        assert report.flush() == 0
        report.write(Reject("a", "why"))
        first = report.flush()
        assert first == len(path.read_bytes()) > 0  # on disk, not only in the buffer
        report.write(Reject("b", "why"))
        assert report.flush() == len(path.read_bytes()) > first


def test_names_are_written_as_they_are_even_when_not_utf8(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a")
    (src / "naïve").write_text("no extension")
    os.close(os.open(os.fsencode(src) + b"/caf\xe9", os.O_CREAT | os.O_WRONLY))  # latin-1: not UTF-8
    pack(src, tmp_path / "out", PackOptions())
    raw = (tmp_path / "out" / REJECTS_NAME).read_bytes()
    assert os.fsencode(src) + b"/caf\xe9" in raw  # the bytes of the name, as ls shows them
    assert "naïve".encode() in raw  # UTF-8, not a \u escape
    assert raw.count(b"\n") == 2 and b"\\u" not in raw


def test_a_pack_without_rejects_leaves_no_rejects_file(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a")
    summary = pack(src, tmp_path / "out", PackOptions())
    assert summary.rejects is None and not (tmp_path / "out" / REJECTS_NAME).exists()


def test_a_stale_rejects_file_from_a_failed_run_is_replaced(tmp_path):
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    (src / "README").write_text("no extension")
    with pytest.raises(PackError, match="no samples to pack"):
        pack(src, out, PackOptions())
    assert (out / REJECTS_NAME).exists()
    (src / "README").unlink()
    (src / "a.txt").write_text("a")
    summary = pack(src, out, PackOptions())
    assert summary.samples == 1 and not (out / REJECTS_NAME).exists()
    (src / "b").write_text("no extension")
    pack(src, out, PackOptions(overwrite=True))
    (reject,) = (out / REJECTS_NAME).read_text().splitlines()
    assert json.loads(reject)["source"] == str(src / "b")


def test_rejects_reported_before_a_kill_survive_a_resume_that_adds_none(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("0-a", "0-b"):
        (src / name).write_text("no extension: rejected before any sample")
    for i in range(20):
        (src / f"{i:02d}.txt").write_text(f"caption {i}")
    out = tmp_path / "out"
    pack_killed(src, out, {"max_size": None, "max_count": 5}, shards=2, samples=1)  # in the third shard
    assert (out / JOURNAL_NAME).exists()
    summary = pack(src, out, PackOptions(max_size=None, max_count=5, resume=True))
    assert summary.resumed_from_shard == 2 and summary.skipped == 2
    assert summary.rejects == str(out / REJECTS_NAME)
    sources = [json.loads(line)["source"] for line in (out / REJECTS_NAME).read_text().splitlines()]
    assert sources == [str(src / "0-a"), str(src / "0-b")]
