"""Security: pickled code in shards never runs, credentials never shown, names never write outside targets."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import os
import re
import shutil
import tarfile
import traceback
import warnings
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from packer.sample import Sample
from packer.shardwriter import TarShardWriter, encode_sample
from shardstream.errors import DecodeError, FormatError, ShardNotFoundError, ShardReadError
from shardstream.format import (
    INDEX_NAME,
    DatasetIndex,
    encode_offsets,
    iter_samples,
    offsets_name,
    shard_name,
    shard_pattern,
)
from shardstream.format.index import ShardEntry
from shardstream.format.scan import scan_file
from shardstream.io.http import HttpOptions, HttpStream
from shardstream.io.openers import OpenOptions, open_stream, read_small
from shardstream_cli import app
from streamer import ShardDataset
from tests.conftest import write_dataset
from tests.servers import Faults, FaultServer, free_port

pytestmark = pytest.mark.timeout(120)  # a hang is the bug: fail, do not wait for CI's limit

runner = CliRunner()


def _pack(root: Path, samples: list[tuple[str, list[tuple[str, bytes]]]], prefix: str = "train") -> Path:
    """One shard holding ``samples`` (key, members), its offsets sidecar and an index; the index's path."""
    root.mkdir(parents=True, exist_ok=True)
    writer = TarShardWriter(root / shard_name(prefix, 0), max_size=None, max_count=None)
    for key, members in samples:
        chunks = encode_sample(Sample(key, key, tuple(members)))
        writer.add(key, chunks, sum(len(c) for c in chunks))
    DatasetIndex(shard_pattern(prefix, 1), [writer.close()]).save(root / INDEX_NAME)
    return root / INDEX_NAME


# -- 1. a member carrying a pickle payload never runs it -------------------------------------------------


class _Payload:
    """Unpickled, this creates the file ``marker``: the side effect that must never happen on reading."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _torch_bytes(obj, *, legacy: bool = False) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer, _use_new_zipfile_serialization=not legacy)
    return buffer.getvalue()


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _npz_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, a=array)
    return buffer.getvalue()


# member extension -> (the payload's bytes for a marker, a safe member's bytes, the safe member decoded)
PAYLOADS = {
    "pth": lambda m: _torch_bytes({"weight": torch.arange(3), "payload": _Payload(m)}),
    "pt": lambda m: _torch_bytes({"weight": torch.arange(3), "payload": _Payload(m)}, legacy=True),
    "pth.gz": lambda m: gzip.compress(_torch_bytes([_Payload(m)])),
    "npy": lambda m: _npy_bytes(np.array([_Payload(m)], dtype=object)),
    "npz": lambda m: _npz_bytes(np.array([_Payload(m)], dtype=object)),
}
SAFE = {
    "pth": _torch_bytes({"weight": torch.arange(3)}),
    "pt": _torch_bytes({"weight": torch.arange(3)}, legacy=True),
    "pth.gz": gzip.compress(_torch_bytes({"weight": torch.arange(3)})),
    "npy": _npy_bytes(np.arange(3)),
    "npz": _npz_bytes(np.arange(3)),
}
UNSAFE_LOAD = {  # what a careless decoder would do: each of these runs the payload
    "pth": lambda data: torch.load(io.BytesIO(data), weights_only=False),
    "pt": lambda data: torch.load(io.BytesIO(data), weights_only=False),
    "pth.gz": lambda data: torch.load(io.BytesIO(gzip.decompress(data)), weights_only=False),
    "npy": lambda data: np.load(io.BytesIO(data), allow_pickle=True),
    "npz": lambda data: np.load(io.BytesIO(data), allow_pickle=True)["a"],
}


def _safe_value(ext: str, value) -> list[int]:
    array = value["weight"] if isinstance(value, dict) and "weight" in value else value
    array = array["a"] if isinstance(array, dict) else array
    return [int(x) for x in array]


@pytest.mark.parametrize("on_error", ["raise", "skip"])
@pytest.mark.parametrize("ext", list(PAYLOADS))
def test_a_pickle_payload_in_a_member_does_not_run(tmp_path, ext, on_error):
    proof = tmp_path / "unsafe-load-ran"
    UNSAFE_LOAD[ext](PAYLOADS[ext](proof))
    assert proof.exists(), "the payload must be live, or this test proves nothing"
    marker = tmp_path / "payload-ran"
    index = _pack(
        tmp_path / "d",
        [
            ("good-0", [(ext, SAFE[ext])]),
            ("evil", [(ext, PAYLOADS[ext](marker))]),
            ("good-1", [(ext, SAFE[ext])]),
        ],
    )
    ds = ShardDataset(index, shuffle=False, on_error=on_error, keep_length=False)
    if on_error == "raise":
        with pytest.raises(DecodeError) as info:
            list(ds)
        assert info.value.member == f"evil.{ext}"
    else:
        samples = list(ds)
        assert [s["__key__"] for s in samples] == ["good-0", "good-1"]
        assert all(_safe_value(ext, s[ext]) == [0, 1, 2] for s in samples)  # plain tensors still load
        assert ds.errors["decode_errors"] == 1
    assert not marker.exists()


def test_the_stream_command_decodes_payload_members_without_running_them(tmp_path):
    markers = {ext: tmp_path / f"ran-{ext}" for ext in PAYLOADS}
    samples = [(f"evil{i}", [(ext, PAYLOADS[ext](markers[ext]))]) for i, ext in enumerate(PAYLOADS)]
    index = _pack(tmp_path / "d", [("good", [("pth", SAFE["pth"])]), *samples])
    result = runner.invoke(app, ["stream", str(index), "--json", "--on-error", "skip"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["errors"]["decode_errors"] == len(PAYLOADS)
    assert not any(marker.exists() for marker in markers.values())


# -- 2. credentials in URLs and auth headers never shown -------------------------------------------------

USER, PASSWORD, TOKEN = "alice", "pw-s3cr3t-not-to-be-shown", "SECRET-TOKEN-not-to-be-shown"
SECRETS = (PASSWORD, TOKEN)
FAST = HttpOptions(
    headers={"Authorization": f"Bearer {TOKEN}"},
    retries=2,
    backoff=0.01,
    max_backoff=0.02,
    connect_timeout=2,
    read_timeout=2,
)


class SecretShown(AssertionError):
    """A secret appeared in an error, warning or log line (what the xfail marks of known holes expect)."""


def _creds(url: str) -> str:
    """``url`` with user:password in it."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{USER}:{PASSWORD}@{rest}"


def _exception_text(exc: BaseException) -> list[str]:
    parts = ["".join(traceback.format_exception(exc))]  # the whole chain, as a log or a crash shows it
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts += [str(exc), repr(exc), repr(exc.args), str(getattr(exc, "url", ""))]
        exc = exc.__cause__ or exc.__context__
    return parts


def _attempt(caplog, action, expect: type[BaseException] | None):
    """Run ``action`` with every warning and DEBUG log line (urllib3's too) recorded; it must raise ``expect``
    (None: return). Gives (the exception or the result, all text the run showed)."""
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="urllib3")
    first = len(caplog.records)
    outcome, parts = None, []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            outcome = action()
        except Exception as exc:
            if expect is None or not isinstance(exc, expect):
                raise
            outcome = exc
            parts += _exception_text(exc)
        else:
            if expect is not None:
                pytest.fail(f"expected {expect.__name__}, got {outcome!r}")
    parts += [warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught]
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    parts += [formatter.format(record) for record in caplog.records[first:]]
    return outcome, "\n".join(parts)


def _assert_hidden(text: str) -> None:
    for secret in SECRETS:
        if secret in text:
            at = text.index(secret)
            raise SecretShown(f"{secret!r} shown: ...{text[max(0, at - 150) : at + 60]}...")


@pytest.fixture
def site(tmp_path):
    """A FaultServer over d/ (two shards of three samples, offsets, an index)."""
    root = tmp_path / "www"
    write_dataset(root / "d", [3, 3])
    with FaultServer(root) as server:
        yield server


def _token_was_sent(server) -> bool:
    return any(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in server.requests)


def test_a_dead_port_names_the_url_without_credentials(caplog):
    port = free_port()
    pattern = _creds(f"http://127.0.0.1:{port}/d/train-{{000000..000001}}.tar")
    ds = ShardDataset(pattern, decode=False, http=FAST)
    exc, text = _attempt(caplog, lambda: list(ds), ShardReadError)
    assert f"127.0.0.1:{port}/d/train-00000" in str(exc) and "cannot connect" in str(exc)
    assert "ConnectionRefusedError" in text  # the urllib3 cause chain is in what was scanned
    _assert_hidden(text)
    index = _creds(f"http://127.0.0.1:{port}/d/{INDEX_NAME}")
    exc, text = _attempt(caplog, lambda: ShardDataset(index, http=FAST), ShardReadError)
    assert f"127.0.0.1:{port}/d/{INDEX_NAME}" in str(exc)
    _assert_hidden(text)


@pytest.mark.parametrize(
    ("faults", "error", "says"),
    [
        (Faults(), ShardNotFoundError, "HTTP 404"),
        (Faults(only="*.tar", status_codes=[401] * 9), ShardReadError, "HTTP 401"),
        (Faults(forbid="*.tar"), ShardReadError, "HTTP 403"),
        (Faults(only="*.tar", status_codes=[500] * 30), ShardReadError, "HTTP 500; gave up after 2 retries"),
        (Faults(only="*.tar", drop_after=0, reset=True), ShardReadError, "gave up after 2 retries"),
        (Faults(only="*.tar", drop_after=1500), None, None),  # resumed by Range: no error, logs only
    ],
    ids=["404", "401", "403", "500-retried", "dropped", "dropped-and-resumed"],
)
def test_http_failures_through_the_dataset_never_show_credentials(site, caplog, faults, error, says):
    site.faults = faults
    name = "nothing" if says == "HTTP 404" else "train"
    ds = ShardDataset(_creds(f"{site.url}/d/{name}-{{000000..000001}}.tar"), decode=False, http=FAST)
    outcome, text = _attempt(caplog, lambda: list(ds), error)
    if error is None:
        assert len(outcome) == 6
    else:
        assert says in str(outcome) and f"127.0.0.1:{site.port}/d/{name}-00000" in str(outcome)
    assert '"GET /d/' in text  # urllib3's request log lines were captured and scanned
    assert _token_was_sent(site)
    _assert_hidden(text)


def test_a_read_timeout_never_shows_credentials(site, caplog):
    site.set_faults(only="*.tar", stall_after=0, stall_seconds=2.0)
    options = HttpOptions(headers=dict(FAST.headers), retries=1, backoff=0.01, read_timeout=0.2)
    url = _creds(f"{site.url}/d/train-000000.tar")
    exc, text = _attempt(caplog, lambda: HttpStream(url, 0, options).read(), ShardReadError)
    assert "ReadTimeoutError" in text and f"127.0.0.1:{site.port}/d/train-000000.tar" in str(exc)
    _assert_hidden(text)


def test_openers_and_the_cache_never_show_credentials(site, caplog, tmp_path):
    shard = Path(site.root) / "d" / "train-000000.tar"
    (shard.parent / "train-000000.tar.gz").write_bytes(gzip.compress(shard.read_bytes()))
    opening = OpenOptions(http=FAST)
    # A compressed shard is read and skipped to the offset: one past its end is an error naming the URL.
    gz = _creds(f"{site.url}/d/train-000000.tar.gz")
    exc, text = _attempt(caplog, lambda: open_stream(gz, 10**6, opening).read(1), ShardReadError)
    assert "stream ended" in str(exc) and "train-000000.tar.gz" in str(exc)
    _assert_hidden(text)
    # The cache: a shard whose bytes are not the index's (sha256), then one larger than the whole cache.
    data = bytearray(shard.read_bytes())
    data[600] ^= 0xFF
    shard.write_bytes(bytes(data))
    cached = dict(http=FAST, cache_dir=tmp_path / "cache", decode=False, shuffle=False)
    ds = ShardDataset(_creds(f"{site.url}/d/{INDEX_NAME}"), **cached)
    exc, text = _attempt(caplog, lambda: list(ds), ShardReadError)
    assert "sha256 mismatch" in str(exc) and f"{site.port}/d/train-000000.tar" in str(exc)
    _assert_hidden(text)
    _, text = _attempt(
        caplog,
        lambda: read_small(
            _creds(f"{site.url}/d/train-000001.tar"),
            OpenOptions(http=FAST, cache_dir=str(tmp_path / "small"), cache_size=10),
        ),
        None,
    )
    assert "more than cache_size" in text
    _assert_hidden(text)
    assert _token_was_sent(site)


def test_options_never_show_the_auth_header(monkeypatch, caplog):
    opening = OpenOptions(http=FAST)
    ds = ShardDataset("http://127.0.0.1:9/unused-{000000..000001}.tar", http=FAST)  # remote: never read
    for shown in (repr(FAST), str(FAST), repr(opening), repr(ds.reading), str(ds.reading)):
        assert "connect_timeout=2" in shown
        _assert_hidden(shown)
    for bad in ('{"Authorization": "Bearer ' + TOKEN + '"', f'["Bearer {TOKEN}"]'):
        monkeypatch.setenv("SHARDSTREAM_HTTP_HEADERS", bad)
        exc, text = _attempt(caplog, HttpOptions().request_headers, ValueError)
        assert "SHARDSTREAM_HTTP_HEADERS" in str(exc)
        _assert_hidden(text)


def _cli(caplog, args: list[str], env: dict[str, str] | None = None):
    """Run the command in-process; (result, everything it showed: stdout, stderr, warnings, logs, errors)."""
    result, text = _attempt(caplog, lambda: runner.invoke(app, args, env=env), None)
    extra = _exception_text(result.exception) if result.exception is not None else []
    return result, "\n".join([result.stdout, result.stderr, text, *extra])


@pytest.mark.parametrize("workers", [0, 1])
def test_the_stream_command_never_shows_credentials_on_failure(site, caplog, workers):
    env = {"SHARDSTREAM_HTTP_HEADERS": json.dumps({"Authorization": f"Bearer {TOKEN}"})}
    site.set_faults(only="*.tar", status_codes=[403] * 9)
    pattern = _creds(f"{site.url}/d/train-{{000000..000001}}.tar")
    result, text = _cli(caplog, ["stream", pattern, "--json", "--workers", str(workers)], env)
    assert result.exit_code == 1 and "HTTP 403" in result.stderr
    assert f"127.0.0.1:{site.port}/d/train-00000" in result.stderr
    assert _token_was_sent(site)
    _assert_hidden(text)


# Messages built from a URL far from the HTTP code: the error base class and ShardList redact them.
def test_a_missing_index_never_shows_credentials(site, caplog):
    exc, text = _attempt(
        caplog, lambda: ShardDataset(_creds(f"{site.url}/nope/{INDEX_NAME}"), http=FAST), FormatError
    )
    assert "index not found" in str(exc) and f"{site.port}/nope/{INDEX_NAME}" in str(exc)
    _assert_hidden(text)


def test_a_bad_pattern_never_shows_credentials(site, caplog):
    pattern = _creds(f"{site.url}/d/train-{{000000..000001.tar")
    exc, text = _attempt(caplog, lambda: ShardDataset(pattern, http=FAST), FormatError)
    assert "never closed" in str(exc)
    _assert_hidden(text)


def test_a_malformed_index_never_shows_credentials(site, caplog):
    (Path(site.root) / "d" / INDEX_NAME).write_text("{not json")
    exc, text = _attempt(
        caplog, lambda: ShardDataset(_creds(f"{site.url}/d/{INDEX_NAME}"), http=FAST), FormatError
    )
    assert "not valid JSON" in str(exc)
    _assert_hidden(text)


def test_a_damaged_shard_never_shows_credentials(site, caplog):
    shard = Path(site.root) / "d" / "train-000001.tar"
    data = bytearray(shard.read_bytes())
    data[1024 + 100] ^= 0xFF  # the second sample's first header
    shard.write_bytes(bytes(data))
    ds = ShardDataset(_creds(f"{site.url}/d/{INDEX_NAME}"), decode=False, shuffle=False, http=FAST)
    exc, text = _attempt(caplog, lambda: list(ds), ShardReadError)
    assert "corrupt tar header" in str(exc)
    _assert_hidden(text)


def test_an_undecodable_member_never_shows_credentials(site, caplog):
    ds = ShardDataset(
        _creds(f"{site.url}/d/{INDEX_NAME}"),
        http=FAST,
        decoders={"txt": int},
        on_error="warn",
        keep_length=False,
    )
    _, text = _attempt(caplog, lambda: list(ds), None)
    assert ds.errors["decode_errors"] == 6 and "does not decode" in text
    _assert_hidden(text)


def test_a_short_shard_never_shows_credentials(site, caplog):
    index = Path(site.root) / "d" / INDEX_NAME
    doc = json.loads(index.read_text())
    doc["shards"][0][1] += 1  # the index promises one sample more than shard 0 holds
    index.write_text(json.dumps(doc))
    (Path(site.root) / "d" / "train-000000.tar.offsets").unlink()
    ds = ShardDataset(_creds(f"{site.url}/d/{INDEX_NAME}"), decode=False, shuffle=False, http=FAST)
    exc, text = _attempt(caplog, lambda: list(ds), ShardReadError)
    assert "the index promises" in str(exc)
    _assert_hidden(text)


def test_a_damaged_offsets_sidecar_never_shows_credentials(site, caplog):
    (Path(site.root) / "d" / "train-000000.tar.offsets").write_bytes(b"1234567")
    ds = ShardDataset(_creds(f"{site.url}/d/{INDEX_NAME}"), decode=False, shuffle=False, http=FAST)
    # A damaged sidecar is its shard's damage, which on_error="skip" counts: a ShardReadError.
    exc, text = _attempt(caplog, lambda: list(ds), ShardReadError)
    assert "multiple of 8" in str(exc)
    _assert_hidden(text)


def test_the_no_counts_warning_never_shows_credentials(site, caplog):
    pattern = _creds(f"{site.url}/d/train-{{000000..000001}}.tar")
    ds = ShardDataset(pattern, decode=False, http=FAST, rank=0, world_size=2)
    _, text = _attempt(caplog, lambda: list(ds), None)
    assert "no per-shard sample counts" in text
    _assert_hidden(text)


def test_the_stream_command_never_shows_credentials_in_its_summary(site, caplog):
    result, text = _cli(caplog, ["stream", _creds(f"{site.url}/d/{INDEX_NAME}"), "--json", "--no-decode"])
    assert result.exit_code == 0 and json.loads(result.stdout)["samples"] == 6
    _assert_hidden(text)


# -- 3. member names with .. or absolute paths never write outside the target ---------------------------


def _tree(root: Path, skip: Path | None = None) -> set[str]:
    """Every path under ``root`` (files, folders, links; links not followed), minus ``skip`` and its tree."""
    found = set()
    for dirpath, dirs, files in os.walk(root):
        here = Path(dirpath)
        if skip is not None and (here == skip or skip in here.parents):
            dirs[:] = []
            continue
        found.update(str((here / n).relative_to(root)) for n in dirs + files)
    if skip is not None:
        found.discard(str(skip.relative_to(root)))
    return found


def _outside(tmp_path: Path) -> Path:
    """A sentinel folder beside the target, with a file in it: nothing may appear here."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    return outside


def _assert_members_safe(out: Path) -> list[str]:
    """All shard member names in ``out``: relative, no '..' part; and every file under ``out`` stays in it."""
    names = []
    for shard in sorted(out.glob("*.tar")):
        with tarfile.open(shard) as tar:
            names += tar.getnames()
    for name in names:
        assert not name.startswith("/") and ".." not in name.split("/"), name
    for path in out.rglob("*"):
        assert path.resolve().is_relative_to(out.resolve()), path
    return names


def test_pack_of_a_manifest_with_dotdot_and_absolute_keys_writes_only_into_outdir(tmp_path):
    outside = _outside(tmp_path)
    (outside / "photo.txt").write_text("a photo")
    media = tmp_path / "m" / "media"
    media.mkdir(parents=True)
    (media / "a.txt").write_text("a")
    (media / "b.dat").write_text("b")
    evil_keys = ["../evil", "../../outside/evil", str(outside / "abs-evil"), "a/../../evil", "..", "./x"]
    records = [{"id": key, "doc": "media/a.txt"} for key in evil_keys]
    records += [
        {"id": "good/one", "doc": "../outside/photo.txt"},  # a manifest may name media anywhere: a read
        {"id": "good2", "docs": ["media/a.txt", str(outside / "photo.txt")]},
        {"id": "good3", "doc": "media/a.txt", "x/../../../outside/evil": "media/b.dat"},
    ]
    manifest = tmp_path / "m" / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in records))
    fields = ["--media-field", "doc", "--media-field", "docs", "--media-field", "x/../../../outside/evil"]
    for naming in ("ext", "field"):
        before = _tree(tmp_path)
        out = tmp_path / f"out-{naming}"
        command = ["pack", str(manifest), str(out), *fields, "--member-naming", naming, "--json", "-q"]
        result = runner.invoke(app, command)
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        assert summary["samples"] == 3 and summary["rejected"] == {"bad-key": len(evil_keys)}
        names = _assert_members_safe(out)
        assert {n.split(".", 1)[0] for n in names} == {"good/one", "good2", "good3"}
        assert _tree(tmp_path, skip=out) == before
    assert sorted(os.listdir(outside)) == ["keep.txt", "photo.txt"]


def test_pack_of_a_folder_with_links_out_of_it_writes_only_into_outdir(tmp_path):
    outside = _outside(tmp_path)
    (outside / "target.txt").write_text("outside")
    source = tmp_path / "src"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "ok.txt").write_text("ok")
    (source / "file-link.txt").symlink_to(outside / "target.txt")
    (source / "dir-link").symlink_to(outside)
    (source / "rel-link.txt").symlink_to(Path("..") / "outside" / "keep.txt")
    os.link(outside / "target.txt", source / "hard.txt")
    before = _tree(tmp_path)
    out = tmp_path / "out"
    result = runner.invoke(app, ["pack", str(source), str(out), "--json", "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rejected"] == {"outside": 3}
    assert sorted(_assert_members_safe(out)) == ["hard.txt", "sub/ok.txt"]  # a hard link is a plain file
    assert _tree(tmp_path, skip=out) == before


@pytest.mark.parametrize("prefix", ["../evil", "../outside/x", "/abs/evil", "a/../../evil", "..", ".hidden"])
def test_pack_refuses_a_prefix_that_is_a_path(tmp_path, prefix):
    _outside(tmp_path)
    source = tmp_path / "src"
    source.mkdir()
    (source / "a.txt").write_text("a")
    out = tmp_path / "deep" / "out"
    before = _tree(tmp_path)
    result = runner.invoke(app, ["pack", str(source), str(out), "--prefix", prefix, "-q"])
    assert result.exit_code == 2 and "prefix" in result.output
    assert _tree(tmp_path) == before


def _crafted_shard(folder: Path, outside: Path) -> Path:
    """A shard whose members are named ``../``, absolute, ``a/../../``, and links out; with an index."""
    folder.mkdir()
    path = folder / "crafted-000000.tar"
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:

        def add(name, data=b"x", kind=tarfile.REGTYPE, link=""):
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.size = kind, link, len(data) if kind == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

        add("../evil.txt")
        add(str(outside / "abs-evil.txt"))
        add("a/../../evil.txt")
        add("sym.txt", kind=tarfile.SYMTYPE, link="../outside/sym-target.txt")
        add("hard.txt", kind=tarfile.LNKTYPE, link=str(outside / "keep.txt"))
        add("good.txt", b"good")
    with tarfile.open(path) as tar:
        assert str(outside / "abs-evil.txt") in tar.getnames()  # tarfile kept the absolute name
    with open(path, "rb") as handle:
        assert len(list(iter_samples(handle))) == 4  # links are no samples
    # The sidecar as shardstream index writes it: a sample's span runs to the next one's, links inside.
    offsets = scan_file(path).offsets
    (folder / offsets_name(path.name)).write_bytes(encode_offsets(offsets))
    entry = ShardEntry(path.name, 4, path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest())
    DatasetIndex(path.name, [entry]).save(folder / INDEX_NAME)
    return folder


def test_commands_reading_crafted_member_names_write_nothing(tmp_path, monkeypatch):
    outside = _outside(tmp_path)
    data = _crafted_shard(tmp_path / "data", outside)
    work = tmp_path / "cwd" / "deeper"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)  # where a command extracting "../x" would write
    before = _tree(tmp_path)
    for args in (
        ["verify", str(data)],
        ["info", str(data)],
        ["stream", str(data), "--json", "--no-decode"],
        ["stream", str(data), "--json"],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
    assert json.loads(result.stdout)["samples"] == 4
    assert _tree(tmp_path) == before
    keys = [s["__key__"] for s in ShardDataset(data, decode=False, shuffle=False)]
    assert keys == ["../evil", str(outside / "abs-evil"), "a/../../evil", "good"]  # links are no members
    with FaultServer(tmp_path) as server:
        cache = tmp_path / "cache"
        ds = ShardDataset(f"{server.url}/data/{INDEX_NAME}", decode=False, shuffle=False, cache_dir=cache)
        assert [s["__key__"] for s in ds] == keys
    assert _tree(tmp_path, skip=cache) == before


_CACHE_NAME = re.compile(r"\.?[0-9a-f]{32}-[A-Za-z0-9._-]+")


def test_cache_files_stay_flat_inside_cache_dir_whatever_the_url(tmp_path):
    outside = _outside(tmp_path)
    root = tmp_path / "www"
    write_dataset(root / "d", [2, 2])
    odd = "odd name ;$(touch x)`ü'..tar"
    shutil.copy(root / "d" / "train-000001.tar", root / "d" / odd)
    shutil.copy(root / "d" / "train-000001.tar.offsets", root / "d" / f"{odd}.offsets")
    cache = tmp_path / "c1" / "c2" / "c3" / "cache"
    (tmp_path / "d").mkdir()  # where a cache laid out by URL path would put "/../../../../d/..."
    before = _tree(tmp_path)
    with FaultServer(root) as server:
        urls = [
            f"{server.url}/../../../../d/train-000000.tar",  # urllib3 drops the dot segments it sends
            f"{server.url}/d/{quote(odd)}",
        ]
        ds = ShardDataset(urls, decode=False, shuffle=False, cache_dir=cache)
        assert len(list(ds)) == 4
        opening = OpenOptions(cache_dir=str(cache))
        for missing in (
            "/../../../../outside/evil",
            "/d/..%2F..%2F..%2Foutside%2Fevil",
            "/d/../../../../",
            "/d/x?p=/../../../outside/evil#/../../outside/evil2",
            "/d/%00/..",
        ):
            assert read_small(server.url + missing, opening) is None  # absent, remembered in the cache
    names = os.listdir(cache)
    assert len([n for n in names if n.endswith(".absent")]) == 5
    for name in names:
        assert _CACHE_NAME.fullmatch(name), name
        assert (cache / name).is_file() and not (cache / name).is_symlink(), name
    assert _tree(tmp_path, skip=cache) == before | {"c1", "c1/c2", "c1/c2/c3"}
    assert sorted(os.listdir(outside)) == ["keep.txt"]
