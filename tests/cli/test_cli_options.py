"""CLI options reach the code that acts on them: pack's media, naming and size options, stream --workers."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from shardstream.format import DatasetIndex
from shardstream.sizes import parse_size
from shardstream_cli import app
from tests.conftest import read_with_tarfile, shard_paths, write_dataset

runner = CliRunner()


def _pack(*args: str) -> dict:
    result = runner.invoke(app, ["pack", *args, "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_image_max_side_downscales_the_packed_images(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    sizes = {"a.jpg": (64, 48), "b.png": (30, 60), "c.webp": (64, 64), "d.png": (10, 8)}
    formats = {"jpg": "JPEG", "png": "PNG", "webp": "WEBP"}
    for name, size in sizes.items():
        buffer = io.BytesIO()
        Image.new("RGB", size, (200, 40, 90)).save(buffer, formats[name[2:]])
        (src / name).write_bytes(buffer.getvalue())
    _pack(str(src), str(tmp_path / "small"), "--image-max-side", "16")
    packed = read_with_tarfile(shard_paths(tmp_path / "small"))
    got = {
        f"{key}.{ext}": Image.open(io.BytesIO(data)).size
        for key, members in packed.items()
        for ext, data in members.items()
    }
    assert got == {"a.jpg": (16, 12), "b.png": (8, 16), "c.webp": (16, 16), "d.png": (10, 8)}
    assert packed["d"]["png"] == (src / "d.png").read_bytes()  # small enough: kept byte for byte


def test_media_root_resolves_manifest_paths_against_the_given_folder(tmp_path):
    beside, elsewhere = tmp_path / "beside", tmp_path / "elsewhere"
    for folder, tag in ((beside, b"decoy"), (elsewhere, b"wanted")):
        (folder / "pics").mkdir(parents=True)
        (folder / "pics" / "a.png").write_bytes(tag + b" a")
        (folder / "pics" / "b.png").write_bytes(tag + b" b")
    manifest = beside / "m.jsonl"
    manifest.write_text('{"id": "a", "image": "pics/a.png"}\n{"id": "b", "image": "pics/b.png"}\n')
    _pack(str(manifest), str(tmp_path / "out"), "--media-root", str(elsewhere))
    got = read_with_tarfile(shard_paths(tmp_path / "out"))
    assert {key: members["png"] for key, members in got.items()} == {"a": b"wanted a", "b": b"wanted b"}
    _pack(str(manifest), str(tmp_path / "default"))  # without it, paths are relative to the manifest
    got = read_with_tarfile(shard_paths(tmp_path / "default"))
    assert {key: members["png"] for key, members in got.items()} == {"a": b"decoy a", "b": b"decoy b"}


def test_member_naming_field_names_list_items_by_field_and_position(tmp_path):
    for name in ("x.jpg", "y.jpg", "cover.jpg", "clip.wav"):
        (tmp_path / name).write_bytes(f"bytes of {name}".encode())
    record = {"id": "k", "images": ["x.jpg", "y.jpg"], "Cover Image": "cover.jpg", "audio": ["clip.wav"]}
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps(record) + "\n")
    summary = _pack(str(manifest), str(tmp_path / "out"), "--member-naming", "field")
    assert summary["samples"] == 1 and summary["skipped"] == 0
    with tarfile.open(shard_paths(tmp_path / "out")[0]) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar}
    assert members == {
        "k.images.0.jpg": b"bytes of x.jpg",
        "k.images.1.jpg": b"bytes of y.jpg",
        "k.cover_image.jpg": b"bytes of cover.jpg",
        "k.audio.0.wav": b"bytes of clip.wav",
        "k.json": json.dumps(record, ensure_ascii=False).encode(),
    }
    _pack(str(manifest), str(tmp_path / "ext"))  # the default names list items by position only
    with tarfile.open(shard_paths(tmp_path / "ext")[0]) as tar:
        assert sorted(tar.getnames()) == ["k.0.jpg", "k.0.wav", "k.1.jpg", "k.jpg", "k.json"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1GiB", 2**30),
        ("1gib", 2**30),
        ("2 MiB", 2 * 2**20),
        ("1.5KiB", 1536),
        ("3KiB", 3072),
        ("1TiB", 2**40),
        ("1GB", 10**9),
        ("256MB", 256 * 10**6),
        ("3kB", 3000),
        ("4096", 4096),
    ],
)
def test_size_units_binary_and_decimal(text, expected):
    assert parse_size(text) == expected


def test_max_size_in_binary_units_caps_shards_at_powers_of_two(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(4):
        (src / f"{i}.bin").write_bytes(bytes([i]) * 512)  # 1024 tar bytes each: two fit in 3 KiB with the end
    counts = {}
    for size in ("3KiB", "3kB", "1GiB"):
        summary = _pack(str(src), str(tmp_path / size), "--max-size", size)
        index = DatasetIndex.load(summary["index"])
        counts[size] = [entry.samples for entry in index.shards]
        assert index.options["max_size"] == parse_size(size)
    assert counts == {"3KiB": [2, 2], "3kB": [1, 1, 1, 1], "1GiB": [4]}
    assert parse_size("3KiB") == 3072 and parse_size("1GiB") == 1_073_741_824


def test_stream_workers_reads_in_worker_processes(tmp_path):
    write_dataset(tmp_path, [6, 5, 7, 6])
    log = tmp_path / "readers.log"
    # Each shard is read through a pipe whose shell logs its parent: the process that opened the shard.
    source = f"pipe:sh -c 'echo $PPID >> {log}; exec cat {tmp_path}/train-{{000000..000003}}.tar'"
    for workers, expect_main in ((0, True), (2, False)):
        log.unlink(missing_ok=True)
        result = runner.invoke(app, ["stream", source, "--workers", str(workers), "--no-decode", "--json"])
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        assert summary["samples"] == 24 and summary["members"] == {"cls": 24, "txt": 24}
        readers = [int(line) for line in log.read_text().split()]
        assert len(readers) == 4
        if expect_main:
            assert set(readers) == {os.getpid()}
        else:
            assert os.getpid() not in readers and len(set(readers)) == 2, readers


@pytest.mark.parametrize("command", ["info", "verify"])
def test_info_and_verify_name_a_bad_index_once_with_the_reason(tmp_path, command):
    missing, broken = tmp_path / "gone.json", tmp_path / "broken.json"
    broken.write_text("{bad")
    result = runner.invoke(app, [command, str(missing)])
    assert result.exit_code != 0
    assert result.output.count(str(missing)) == 1 and "No such file or directory" in result.output
    result = runner.invoke(app, [command, str(broken)])
    assert result.exit_code != 0
    assert result.output.count(str(broken)) == 1 and "not valid JSON" in result.output


def test_stream_zero_copy_reads_every_sample_in_process_and_through_workers(tmp_path):
    write_dataset(tmp_path, [60, 50, 70, 61])
    for workers in ("0", "2"):
        result = runner.invoke(app, ["stream", str(tmp_path), "--zero-copy", "--workers", workers, "--json"])
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        assert summary["samples"] == 241 and summary["members"] == {"cls": 241, "txt": 241}
    mixture = tmp_path / "mix.yaml"
    mixture.write_text("sources: []\n")
    result = runner.invoke(app, ["stream", str(mixture), "--zero-copy"])
    assert result.exit_code != 0 and "--zero-copy reads one dataset, not a mixture" in result.output


def _bytes_read() -> int:
    lines = Path("/proc/self/io").read_text().splitlines()
    return int(next(line for line in lines if line.startswith("rchar:")).split()[1])


def test_stream_front_to_back_reads_the_buffer_first_and_defer_reads_only_what_it_hands_out(tmp_path):
    """A dataset, then a mixture of it."""
    write_dataset(tmp_path / "d", [400], payload=2000)  # one 4.4 MB shard of 400 samples
    read = {}
    for flag in ("--defer-reads", "--front-to-back", "--defer-reads"):  # the first also imports modules
        before = _bytes_read()
        result = runner.invoke(app, ["stream", str(tmp_path / "d"), flag, "--limit", "1", "--no-decode"])
        assert result.exit_code == 0, result.output
        read[flag] = _bytes_read() - before
    shard = (tmp_path / "d" / "train-000000.tar").stat().st_size
    assert read["--defer-reads"] < 1 << 20 and read["--front-to-back"] > shard * 0.9
    mixture = tmp_path / "mix.yaml"  # a mixture's windows take the flags too
    mixture.write_text("sources:\n  - {path: d, weight: 1}\nbuffer_size: 400\n")
    for flag in ("--defer-reads", "--front-to-back", "--defer-reads"):
        before = _bytes_read()
        result = runner.invoke(app, ["stream", str(mixture), flag, "--limit", "1", "--no-decode"])
        assert result.exit_code == 0, result.output
        read[flag] = _bytes_read() - before
    assert read["--defer-reads"] < 1 << 20 and read["--front-to-back"] > shard * 0.9
