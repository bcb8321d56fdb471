"""Secrets in URLs and the reach of a remote index (issue 32, items 8 and 10).

Item 8: a URL's user:password and its token query parameters (presigned S3/GCS URLs, SAS signatures,
OAuth tokens) are needed to open the shard and nowhere else: never in a sample's ``__url__`` or
``__source__``, an error, a warning, a saved state or what the command line prints. Item 10: an index
fetched from a server names shards on that kind of server only; a row naming a local file (a path,
``file://``, fsspec's ``local://``) or a command (``pipe:``) is refused, naming the index and the row,
before anything local is read. A local index keeps naming local files.
"""

from __future__ import annotations

import base64
import pickle
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shardstream.errors import FormatError, ShardNotFoundError, StreamError, redact_url
from shardstream.format import INDEX_NAME, DatasetIndex, shard_name
from shardstream.format.index import ShardEntry
from shardstream.io.http import HttpOptions
from shardstream_cli import app
from streamer import MixSource, Mixture, ShardDataset, ShardMap
from tests.conftest import write_dataset
from tests.servers import Faults, FaultServer

pytestmark = pytest.mark.timeout(60)  # a hang is a bug too: fail, do not wait for CI's limit

PASSWORD = "pw-Sekrit42"
TOKENS = ("SIGSEKRIT", "CREDSEKRIT", "SESSIONSEKRIT")
FAST = HttpOptions(retries=1, backoff=0.01, connect_timeout=2, read_timeout=5)
BASIC = "Basic " + base64.b64encode(f"user:{PASSWORD}".encode()).decode()
PRESIGNED = f"X-Amz-Credential={TOKENS[1]}&X-Amz-Security-Token={TOKENS[2]}&X-Amz-Signature={TOKENS[0]}"


def _hidden(text: str) -> None:
    for secret in (PASSWORD, *TOKENS):
        assert secret not in text, f"{secret!r} shown in: {text[max(0, text.find(secret) - 200) :][:300]}"


@pytest.fixture
def site(tmp_path):
    """A FaultServer over d/ (two shards of three samples, offsets, an index) that wants Basic auth."""
    root = tmp_path / "www"
    write_dataset(root / "d", [3, 3])
    with FaultServer(root, faults=Faults(require_headers={"Authorization": BASIC})) as server:
        server.creds = f"http://user:{PASSWORD}@127.0.0.1:{server.port}"
        yield server


# -- item 8: credentials leak -----------------------------------------------------------------------------


def test_redact_url_cuts_userinfo_and_token_parameters():
    url = f"https://user:{PASSWORD}@host:8443/b/train-000001.tar?versionId=7&{PRESIGNED}&sig={TOKENS[0]}#x"
    shown = redact_url(f"cannot read {url!r}: HTTP 403")
    assert shown == (
        "cannot read 'https://host:8443/b/train-000001.tar?versionId=7&X-Amz-Credential=***&"
        "X-Amz-Security-Token=***&X-Amz-Signature=***&sig=***#x': HTTP 403"
    )
    # pathlib folds '//' into '/': a URL passed through Path(...) still loses its password.
    assert (
        redact_url(f"http:/user:{PASSWORD}@h/d/index.json: No such file")
        == "http:/h/d/index.json: No such file"
    )
    assert redact_url("/data/a@b/train-000000.tar?x=1") == "/data/a@b/train-000000.tar?x=1"


@pytest.mark.parametrize("reader", ["dataset", "zero-copy", "shardmap", "mixture"])
def test_samples_and_state_over_basic_auth_never_show_the_password(site, reader):
    folder = "/d"
    if reader == "mixture":  # at the server's root, where the source's name is the URL's host part
        write_dataset(Path(site.root), [3, 3])
        folder = ""
    index = f"{site.creds}{folder}/{INDEX_NAME}"
    if reader == "shardmap":
        mapped = ShardMap(index, decode=False, http=FAST)
        samples = [mapped[i] for i in range(len(mapped))]
        state = None
    else:
        if reader == "mixture":
            ds = Mixture([MixSource(index, weight=1.0, decode=False)], http=FAST, seed=1)
        else:
            ds = ShardDataset(index, decode=False, seed=1, http=FAST, zero_copy=reader == "zero-copy")
        samples = list(ds)
        state = ds.state_dict()
    assert len(samples) == 6
    assert all(s["__url__"].startswith(f"http://127.0.0.1:{site.port}{folder}/train-00000") for s in samples)
    _hidden(repr([{k: v for k, v in s.items() if k.startswith("__")} for s in samples]))
    _hidden(repr(pickle.loads(pickle.dumps(state))))
    assert any(r.headers.get("authorization") == BASIC for r in site.requests)  # the password was used


def test_presigned_tokens_stay_out_of_samples_errors_and_warnings(site, tmp_path):
    site.faults = Faults()  # a presigned URL carries its own credentials
    # A local index naming presigned shards, its sidecars apart (as ``shardstream index URL --out DIR``).
    rows = [
        ShardEntry(f"{site.url}/d/{e.name}?{PRESIGNED}", e.samples, e.size, e.sha256)
        for e in DatasetIndex.load(Path(site.root) / "d" / INDEX_NAME).shards
    ]
    DatasetIndex(None, rows, sidecars="sidecars").save(tmp_path / INDEX_NAME)
    samples = list(ShardDataset(tmp_path, decode=False, shuffle=False, http=FAST))
    assert len(samples) == 6 and all("X-Amz-Signature=***" in s["__url__"] for s in samples)
    _hidden(repr([s["__url__"] for s in samples]))
    missing = f"{site.url}/d/nothing-{{000000..000001}}.tar?{PRESIGNED}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = ShardDataset(missing, decode=False, http=FAST, on_error="warn", rank=0, world_size=2)
        assert list(ds) == []
    shown = [str(w.message) for w in caught]
    assert any("no per-shard sample counts" in m for m in shown) and any("HTTP 404" in m for m in shown)
    _hidden("".join(shown))
    with pytest.raises(ShardNotFoundError) as info:
        list(ShardDataset(missing, decode=False, http=FAST))
    assert "?X-Amz-Credential=***" in str(info.value)
    _hidden(str(info.value) + repr(info.value.args) + info.value.url)


def test_the_index_command_never_prints_the_password(site):
    runner = CliRunner()
    pattern = f"{site.creds}/d/train-{{000000..000001}}.tar?{PRESIGNED}"
    result = runner.invoke(app, ["index", pattern])  # remote, without --out: an error naming the source
    assert result.exit_code == 1 and "--out" in result.stderr, result.output
    assert f"127.0.0.1:{site.port}/d/train-" in result.stderr
    _hidden(result.output + result.stderr)
    # verify takes a local index: the URL goes through a Path (http:/user:pw@...) into its error.
    result = runner.invoke(app, ["verify", f"{site.creds}/d/{INDEX_NAME}"])
    assert result.exit_code == 1, result.output
    _hidden(result.output + result.stderr)


# -- item 10: a remote index opens local files ------------------------------------------------------------


def _local_tar(tmp_path: Path) -> tuple[Path, ShardEntry]:
    """A real shard outside the served folder, standing in for /etc/passwd: today's code would read it."""
    write_dataset(tmp_path / "private", [2], prefix="private")
    path = tmp_path / "private" / shard_name("private", 0)
    return path, DatasetIndex.load(tmp_path / "private" / INDEX_NAME).shards[0]


ROWS = {
    "absolute-path": lambda p: str(p),
    "file-url": lambda p: p.as_uri(),
    "fsspec-local": lambda p: f"local://{p}",
    "pipe": lambda p: f"pipe:cat {p}",
    "other-scheme": lambda p: f"s3://bucket/{p.name}",
}


@pytest.mark.parametrize("columns", [False, True], ids=["rows", "columns"])
@pytest.mark.parametrize("row", list(ROWS))
def test_a_remote_index_may_not_name_local_files_or_commands(tmp_path, row, columns):
    private, entry = _local_tar(tmp_path)
    served = tmp_path / "www" / "d"
    write_dataset(served, [3])
    good = DatasetIndex.load(served / INDEX_NAME).shards[0]
    named = ROWS[row](private)
    hostile = ShardEntry(named, entry.samples, entry.size, entry.sha256)
    DatasetIndex(None, [good, hostile]).save(served / INDEX_NAME, columns=columns)
    with FaultServer(tmp_path / "www") as server:
        index = f"{server.url}/d/{INDEX_NAME}"
        for make in (
            lambda: list(ShardDataset(index, decode=False, shuffle=False, http=FAST, on_error="skip")),
            lambda: ShardMap(index, decode=False, http=FAST)[4],
        ):
            with pytest.raises(FormatError) as info:
                make()
            assert not isinstance(info.value, StreamError)  # not a bad shard to skip: a refused index
            text = str(info.value)
            assert index in text and repr(named) in text and "remote index" in text, text
        assert not any(private.name in r.path for r in server.requests)  # nor fetched from the server


def test_a_local_index_may_name_local_files(tmp_path):
    private, entry = _local_tar(tmp_path)
    here = tmp_path / "here"
    write_dataset(here, [3])
    good = DatasetIndex.load(here / INDEX_NAME).shards[0]
    rows = [good] + [
        ShardEntry(n, entry.samples, entry.size, entry.sha256) for n in (private.as_uri(), str(private))
    ]
    DatasetIndex(None, rows).save(here / INDEX_NAME)
    keys = [s["__key__"] for s in ShardDataset(here / INDEX_NAME, decode=False, shuffle=False)]
    assert len(keys) == 7 and keys.count("s000-00000") == 3


def test_a_remote_index_names_shards_relative_to_itself_and_on_its_own_kind_of_server(tmp_path):
    served = tmp_path / "www" / "d"
    write_dataset(served, [3, 2])
    (served / "sub").mkdir()
    rows = list(DatasetIndex.load(served / INDEX_NAME).shards)
    with FaultServer(tmp_path / "www") as server:
        rows[0] = ShardEntry(f"sub/../{rows[0].name}", rows[0].samples, rows[0].size, rows[0].sha256)
        rows[1] = ShardEntry(f"{server.url}/d/{rows[1].name}", rows[1].samples, rows[1].size, rows[1].sha256)
        DatasetIndex(None, rows).save(served / INDEX_NAME)
        ds = ShardDataset(f"{server.url}/d/{INDEX_NAME}", decode=False, shuffle=False, http=FAST)
        assert len(list(ds)) == 5
