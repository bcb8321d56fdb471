"""fields with alternatives and canonical names, on a packed JPEG/PNG set as issue 33's user had it.

``fields={"image": "jpg;png"}``: each sample's first present alternative decodes by its own extension and
comes out as ``image``, through ShardDataset, ShardMap, a Mixture (mapping and YAML) and collate. A sample
with none of an entry's members is a MissingMemberError saying what the sample really holds.
"""

from __future__ import annotations

import pickle

import pytest
import torch
from torch.utils.data import DataLoader

from shardstream.errors import MissingMemberError
from streamer import ShardDataset, ShardMap, collate
from streamer.decode.sample import SampleDecoder
from streamer.mixture.mixture import Mixture
from tests.streamer.mixedset import SIZE, pack_mixed

FIELDS = {"image": "jpg;png;webp", "meta": "json"}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    return pack_mixed(tmp_path_factory.mktemp("llava"))


def _pixel(i: int) -> int:
    return 40 + 7 * (i % 30)


def _check(sample) -> None:
    """Each image is the one its record names, decoded (the PNGs included) under the canonical name."""
    assert sorted(k for k in sample if not k.startswith("__")) == ["image", "meta"]
    i = int(sample["meta"]["id"].rsplit("-", 1)[1])
    image = sample["image"]
    assert tuple(image.shape) == (3, SIZE[1], SIZE[0])
    assert abs(int(image[0, 0, 0]) - _pixel(i)) <= 3  # the PNGs exactly, the JPEGs within their loss


def test_every_sample_decodes_its_own_member_under_the_canonical_name(mixed):
    samples = list(ShardDataset(mixed, fields=FIELDS, image="torch", buffer_size=8))
    assert len(samples) == 30
    for sample in samples:
        _check(sample)


def test_collate_stacks_a_mixed_batch_under_the_canonical_name(mixed):
    ds = ShardDataset(mixed, fields=FIELDS, image="torch", image_size=16, seed=3)
    batches = list(DataLoader(ds, batch_size=5, num_workers=2, collate_fn=collate))
    assert sum(len(b["__key__"]) for b in batches) == 30
    for batch in batches:
        assert isinstance(batch["image"], torch.Tensor) and batch["image"].shape[:2] == (5, 3)
        assert "jpg" not in batch and "png" not in batch and len(batch["meta"]) == 5


def test_the_first_alternative_present_wins():
    both = {"__key__": "k", "__url__": "u", "png": _png(), "jpg": b"not a jpeg at all"}
    out = SampleDecoder(image="numpy", fields={"image": "png;jpg"})(both)
    assert out["image"].shape == (2, 3, 3) and set(out) == {"__key__", "__url__", "image"}


def test_shardmap_and_mixture_take_the_same_mapping(mixed, tmp_path):
    kept = ShardMap(mixed, fields=FIELDS, image="torch")
    for i in (0, 2, 29):
        _check(kept[i])
    mix = Mixture([{"path": str(mixed), "weight": 1, "fields": FIELDS, "image": "torch"}], epoch_size=30)
    for sample in mix:
        _check(sample)
    config = tmp_path / "mix.yaml"
    config.write_text(
        f"sources:\n  - path: {mixed.parent}\n    weight: 1\n    image: torch\n"
        "    fields: {image: jpg;png;webp, meta: json}\n"
        "epoch_size: 30\n"
    )
    samples = list(Mixture.from_yaml(config))
    assert len(samples) == 30
    for sample in samples:
        _check(sample)


def test_undecoded_samples_are_renamed_too(mixed):
    samples = list(ShardDataset(mixed, fields=FIELDS, decode=False, shuffle=False))
    assert all(sorted(k for k in s if not k.startswith("__")) == ["image", "meta"] for s in samples)
    assert samples[2]["image"][:8] == b"\x89PNG\r\n\x1a\n" and samples[0]["image"][:2] == b"\xff\xd8"


def test_a_png_sample_under_fields_jpg_says_what_it_holds_and_names_no_member_it_lacks(mixed):
    ds = ShardDataset(mixed, fields=["jpg", "json"], shuffle=False)
    with pytest.raises(MissingMemberError) as info:
        list(ds)
    message = str(info.value)
    assert "llava-000002" in message
    assert "['json', 'png']" in message  # every member it holds, not what survived the filter
    assert "llava-000002.jpg" not in message and info.value.member is None
    mix = Mixture([{"path": str(mixed), "weight": 1, "fields": {"image": "jpg;webp"}}], epoch_size=30)
    with pytest.raises(MissingMemberError, match=r"'jpg', 'webp'.*\['json', 'png'\]"):
        list(mix)


def test_the_mapping_pickles_and_bad_mappings_name_the_argument(mixed):
    decoder = SampleDecoder(image="numpy", fields={"image": "jpg;png"})
    clone = pickle.loads(pickle.dumps(decoder))
    assert clone({"__key__": "k", "png": _png()})["image"].shape == (2, 3, 3)
    for bad in (
        {"image": ""},
        {"image": "jpg;;png"},
        {"": "jpg"},
        {"__key__": "jpg"},
        {"a": "jpg", "b": "jpg"},
        {"image": 3},
        ["jpg;png"],
        "jpg",
    ):
        with pytest.raises(ValueError, match="fields"):
            SampleDecoder(fields=bad)
    with pytest.raises(ValueError, match="fields"):
        ShardDataset(mixed, fields={"image": ""})
    with pytest.raises(ValueError, match=r"source 'llava'.*fields"):
        Mixture([{"path": str(mixed), "name": "llava", "weight": 1, "fields": ["jpg;png"]}], epoch_size=3)


def _png() -> bytes:
    import io

    import numpy as np
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.zeros((2, 3, 3), np.uint8)).save(buffer, "PNG")
    return buffer.getvalue()
