"""Mixture on real shards through real DataLoaders: proportions, whole passes, exact and changed resumes."""

from __future__ import annotations

import collections
import random

import numpy as np
import pytest
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from shardstream.errors import ShardReadError
from streamer import ShardDataset
from streamer.mixture.mixture import Mixture
from tests.conftest import write_dataset
from tests.streamer.mixture.twosources import stopped

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixture")
    return {
        "tiny": write_dataset(root / "tiny", [7], prefix="tiny").parent,
        "mid": write_dataset(root / "mid", [300, 700], prefix="mid").parent,
        "big": write_dataset(root / "big", [5000] * 10, prefix="big", payload=4).parent,
    }


def _sources(paths, weights, **options):
    return [
        {"path": str(paths[name]), "weight": w, "decode": False, **options} for name, w in weights.items()
    ]


def _keys(batch):
    return [(sample["__source__"], sample["__key__"]) for sample in batch]


def test_a_real_dataloader_keeps_proportions_on_every_rank_and_reads_the_big_source_at_most_once(three):
    weights = {"tiny": 0.2, "mid": 0.3, "big": 0.5}
    seen: list[tuple[str, str]] = []
    for rank in range(2):
        mixture = Mixture(_sources(three, weights), rank=rank, world_size=2)
        plan = mixture.plan(2, 2)
        planned = dict(zip(mixture.names, np.asarray(plan.per_rank()) / plan.rank_length, strict=True))
        counts: collections.Counter[str] = collections.Counter()
        total = 0
        for batch in DataLoader(mixture, batch_size=16, num_workers=2, collate_fn=_keys):
            counts.update(source for source, _ in batch)
            total += len(batch)
            for name, weight in weights.items():  # within the worker count, at every batch boundary
                assert abs(counts[name] - planned[name] * total) <= 2, (rank, total, name)
                assert abs(counts[name] - weight * total) <= 3, (rank, total, name)
            seen += batch
        assert total == len(mixture) == (7 + 1000 + 50_000) // 2
    big = [key for source, key in seen if source == "big"]
    assert len(big) == len(set(big)) > 25_000
    tiny = collections.Counter(key for source, key in seen if source == "tiny")
    assert len(tiny) == 7 and max(tiny.values()) - min(tiny.values()) <= 1  # whole passes
    mid = collections.Counter(key for source, key in seen if source == "mid")
    assert len(mid) == 1000 and max(mid.values()) - min(mid.values()) <= 1


def _loader(mixture, workers):
    return StatefulDataLoader(mixture, batch_size=8, num_workers=workers, collate_fn=_keys)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stateful_dataloader_restored_at_random_batches_equals_the_uninterrupted_run(three, workers):
    weights = {"tiny": 0.2, "mid": 0.3, "big": 0.5}

    def mixture():
        m = Mixture(_sources(three, weights), epoch_size=600, buffer_size=40, seed=3)
        m.set_epoch(1)
        return m

    full = list(_loader(mixture(), workers))
    assert len(full) == (75 if workers == 0 else 76)  # two workers: 300 samples each, 38 batches each
    for stop in sorted(random.Random(workers).sample(range(1, len(full)), 3)):
        loader = _loader(mixture(), workers)
        batches = iter(loader)
        head = [next(batches) for _ in range(stop)]
        state = loader.state_dict()
        restored = _loader(mixture(), workers)
        restored.load_state_dict(state)
        assert head + list(restored) == full, f"restored after batch {stop}"


def _reads_per_key(batches, source):
    return collections.Counter(key for batch in batches for name, key in batch if name == source)


@pytest.mark.parametrize(
    "second",
    [{"tiny": 0.5, "mid": 0.3, "big": 0.2}, {"mid": 0.6, "big": 0.4}],
    ids=["weights-changed", "source-removed"],
)
def test_a_changed_mixture_carries_every_source_on_without_repeat_or_skip(three, second):
    first = {"tiny": 0.2, "mid": 0.3, "big": 0.5}
    loader = _loader(Mixture(_sources(three, first), epoch_size=4000), 2)
    epoch0 = list(loader)
    state = loader.state_dict()
    changed = Mixture(_sources(three, second), epoch_size=4000)
    changed.load_state_dict(state)  # before the loader starts its workers, which then inherit it
    changed.set_epoch(1)
    resumed = _loader(changed, 2)
    resumed.load_state_dict(state)
    epoch1 = list(resumed)
    assert sum(map(len, epoch1)) == 4000
    for source in second:
        reads = _reads_per_key(epoch0 + epoch1, source)
        # Every sample read k or k + 1 times: a pass is finished before the next begins, nothing skipped.
        assert max(reads.values()) - min(reads.values()) <= 1, source
        if source == "big":
            assert len(reads) == sum(reads.values())  # under one pass in all: no sample twice


def test_a_mixture_whose_sources_change_in_the_middle_of_an_epoch_is_refused_with_the_reason(three):
    """Weights may change mid-epoch (test_mixture_change.py); another source may not."""
    mixture = Mixture(_sources(three, {"tiny": 0.2, "big": 0.8}), epoch_size=100)
    stream = iter(mixture)
    for _ in range(10):
        next(stream)
    state = mixture.state_dict()
    with pytest.raises(ValueError, match="middle of epoch 0; change its sources at an epoch boundary"):
        Mixture(_sources(three, {"tiny": 0.5, "mid": 0.5}), epoch_size=100).load_state_dict(state)


def test_every_sample_says_its_source_and_each_source_decodes_its_own_way(three):
    mixture = Mixture(
        [
            {"path": str(three["mid"]), "name": "decoded", "weight": 1},
            {"path": str(three["tiny"]), "name": "raw", "weight": 1, "decode": False},
            {"path": str(three["big"]), "name": "only-cls", "weight": 1, "fields": ["cls"]},
        ],
        epoch_size=300,
    )
    samples = list(mixture)
    assert len(samples) == 300
    by_source = {s["__source__"]: s for s in samples}
    assert isinstance(by_source["decoded"]["txt"], str) and isinstance(by_source["decoded"]["cls"], int)
    assert isinstance(by_source["raw"]["txt"], bytes)
    assert "txt" not in by_source["only-cls"] and isinstance(by_source["only-cls"]["cls"], int)


def test_a_yaml_mixture_reads_paths_beside_it(three):
    config = three["tiny"].parent / "mix.yaml"
    config.write_text(
        "seed: 5\nepoch_size: 120\nsources:\n"
        "  - {path: tiny, weight: 0.25, decode: false}\n"
        "  - {path: big, name: large, samples: 90, fields: [cls]}\n"
    )
    mixture = Mixture.from_yaml(config)
    samples = list(mixture)
    assert collections.Counter(s["__source__"] for s in samples) == {"tiny": 30, "large": 90}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sources:\n  - {path: tiny, wieght: 1}\n", "source 0 .*unknown key 'wieght'"),
        ("seeed: 1\nsources:\n  - {path: tiny, weight: 1}\n", "unknown key 'seeed'"),
        ("sources: []\n", "non-empty list"),
        ("sources:\n  - {path: tiny, weight: -1}\n", "'tiny': weight must be > 0.*give it weight: 0"),
        ("sources:\n  - {path: tiny, weight: 0}\n", r"every source has weight 0 \('tiny'\)"),
        ("sources:\n  - {path: nowhere, weight: 1}\n", "'nowhere'.*does not exist"),
        ("sources:\n  - {path: tiny}\n", "exactly one of weight, repeat or samples"),
        ("sources:\n  - {path: tiny, weight: 1}\n  - {path: tiny, repeat: 2}\n", "'tiny' is used twice"),
        ("sources: [: bad\n", "not valid YAML"),
    ],
)
def test_bad_mixture_files_name_the_file_the_source_and_the_key(three, text, message):
    config = three["tiny"].parent / "bad.yaml"
    config.write_text(text)
    with pytest.raises(ValueError, match=message) as caught:
        Mixture.from_yaml(config)
    assert "bad.yaml" in str(caught.value)


def test_a_source_without_counts_is_refused_with_the_fix(three):
    pattern = str(three["tiny"] / "tiny-{000000..000000}.tar")
    with pytest.raises(ValueError, match=r"no per-shard sample counts.*shardstream index"):
        Mixture([{"path": pattern, "weight": 1}])


def test_a_shard_dataset_state_is_not_taken_for_a_mixture_state(three):
    dataset = ShardDataset(str(three["tiny"]))
    with pytest.raises(ValueError, match="not a Mixture state"):
        Mixture(_sources(three, {"tiny": 1})).load_state_dict(dataset.state_dict())


def test_spawned_workers_read_the_same_mixture(three):
    def read(context):
        mixture = Mixture(_sources(three, {"tiny": 0.5, "mid": 0.5}), epoch_size=64)
        loader = DataLoader(
            mixture, batch_size=8, num_workers=2, collate_fn=_keys, multiprocessing_context=context
        )
        return list(loader)

    assert read("spawn") == read("fork")


def test_the_example_mixture_file_is_valid_and_streams_from_the_cli(three, tmp_path):
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from shardstream_cli import app
    from streamer.mixture.config import load_mixture

    example = Path(__file__).parents[3] / "configs" / "mixture-example.yaml"
    sources, options = load_mixture(example)
    real = [three["mid"], three["tiny"], three["big"], three["mid"]]
    for source, path in zip(sources, real, strict=True):
        source["path"] = str(path)
    sources[3]["name"] = "mid-again"
    mixture = Mixture(sources, **{**options, "epoch_size": 60_100})
    assert mixture.names == ["mid", "tiny", "charts", "mid-again"]
    assert mixture.plan(1, 1).per_rank()[2:] == [50_000, 100]
    config = tmp_path / "mix.yaml"
    config.write_text(
        f"epoch_size: 40\nsources:\n  - {{path: {three['tiny']}, weight: 1}}\n"
        f"  - {{path: {three['mid']}, weight: 3}}\n"
    )
    result = CliRunner().invoke(app, ["stream", str(config), "--json", "--no-decode"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["samples"] == 40 and summary["sources"] == {"mid": 30, "tiny": 10}
    bad = tmp_path / "bad.yaml"
    bad.write_text("sources:\n  - {path: nowhere, weight: 1}\n")
    failed = CliRunner().invoke(app, ["stream", str(bad)])
    assert failed.exit_code != 0 and "does not exist" in failed.output


def test_stratified_batches_from_a_real_dataloader_hold_each_share_and_resume_exactly(three):
    weights = {"tiny": 0.25, "mid": 0.35, "big": 0.4}

    def loader():
        mixture = Mixture(_sources(three, weights), epoch_size=640, stratify=16, buffer_size=32)
        return _loader16(mixture)

    def _loader16(mixture):
        return StatefulDataLoader(mixture, batch_size=16, num_workers=2, collate_fn=_keys)

    full = list(loader())
    assert len(full) == 40
    plan = Mixture(_sources(three, weights), epoch_size=640).plan(1, 2)
    share = np.asarray(plan.budgets(0)) * 16 / plan.worker_length(0)
    for batch in full:
        held = collections.Counter(source for source, _ in batch)
        assert all(abs(held[name] - s) < 1 for name, s in zip(weights, share, strict=True)), held
    head, state = stopped(loader(), 13)
    restored = loader()
    restored.load_state_dict(state)
    assert head + list(restored) == full


def test_a_damaged_sample_is_skipped_counted_and_stood_in_for_keeping_the_length(three, tmp_path):
    from shardstream.format import decode_offsets

    root = write_dataset(tmp_path / "hurt", [40], prefix="hurt").parent
    shard = root / "hurt-000000.tar"
    offsets = decode_offsets((root / "hurt-000000.tar.offsets").read_bytes())
    data = bytearray(shard.read_bytes())
    data[offsets[5] + 5] ^= 0x55  # sample 5's header checksum no longer matches
    shard.write_bytes(bytes(data))
    sources = [{"path": str(root), "repeat": 1, "decode": False}, {"path": str(three["tiny"]), "repeat": 2}]
    with pytest.raises(ShardReadError, match=r"hurt-000000\.tar"):
        list(Mixture(sources))
    mixture = Mixture(sources, on_error="skip")
    samples = list(mixture)
    assert len(samples) == len(mixture) == 54
    keys = collections.Counter(s["__key__"] for s in samples if s["__source__"] == "hurt")
    assert "s000-00005" not in keys and sum(keys.values()) == 40  # 39 read, one good one repeated
    assert mixture.errors["samples_skipped"] == 1 and mixture.errors["samples_repeated"] == 1


def test_a_reader_closed_to_keep_few_files_open_reopens_where_it_stood(three):
    """max_open=1: every switch of source closes one reader and reopens another mid-run."""
    weights = {"tiny": 0.2, "mid": 0.3, "big": 0.5}
    many = [_keys([s]) for s in Mixture(_sources(three, weights), epoch_size=900, buffer_size=30)]
    one = [_keys([s]) for s in Mixture(_sources(three, weights), epoch_size=900, buffer_size=30, max_open=1)]
    assert one == many and len(one) == 900


class _Counting:
    """A decode function that counts the samples it decoded and how many of its outputs are still alive."""

    def __init__(self) -> None:
        self.calls = 0
        self.alive = 0

    def __call__(self, sample):
        self.calls += 1
        self.alive += 1
        return _Decoded(sample, self)


class _Decoded(dict):
    def __init__(self, sample, counter):
        super().__init__(sample)
        self.counter = counter

    def __del__(self):
        self.counter.alive -= 1


@pytest.mark.parametrize("buffer_size", [1, 100, 1000])
def test_a_mixture_decodes_each_sample_as_it_is_handed_out_not_a_window_at_once(three, buffer_size):
    """Its windows hold raw samples only: decoded ones are many times bigger (a window of 1,000 512x512
    images decoded at once took 819 MB and 2 s before the first sample)."""
    counting = _Counting()
    sources = [{"path": str(three["mid"]), "weight": 1.0, "decode": counting}]
    stream = iter(Mixture(sources, buffer_size=buffer_size, seed=3))
    first = next(stream)
    assert counting.calls == 1 and first["__source__"] == "mid"
    del first
    for handed_out in range(2, 301):
        next(stream)
        assert counting.calls == handed_out
        assert counting.alive <= 1  # the one handed out last, still referenced by the loop's temporary
