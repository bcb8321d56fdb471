"""Hostile members for the decoders (issue 32, items 12-13): an image is opened only as the format its
extension names (an EPS named ``x.png`` never reaches Pillow's EPS plugin, which runs Ghostscript), one
pixel limit guards every image path (Pillow's and torchcodec's), a ``.gz`` member inflates to a capped size,
and ``ls``/``stats`` count member sizes without holding the members. Memory is measured in a child."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import zlib
from functools import cache
from pathlib import Path

import pytest
from PIL import Image

from shardstream.errors import DecodeError
from streamer.decode.sample import DecodeOptions, SampleDecoder

pytestmark = pytest.mark.timeout(60)  # a hang or a swap storm is the bug: fail, do not wait for CI's limit

GIB = 1 << 30
EPS = b"""%!PS-Adobe-3.0 EPSF-3.0
%%BoundingBox: 0 0 16 16
%%EndComments
newpath 0 0 moveto 16 16 lineto stroke
showpage
%%EOF
"""


def _image(fmt: str, size: tuple[int, int] = (16, 8)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (200, 30, 90)).save(out, format=fmt)
    return out.getvalue()


def _jpeg_claiming(width: int, height: int) -> bytes:
    """A ~1 KB JPEG whose frame header claims ``width`` x ``height`` (its scan holds 16x16 pixels)."""
    data = bytearray(_image("JPEG", (16, 16)))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
    return bytes(data)


def _zeros_gz(size: int) -> bytes:
    """gzip of ``size`` zero bytes, compressed a MiB at a time (never holding ``size`` bytes)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    parts = [packer.compress(chunk) for _ in range(size // len(chunk))]
    return b"".join(parts) + packer.flush()


@cache
def _gz_gz_bomb() -> bytes:
    """A ~1 KiB member that inflates twice to 1 GiB of zeros."""
    return gzip.compress(_zeros_gz(GIB), 9)


def _decode_in_child(tmp_path: Path, mode: str, member: str, data: bytes, **opts):
    """Decode one sample in a fresh interpreter: (the DecodeError's text or "decoded", MiB grown past the
    imports). A child, so that its peak memory is its own."""
    (tmp_path / "member").write_bytes(data)
    script = f"""
import json, resource, sys
from shardstream.errors import DecodeError
from streamer.decode.sample import SampleDecoder
decoder = SampleDecoder(image={mode!r}, **{opts!r})
data = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    decoder({{"__key__": "x", "__url__": "shard-000.tar", {member!r}: data}})
    said = "decoded"
except DecodeError as exc:
    said = str(exc)
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({{"said": said, "grown_mb": grown}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "member")],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    return result["said"], result["grown_mb"]


# -- item 12: an image opens only as its extension's format ------------------------------------------


_EPS_CHILD = """
import json, sys
from shardstream.errors import DecodeError
from streamer.decode.sample import SampleDecoder
data = open(sys.argv[1], "rb").read()
said = {}
for mode in ("pil", "numpy", "torch"):
    for member in ("png", "jpg"):
        try:
            SampleDecoder(image=mode)({"__key__": "x", "__url__": "shard-000.tar", member: data})
            said[f"{member}-{mode}"] = "decoded"
        except DecodeError as exc:
            said[f"{member}-{mode}"] = str(exc)
print(json.dumps(said))
"""


def test_eps_named_as_an_image_never_reaches_ghostscript(tmp_path):
    """Pillow's EPS plugin runs ``gs`` on the bytes; a fake ``gs`` first on PATH leaves a mark if it runs.
    In a child, every image mode: Pillow looks for ``gs`` once per process."""
    bin_dir, mark = tmp_path / "bin", tmp_path / "gs-ran"
    bin_dir.mkdir()
    (bin_dir / "gs").write_text(f'#!/bin/sh\necho "$@" >> {mark}\nexit 1\n')
    (bin_dir / "gs").chmod(0o755)
    (tmp_path / "x.eps").write_bytes(EPS)
    done = subprocess.run(
        [sys.executable, "-c", _EPS_CHILD, str(tmp_path / "x.eps")],
        capture_output=True,
        text=True,
        timeout=50,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert not mark.exists(), f"Ghostscript ran: {mark.read_text()!r}"
    for case, said in json.loads(done.stdout).items():
        member = case.split("-")[0]
        expected = {"png": "PNG", "jpg": "JPEG"}[member]
        assert f"not {expected}" in said and f"x.{member}" in said, (case, said)


@pytest.mark.parametrize("mode", ["pil", "numpy", "torch"])
@pytest.mark.parametrize(
    ("member", "fmt"), [("png", "GIF"), ("png", "JPEG"), ("jpg", "PNG"), ("webp", "BMP")]
)
def test_an_image_whose_bytes_are_another_format_is_a_decode_error(member, fmt, mode):
    decoder = SampleDecoder(image=mode)
    with pytest.raises(DecodeError, match=rf"x\.{member}.*not {member.upper().replace('JPG', 'JPEG')}"):
        decoder({"__key__": "x", "__url__": "shard-000.tar", member: _image(fmt)})


def test_each_image_extension_opens_its_own_format():
    from shardstream.mediatypes import IMAGE_EXTENSIONS, IMAGE_FORMATS

    Image.init()
    assert set(IMAGE_FORMATS) == IMAGE_EXTENSIONS
    assert all(name in Image.OPEN for names in IMAGE_FORMATS.values() for name in names)
    decoder = SampleDecoder(image="numpy")
    formats = {"jpg": "JPEG", "jpeg": "JPEG", "png": "PNG", "webp": "WEBP", "gif": "GIF", "bmp": "BMP"}
    formats.update({"tif": "TIFF", "tiff": "TIFF", "ppm": "PPM"})
    sample = {"__key__": "x", **{ext: _image(fmt) for ext, fmt in formats.items()}}
    decoded = decoder(sample)
    assert all(decoded[ext].shape == (8, 16, 3) for ext in formats)


def test_a_skipped_image_of_the_wrong_format_is_counted(tmp_path):
    """Under ``on_error="skip"`` the member is a decode error like any other: counted, the rest read."""
    from streamer import ShardDataset

    shard = tmp_path / "shard-000.tar"
    with tarfile.open(shard, "w") as tar:
        for key, data in (("a", _image("PNG")), ("b", _image("GIF")), ("c", _image("PNG"))):
            info = tarfile.TarInfo(f"{key}.png")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    ds = ShardDataset(str(shard), shuffle=False, image="numpy", on_error="skip", keep_length=False)
    assert [s["__key__"] for s in ds] == ["a", "c"]
    assert ds.errors["decode_errors"] == 1, ds.errors


# -- item 13: one pixel limit on every image path ---------------------------------------------------


@pytest.mark.parametrize("mode", ["torch", "numpy", "pil"])
def test_a_jpeg_claiming_huge_dimensions_is_refused_on_every_path(tmp_path, mode):
    """A 1 KB JPEG claiming 20000x20000 reached 1.85 GB with image="torch" (torchcodec skipped Pillow's
    pixel limit)."""
    data = _jpeg_claiming(20000, 20000)
    assert len(data) < 2048
    said, grown = _decode_in_child(tmp_path, mode, "jpg", data)
    assert "image_max_pixels" in said and "x.jpg" in said and grown < 400, f"{said} (grew {grown:.0f} MB)"


def test_the_pixel_limit_is_an_option():
    data = _image("JPEG", (64, 32))
    for mode in ("torch", "pil"):
        with pytest.raises(DecodeError, match=r"2048 pixels.*image_max_pixels=2000"):
            SampleDecoder(image=mode, image_max_pixels=2000)({"__key__": "x", "jpg": data})
        assert SampleDecoder(image=mode, image_max_pixels=2048)({"__key__": "x", "jpg": data})
    with pytest.raises(ValueError, match="image_max_pixels"):
        DecodeOptions(image_max_pixels=0)


# -- item 13: a .gz member inflates to a capped size ------------------------------------------------


def test_a_gz_gz_bomb_is_refused_with_bounded_memory(tmp_path):
    """A ~1 KiB ``x.bin.gz.gz`` inflated to 1 GiB (2.5 GB RSS)."""
    bomb = _gz_gz_bomb()
    assert len(bomb) < 4096
    said, grown = _decode_in_child(tmp_path, "pil", "bin.gz.gz", bomb)
    assert "x.bin.gz.gz" in said and "gunzip_max_bytes" in said and grown < 400, (
        f"{said} (grew {grown:.0f} MB)"
    )


def test_the_inflated_size_cap_is_an_option_and_gz_still_reads():
    text = b"hello gz " * 1000
    sample = {"__key__": "x", "txt.gz": gzip.compress(text), "bin.gz": gzip.compress(text) * 2}
    decoded = SampleDecoder()(sample)
    assert decoded["txt.gz"] == text.decode() and decoded["bin.gz"] == text * 2  # two gzip members
    assert SampleDecoder(gunzip_max_bytes=len(text))({"__key__": "x", "txt.gz": sample["txt.gz"]})
    with pytest.raises(DecodeError, match=r"x\.txt\.gz.*more than 8999 bytes.*gunzip_max_bytes"):
        SampleDecoder(gunzip_max_bytes=len(text) - 1)({"__key__": "x", "txt.gz": sample["txt.gz"]})
    with pytest.raises(DecodeError, match=r"x\.bin\.gz"):
        SampleDecoder()({"__key__": "x", "bin.gz": sample["bin.gz"][:-20]})  # cut short
    assert DecodeOptions(gunzip_max_bytes="1MiB").gunzip_max_bytes == 1 << 20
    with pytest.raises(ValueError, match="gunzip_max_bytes"):
        DecodeOptions(gunzip_max_bytes=-1)


# -- item 13: ls and stats count sizes without holding the members -----------------------------------


@pytest.fixture(scope="module")
def big_member_shard(tmp_path_factory) -> Path:
    """A ~1 MiB ``.tar.gz`` holding a 1 GiB member between two small samples."""
    shard = tmp_path_factory.mktemp("bigmember") / "shard-000.tar.gz"
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    with open(shard, "wb") as out:

        def member(name: str, size: int, fill: bytes = b"") -> None:
            info = tarfile.TarInfo(name)
            info.size = size
            out.write(packer.compress(info.tobuf(format=tarfile.USTAR_FORMAT)))
            chunk = bytes(1 << 20)
            for _ in range(size // len(chunk)):
                out.write(packer.compress(chunk))
            out.write(packer.compress(fill + bytes(-size % 512 + size % len(chunk) - len(fill))))

        member("a.txt", 5, b"hello")
        member("big.bin", GIB)
        member("big.txt", 3, b"big")
        member("z.txt", 2, b"zz")
        out.write(packer.compress(bytes(1024)) + packer.flush())
    assert shard.stat().st_size < 4 << 20
    return shard


_CLI_PEAK = """
import json, resource, sys
from typer.main import get_command
from shardstream_cli import app
command = get_command(app)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    command.main(sys.argv[1:], standalone_mode=False)
    code = 0
except SystemExit as exc:
    code = exc.code
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"code": code, "grown_mb": grown}))
"""


@pytest.mark.parametrize("command", [["ls", "--json"], ["stats", "--json"]])
def test_ls_and_stats_count_a_big_member_without_holding_it(big_member_shard, command):
    """``shardstream ls`` held a 1 GiB member of a 1 MiB ``.tar.gz`` to print its size."""
    done = subprocess.run(
        [sys.executable, "-c", _CLI_PEAK, *command, str(big_member_shard)],
        capture_output=True,
        text=True,
        timeout=50,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    *printed, last = done.stdout.splitlines()
    peak = json.loads(last)
    assert peak["code"] == 0 and peak["grown_mb"] < 400, peak
    if command[0] == "ls":
        rows = [json.loads(line) for line in printed]
        assert [(r["key"], r["members"]) for r in rows] == [
            ("a", {"txt": 5}),
            ("big", {"bin": GIB, "txt": 3}),
            ("z", {"txt": 2}),
        ]
    else:
        stats = json.loads("\n".join(printed))
        assert stats["samples"] == 3
        assert stats["fields"] == {"bin": {"members": 1, "bytes": GIB}, "txt": {"members": 3, "bytes": 10}}


def test_verify_decode_opens_an_image_only_as_its_extension_format(tmp_path):
    """``shardstream verify --decode`` decodes with the streamer's decoders, bound to the same formats."""
    from typer.testing import CliRunner

    from shardstream_cli import app

    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.png").write_bytes(_image("PNG"))
    (raw / "b.png").write_bytes(_image("GIF"))
    (raw / "c.gif").write_bytes(_image("GIF"))
    runner = CliRunner()
    assert runner.invoke(app, ["pack", str(raw), str(tmp_path / "out")]).exit_code == 0
    result = runner.invoke(app, ["verify", str(tmp_path / "out"), "--decode", "--json"])
    doc = json.loads(result.stdout)
    [failure] = doc["decode_failures"]
    assert (failure["key"], failure["member"]) == ("b", "png") and "not PNG" in failure["reason"], failure
    assert doc["decoded"] == {"gif": 1, "png": 1}


def test_ls_still_reports_a_large_member_cut_short(tmp_path):
    """Dropping a large member's bytes keeps the reader's check that they all came."""
    from typer.testing import CliRunner

    from shardstream_cli import app

    shard = tmp_path / "cut.tar"
    with tarfile.open(shard, "w") as tar:
        for name, size in (("a.txt", 5), ("b.bin", 3 << 20)):
            info = tarfile.TarInfo(name)
            info.size = size
            tar.addfile(info, io.BytesIO(bytes(size)))
    whole = CliRunner().invoke(app, ["ls", str(shard), "--json"])
    assert whole.exit_code == 0 and json.loads(whole.stdout.splitlines()[1])["members"] == {"bin": 3 << 20}
    shard.write_bytes(shard.read_bytes()[: 2 << 20])
    cut = CliRunner().invoke(app, ["ls", str(shard), "--json"])
    assert cut.exit_code == 1 and "truncated tar" in cut.output and "b.bin" in cut.output, cut.output
