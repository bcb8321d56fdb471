"""The README's object-storage example, run verbatim against the shaped S3 server: only its URL is
replaced by the server's (the comment naming gs:// and az:// stays as it is)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from packer import PackOptions, pack
from shardstream_cli.demo.synth import make_corpus
from tests.servers.shaped_s3 import ShapedS3Server

pytest_plugins = ["tests.servers.shaped_fixtures"]
pytest.importorskip("obstore", reason="native s3:// needs obstore: pip install obstore")

README = Path(__file__).resolve().parents[2] / "README.md"
URL = '"s3://bucket/data/shardstream-index.json"'


def _example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Object storage: `s3://`, `gs://`, `az://`") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None and URL in code.group(1), "the object-storage section's example moved"
    return code.group(1)


def test_the_readme_object_storage_example_reads_every_sample(pointed_s3: ShapedS3Server, tmp_path):
    corpus = make_corpus(tmp_path / "corpus", 6, video=False).files_dir
    pack(corpus, pointed_s3.root / "data", PackOptions(max_count=2))
    url = f"s3://{pointed_s3.bucket}/data/shardstream-index.json"
    namespace: dict = {}
    exec(compile(_example().replace(URL, repr(url)), str(README), "exec"), namespace)
    keys = sorted(sample["__key__"] for sample in namespace["ds"])
    assert len(keys) == 6 and len(set(keys)) == 6
    assert any(r.path.endswith(".tar") and r.kind == "range" for r in pointed_s3.requests)
