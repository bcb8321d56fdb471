"""gs:// and az:// read natively through obstore, against the shaped server on 127.0.0.1: GCS's XML API and
Azure's Blob API serve a GET or HEAD of ``/<bucket or account>/<key>`` with a Range as S3 does, so the
same server answers them (no signature checked). Every sample once and byte-identical, in ranged GETs of
obstore's; a forked worker without the fsspec backend is told the fix; a refusal names that store's
credentials. The index is read natively too when gcsfs / adlfs is missing (as here)."""

from __future__ import annotations

import multiprocessing.forkserver
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from packer import PackOptions, pack
from shardstream.errors import ShardReadError
from shardstream.io.objstoreoptions import has_fsspec_backend
from shardstream_cli.demo.synth import make_corpus
from streamer import ShardDataset
from tests.conftest import members_by_key
from tests.servers.shaped_s3 import ShapedS3Server

pytest.importorskip("obstore", reason="native gs:// and az:// need obstore: pip install obstore")

INDEX = "shardstream-index.json"
ACCOUNT = "devaccount"  # Azure's account: the server's bucket, so /ACCOUNT/CONTAINER/KEY is a path in it
SECRET = "c2hhcmRzdHJlYW0tdGVzdC1henVyZS1rZXk="  # a dummy account key: must never show in an error


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("clouds") / "corpus", 12, video=False).files_dir


def _serve(root: Path, corpus: Path, bucket: str, folder: str) -> ShapedS3Server:
    pack(corpus, root / folder, PackOptions(max_count=3))
    return ShapedS3Server(root, bucket=bucket)


@pytest.fixture
def gcs(tmp_path: Path, corpus: Path, monkeypatch) -> Iterator[tuple[ShapedS3Server, str]]:
    with _serve(tmp_path, corpus, "shardstream-gcs", "packed") as srv:
        monkeypatch.setenv("GOOGLE_BASE_URL", srv.endpoint_url)
        monkeypatch.setenv("GOOGLE_SKIP_SIGNATURE", "true")  # no token server here
        yield srv, f"gs://{srv.bucket}/packed"


@pytest.fixture
def azure(tmp_path: Path, corpus: Path, monkeypatch) -> Iterator[tuple[ShapedS3Server, str]]:
    with _serve(tmp_path, corpus, ACCOUNT, "data/packed") as srv:
        monkeypatch.setenv("AZURE_STORAGE_ENDPOINT", f"{srv.endpoint_url}/{ACCOUNT}")
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT)
        monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", SECRET)
        yield srv, "az://data/packed"


def _on_disk(folder: Path) -> dict[str, dict]:
    local = ShardDataset(str(folder / INDEX), decode=False, shuffle=False)
    return members_by_key(local)


@pytest.mark.parametrize("store", ["gcs", "azure"])
def test_every_sample_once_and_byte_identical_in_obstores_ranged_gets(store, request):
    srv, url = request.getfixturevalue(store)
    folder = srv.root / ("packed" if store == "gcs" else "data/packed")
    samples = list(ShardDataset(f"{url}/{INDEX}", decode=False, seed=3))
    assert len(samples) == 12 and members_by_key(samples) == _on_disk(folder)
    shards = [r for r in srv.requests if r.path.endswith(".tar")]
    assert {r.path.rsplit("/", 1)[-1] for r in shards} == {p.name for p in folder.glob("*.tar")}
    assert all(r.headers.get("user-agent", "").startswith("object_store/") for r in shards)
    assert all(r.kind == "range" for r in shards)  # parts, no HEAD first


def test_forkserver_workers_read_natively(azure):
    srv, url = azure
    multiprocessing.forkserver._forkserver._stop()  # type: ignore[attr-defined]  # a fresh env: this server's
    loader = DataLoader(
        ShardDataset(f"{url}/{INDEX}", decode=False, seed=1),
        batch_size=None,
        num_workers=2,
        multiprocessing_context="forkserver",
    )
    assert sorted(s["__key__"] for s in loader) == sorted(_on_disk(srv.root / "data/packed"))


@pytest.mark.skipif(has_fsspec_backend("gs"), reason="with gcsfs a forked worker reads through it")
def test_a_worker_forked_after_obstore_ran_here_is_told_the_fix(gcs):
    _, url = gcs
    dataset = ShardDataset(f"{url}/{INDEX}", decode=False)  # the index read here, through obstore
    batches = iter(DataLoader(dataset, batch_size=None, num_workers=1, multiprocessing_context="fork"))
    with pytest.raises(ShardReadError, match=r"multiprocessing_context='forkserver'.*pip install gcsfs"):
        list(batches)
    # Shut its worker down here, not in a later test's garbage collection (which may run in a server's
    # thread): a child forked after obstore ran does not exit at once, and the DataLoader waits 5 s for it.
    batches._shutdown_workers()  # type: ignore[attr-defined]


@pytest.mark.parametrize("store", ["gcs", "azure"])
def test_a_refusal_names_that_stores_credentials_without_showing_them(store, request):
    srv, url = request.getfixturevalue(store)
    srv.forbid()
    with pytest.raises(ShardReadError) as caught:
        list(ShardDataset(f"{url}/{INDEX}", decode=False))
    assert [r.status for r in srv.requests] == [403]  # the index's GET, refused: not asked again
    shown = "".join(traceback.format_exception(caught.value))
    expected = "GOOGLE_APPLICATION_CREDENTIALS" if store == "gcs" else "AZURE_STORAGE_ACCOUNT_KEY"
    assert "access denied" in str(caught.value) and expected in str(caught.value)
    assert SECRET not in shown
