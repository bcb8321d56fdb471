"""The resume journal: what it records reads back whole, torn lines end it, changed options are refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from packer import PackOptions, pack
from packer.journal import Journal, PackProgress
from shardstream.errors import PackError
from shardstream.format import ShardEntry
from shardstream.format.constants import JOURNAL_NAME
from tests.packer.killing import pack_killed

OPTIONS = {"source": "/data/src", "max_size": None, "max_count": 10, "prefix": "train"}


def _progress(shards: int) -> PackProgress:
    """A progress with every field set to a value of its own, so a field dropped or swapped shows."""
    return PackProgress(
        position=17 * shards,
        rejects_bytes=301 * shards,
        samples=11 * shards,
        payload_bytes=9001 * shards,
        rejected={"no-extension": 3 * shards, "hidden": shards},
        fields={"txt": 11 * shards, "bin": 10 * shards},
        oversized=shards,
        shards=[ShardEntry(f"train-{i:06d}.tar", 10 + i, 4096 * (i + 1), f"{i:064x}") for i in range(shards)],
    )


def test_every_field_recorded_reads_back(tmp_path):
    journal = Journal(tmp_path / JOURNAL_NAME)
    journal.start(OPTIONS)
    for n in (1, 2, 3):
        journal.record(_progress(n))
    assert journal.load(dict(OPTIONS)) == _progress(3)
    lines = journal.path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and json.loads(lines[0]) == {"options": OPTIONS}
    assert json.loads(lines[2])["shard"] == ["train-000001.tar", 11, 8192, f"{1:064x}"]  # only the newest


def test_a_journal_with_only_its_header_resumes_from_the_start(tmp_path):
    journal = Journal(tmp_path / JOURNAL_NAME)
    journal.start(OPTIONS)
    assert journal.load(dict(OPTIONS)) == PackProgress()


def test_start_replaces_an_old_journal(tmp_path):
    journal = Journal(tmp_path / JOURNAL_NAME)
    journal.start({"source": "old"})
    journal.record(_progress(2))
    journal.start(OPTIONS)
    assert journal.load(dict(OPTIONS)) == PackProgress()


def test_a_torn_last_line_is_ignored(tmp_path):
    journal = Journal(tmp_path / JOURNAL_NAME)
    journal.start(OPTIONS)
    journal.record(_progress(1))
    journal.record(_progress(2))
    whole = journal.path.read_bytes()
    journal.path.write_bytes(whole[: whole.rindex(b"\n", 0, len(whole) - 1) + 1 + 40])  # a kill mid-write
    assert journal.load(dict(OPTIONS)) == _progress(1)


@pytest.mark.parametrize(
    "damage", [b'{"position": 34, "rejects', b'{"position": 3\xff\xfe}\n'], ids=["torn", "not-utf8"]
)
def test_nothing_after_a_torn_line_is_trusted(tmp_path, damage):
    """A resume appends after a torn line; what follows it never counts (the redone shards replace it).
    A line with bytes that are not UTF-8 ends the journal the same way."""
    journal = Journal(tmp_path / JOURNAL_NAME)
    journal.start(OPTIONS)
    journal.record(_progress(1))
    with journal.path.open("ab") as handle:
        handle.write(damage)
    journal.record(_progress(2))  # lands on the torn line, or on the line after the damaged one
    journal.record(_progress(3))
    assert journal.load(dict(OPTIONS)) == _progress(1)


@pytest.mark.parametrize("text", ["", "\n", "{not json\n", '{"options": '])
def test_an_unreadable_header_is_a_pack_error(tmp_path, text):
    path = tmp_path / JOURNAL_NAME
    path.write_text(text)
    expected = r"\.shardstream-journal\.jsonl: unreadable resume journal; start over with --overwrite$"
    with pytest.raises(PackError, match=expected):
        Journal(path).load(OPTIONS)


@pytest.mark.parametrize(
    "data", [b"[1]\n", b'"options"\n', b"null\n", b'{"options": [1]}\n', b'{"options": {"a": "\xff"}}\n']
)
def test_a_header_that_is_not_an_options_object_is_a_pack_error(tmp_path, data):
    path = tmp_path / JOURNAL_NAME
    path.write_bytes(data)
    with pytest.raises(PackError, match=r"unreadable resume journal; start over with --overwrite$"):
        Journal(path).load(OPTIONS)


def test_an_entry_recorded_before_any_shard_reads_back(tmp_path):
    journal = Journal(tmp_path / JOURNAL_NAME)
    journal.start(OPTIONS)
    early = PackProgress(position=5, rejects_bytes=80, rejected={"no-extension": 5})
    journal.record(early)
    assert json.loads(journal.path.read_text().splitlines()[1])["shard"] is None
    assert journal.load(dict(OPTIONS)) == early
    journal.record(_progress(1))
    assert journal.load(dict(OPTIONS)) == _progress(1)


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"position": 1}, "KeyError: 'shard'"),
        ([1, 2], "TypeError: list indices"),
        ({**_progress(1).to_json(), "shard": ["a.tar", 1]}, "TypeError: ShardEntry"),
    ],
)
def test_a_whole_line_that_is_not_an_entry_is_a_pack_error_naming_the_line(tmp_path, entry, error):
    journal = Journal(tmp_path / JOURNAL_NAME)
    journal.start(OPTIONS)
    journal.record(_progress(1))
    with journal.path.open("a") as handle:
        handle.write(json.dumps(entry) + "\n")
    expected = rf"{JOURNAL_NAME}: line 3 is not a journal entry \({error}.*--overwrite$"
    with pytest.raises(PackError, match=expected):
        journal.load(dict(OPTIONS))


def test_changed_options_are_refused_naming_each_change_in_order(tmp_path):
    journal = Journal(tmp_path / JOURNAL_NAME)
    journal.start(OPTIONS)
    changed = {**OPTIONS, "prefix": "val", "max_count": 20}
    expected = (
        r"^cannot --resume with different options \(max_count: 10 -> 20, prefix: 'train' -> 'val'\); "
        r"rerun with the original options or start over with --overwrite$"
    )
    with pytest.raises(PackError, match=expected):
        journal.load(changed)


def test_an_option_only_one_side_knows_counts_as_changed(tmp_path):
    journal = Journal(tmp_path / JOURNAL_NAME)
    journal.start(OPTIONS)
    with pytest.raises(PackError, match=r"\(media\.audio_rate: None -> 8000\)"):
        journal.load({**OPTIONS, "media.audio_rate": 8000})
    older = {k: v for k, v in OPTIONS.items() if k != "prefix"}
    with pytest.raises(PackError, match=r"\(prefix: 'train' -> None\)"):
        journal.load(older)
    assert journal.load(dict(OPTIONS)) == PackProgress()


def test_a_header_without_options_refuses_every_option(tmp_path):
    path = tmp_path / JOURNAL_NAME
    path.write_text("{}\n")
    expected = r"\(max_count: None -> 10, prefix: None -> 'train', source: None -> '/data/src'\)"
    with pytest.raises(PackError, match=expected):  # max_size is None on both sides: unchanged
        Journal(path).load(OPTIONS)


def _kill_at(source: Path, out: Path, shards: int, samples: int, *, resume: bool) -> None:
    options = {"max_size": None, "max_count": 10, "resume": resume}
    pack_killed(source, out, options, shards=shards, samples=samples, timeout=60)


def _digests(outdir: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(outdir.iterdir()) if p.is_file()
    }


def test_killed_twice_with_a_torn_journal_line_then_resumed_is_exact(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(60):
        (src / f"{i:03d}.txt").write_text(f"caption {i}\n" * (i % 4 + 1))
    (src / "00-notes").write_text("no extension: a reject before the first shard")
    options = PackOptions(max_size=None, max_count=10)
    pack(src, tmp_path / "clean", options)
    out = tmp_path / "out"
    _kill_at(src, out, 1, 3, resume=False)
    with (out / JOURNAL_NAME).open("a") as handle:
        handle.write('{"position": 21, "rejects_bytes": 1')  # as if the kill had torn shard 1's entry
    _kill_at(src, out, 3, 3, resume=True)  # the resume's first entry lands on the torn line
    lines = (out / JOURNAL_NAME).read_text().splitlines()
    assert len(lines) == 4 and lines[2].startswith('{"position": 21, "rejects_bytes": 1{')
    pack(src, out, PackOptions(max_size=None, max_count=10, resume=True))
    assert _digests(out) == _digests(tmp_path / "clean")
