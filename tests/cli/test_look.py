"""`shardstream ls`, `cat`, `stats` and `verify --decode` on real shards from both index kinds.

Datasets are made the two ways a user makes them: `shardstream pack` (an index without key file or
per-field bytes) and webdataset's ShardWriter followed by `shardstream index`, run as a subprocess (key
file, per-field bytes, no sha256; with --out, sidecars in a folder of their own and absolute names).
Expected values come from Python's tarfile, never from the code under test.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile
import wave
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from shardstream_cli import app

runner = CliRunner()
BIN = Path(sys.executable).parent / "shardstream"
SAMPLES = 6


def _image(fmt: str, seed: int) -> bytes:
    pixels = (np.random.default_rng(seed).random((12, 16, 3)) * 255).astype("uint8")
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, fmt)
    return out.getvalue()


def _wav(seed: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(8000)
        writer.writeframes((np.random.default_rng(seed).random(400) * 1000).astype("<i2").tobytes())
    return out.getvalue()


def _raw(root: Path, *, corrupt: str | None = None) -> dict[str, dict[str, bytes]]:
    """Six samples: jpg, cls, json on each, png on every 2nd, wav on every 3rd; ``corrupt``'s jpg: garbage."""
    samples = {}
    for i in range(SAMPLES):
        key = f"sample{i:06d}"
        members = {"jpg": _image("JPEG", i), "cls": b"%d" % (i % 3), "json": json.dumps({"i": i}).encode()}
        if i % 2 == 0:
            members["png"] = _image("PNG", i + 10)
        if i % 3 == 0:
            members["wav"] = _wav(i)
        if key == corrupt:
            members["jpg"] = b"\xff\xd8\xff\xe0" + b"not a jpeg at all " * 20
        samples[key] = members
    root.mkdir(parents=True)
    for key, members in samples.items():
        for ext, data in members.items():
            (root / f"{key}.{ext}").write_bytes(data)
    return samples


def _pack(raw: Path, out: Path) -> Path:
    result = runner.invoke(app, ["pack", str(raw), str(out), "--max-count", "4", "--quiet"])
    assert result.exit_code == 0, result.output
    return out


def _write_wds(samples: dict[str, dict[str, bytes]], out: Path) -> Path:
    import webdataset as wds

    out.mkdir(parents=True)
    with wds.ShardWriter(str(out / "wds-%06d.tar"), maxcount=4, verbose=0) as writer:
        for key, members in samples.items():
            writer.write({"__key__": key, **members})
    return out


def _index(shards: Path, *extra: str) -> dict:
    command = [str(BIN)] if BIN.exists() else [sys.executable, "-m", "shardstream_cli"]
    done = subprocess.run(
        [*command, "index", str(shards), "--json", *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def _in_order(tars: list[Path]) -> list[tuple[str, dict[str, bytes], str]]:
    """(key, members, shard path) per sample, read with tarfile: consecutive members sharing a key."""
    out: list[tuple[str, dict[str, bytes], str]] = []
    for path in tars:
        with tarfile.open(path) as tar:
            for member in tar:
                if not member.isfile():
                    continue
                slash = member.name.rfind("/")
                dot = member.name.find(".", slash + 1)
                key, ext = member.name[:dot], member.name[dot + 1 :]
                if not out or out[-1][0] != key or out[-1][2] != str(path):
                    out.append((key, {}, str(path)))
                out[-1][1][ext] = tar.extractfile(member).read()
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("look")
    samples = _raw(root / "raw")
    packed = _pack(root / "raw", root / "packed")
    wds_dir = _write_wds(samples, root / "wds")
    _index(wds_dir)
    apart = root / "apart"
    _index(wds_dir, "--out", str(apart))
    expected = _in_order(sorted(packed.glob("*.tar")))
    return {
        "samples": samples,
        "packed": packed,
        "indexed": wds_dir,
        "apart": apart,
        "expected": expected,
        "wds_tars": sorted(wds_dir.glob("*.tar")),
    }


def _ok(args: list[str]):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("kind", ["packed", "indexed", "apart", "pattern"])
def test_ls_lists_every_sample_in_order_with_its_member_sizes(data, kind):
    source = str(data["indexed"] / "wds-{000000..000001}.tar") if kind == "pattern" else str(data[kind])
    lines = _ok(["ls", source]).stdout.splitlines()
    expected = _in_order(data["wds_tars"]) if kind != "packed" else data["expected"]
    assert len(lines) == SAMPLES + 1 and [line.split()[0] for line in lines[:-1]] == [e[0] for e in expected]
    shown = " ".join(lines[0].split()[1:])
    for ext, value in expected[0][1].items():
        assert f"{ext} {len(value)} B" in shown  # members under 1 kB print in bytes
    of = "" if kind == "pattern" else f" of {SAMPLES}"
    assert lines[-1] == f"{SAMPLES}{of} samples shown"


def test_ls_limit_and_json_lines(data):
    limited = _ok(["ls", str(data["packed"]), "--limit", "2"]).stdout.splitlines()
    assert len(limited) == 3 and limited[-1] == f"2 of {SAMPLES} samples shown"
    bare = _ok(["ls", str(data["indexed"] / "wds-000000.tar"), "--limit", "3"]).stdout.splitlines()
    assert bare[-1] == "3 samples shown (stopped at --limit 3)"
    docs = [json.loads(line) for line in _ok(["ls", str(data["packed"]), "--json"]).stdout.splitlines()]
    assert [(d["key"], d["url"], d["members"]) for d in docs] == [
        (key, path, {ext: len(v) for ext, v in members.items()}) for key, members, path in data["expected"]
    ]
    assert runner.invoke(app, ["ls", str(data["packed"]), "--limit", "0"]).exit_code == 2
    missing = runner.invoke(app, ["ls", str(data["packed"] / "nothing-{0..1}.tar")])
    assert missing.exit_code == 1 and "does not exist" in missing.output


def test_ls_does_not_import_torch(data):
    script = (
        "import sys\nfrom shardstream_cli import app\n"
        "try:\n    app(['ls', sys.argv[1], '--limit', '2'])\n"
        "except SystemExit as exit:\n    assert exit.code in (0, None), exit.code\n"
        "assert 'torch' not in sys.modules, 'ls imported torch'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(data["indexed"])], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"2 of {SAMPLES} samples shown"


@pytest.mark.parametrize("kind", ["packed", "indexed", "apart"])
def test_cat_field_is_byte_identical_to_the_tar_member(data, kind):
    expected = data["expected"] if kind == "packed" else _in_order(data["wds_tars"])
    for key, members, _path in (expected[1], expected[4]):
        for ext, value in members.items():
            result = _ok(["cat", str(data[kind]), key, ext])
            assert result.stdout_bytes == value
    assert _ok(["cat", str(data[kind]), "--position", "4", "jpg"]).stdout_bytes == expected[4][1]["jpg"]


def test_cat_without_a_field_prints_where_the_sample_is(data):
    doc = json.loads(_ok(["cat", str(data["indexed"]), "sample000005"]).stdout)
    members = data["samples"]["sample000005"]
    assert doc == {
        "key": "sample000005",
        "url": str(data["indexed"] / "wds-000001.tar"),
        "shard": 1,
        "sample_in_shard": 1,
        "position": 5,
        "members": {ext: len(v) for ext, v in sorted(members.items())},
    }
    by_position = json.loads(_ok(["cat", str(data["apart"]), "--position", "5"]).stdout)
    assert by_position == doc


def test_cat_without_a_key_file_reads_in_order_and_says_so(data, tmp_path):
    packed = tmp_path / "packed"  # packs write a key file now: this copy's is taken away
    shutil.copytree(data["packed"], packed)
    for name in ("shardstream-keys", "shardstream-keys.idx"):
        (packed / name).unlink()
    doc = json.loads((packed / "shardstream-index.json").read_text())
    doc.pop("keys", None)
    (packed / "shardstream-index.json").write_text(json.dumps(doc))
    result = _ok(["cat", str(packed), "sample000003", "wav"])
    assert result.stdout_bytes == data["samples"]["sample000003"]["wav"]
    assert "no key file" in result.stderr and "shardstream index" in result.stderr
    bare = _ok(["cat", str(data["indexed"] / "wds-{000000..000001}.tar"), "--position", "5"])
    assert json.loads(bare.stdout)["key"] == "sample000005"


def test_cat_exit_codes_name_what_is_missing(data):
    unknown = runner.invoke(app, ["cat", str(data["indexed"]), "sample999999"])
    assert unknown.exit_code == 1 and "no sample has key 'sample999999'" in unknown.output
    scanned = runner.invoke(app, ["cat", str(data["packed"]), "sample999999"])
    assert scanned.exit_code == 1 and "no sample has key" in scanned.output
    field = runner.invoke(app, ["cat", str(data["indexed"]), "sample000001", "wav"])
    assert field.exit_code == 1 and "its members: cls, jpg, json" in field.output
    past = runner.invoke(app, ["cat", str(data["indexed"]), "--position", str(SAMPLES)])
    assert past.exit_code == 1 and "past the end" in past.output
    assert runner.invoke(app, ["cat", str(data["indexed"])]).exit_code == 2
    assert runner.invoke(app, ["cat", str(data["indexed"]), "--position", "1", "a", "jpg"]).exit_code == 2
    assert runner.invoke(app, ["cat", str(data["indexed"]), "--position", "-1"]).exit_code == 2


def _tar_figures(tars: list[Path]) -> tuple[dict, list[int], list[int]]:
    fields: dict[str, dict[str, int]] = {}
    counts = []
    for tar in tars:
        samples = _in_order([tar])
        counts.append(len(samples))
        for _key, members, _path in samples:
            for ext, value in members.items():
                figures = fields.setdefault(ext, {"members": 0, "bytes": 0})
                figures["members"] += 1
                figures["bytes"] += len(value)
    return dict(sorted(fields.items())), [tar.stat().st_size for tar in tars], counts


@pytest.mark.parametrize("kind", ["packed", "indexed", "pattern"])
def test_stats_from_the_index_or_from_the_tar_headers(data, kind):
    source = str(data["indexed"] / "wds-{000000..000001}.tar") if kind == "pattern" else str(data[kind])
    doc = json.loads(_ok(["stats", source, "--json"]).stdout)
    tars = sorted(data["packed"].glob("*.tar")) if kind == "packed" else data["wds_tars"]
    fields, sizes, counts = _tar_figures(tars)
    # The packer's index holds per-field bytes as `shardstream index`'s does: only a pattern is scanned.
    assert doc["from"] == ("scan of the shards' tar headers" if kind == "pattern" else "index")
    assert (doc["fields"], doc["shards"], doc["samples"], doc["bytes"]) == (fields, 2, SAMPLES, sum(sizes))
    assert counts == [4, 2]
    assert doc["samples_per_shard"] == {"min": 2, "p50": 2, "p90": 4, "max": 4, "mean": 3.0}
    assert doc["shard_bytes"] == {
        "min": min(sizes),
        "p50": min(sizes),
        "p90": max(sizes),
        "max": max(sizes),
        "mean": round(sum(sizes) / 2, 1),
    }
    text = _ok(["stats", source]).stdout
    assert "figures:  from the " + doc["from"] in text and "samples/shard: min 2  p50 2  p90 4" in text


@pytest.mark.parametrize("kind", ["packed", "indexed", "apart"])
def test_verify_decode_passes_a_good_dataset(data, kind):
    result = _ok(["verify", str(data[kind]), "--decode", "--json"])
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and doc["problems"] == [] and doc["decode_failures"] == []
    assert doc["decoded"] == {"jpg": SAMPLES, "png": 3, "wav": 2}
    assert doc["notes"] == ([] if kind == "packed" else [doc["notes"][0]])
    assert kind == "packed" or "sha256 not recorded" in doc["notes"][0]
    text = _ok(["verify", str(data[kind])]).stdout
    assert text.splitlines()[-1] == "ok"


def test_verify_decode_names_a_corrupt_jpeg(tmp_path):
    _raw(tmp_path / "raw", corrupt="sample000002")
    packed = _pack(tmp_path / "raw", tmp_path / "packed")
    assert runner.invoke(app, ["verify", str(packed)]).exit_code == 0  # the tar itself is intact
    result = runner.invoke(app, ["verify", str(packed), "--decode", "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["ok"] is False and doc["problems"] == []
    [failure] = doc["decode_failures"]
    assert failure["shard"] == str(packed / "train-000000.tar")
    assert (failure["key"], failure["member"]) == ("sample000002", "jpg") and failure["reason"]
    assert doc["decoded"]["jpg"] == SAMPLES - 1
    text = runner.invoke(app, ["verify", str(packed), "--decode"])
    assert text.exit_code == 1
    assert f"{packed / 'train-000000.tar'}: sample 'sample000002' member 'jpg' does not decode" in text.stdout
    assert text.stdout.splitlines()[-1].startswith("0 problem(s), 1 decode failure(s)")


def test_verify_reads_an_index_made_of_tars_with_directory_entries(tmp_path, data):
    """tarfile adds a folder's entry before its files, as GNU tar does; samples still span offsets."""
    shards = tmp_path / "gnu"
    shards.mkdir()
    with tarfile.open(shards / "g-0.tar", "w", format=tarfile.GNU_FORMAT) as tar:
        for key, members in data["samples"].items():
            folder = "a" if key < "sample000003" else "a/b"
            if key in ("sample000000", "sample000003"):  # a folder's entry between two samples
                entry = tarfile.TarInfo(folder)
                entry.type = tarfile.DIRTYPE
                tar.addfile(entry)
            for ext, value in sorted(members.items()):
                info = tarfile.TarInfo(f"{folder}/{key}.{ext}")
                info.size = len(value)
                tar.addfile(info, io.BytesIO(value))
    assert _index(shards)["samples"] == SAMPLES
    doc = json.loads(_ok(["verify", str(shards), "--json"]).stdout)
    assert doc["ok"] is True and doc["problems"] == []
    png = _ok(["cat", str(shards), "a/b/sample000004", "png"]).stdout_bytes
    assert png == data["samples"]["sample000004"]["png"]
