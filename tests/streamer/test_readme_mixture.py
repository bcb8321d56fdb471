"""The README's mixture example and configs/mixture-example.yaml, run verbatim on packed LLaVA-style sets of
JPEGs and PNGs (issue 33, acceptance 2): the example's relative paths (``data/...``, and ``../data/...``
from the config's folder) are made to exist under a temporary working folder; nothing in the code changes."""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path

import pytest

from packer import PackOptions, pack
from tests.streamer.mixedset import write_mixed

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("captions", "ocr", "charts", "text-only")


def mixture_example() -> str:
    """The first python block after the "## Mixtures" heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Mixtures: `streamer.Mixture`") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "README's mixture section has no python block"
    return code.group(1)


def test_the_readme_mixture_example_and_its_yaml_run_on_mixed_jpeg_png_sets(tmp_path, monkeypatch):
    for name in SOURCES:
        pack(write_mixed(tmp_path / "raw" / name, 24), tmp_path / "data" / name, PackOptions(max_size=20_000))
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    code = mixture_example()
    python_part, _ = code.split("\nmix = Mixture.from_yaml")
    namespace: dict = {"__name__": "readme_example"}
    exec(compile(python_part, "README.md", "exec"), namespace)
    python_mix = namespace["mix"]
    exec(compile(code, "README.md", "exec"), namespace)  # the whole block: its last line is the YAML's
    yaml_mix = namespace["mix"]
    # The source whose fields name alternatives: charts in the Python, captions in the YAML.
    for mix, renamed in ((python_mix, "charts"), (yaml_mix, "captions")):
        samples = list(itertools.islice(iter(mix), 200))
        assert {s["__source__"] for s in samples} >= {"captions", "ocr", "charts"}
        picked = [s for s in samples if s["__source__"] == renamed]
        assert picked and all("image" in s and "meta" in s for s in picked)  # whichever member it had
        assert {s["__key__"][-1] for s in picked} & {"2", "5", "8"}  # PNGs among them (i % 3 == 2)


@pytest.mark.parametrize("name", SOURCES)
def test_the_example_config_names_the_readmes_sources(name):
    assert f"../data/{name}" in (ROOT / "configs" / "mixture-example.yaml").read_text()
