"""Bad input: each case is a clear, counted, reported skip (or fatal with --strict); nothing vanishes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from packer import PackError, PackOptions, pack
from packer.media import MediaOptions
from shardstream.format import DatasetIndex
from tests.conftest import read_with_tarfile, read_with_webdataset, shard_paths


def _rejects(outdir: Path) -> list[dict[str, str]]:
    path = outdir / "shardstream-rejects.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _write_manifest(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def media(tmp_path: Path, corpus) -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    jpg = next(corpus.files_dir.rglob("*.jpg"))
    (folder / "good.jpg").write_bytes(jpg.read_bytes())
    (folder / "other.jpg").write_bytes(jpg.read_bytes()[::-1][:500] + b"x")
    (folder / "corrupt.jpg").write_bytes(jpg.read_bytes()[:200])
    (folder / "notes.txt").write_text("hello")
    (folder / "adir.jpg").mkdir()
    return folder


def test_manifest_bad_records_are_skipped_counted_and_reported(tmp_path, media):
    manifest = _write_manifest(
        media / "m.jsonl",
        [
            {"id": "ok1", "image": "good.jpg", "text": "fine"},
            {"id": "gone", "image": "missing/nothing.jpg"},
            {"id": "dir", "image": "adir.jpg"},
            {"id": "v1.2", "image": "good.jpg"},
            {"id": "ok1", "image": "good.jpg"},
            {"id": "two", "image": "good.jpg", "thumb": "other.jpg"},
            {"id": "../up", "image": "good.jpg"},
            ["not", "an", "object"],
            {"id": "ok2", "image": "corrupt.jpg"},
        ],
    )
    with manifest.open("a") as handle:
        handle.write("{not json\n")
    summary = pack(manifest, tmp_path / "out", PackOptions())
    rejects = _rejects(tmp_path / "out")
    by_kind = {}
    for reject in rejects:
        by_kind.setdefault(reject["kind"], []).append(reject)
    assert summary.samples == 2  # ok1 and ok2 (corrupt bytes are packed as-is without --verify-media)
    assert summary.skipped == len(rejects) == 8
    assert summary.rejected == {k: len(v) for k, v in by_kind.items()}
    assert "missing/nothing.jpg" in by_kind["missing"][0]["reason"]
    assert "m.jsonl:record 1" in by_kind["missing"][0]["source"]
    assert "cannot read" in by_kind["unreadable"][0]["reason"]
    assert {r["source"].rsplit(" ", 1)[1] for r in by_kind["bad-key"]} == {"3", "6"}
    assert any("would split it as key 'v1'" in r["reason"] for r in by_kind["bad-key"])
    assert "repeats a key" in by_kind["duplicate-key"][0]["reason"]
    assert "--member-naming field" in by_kind["member-clash"][0]["reason"]
    assert len(by_kind["bad-record"]) == 2
    assert DatasetIndex.load(summary.index).rejected == summary.rejected


def test_member_naming_field_resolves_clashing_fields(tmp_path, media):
    manifest = _write_manifest(media / "m.jsonl", [{"id": "two", "image": "good.jpg", "thumb": "other.jpg"}])
    summary = pack(manifest, tmp_path / "out", PackOptions(member_naming="field"))
    assert summary.samples == 1
    sample = read_with_webdataset(str(tmp_path / "out" / summary.pattern))["two"]
    assert sample["image.jpg"] == (media / "good.jpg").read_bytes()
    assert sample["thumb.jpg"] == (media / "other.jpg").read_bytes()


def test_verify_media_rejects_corrupt_files(tmp_path, media):
    manifest = _write_manifest(
        media / "m.jsonl", [{"id": "a", "image": "good.jpg"}, {"id": "b", "image": "corrupt.jpg"}]
    )
    summary = pack(manifest, tmp_path / "out", PackOptions(media=MediaOptions(verify=True)))
    assert summary.samples == 1 and summary.rejected == {"media": 1}
    (reject,) = _rejects(tmp_path / "out")
    assert "corrupt.jpg" in reject["reason"] and "record 1" in reject["source"]


def test_duplicate_keys_across_shards_are_kept_and_reported(tmp_path, media):
    records = [{"id": f"k{i}", "image": "good.jpg"} for i in range(6)] + [{"id": "k1", "image": "good.jpg"}]
    manifest = _write_manifest(media / "m.jsonl", records)
    summary = pack(manifest, tmp_path / "out", PackOptions(max_count=3))
    assert summary.samples == 7 and summary.duplicate_keys == 1
    (reject,) = _rejects(tmp_path / "out")
    assert reject["source"] == "k1" and "train-000000.tar, train-000002.tar" in reject["reason"]
    with pytest.raises(PackError, match=r"k1.*--strict"):
        pack(manifest, tmp_path / "strict", PackOptions(max_count=3, strict=True))


def test_directory_oddities_are_reported_not_dropped(tmp_path, corpus):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.txt").write_text("a")
    (src / "sub" / "a.json").write_text("{}")
    (src / "sub" / "b.JPG").write_text("upper")
    (src / "sub" / "b.jpg").write_text("lower")
    (src / "sub" / "noext").write_text("x")
    (src / "sub" / ".DS_Store").write_text("x")
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("x")
    os.mkfifo(src / "sub" / "pipe.txt")  # reading it would hang; it must be refused unread
    (src / "sub" / "inside.txt").symlink_to(src / "sub" / "a.txt")
    (src / "sub" / "outside.txt").symlink_to(corpus.manifest)
    (src / "sub" / "dangling.txt").symlink_to(src / "nowhere")
    (src / "sub" / "loop").symlink_to(src)
    summary = pack(src, tmp_path / "out", PackOptions())
    got = read_with_tarfile(shard_paths(tmp_path / "out"))
    assert got == {"sub/a": {"txt": b"a", "json": b"{}"}, "sub/inside": {"txt": b"a"}}
    kinds = sorted(r["kind"] for r in _rejects(tmp_path / "out"))
    assert kinds == sorted(
        ["hidden", "hidden", "member-clash", "no-extension", "unreadable", "outside", "unreadable", "loop"]
    )
    assert summary.skipped == len(kinds)
    clash = next(r for r in _rejects(tmp_path / "out") if r["kind"] == "member-clash")
    assert "b.JPG" in clash["reason"] and "b.jpg" in clash["reason"]


def test_strict_stops_at_the_first_reject(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a")
    (src / "b").write_text("no extension")
    with pytest.raises(PackError, match=r"src/b: file has no extension.*--strict"):
        pack(src, tmp_path / "out", PackOptions(strict=True))


def test_empty_source_is_an_error_and_writes_no_shard(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PackError, match="no samples to pack"):
        pack(empty, tmp_path / "out", PackOptions())
    assert not list((tmp_path / "out").glob("*.tar"))
    (empty / ".hidden").write_text("x")
    with pytest.raises(PackError, match=r"1 inputs rejected, see .*rejects.jsonl"):
        pack(empty, tmp_path / "out2", PackOptions())
    manifest = tmp_path / "empty.jsonl"
    manifest.write_text("")
    with pytest.raises(PackError, match="no samples to pack"):
        pack(manifest, tmp_path / "out3", PackOptions())


def test_missing_source_and_unknown_manifest_type(tmp_path):
    with pytest.raises(PackError, match="no such directory or manifest"):
        pack(tmp_path / "nope", tmp_path / "out", PackOptions())
    odd = tmp_path / "list.txt"
    odd.write_text("x")
    with pytest.raises(PackError, match="--manifest-format"):
        pack(odd, tmp_path / "out", PackOptions())


def test_outdir_with_shards_is_refused_unless_overwrite(tmp_path, corpus):
    out = tmp_path / "out"
    pack(corpus.files_dir, out, PackOptions())
    with pytest.raises(PackError, match=r"--resume.*--overwrite"):
        pack(corpus.files_dir, out, PackOptions())
    (out / "foreign-000000.tar").write_bytes(b"\0" * 1024)
    summary = pack(corpus.manifest, out, PackOptions(overwrite=True))
    assert summary.samples == corpus.samples
    assert (out / "foreign-000000.tar").exists()  # other datasets' files are left alone


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_size": None, "max_count": None}, "max_size and max_count"),
        ({"workers": 0}, "workers must be >= 1"),
        ({"prefix": "../x"}, "prefix"),
        ({"resume": True, "overwrite": True}, "resume and overwrite"),
        ({"media": {"image_quality": 0}}, "image_quality"),
    ],
)
def test_bad_options_are_value_errors_naming_the_option(tmp_path, corpus, options, message):
    with pytest.raises(ValueError, match=message):  # checked once, when the options are made
        if "media" in options:
            options = {"media": MediaOptions(**options["media"])}
        pack(corpus.files_dir, tmp_path / "out", PackOptions(**options))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ({b"bad\xff.txt": b"not packable"}, "not valid UTF-8"),  # the key
        (
            {b"pair.txt": b"its sibling cannot be a member", b"pair.j\xffg": b"not packable"},
            "extension is not valid UTF-8",
        ),  # the key is fine, one extension is not
    ],
    ids=["key", "extension"],
)
def test_a_file_name_that_is_not_utf8_rejects_its_sample_not_a_crash(tmp_path, files, says):
    """os.listdir gives such a name back with a lone surrogate: no tar name can hold it, so a bad key."""
    import os

    from packer import PackOptions, pack

    source = tmp_path / "src"
    source.mkdir()
    (source / "good.txt").write_text("kept")
    for name, data in files.items():
        with open(os.path.join(os.fsencode(source), name), "wb") as handle:
            handle.write(data)
    summary = pack(source, tmp_path / "out", PackOptions())
    assert summary.samples == 1 and summary.rejected == {"bad-key": 1}
    rejects = (tmp_path / "out" / "shardstream-rejects.jsonl").read_text(encoding="utf-8", errors="replace")
    assert says in rejects
    if b"pair.txt" in files:
        assert "pair" in rejects
